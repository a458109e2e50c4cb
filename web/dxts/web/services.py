"""The services as one signed-in user calls them.

One channel per service is shared by every user; each call carries the user's own bearer
token in its metadata (the core channel adds no token of its own when the call has one), so
the services apply their own checks to the person behind the page — another VO's workgraph
is NOT_FOUND to them, a transition they may not make is refused — and the page shows that.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from dxts.core.grpc import channel
from dxts.v1 import (
    accounting_pb2_grpc,
    definition_pb2_grpc,
    dispatcher_pb2_grpc,
    execution_pb2_grpc,
)
from dxts.web.settings import WebSettings


class _AsUser:
    """A stub whose every call carries `token`: `await stub.GetWorkgraph(request)`."""

    def __init__(self, stub: Any, token: str) -> None:
        self._stub = stub
        self._metadata = (("authorization", f"Bearer {token}"),)

    def __getattr__(self, rpc: str) -> Callable[[Any], Awaitable[Any]]:
        method = getattr(self._stub, rpc)

        def call(request: Any) -> Awaitable[Any]:
            return method(request, metadata=self._metadata)

        return call


class UserClients:
    """The three services (and the dispatcher, where the web was told where it is), called
    as one user."""

    def __init__(self, services: Services, token: str) -> None:
        self.definition: Any = _AsUser(services.definition_stub, token)
        self.execution: Any = _AsUser(services.execution_stub, token)
        self.accounting: Any = _AsUser(services.accounting_stub, token)
        self.dispatcher: Any | None = (
            _AsUser(services.dispatcher_stub, token) if services.dispatcher_stub else None
        )


class Services:
    """The shared channels of one web process."""

    def __init__(self, settings: WebSettings) -> None:
        timeout = settings.call_timeout_s
        self._channels: list[grpc.aio.Channel] = [
            channel(settings.definition_address, default_timeout=timeout),
            channel(settings.execution_address, default_timeout=timeout),
            channel(settings.accounting_address, default_timeout=timeout),
        ]
        definition, execution, accounting = self._channels
        self.definition_stub = definition_pb2_grpc.DefinitionServiceStub(definition)
        self.execution_stub = execution_pb2_grpc.ExecutionServiceStub(execution)
        self.accounting_stub = accounting_pb2_grpc.AccountingServiceStub(accounting)
        self.dispatcher_stub: Any | None = None
        if settings.dispatcher_address:
            dispatcher = channel(settings.dispatcher_address, default_timeout=timeout)
            self._channels.append(dispatcher)
            self.dispatcher_stub = dispatcher_pb2_grpc.DispatcherServiceStub(dispatcher)

    def as_user(self, token: str) -> UserClients:
        return UserClients(self, token)

    async def close(self) -> None:
        for opened in self._channels:
            await opened.close()
