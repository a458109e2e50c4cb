"""An adaptor served over real gRPC on a free port, for the tests that speak to it as the
dispatcher does."""

from __future__ import annotations

from dxts.backends.edge.servicer import adaptor_service
from dxts.backends.logic import Adaptor
from dxts.core.grpc import GrpcServer, TokenVerifier
from dxts.core.settings import ServerSettings


async def serve_adaptor(adaptor: Adaptor, verifier: TokenVerifier) -> GrpcServer:
    """Serve an adaptor (already started) on 127.0.0.1; the caller stops the server."""
    server = GrpcServer(
        [adaptor_service(adaptor)],
        settings=ServerSettings(listen="127.0.0.1:0"),
        verifier=verifier,
    )
    await server.start()
    return server
