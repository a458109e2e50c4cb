"""The gRPC half of the shell every dxts server runs in (`dxts.core.component.serve`): serve a
component's gRPC services (and Prometheus metrics when a port is configured), and run a process
body with logging to stderr, turning a configuration or start-up error into one line and exit
status 1 rather than a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from dxts.core.db import Database
from dxts.core.errors import DxtsError
from dxts.core.grpc.auth import Authenticator
from dxts.core.grpc.metrics import start_metrics_server
from dxts.core.grpc.server import GrpcServer, Service
from dxts.core.grpc.tls import TlsSettings
from dxts.core.settings import ServerSettings


async def serve_component(
    stack: contextlib.AsyncExitStack,
    services: Sequence[Service],
    *,
    settings: ServerSettings,
    verifier: Authenticator,
    database: Database | None = None,
    tls: TlsSettings | None = None,
    log: logging.Logger,
) -> GrpcServer:
    """Start the metrics endpoint (if configured) and the gRPC server, each stopped by `stack`
    (health NOT_SERVING first, then in-flight calls get the grace); returns the started server.
    Signals are the caller's (`dxts.core.component.serve` catches them before anything
    starts)."""
    metrics = start_metrics_server(settings.metrics_port, address=settings.listen_host)
    if metrics is not None:
        stack.callback(metrics.close)
        log.info("metrics on %s:%d", settings.listen_host, metrics.port)
    server = GrpcServer(services, settings=settings, verifier=verifier, database=database, tls=tls)
    await server.start()
    stack.push_async_callback(server.stop)
    return server


def run_process(
    what: str, serve: Callable[[], Coroutine[Any, Any, None]], log: logging.Logger
) -> None:
    """The body of a server's `main()`: logging set up, `serve()` run to its end; a domain or
    settings error (pydantic's ValidationError is a ValueError) is logged as "cannot run the
    <what>: ..." and the process exits 1."""
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(serve())
    except (DxtsError, ValueError) as error:
        log.error("cannot run the %s: %s", what, error)
        sys.exit(1)
