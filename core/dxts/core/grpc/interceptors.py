"""The server interceptors every dxts server runs, outermost first.

* `StatusInterceptor` — the one place domain errors become status codes (see `errors`), RPCs
  are counted and timed for Prometheus, and the caller's deadline is made current for the
  calls the handler makes (see `deadlines`).
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
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import grpc
from grpc.aio import ServicerContext

from dxts.core import deadlines
from dxts.core.grpc.auth import TokenVerifier, bearer_token
from dxts.core.grpc.errors import rich_status, to_grpc_status
from dxts.core.grpc.metrics import RPC_SECONDS, RPCS_HANDLED
from dxts.core.identity import acting_as
from dxts.core.kernel.authorisation import Rules, authorise_call, serving

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


class AuthInterceptor(_WrappingInterceptor):
    """Bearer token → Identity for the duration of the call (see `auth.current_identity`), and
    the call refused unless the authorisation table lets that caller make it. `extra_rules` adds
    rows for methods outside the contracts (the tests' probe services)."""

    exempt = UNAUTHENTICATED_SERVICES

    def __init__(self, verifier: TokenVerifier, extra_rules: Rules | None = None) -> None:
        self._verifier = verifier
        self._extra_rules = extra_rules

    @asynccontextmanager
    async def around(self, context: Context, method: str) -> AsyncIterator[None]:
        identity = self._verifier.verify(bearer_token(context.invocation_metadata()))
        authorise_call(method, identity, extra_rules=self._extra_rules)
        with acting_as(identity):
            yield
