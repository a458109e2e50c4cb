"""gRPC scaffolding shared by every dxts server and client.

* `GrpcServer`, `Service` — a grpc.aio server with health, reflection, graceful stop and the
  interceptors below (`server`).
* `StatusInterceptor`, `AuthInterceptor` — domain errors → status codes, metrics, deadlines;
  bearer tokens → `current_identity()` (`interceptors`).
* `domain_error` — a failed call's status back into the domain error (`errors`).
* `channel` — a client channel whose calls carry the token and the inherited deadline and raise
  domain errors (`client`).
* `Identity`, `current_identity`, `acting_as`, `TokenVerifier`, `DevKeys`, `issue_token`
  (`auth`); `deadline`, `time_remaining` (`deadlines`); `start_metrics_server` (`metrics`);
  value conversions (`convert`) and page tokens (`paging`).

The names are imported on first use (PEP 562): a client that needs only `channel` does not pay
for the server side (its database, SQLAlchemy, reflection, metrics) when it starts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dxts.core.grpc.auth import (
        DevKeys,
        Identity,
        TokenVerifier,
        acting_as,
        current_identity,
        issue_token,
    )
    from dxts.core.grpc.client import channel
    from dxts.core.grpc.deadlines import DEFAULT_TIMEOUT_S, deadline, time_remaining
    from dxts.core.grpc.errors import domain_error
    from dxts.core.grpc.interceptors import AuthInterceptor, StatusInterceptor
    from dxts.core.grpc.metrics import MetricsServer, start_metrics_server
    from dxts.core.grpc.server import GrpcServer, Service

# Each exported name → the submodule defining it.
_WHERE = {
    "DevKeys": "auth",
    "Identity": "auth",
    "TokenVerifier": "auth",
    "acting_as": "auth",
    "current_identity": "auth",
    "issue_token": "auth",
    "channel": "client",
    "DEFAULT_TIMEOUT_S": "deadlines",
    "deadline": "deadlines",
    "time_remaining": "deadlines",
    "domain_error": "errors",
    "AuthInterceptor": "interceptors",
    "StatusInterceptor": "interceptors",
    "MetricsServer": "metrics",
    "start_metrics_server": "metrics",
    "GrpcServer": "server",
    "Service": "server",
}

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "AuthInterceptor",
    "DevKeys",
    "GrpcServer",
    "Identity",
    "MetricsServer",
    "Service",
    "StatusInterceptor",
    "TokenVerifier",
    "acting_as",
    "channel",
    "current_identity",
    "deadline",
    "domain_error",
    "issue_token",
    "start_metrics_server",
    "time_remaining",
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
