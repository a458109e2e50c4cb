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
"""

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
