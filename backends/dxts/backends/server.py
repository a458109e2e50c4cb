"""What every adaptor shares: its gRPC service registration, the process around it, and the
small vocabulary of Submit answers.

An adaptor is a `BackendAdaptorService` servicer with `start()`/`stop()` for its own background
work (`AdaptorServicer`); `run_adaptor` serves one as a process (health, reflection, auth,
metrics, graceful stop on SIGTERM), with the same DXTS_LISTEN / DXTS_METRICS_PORT / DXTS_AUTH_* /
DXTS_DATA_DIR settings as every dxts component.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from dxts.core.errors import InvalidArgument
from dxts.core.grpc import DevKeys, Service, TokenVerifier
from dxts.core.grpc.process import run_process, serve_component
from dxts.core.ids import id_from_str
from dxts.core.settings import AuthSettings, ServerSettings
from dxts.v1 import backend_pb2, backend_pb2_grpc


class AdaptorServicer(backend_pb2_grpc.BackendAdaptorServiceServicer):
    """A servicer that also owns background work (workers, timers, pushes)."""

    async def start(self) -> None:
        """Begin the background work (and open what the adaptor keeps)."""

    async def stop(self) -> None:
        """End it; what was accepted survives in the adaptor's state."""


def adaptor_service(servicer: backend_pb2_grpc.BackendAdaptorServiceServicer) -> Service:
    return Service.of(
        backend_pb2.DESCRIPTOR.services_by_name["BackendAdaptorService"],
        backend_pb2_grpc.add_BackendAdaptorServiceServicer_to_server,
        servicer,
    )


def accepted(parcel_id: str, identifier: str) -> backend_pb2.SubmitResult:
    return backend_pb2.SubmitResult(
        parcel_id=parcel_id,
        disposition=backend_pb2.SUBMIT_DISPOSITION_ACCEPTED,
        identifier=identifier,
    )


def refused(parcel_id: str, reason: str) -> backend_pb2.SubmitResult:
    return backend_pb2.SubmitResult(
        parcel_id=parcel_id, disposition=backend_pb2.SUBMIT_DISPOSITION_REFUSED, reason=reason
    )


def key_problem(parcel_id: str) -> str | None:
    """Why `parcel_id` cannot be an idempotency key (None when it can)."""
    try:
        id_from_str(parcel_id, field="parcel_id")
    except InvalidArgument as error:
        return str(error)
    return None


def data_dir() -> Path | None:
    """DXTS_DATA_DIR: where the development key pair lives when no key is configured."""
    value = os.environ.get("DXTS_DATA_DIR")
    return Path(value) if value else None


def dev_service_token(sub: str) -> str | None:
    """A service token minted from the development key pair in DXTS_DATA_DIR (None without
    one): the adaptor's own calls when no token is configured, on a single machine only."""
    directory = data_dir()
    if directory is None:
        return None
    return DevKeys.load_or_create(directory).issue(
        "dxts", sub, ("service",), lifetime=timedelta(days=365)
    )


async def serve(adaptor: AdaptorServicer) -> None:
    """Serve one adaptor until SIGTERM/SIGINT, then stop it gracefully."""
    server_settings = ServerSettings()
    verifier = TokenVerifier.from_settings(AuthSettings(), dev_key_dir=data_dir())
    log = logging.getLogger("dxts.backends")
    async with contextlib.AsyncExitStack() as stack:
        await adaptor.start()
        stack.push_async_callback(adaptor.stop)
        server = await serve_component(
            stack, [adaptor_service(adaptor)], settings=server_settings, verifier=verifier, log=log
        )
        await server.serve_until_signalled()


def run_adaptor(name: str, build: Callable[[], AdaptorServicer]) -> None:
    """The body of an adaptor's `main()`: logging, `build()` the adaptor, serve it."""

    async def main() -> None:
        await serve(build())

    run_process(f"{name} adaptor", main, logging.getLogger("dxts.backends"))
