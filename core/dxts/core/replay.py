"""Replaying a transaction the database gave up on: a deadlock, a certification failure, a
lost connection.

`Database.run` hands its whole transaction function to `replaying`, which runs it again when
the error says "again" and not "never":

* **Deadlock** (MySQL error 1213). On a Galera cluster a write that conflicts with another
  node's fails certification at COMMIT, and a transaction a replicated write brute-force aborts
  fails at its next statement; both surface as this same 1213. The transaction was rolled back:
  it is replayed after a short jittered backoff, at most `deadlock_retries` times, then
  `Aborted`.
* **Connection lost** (`ConnectionLost`: the server or the proxy closed the connection, 2013 and
  2006; a Galera node outside the primary component, 1047, or one that lost it under a write,
  1180; a connection refused while the proxy has no node to send to). The database is expected
  back: a proxy fails over to another node in seconds, a node regains quorum. The transaction is
  replayed on a new connection, waiting with a growing pause, for at most `failover_wait_s`
  (`DXTS_DB_FAILOVER_WAIT_S`) from the first loss; then `Unavailable`, and the caller's own
  retry (a sweep's next round, a client's retry with the same request id) takes over.

A connection lost while COMMIT was in flight leaves the outcome unknown: the commit may have
been replicated before the node died. It is replayed like any other: every transaction dxts
runs through `Database.run` is decided by what it reads under its own locks (a transition is a
conditional UPDATE whose row count drives the journal; a command finds its request id in the
log it wrote in the same transaction; a packer's batch rolls back unless every input is still
Unassigned), so a replay of work that did commit changes nothing.

Named locks (`dxts.core.locks`) are tied to a connection, and on Galera to one node. A hold
that a task is inside is registered here (`holding`); before a transaction that lost its
connection is replayed, every such hold is reasserted: one whose connection survived is kept,
one whose connection went down with the node is taken again on a new connection (the node the
proxy writes to now), and if someone else holds it by then the replay stops with `LockLost`
(the work under the lock is skipped this round, as when the lock was not free).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import random
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol, TypeVar

from sqlalchemy import exc

from dxts.core.errors import Aborted, Unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

MYSQL_DEADLOCK = 1213
# The first pause after a deadlock, and the longest after a lost connection.
DEADLOCK_PAUSE_S = 0.005
MAX_DEADLOCK_PAUSE_S = 1.0
FIRST_LOST_PAUSE_S = 0.1
MAX_LOST_PAUSE_S = 1.0


class ConnectionLost(Unavailable):
    """The database connection failed or could not be opened: the server, the proxy or the
    network went away (the driver's words are in the log); a caller hears "retry later"."""


class LockLost(Aborted):
    """A named lock held around a transaction was lost with its connection, and another holder
    took it before it could be taken again."""


class Reassertable(Protocol):
    """A held named lock: `reassert()` keeps or retakes it and says whether it is ours."""

    @property
    def description(self) -> str: ...

    async def reassert(self) -> bool: ...


_holds: contextvars.ContextVar[tuple[Reassertable, ...]] = contextvars.ContextVar(
    "dxts_lock_holds", default=()
)


@contextlib.contextmanager
def holding(hold: Reassertable) -> Iterator[None]:
    """Register `hold` for the block: transactions replayed inside it reassert it first."""
    token = _holds.set((*_holds.get(), hold))
    try:
        yield
    finally:
        _holds.reset(token)


async def reassert_holds() -> None:
    """Keep or retake every lock the current task holds; `LockLost` naming the first that
    another holder has taken meanwhile."""
    for hold in _holds.get():
        if not await hold.reassert():
            raise LockLost(
                f"the {hold.description} lock was lost with its database connection and "
                "another holder has it now; this round stops here"
            )


def error_code(error: BaseException) -> int | None:
    """The server/client error number behind a SQLAlchemy DBAPI error, if any."""
    orig = getattr(error, "orig", None)
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int):
        return args[0]
    return None


def is_deadlock(error: BaseException) -> bool:
    """1213: a deadlock victim, or on Galera a certification failure or brute-force abort."""
    return isinstance(error, exc.DBAPIError) and error_code(error) == MYSQL_DEADLOCK


async def replaying(
    attempt: Callable[[], Awaitable[T]],
    *,
    deadlock_retries: int,
    failover_wait_s: float,
) -> T:
    """Run `attempt()` (one whole transaction), replaying it as the module docstring says."""
    loop = asyncio.get_running_loop()
    deadlocks = 0
    deadlock_pause = DEADLOCK_PAUSE_S
    lost_since: float | None = None
    lost_pause = FIRST_LOST_PAUSE_S
    while True:
        try:
            if lost_since is not None:
                await reassert_holds()
            return await attempt()
        except exc.DBAPIError as error:
            if not is_deadlock(error):
                raise
            deadlocks += 1
            if deadlocks > deadlock_retries:
                raise Aborted(
                    f"deadlock persisted after {deadlocks} attempts; retry the operation"
                ) from error
            log.info("deadlock on attempt %d/%d; replaying", deadlocks, deadlock_retries + 1)
            await asyncio.sleep(deadlock_pause * (1 + random.random()))
            deadlock_pause = min(deadlock_pause * 2, MAX_DEADLOCK_PAUSE_S)
        except ConnectionLost as error:
            now = loop.time()
            if lost_since is None:
                lost_since = now
            waited = now - lost_since
            if waited >= failover_wait_s:
                raise ConnectionLost(
                    f"the database is still unreachable after {waited:.1f} s; retry later"
                ) from error
            log.warning(
                "database connection lost (%s); replaying the transaction on a new connection",
                error.__cause__ or error,
            )
            await asyncio.sleep(min(lost_pause, failover_wait_s - waited))
            lost_pause = min(lost_pause * 2, MAX_LOST_PAUSE_S)
