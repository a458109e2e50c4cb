"""An adaptor served over real gRPC on a free port, for the tests that speak to it as the
dispatcher does."""

from __future__ import annotations

from dxts.backends.edge.servicer import adaptor_service
from dxts.backends.logic import Adaptor
from dxts.core.grpc import GrpcServer, TokenVerifier
from dxts.core.settings import ServerSettings


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
