"""Prometheus metrics of the gRPC layer, and the HTTP server every component exposes them on.

The RPC counter and latency histogram are filled by the server interceptor; components add
their own metrics to the same default registry.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import Counter, Histogram, start_http_server

RPCS_HANDLED = Counter(
    "dxts_grpc_server_handled",
    "RPCs completed by this server, by full method name and status code.",
    ["method", "code"],
)
RPC_SECONDS = Histogram(
    "dxts_grpc_server_handling_seconds",
    "Time from the start of an RPC's handler to its status, by full method name.",
    ["method"],
)


@dataclass
class MetricsServer:
    """A running metrics HTTP server (in a daemon thread); `port` is the bound port."""

    port: int
    _server: WSGIServer
    _thread: threading.Thread

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def start_metrics_server(port: int | None, *, address: str = "0.0.0.0") -> MetricsServer | None:
    """Serve /metrics on `port` (ServerSettings.metrics_port; 0 picks a free port, None
    disables it and returns None)."""
    if port is None:
        return None
    server, thread = start_http_server(port, addr=address)
    return MetricsServer(server.server_port, server, thread)
