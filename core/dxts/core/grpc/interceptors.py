"""The server interceptors every dxts server runs, outermost first.

* `StatusInterceptor` — the one place domain errors become status codes (see `errors`), RPCs
  are counted and timed for Prometheus, and the caller's deadline is made current for the
  calls the handler makes (see `deadlines`).
* `RequestInterceptor` — parses the request itself, so that bytes that are no message of the
  method's type are INVALID_ARGUMENT (one log line, no traceback) rather than the transport's
  UNKNOWN, and checks it against the bounds of `dxts.core.kernel.bounds` before anything else
  runs, token or no token: the same answer for anyone, and no work for an oversized request.
* `AuthInterceptor` — verifies the bearer token, makes the caller's Identity current and checks
  the authorisation table (`dxts.core.kernel.authorisation`) before any handler runs; health
  checking and reflection are exempt. It raises Unauthenticated or PermissionDenied, which the
  status interceptor outside it reports, so refusals are counted like any other outcome.

Both wrap each handler's behaviour (unary or streaming, coroutine or async generator) in one
async context manager, so each concern is written once.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message
from grpc.aio import ServicerContext

from dxts.core import deadlines
from dxts.core.errors import InvalidArgument
from dxts.core.grpc.auth import Authenticator, bearer_token
from dxts.core.grpc.errors import rich_status, to_grpc_status
from dxts.core.grpc.metrics import RPC_SECONDS, RPCS_HANDLED
from dxts.core.identity import acting_as
from dxts.core.kernel.authorisation import Rules, authorise_call, serving
from dxts.core.kernel.bounds import check_request

log = logging.getLogger(__name__)

# Services reachable without a token: probes and tooling must work before anyone logs in.
UNAUTHENTICATED_SERVICES = (
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/grpc.reflection.v1.ServerReflection/",
)

Context = ServicerContext[Any, Any]
Around = Callable[[Context, str], AbstractAsyncContextManager[None]]

_CODES_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def _wrap_handler(handler: Any, method: str, around: Around) -> Any:
    """The same handler with every call of its behaviour run inside `around(context, method)`."""

    def unary_response(behavior: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def wrapped(request: Any, context: Context) -> Any:
            async with around(context, method):
                return await behavior(request, context)

        return wrapped

    def stream_response(behavior: Callable[..., Any]) -> Callable[..., Any]:
        if not inspect.isasyncgenfunction(behavior):
            return unary_response(behavior)  # a coroutine that writes with context.write()

        async def wrapped(request: Any, context: Context) -> AsyncIterator[Any]:
            async with around(context, method):
                async for response in behavior(request, context):
                    yield response

        return wrapped

    io = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(unary_response(handler.unary_unary), **io)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(stream_response(handler.unary_stream), **io)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(unary_response(handler.stream_unary), **io)
    return grpc.stream_stream_rpc_method_handler(stream_response(handler.stream_stream), **io)


class _WrappingInterceptor(grpc.aio.ServerInterceptor):
    """Runs `self.around` around the behaviour of every method not in `self.exempt`."""

    exempt: tuple[str, ...] = ()

    def around(self, context: Context, method: str) -> AbstractAsyncContextManager[None]:
        raise NotImplementedError

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(self.exempt):
            return handler
        return _wrap_handler(handler, method, self.around)


class StatusInterceptor(_WrappingInterceptor):
    """Domain errors → status codes with details; metrics; the caller's deadline and the RPC
    served (`served_rpc`, what a command is named after) made current."""

    @asynccontextmanager
    async def around(self, context: Context, method: str) -> AsyncIterator[None]:
        started = time.perf_counter()
        code = grpc.StatusCode.OK
        counted = False
        try:
            with deadlines.deadline(context.time_remaining()), serving(method):
                try:
                    yield
                except asyncio.CancelledError:
                    remaining = deadlines.time_remaining()
                    expired = remaining is not None and remaining <= 0
                    code = (
                        grpc.StatusCode.DEADLINE_EXCEEDED if expired else grpc.StatusCode.CANCELLED
                    )
                    raise
        except grpc.aio.AbortError:
            # The handler (or an inner interceptor) chose its own status.
            code = context.code() or grpc.StatusCode.UNKNOWN
            raise
        except Exception as error:
            status = rich_status(error, method=method)
            code = _CODES_BY_NUMBER[status.code]
            # Counted before the status leaves, so that a caller who has seen it sees it counted.
            _count(method, code, started)
            counted = True
            await context.abort_with_status(to_grpc_status(status))
        finally:
            if not counted:
                _count(method, code, started)


def _count(method: str, code: grpc.StatusCode, started: float) -> None:
    RPCS_HANDLED.labels(method=method, code=code.name).inc()
    RPC_SECONDS.labels(method=method).observe(time.perf_counter() - started)


def _raw(data: bytes) -> bytes:
    """The request as it came: `RequestInterceptor` parses it where a failure is the caller's."""
    return data


class RequestInterceptor(grpc.aio.ServerInterceptor):
    """Each request parsed and bounded before the authorisation check and the handler (see the
    module docstring). Methods with streamed requests are left to their handlers: no contract
    has one."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if (
            handler is None
            or method.startswith(UNAUTHENTICATED_SERVICES)
            or handler.request_streaming
            or handler.request_deserializer is None
        ):
            return handler
        parse: Callable[[bytes], Any] = handler.request_deserializer

        def parsed(behavior: Callable[..., Any]) -> Callable[..., Any]:
            if inspect.isasyncgenfunction(behavior):

                async def streamed(raw: bytes, context: Context) -> AsyncIterator[Any]:
                    async for response in behavior(_checked(parse, raw, method), context):
                        yield response

                return streamed

            async def unary(raw: bytes, context: Context) -> Any:
                return await behavior(_checked(parse, raw, method), context)

            return unary

        io = {"request_deserializer": _raw, "response_serializer": handler.response_serializer}
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(parsed(handler.unary_unary), **io)
        return grpc.unary_stream_rpc_method_handler(parsed(handler.unary_stream), **io)


def _checked(parse: Callable[[bytes], Any], raw: bytes, method: str) -> Any:
    """The request `raw` encodes, within its bounds; INVALID_ARGUMENT (and one log line)
    otherwise."""
    try:
        request = parse(raw)
    except DecodeError:
        log.warning("%s: refused a request that is no well-formed message", method)
        raise InvalidArgument(
            "not a well-formed protobuf message of this method's request type", field="request"
        ) from None
    if isinstance(request, Message):
        try:
            check_request(request)
        except InvalidArgument as error:
            log.warning("%s: refused a request over its bounds: %.300s", method, error)
            raise
    return request


class AuthInterceptor(_WrappingInterceptor):
    """Bearer token → Identity for the duration of the call (see `auth.current_identity`), and
    the call refused unless the authorisation table lets that caller make it. `extra_rules` adds
    rows for methods outside the contracts (the tests' probe services)."""

    exempt = UNAUTHENTICATED_SERVICES

    def __init__(self, verifier: Authenticator, extra_rules: Rules | None = None) -> None:
        self._verifier = verifier
        self._extra_rules = extra_rules

    @asynccontextmanager
    async def around(self, context: Context, method: str) -> AsyncIterator[None]:
        identity = await self._verifier.authenticate(bearer_token(context.invocation_metadata()))
        authorise_call(method, identity, extra_rules=self._extra_rules)
        with acting_as(identity):
            yield
