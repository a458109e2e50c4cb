"""dxts-web served by uvicorn, on the event loop of whoever runs it (`dxts-web` alone, or
`dxts up` beside the other components)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import uvicorn

from dxts.web.app import Web, build_app
from dxts.web.settings import WebSettings


class _Server(uvicorn.Server):
    """uvicorn's server, leaving the signals to the process that runs it (`dxts up` stops
    every component on its own SIGINT/SIGTERM)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class WebServer:
    def __init__(self, settings: WebSettings) -> None:
        self.web = Web(settings)
        host, _, port = settings.listen.rpartition(":")
        self._socket = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host.strip("[]") or "0.0.0.0", int(port)))
        bound_host, bound_port = self._socket.getsockname()[:2]
        self.address = f"{host or bound_host}:{bound_port}"
        config = uvicorn.Config(
            build_app(self.web), log_level="warning", access_log=False, lifespan="on"
        )
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]))
        while not self._server.started:
            if self._task.done():
                await self._task  # raises what stopped it
                raise RuntimeError("the web server stopped while starting")
            await asyncio.sleep(0.02)

    def sign_in_link(self, path: str = "/", *, token: str, seconds: float | None = None) -> str:
        """A one-time link that signs `token`'s bearer in and opens `path`."""
        ticket = self.web.sessions.issue_ticket(token, seconds=seconds)
        return f"{self.url}/signin/{ticket}?next={path}"

    async def stop(self) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task
        self._socket.close()
