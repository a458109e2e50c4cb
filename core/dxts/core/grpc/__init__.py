"""gRPC scaffolding shared by every dxts server and client.

* `GrpcServer`, `Service` — a grpc.aio server with health, reflection, graceful stop and the
  interceptors below (`server`).
* `StatusInterceptor`, `AuthInterceptor` — domain errors → status codes, metrics, deadlines;
  bearer tokens → `current_identity()` (`interceptors`).
* `domain_error` — a failed call's status back into the domain error (`errors`).
* `channel` — a client channel whose calls carry the token and the inherited deadline and raise
  domain errors (`client`).
* `TokenVerifier`, `DevKeys`, `issue_token` (`auth`); `start_metrics_server` (`metrics`);
  value conversions (`convert`) and page tokens (`paging`).

Who is calling (`dxts.core.identity`) and the deadlines (`dxts.core.deadlines`) are not gRPC's:
they live beside it in core, for logic to read without knowing the transport.

The names are imported on first use (PEP 562): a client that needs only `channel` does not pay
for the server side (its database, SQLAlchemy, reflection, metrics) when it starts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dxts.core.grpc.auth import DevKeys, TokenVerifier, issue_token
    from dxts.core.grpc.client import channel
    from dxts.core.grpc.errors import domain_error
    from dxts.core.grpc.interceptors import AuthInterceptor, StatusInterceptor
    from dxts.core.grpc.metrics import MetricsServer, start_metrics_server
    from dxts.core.grpc.server import GrpcServer, Service

# Each exported name → the submodule defining it.
_WHERE = {
    "DevKeys": "auth",
    "TokenVerifier": "auth",
    "issue_token": "auth",
    "channel": "client",
    "domain_error": "errors",
    "AuthInterceptor": "interceptors",
    "StatusInterceptor": "interceptors",
    "MetricsServer": "metrics",
    "start_metrics_server": "metrics",
    "GrpcServer": "server",
    "Service": "server",
}

__all__ = [
    "AuthInterceptor",
    "DevKeys",
    "GrpcServer",
    "MetricsServer",
    "Service",
    "StatusInterceptor",
    "TokenVerifier",
    "channel",
    "domain_error",
    "issue_token",
    "start_metrics_server",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
