"""Named locks: "one invocation per transformation at a time" across replicas, skipping not waiting.

A sweep declares the lock it needs as a value, `Lock(LockKind.FEEDER, transformation_id)`, and
takes it through one wrapper (every kind is declared in `LockKind`):

    async with lock_manager.try_hold(Lock(LockKind.FEEDER, tid)) as held:
        if not held:
            return  # another replica is on it: skip this round, never queue behind it
        ...

* On MariaDB/MySQL the lock is `GET_LOCK(name, 0)` on a connection of its own, opened for this
  hold outside the shared pool and closed when the hold ends. The server ties the lock to that
  connection, so a holder that crashes (or whose connection is killed) releases it; and since the
  connection never goes back to a pool, no later user can inherit a lock it did not take.
* On SQLite (one process, the embedded default) it is an in-process lock keyed by database and
  name, shared by every LockManager of the process.

Sweeps never wait. A caller that must serialise rather than skip (a request that must not be
applied twice concurrently) passes `wait=seconds`: `GET_LOCK(name, seconds)` on the server, a
short poll on SQLite; the result is still falsy if the lock stayed taken that long.

A hold taken by `try_hold` is registered for the block (`dxts.core.replay.holding`): a
transaction replayed inside it after a lost connection first reasserts it (`Held.reassert`), so
work that needs the lock never goes on without it. On a Galera cluster behind a proxy that sends
every connection to one node, GET_LOCK is node-local, but every holder asks the same node, so it
still excludes; when that node dies its locks die with it and with their connections, and the
holder finds that out at its next reassertion and takes the lock again on the new node (or
learns that another replica did first). Correctness never rests on the lock alone: the writes
under it are conditional, so a second holder in the moment of a failover changes nothing twice.

Names are stable across versions (replicas of two releases must compute the same name during a
rolling upgrade): `dxts:<kind>:<key>` when that is at most 64 characters of `[a-z0-9_.:-]`
(MySQL's GET_LOCK limit; MySQL compares names case-insensitively, MariaDB does not, so only
lowercase names are used literally), otherwise `dxts#<kind prefix>:<SHA-256 prefix>` of the
literal form. A 16-byte id renders as its canonical UUID string, so the id and its string name
the same lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from enum import StrEnum

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from dxts.core.db import Database, is_unreachable
from dxts.core.errors import InvalidArgument
from dxts.core.ids import UUID_BYTES, id_to_str
from dxts.core.replay import ConnectionLost, holding

log = logging.getLogger(__name__)

MAX_NAME_LENGTH = 64
KIND_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,31}")
LITERAL_NAME = re.compile(r"[a-z0-9_.:-]+")
# 128 bits of the SHA-256: long names only collide by intent.
HASH_HEX_DIGITS = 32
# A waiting acquire: at most this long, and on SQLite polled this often.
MAX_WAIT_S = 300.0
LOCAL_POLL_S = 0.02


class LockKind(StrEnum):
    """Every kind of named lock dxts takes, in one table: what each serialises. The values are
    the names on the wire (`dxts:<kind>:<key>`), which replicas of two releases must compute
    alike during a rolling upgrade: a value never changes, a new kind is a new row."""

    # A serialised command's scope: retries of one request apply once (kernel.commands).
    COMMAND = "command"
    # A creating command's (caller, RPC, request id): its retries wait for the first.
    REQUEST = "request"
    # A workgraph's or standalone transformation's lifecycle step (definition).
    LIFECYCLE = "lifecycle"
    # A transformation's feeder, its packer, its HandleFailedInput pass (execution).
    FEEDER = "feeder"
    PACKER = "packer"
    FAILED_INPUTS = "failed-inputs"
    # A counter's fold, and the drift repair of every counter (accounting).
    COUNTER_FOLD = "counter-fold"
    COUNTER_REPAIR = "counter-repair"
    # A backend's poll and its cancellations (dispatcher).
    DISPATCH_POLL = "dispatch-poll"
    DISPATCH_CANCEL = "dispatch-cancel"


@dataclass(frozen=True)
class Lock:
    """A declared lock: what kind of thing it guards (a `LockKind`; tests of the mechanism use
    kinds of their own) and which one (an id, or a string)."""

    kind: str
    key: bytes | str

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not KIND_PATTERN.fullmatch(self.kind):
            raise InvalidArgument(
                f"a lock kind is 1-32 characters of [a-z0-9_-] starting with a letter, "
                f"got {self.kind!r}",
                field="kind",
            )
        if isinstance(self.key, bytes):
            if len(self.key) != UUID_BYTES:
                raise InvalidArgument(
                    f"a bytes lock key is a {UUID_BYTES}-byte id, got {len(self.key)} bytes",
                    field="key",
                )
        elif not isinstance(self.key, str) or not self.key:
            raise InvalidArgument(
                f"a lock key is a 16-byte id or a non-empty string, got {self.key!r}",
                field="key",
            )

    @property
    def name(self) -> str:
        """The server-side lock name: readable when it can be, never over 64 characters."""
        key = id_to_str(self.key) if isinstance(self.key, bytes) else self.key
        literal = f"dxts:{self.kind}:{key}"
        if len(literal) <= MAX_NAME_LENGTH and LITERAL_NAME.fullmatch(literal):
            return literal
        digest = hashlib.sha256(literal.encode()).hexdigest()[:HASH_HEX_DIGITS]
        room = MAX_NAME_LENGTH - len("dxts#:") - HASH_HEX_DIGITS
        return f"dxts#{self.kind[:room]}:{digest}"


def server_name(lock: Lock, database_name: str) -> str:
    """The GET_LOCK name of `lock` in one database.

    Named locks live in the server, not in a database: two installations (or two test runs)
    sharing one MariaDB server would otherwise exclude each other's sweeps. The database name is
    part of the literal, hashed like any other literal that is too long or not lowercase.
    """
    literal = f"{lock.name}@{database_name}"
    if len(literal) <= MAX_NAME_LENGTH and LITERAL_NAME.fullmatch(literal.replace("@", ":")):
        return literal
    digest = hashlib.sha256(literal.encode()).hexdigest()[:HASH_HEX_DIGITS]
    room = MAX_NAME_LENGTH - len("dxts#:") - HASH_HEX_DIGITS
    return f"dxts#{lock.kind[:room]}:{digest}"


class Held:
    """One attempt at a lock; truthy when it was acquired. Release it once (try_hold does)."""

    def __init__(self, lock: Lock) -> None:
        self.lock = lock
        self.acquired = False

    def __bool__(self) -> bool:
        return self.acquired

    @property
    def description(self) -> str:
        return self.lock.name

    async def still_held(self) -> bool:
        """Whether the lock is still ours (a server lock is lost with a killed connection)."""
        return self.acquired

    async def reassert(self) -> bool:
        """Keep the lock, or take it again if its connection was lost; whether it is ours."""
        return await self.still_held()

    async def release(self) -> None:
        self.acquired = False


class _ServerHeld(Held):
    """A GET_LOCK held on its own connection; releasing also closes the connection."""

    def __init__(self, manager: LockManager, lock: Lock, conn: AsyncConnection, name: str) -> None:
        super().__init__(lock)
        self.acquired = True
        self._manager = manager
        self._conn = conn
        self.server_name = name

    async def still_held(self) -> bool:
        if not self.acquired:
            return False
        try:
            owner = await self._conn.scalar(
                sa.text("SELECT IS_USED_LOCK(:name) = CONNECTION_ID()"),
                {"name": self.server_name},
            )
        except Exception:
            return False
        return bool(owner)

    async def reassert(self) -> bool:
        if not self.acquired:
            return False
        if await self.still_held():
            return True
        # Its connection is gone, and the lock with it: take it again on a new one (after a
        # failover, on the node the proxy sends connections to now).
        log.warning("lock %s was lost with its connection; taking it again", self.server_name)
        with contextlib.suppress(Exception):
            await self._conn.invalidate()
        with contextlib.suppress(Exception):
            await self._conn.close()
        again = await self._manager.acquire(self.lock)
        if isinstance(again, _ServerHeld):
            self._conn = again._conn
            return True
        self.acquired = False
        return False

    async def release(self) -> None:
        if not self.acquired:
            return
        self.acquired = False
        # Shielded: a cancelled sweep still gives the lock back, and the connection is closed
        # whatever happens (closing it releases the lock on the server too).
        task = asyncio.ensure_future(_release_and_close(self._conn, self.server_name))
        _closing.add(task)
        task.add_done_callback(_closing.discard)
        await asyncio.shield(task)


class _LocalHeld(Held):
    """An in-process lock (SQLite: one process)."""

    def __init__(self, lock: Lock, slot: tuple[str, str]) -> None:
        super().__init__(lock)
        self.acquired = True
        self._slot = slot

    async def release(self) -> None:
        if not self.acquired:
            return
        self.acquired = False
        with _local_guard:
            _local_held.discard(self._slot)


class LockManager:
    """Takes named locks for one database: `try_hold` for sweeps, `acquire` for the rest."""

    def __init__(self, database: Database) -> None:
        self._database = database
        # Lock connections never come from (or go back to) a pool: see the module docstring.
        self._engine = (
            None
            if database.is_sqlite
            else create_async_engine(database.url, poolclass=sa.pool.NullPool)
        )

    def server_name(self, lock: Lock) -> str:
        """The name this manager's database gives `lock` on the server (GET_LOCK)."""
        return server_name(lock, self._database.url.database or "")

    async def acquire(self, lock: Lock, *, wait: float = 0.0) -> Held:
        """Take the lock, waiting at most `wait` seconds (default: not at all) for a holder to
        release it; the result is falsy if someone else still holds it."""
        if not isinstance(lock, Lock):
            raise InvalidArgument(f"expected a Lock, got {type(lock).__name__}", field="lock")
        if not isinstance(wait, int | float) or not 0 <= wait <= MAX_WAIT_S:
            raise InvalidArgument(f"wait is 0 to {MAX_WAIT_S} seconds, got {wait!r}", field="wait")
        if self._engine is None:
            return await self._acquire_local_waiting(lock, wait)
        try:
            conn = await self._engine.connect()
        except (exc.DBAPIError, OSError) as error:
            if is_unreachable(error):
                raise ConnectionLost(f"cannot open a lock connection: {error}") from error
            raise
        try:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            got = await conn.scalar(
                sa.text("SELECT GET_LOCK(:name, :wait)"),
                {"name": self.server_name(lock), "wait": wait},
            )
        except BaseException:
            # Cancelled or failed after GET_LOCK may have succeeded: dropping the connection
            # drops whatever it holds.
            with contextlib.suppress(Exception):
                await conn.invalidate()
            with contextlib.suppress(Exception):
                await conn.close()
            raise
        if got == 1:
            return _ServerHeld(self, lock, conn, self.server_name(lock))
        await conn.close()
        return Held(lock)

    async def _acquire_local_waiting(self, lock: Lock, wait: float) -> Held:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            held = self._acquire_local(lock)
            if held or loop.time() >= deadline:
                return held
            await asyncio.sleep(min(LOCAL_POLL_S, max(0.0, deadline - loop.time())))

    def _acquire_local(self, lock: Lock) -> Held:
        slot = (self._database.url.render_as_string(hide_password=True), lock.name)
        with _local_guard:
            if slot in _local_held:
                return Held(lock)
            _local_held.add(slot)
        return _LocalHeld(lock, slot)

    @contextlib.asynccontextmanager
    async def try_hold(self, lock: Lock, *, wait: float = 0.0) -> AsyncIterator[Held]:
        """Hold `lock` for the block if it is free (or freed within `wait` seconds); `held` is
        falsy (and the block should skip) if another holder has it. Released on exit, whatever
        the block raised."""
        held = await self.acquire(lock, wait=wait)
        try:
            if held:
                with holding(held):
                    yield held
            else:
                yield held
        finally:
            await held.release()

    async def dispose(self) -> None:
        """Close the manager's engine (it pools nothing; held locks stay with their holders)."""
        if self._engine is not None:
            await self._engine.dispose()


async def _release_and_close(conn: AsyncConnection, name: str) -> None:
    try:
        released = await conn.scalar(sa.text("SELECT RELEASE_LOCK(:name)"), {"name": name})
        if released != 1:
            log.warning("lock %s was no longer held by its connection at release", name)
    except Exception as error:
        log.warning("lock %s: release failed (%s); its connection is dropped instead", name, error)
        with contextlib.suppress(Exception):
            await conn.invalidate()
    finally:
        with contextlib.suppress(Exception):
            await conn.close()


_closing: set[asyncio.Future[None]] = set()
_local_guard = threading.Lock()
_local_held: set[tuple[str, str]] = set()
