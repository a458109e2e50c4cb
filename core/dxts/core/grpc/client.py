"""Client channels: every call carries the bearer token and a deadline, and fails with the
domain error the server raised.

    async with channel("127.0.0.1:50051", token=token) as ch:
        stub = definition_pb2_grpc.DefinitionServiceStub(ch)
        reply = await stub.GetWorkgraph(request)   # raises NotFound, InvalidArgument, ...

The deadline of each call is the tighter of its own `timeout=` and the deadline inherited from
the request being served (or a `deadlines.deadline()` block); with neither, `default_timeout`.
Unary-response calls raise domain errors (`errors.domain_error`); streaming-response calls are
given the token and deadline but their errors are left as grpc.aio.AioRpcError.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import grpc
from grpc.aio import ClientCallDetails

from dxts.core.deadlines import DEFAULT_TIMEOUT_S, call_timeout
from dxts.core.grpc.errors import domain_error

if TYPE_CHECKING:
    from dxts.core.grpc.tls import TlsSettings

TLS_VARIABLE_PREFIX = "DXTS_TLS_"
# A bearer token, or what gives the current one.
Token = str | Callable[[], str]


class _CallSettings:
    """What every call of one channel gets: its token and its default deadline."""

    def __init__(self, token: Token | None, default_timeout: float | None) -> None:
        self.token = token
        self.default_timeout = default_timeout

    def apply(self, details: ClientCallDetails) -> ClientCallDetails:
        metadata = grpc.aio.Metadata(*(details.metadata or ()))
        if self.token is not None and "authorization" not in metadata:
            token = self.token() if callable(self.token) else self.token
            metadata.add("authorization", f"Bearer {token}")
        timeout = call_timeout(details.timeout, self.default_timeout)
        if timeout is not None and timeout <= 0:
            # Already too late: fail here, as grpc would only race the call against its timer.
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(),
                details=f"the deadline passed before {details.method!r} was called",
            )
        return ClientCallDetails(
            method=details.method,
            timeout=timeout,
            metadata=metadata,
            credentials=details.credentials,
            wait_for_ready=details.wait_for_ready,
        )


async def _response_or_domain_error(call: Any) -> Any:
    try:
        return await call
    except grpc.aio.AioRpcError as error:
        converted = domain_error(error)
        if converted is error:
            raise
        raise converted from error


class _UnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):
    def __init__(self, settings: _CallSettings) -> None:
        self._settings = settings

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], client_call_details: ClientCallDetails, request: Any
    ) -> Any:
        call = await continuation(self._settings.apply(client_call_details), request)
        return await _response_or_domain_error(call)


class _StreamUnary(grpc.aio.StreamUnaryClientInterceptor):
    def __init__(self, settings: _CallSettings) -> None:
        self._settings = settings

    async def intercept_stream_unary(
        self,
        continuation: Callable[..., Any],
        client_call_details: ClientCallDetails,
        request_iterator: Any,
    ) -> Any:
        call = await continuation(self._settings.apply(client_call_details), request_iterator)
        return await _response_or_domain_error(call)


class _UnaryStream(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, settings: _CallSettings) -> None:
        self._settings = settings

    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], client_call_details: ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(self._settings.apply(client_call_details), request)


class _StreamStream(grpc.aio.StreamStreamClientInterceptor):
    def __init__(self, settings: _CallSettings) -> None:
        self._settings = settings

    async def intercept_stream_stream(
        self,
        continuation: Callable[..., Any],
        client_call_details: ClientCallDetails,
        request_iterator: AsyncIterable[Any] | Iterable[Any],
    ) -> Any:
        return await continuation(self._settings.apply(client_call_details), request_iterator)


def _tls_configured() -> bool:
    """Whether the environment sets any DXTS_TLS_* setting: without one, the settings (and
    pydantic-settings, a tenth of a command's start-up) need not be read at all."""
    return any(name.startswith(TLS_VARIABLE_PREFIX) for name in os.environ)


def channel(
    address: str,
    token: Token | None = None,
    *,
    default_timeout: float | None = DEFAULT_TIMEOUT_S,
    credentials: grpc.ChannelCredentials | None = None,
    options: Sequence[tuple[str, Any]] = (),
    tls: TlsSettings | None = None,
) -> grpc.aio.Channel:
    """A grpc.aio channel to `address` whose calls carry `token` and a deadline.

    `token` may be a function, asked on every call: a token that expires while the channel is
    open (a DiracX access token, refreshed by `dxts login`'s credentials) stays current.

    TLS when `credentials` are given, or when the process's TLS settings (`tls`, default: the
    `DXTS_TLS_*` environment) name a CA to verify servers with; plain text otherwise (the
    embedded default listens on localhost).
    """
    if tls is None and credentials is None and _tls_configured():
        from dxts.core.grpc.tls import TlsSettings

        tls = TlsSettings()
    if credentials is None and tls is not None and tls.connects_tls:
        from dxts.core.grpc.tls import client_credentials, client_options

        credentials = client_credentials(tls)
        options = [*options, *client_options(tls)]
    settings = _CallSettings(token, default_timeout)
    interceptors = [
        _UnaryUnary(settings),
        _UnaryStream(settings),
        _StreamUnary(settings),
        _StreamStream(settings),
    ]
    if credentials is not None:
        return grpc.aio.secure_channel(
            address, credentials, options=list(options), interceptors=interceptors
        )
    return grpc.aio.insecure_channel(address, options=list(options), interceptors=interceptors)
