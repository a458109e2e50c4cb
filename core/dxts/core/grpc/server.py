"""The gRPC server every dxts component runs.

    server = GrpcServer(
        [Service.of(definition_pb2.DESCRIPTOR.services_by_name["DefinitionService"],
                    definition_pb2_grpc.add_DefinitionServiceServicer_to_server, servicer)],
        settings=ServerSettings(), verifier=TokenVerifier.from_settings(...), database=db)
    await server.start()            # bound: server.port, server.address
    ...
    await server.stop()             # health NOT_SERVING, then in-flight calls get the grace

A process serves its component through the shell (`dxts.core.component.serve`), which catches
SIGTERM and SIGINT and stops the server gracefully.

What every server has (docs/architecture.md, conventions): the interceptors of
`interceptors` (status mapping, metrics, deadlines, authentication); standard health checking
with the overall ("") and per-service statuses, NOT_SERVING while the database does not answer
and from the moment a stop begins, so that load balancers stop routing before in-flight calls
are given `grace` to finish; reflection for every registered service; TLS or mutual TLS when
the process's `DXTS_TLS_*` settings give a certificate (`tls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from dxts.core.db import Database
from dxts.core.grpc.auth import Authenticator
from dxts.core.grpc.interceptors import AuthInterceptor, RequestInterceptor, StatusInterceptor
from dxts.core.grpc.tls import ServerCredentials, TlsSettings
from dxts.core.kernel.authorisation import Rules
from dxts.core.settings import ServerSettings

log = logging.getLogger(__name__)

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
DEFAULT_HEALTH_INTERVAL_S = 5.0


@dataclass(frozen=True)
class Service:
    """One service to serve: its full name (for health and reflection) and how to register it."""

    name: str
    register: Callable[[grpc.aio.Server], None]

    @classmethod
    def of(
        cls,
        descriptor: ServiceDescriptor,
        add_to_server: Callable[[Any, grpc.aio.Server], None],
        servicer: object,
    ) -> Service:
        """A generated servicer: `Service.of(x_pb2.DESCRIPTOR.services_by_name["X"],
        x_pb2_grpc.add_XServicer_to_server, XServicer(...))`."""
        return cls(descriptor.full_name, lambda server: add_to_server(servicer, server))

    @classmethod
    def generic(cls, name: str, handler: grpc.GenericRpcHandler) -> Service:
        """Handlers built by hand (grpc.method_handlers_generic_handler), e.g. in tests."""
        return cls(name, lambda server: server.add_generic_rpc_handlers((handler,)))


class GrpcServer:
    """A grpc.aio server with the dxts interceptors, health, reflection and graceful stop."""

    def __init__(
        self,
        services: Sequence[Service],
        *,
        settings: ServerSettings,
        verifier: Authenticator,
        database: Database | None = None,
        health_interval_s: float = DEFAULT_HEALTH_INTERVAL_S,
        options: Iterable[tuple[str, Any]] = (),
        tls: TlsSettings | None = None,
        extra_rules: Rules | None = None,
    ) -> None:
        """`extra_rules`: authorisation rows for services outside the contracts (tests)."""
        names = [service.name for service in services]
        if len(set(names)) != len(names):
            raise ValueError(f"a service is registered twice: {names}")
        self.settings = settings
        self.tls = TlsSettings() if tls is None else tls
        self.service_names = names
        self.database = database
        self.health_interval_s = health_interval_s
        self.health = health.aio.HealthServicer()
        self._server = grpc.aio.server(
            interceptors=[
                StatusInterceptor(),
                RequestInterceptor(),
                AuthInterceptor(verifier, extra_rules),
            ],
            options=list(options),
        )
        for service in services:
            service.register(self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        reflection.enable_server_reflection(
            [*names, health.SERVICE_NAME, reflection.SERVICE_NAME], self._server
        )
        self.port = 0
        self.health_port = 0
        self._health_server: grpc.aio.Server | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._serving: bool | None = None
        self._stopping = False

    @property
    def address(self) -> str:
        """host:port actually bound (the port resolved when settings.listen asked for 0)."""
        host = self.settings.listen.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    async def start(self) -> None:
        """Bind, start, and report SERVING (once the database answers, when there is one)."""
        if self.tls.serves_tls:
            credentials = ServerCredentials(self.tls).credentials
            self.port = self._server.add_secure_port(self.settings.listen, credentials)
        else:
            self.port = self._server.add_insecure_port(self.settings.listen)
        await self._server.start()
        if self.settings.health_listen:
            # Health alone, in plain text: what a kubelet's gRPC probe can reach when the
            # services speak TLS. It tells whether the process serves, nothing more.
            self._health_server = grpc.aio.server()
            health_pb2_grpc.add_HealthServicer_to_server(self.health, self._health_server)
            self.health_port = self._health_server.add_insecure_port(self.settings.health_listen)
            await self._health_server.start()
        await self._set_serving(await self._database_answers())
        if self.database is not None:
            self._watcher = asyncio.create_task(self._watch_database())
        log.info(
            "serving %s on %s (%s)",
            ", ".join(self.service_names),
            self.address,
            self._security(),
        )

    def _security(self) -> str:
        if not self.tls.serves_tls:
            return "plain text"
        return "mutual TLS" if self.tls.require_client_cert else "TLS"

    async def stop(self, grace: float | None = None) -> None:
        """Report NOT_SERVING, then stop taking calls and give in-flight ones `grace` seconds
        (default settings.shutdown_grace_s) before cancelling them."""
        if self._stopping:
            return
        self._stopping = True
        await self.health.enter_graceful_shutdown()
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        await self._server.stop(self.settings.shutdown_grace_s if grace is None else grace)
        if self._health_server is not None:
            await self._health_server.stop(0)
        log.info("stopped serving on %s", self.address)

    async def wait_for_termination(self) -> None:
        await self._server.wait_for_termination()

    async def __aenter__(self) -> GrpcServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop(grace=0)

    async def _set_serving(self, serving: bool) -> None:
        if serving == self._serving:
            return
        if self._serving is not None:
            log.warning("health: %s", "SERVING again" if serving else "NOT_SERVING (database)")
        self._serving = serving
        status = SERVING if serving else NOT_SERVING
        for name in ("", *self.service_names):
            await self.health.set(name, status)

    async def _database_answers(self) -> bool:
        if self.database is None:
            return True
        try:
            return await asyncio.wait_for(self.database.ping(), timeout=self.health_interval_s)
        except TimeoutError:
            return False

    async def _watch_database(self) -> None:
        while True:
            await asyncio.sleep(self.health_interval_s)
            await self._set_serving(await self._database_answers())
