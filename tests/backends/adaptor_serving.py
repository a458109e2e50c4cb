"""An adaptor served over real gRPC on a free port, for the tests that speak to it as the
dispatcher does; `Served` restarts it on the same port."""

from __future__ import annotations

from collections.abc import Callable

from dxts.backends.edge.servicer import adaptor_service
from dxts.backends.logic.adaptor import Adaptor
from dxts.core.grpc import GrpcServer, TokenVerifier
from dxts.core.settings import ServerSettings

Build = Callable[[], Adaptor]  # makes the adaptor afresh, over the same state


async def serve_adaptor(
    adaptor: Adaptor, verifier: TokenVerifier, listen: str = "127.0.0.1:0"
) -> GrpcServer:
    """Serve an adaptor (already started) at `listen` (a free port on 127.0.0.1 by default);
    the caller stops the server."""
    server = GrpcServer(
        [adaptor_service(adaptor)],
        settings=ServerSettings(listen=listen),
        verifier=verifier,
    )
    await server.start()
    return server


class Served:
    """An adaptor served over gRPC; `restart()` stops it and serves a new one, built the same
    way over the same state, on the same port."""

    def __init__(self, build: Build, verifier: TokenVerifier) -> None:
        self.build = build
        self.verifier = verifier
        self.adaptor: Adaptor | None = None
        self.server: GrpcServer | None = None
        self.address = "127.0.0.1:0"

    async def start(self) -> None:
        self.adaptor = self.build()
        await self.adaptor.start()
        self.server = await serve_adaptor(self.adaptor, self.verifier, listen=self.address)
        self.address = self.server.address

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(grace=0)
            self.server = None
        if self.adaptor is not None:
            await self.adaptor.stop()
            self.adaptor = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()
