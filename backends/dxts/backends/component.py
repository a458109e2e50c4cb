"""An adaptor assembled as a process: `run_adaptor` serves any `logic.Adaptor` through the shared
edge (`edge.servicer`) with health, reflection, auth, metrics and a graceful stop on SIGTERM,
and the same DXTS_LISTEN / DXTS_METRICS_PORT / DXTS_AUTH_* / DXTS_DATA_DIR settings as every dxts
component.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from dxts.backends.edge.servicer import adaptor_service
from dxts.backends.logic import Adaptor
from dxts.core.grpc import DevKeys, TokenVerifier
from dxts.core.grpc.process import run_process, serve_component
from dxts.core.settings import AuthSettings, ServerSettings


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


async def serve(adaptor: Adaptor) -> None:
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


def run_adaptor(name: str, build: Callable[[], Adaptor]) -> None:
    """The body of an adaptor's `main()`: logging, `build()` the adaptor, serve it."""

    async def main() -> None:
        await serve(build())

    run_process(f"{name} adaptor", main, logging.getLogger("dxts.backends"))
