"""Deadlines: every call has one, and a call made while serving a request inherits its rest.

While a request is being served, the server (`dxts.core.grpc.interceptors`) records the
caller's deadline in a context variable; outgoing calls (`dxts.core.grpc.channel`) and logic
read it, so a nested call never outlives the request that made it, and a call made outside any
request gets `DEFAULT_TIMEOUT_S`. Code outside a request (a sweep) bounds a group of calls with
`deadline(seconds)`.

CPU-bound work of a request (parsing and compiling a document) runs in `in_abandonable_thread`
and calls `checkpoint(doing)` between its steps: once the deadline has passed, or the request was
cancelled (the caller gave up, or the server is stopping and the grace period is over), the next
checkpoint raises DeadlineExceeded and the thread ends. The thread is a daemon, so even work
between two checkpoints never holds up the process's exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from dxts.core.errors import DeadlineExceeded

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0

# Absolute, on the time.monotonic() clock; None = no deadline.
_current_deadline: ContextVar[float | None] = ContextVar("dxts_deadline", default=None)
# Set when the coroutine awaiting an abandonable thread is cancelled.
_abandoned: ContextVar[threading.Event | None] = ContextVar("dxts_abandoned", default=None)


def time_remaining() -> float | None:
    """Seconds left before the current deadline (negative once passed), or None without one."""
    current = _current_deadline.get()
    return None if current is None else current - time.monotonic()


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Bound every call made inside the block by `seconds` from now (never loosening an
    enclosing deadline); None leaves the enclosing deadline, if any, as it is."""
    remaining = time_remaining()
    if seconds is None:
        yield
        return
    if remaining is not None:
        seconds = min(seconds, remaining)
    token = _current_deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _current_deadline.reset(token)


def call_timeout(explicit: float | None, default: float | None = DEFAULT_TIMEOUT_S) -> float | None:
    """The timeout an outgoing call gets: the tighter of `explicit` and the inherited deadline,
    else `default`. Never negative: a call made after the deadline fails at once."""
    bounds = [bound for bound in (explicit, time_remaining()) if bound is not None]
    if bounds:
        return max(0.0, min(bounds))
    return default


def checkpoint(doing: str) -> None:
    """Raise DeadlineExceeded if the current deadline has passed or the work was abandoned;
    `doing` says what was about to happen ("loading main.cwl")."""
    abandoned = _abandoned.get()
    if abandoned is not None and abandoned.is_set():
        raise DeadlineExceeded(f"abandoned before {doing}: the call was cancelled")
    remaining = time_remaining()
    if remaining is not None and remaining <= 0:
        raise DeadlineExceeded(f"the deadline passed before {doing}")


async def in_abandonable_thread(function: Callable[..., T], *args: object) -> T:
    """`function(*args)` in a daemon thread of its own, in a copy of the current context (so
    it sees the deadline), awaited; cancelling the await marks the work abandoned, so that its
    next `checkpoint` ends it, and returns at once without waiting for the thread."""
    loop = asyncio.get_running_loop()
    result: asyncio.Future[T] = loop.create_future()
    abandoned = threading.Event()
    context = contextvars.copy_context()
    context.run(_abandoned.set, abandoned)

    def settle(outcome: T | None, error: BaseException | None) -> None:
        if result.done():
            return
        if error is None:
            result.set_result(outcome)  # type: ignore[arg-type]
        else:
            result.set_exception(error)

    def work() -> None:
        outcome: T | None = None
        failure: BaseException | None = None
        try:
            outcome = context.run(function, *args)
        except BaseException as error:
            failure = error  # handed to the awaiting coroutine
        # RuntimeError: the loop has closed meanwhile, and nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, outcome, failure)

    name = f"dxts-{getattr(function, '__name__', 'work')}"
    threading.Thread(target=work, name=name, daemon=True).start()
    try:
        return await result
    finally:
        abandoned.set()  # harmless once done; ends the work at its next checkpoint otherwise
