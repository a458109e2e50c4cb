"""Deadlines: every call has one, and a call made while serving a request inherits its rest.

While a request is being served, the server interceptor records the caller's deadline in a
context variable; `channel()` clients read it, so a nested call never outlives the request that
made it, and a call made outside any request gets `DEFAULT_TIMEOUT_S`. Code outside a request
(a sweep) bounds a group of calls with `deadline(seconds)`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

DEFAULT_TIMEOUT_S = 30.0

# Absolute, on the time.monotonic() clock; None = no deadline.
_current_deadline: ContextVar[float | None] = ContextVar("dxts_grpc_deadline", default=None)


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
