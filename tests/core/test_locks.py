"""Named locks: exclusion without waiting (and with), release, release with a dead holder, stable
names."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from dxts.core.db import Database, Isolation
from dxts.core.errors import InvalidArgument
from dxts.core.ids import id_from_str, id_to_str, new_id
from dxts.core.locks import MAX_NAME_LENGTH, Lock, LockManager

# Hang protection only: acquire waits only when asked to, so it answers at once otherwise.
NO_HANG_S = 10


async def try_once(manager: LockManager, lock: Lock) -> bool:
    held = await asyncio.wait_for(manager.acquire(lock), NO_HANG_S)
    acquired = bool(held)
    await held.release()
    return acquired


# --- names -------------------------------------------------------------------------------------


def test_name_is_stable_and_readable() -> None:
    tid = id_from_str("01936d2a-5b1c-7e3f-8a9b-0c1d2e3f4a5b")
    # Golden values: replicas of two releases must agree on every name.
    assert Lock("transformation", tid).name == (
        "dxts:transformation:01936d2a-5b1c-7e3f-8a9b-0c1d2e3f4a5b"
    )
    assert Lock("workgraph", "01936d2a-5b1c-7e3f-8a9b-0c1d2e3f4a5b").name == (
        "dxts:workgraph:01936d2a-5b1c-7e3f-8a9b-0c1d2e3f4a5b"
    )
    assert Lock("dispatcher", "stale-reserved").name == "dxts:dispatcher:stale-reserved"
    assert Lock("transformation", "x" * 100).name == (
        "dxts#transformation:854257611aea8fc3450c9aa27d7607db"
    )
    assert Lock("feeder", "Foo").name == "dxts#feeder:7b52cc8e7479377f68957db05b59e41e"


def test_long_and_cased_names_are_hashed_within_the_limit() -> None:
    long_name = Lock("transformation", "x" * 100).name
    assert long_name.startswith("dxts#transformation:")
    assert len(long_name) <= MAX_NAME_LENGTH
    longest = Lock("a" * 32, "y" * 1000).name
    assert len(longest) == MAX_NAME_LENGTH
    # MySQL compares lock names case-insensitively: mixed case must not be used literally.
    assert Lock("feeder", "Foo").name != Lock("feeder", "foo").name
    assert Lock("feeder", "Foo").name.startswith("dxts#")


def test_an_id_and_its_string_name_the_same_lock() -> None:
    tid = new_id()
    assert Lock("transformation", tid).name == Lock("transformation", id_to_str(tid)).name


def test_different_locks_have_different_names() -> None:
    ids = [new_id() for _ in range(200)]
    locks = [Lock(kind, key) for kind in ("transformation", "workgraph") for key in ids]
    # Long keys sharing a 60-character prefix, and keys differing only in case.
    locks += [Lock("transformation", "p" * 60 + suffix) for suffix in ("a", "b", "c", "aa")]
    locks += [Lock("feeder", key) for key in ("abc", "ABC", "Abc", "dxts:x", "dxts#x")]
    names = [lock.name for lock in locks]
    assert len(set(names)) == len(names)
    assert all(len(name) <= MAX_NAME_LENGTH for name in names)


# A fixed id, so that every collection of the module (each pytest-xdist worker's) names the
# same tests.
A_KEY = id_from_str("01a2366e-bc6e-7767-a501-36630c5ef6ab")


@pytest.mark.parametrize(
    ("kind", "key", "field"),
    [
        ("", A_KEY, "kind"),
        ("Transformation", A_KEY, "kind"),
        ("has:colon", A_KEY, "kind"),
        (None, A_KEY, "kind"),
        ("transformation", b"short", "key"),
        ("transformation", "", "key"),
        ("transformation", 42, "key"),
        ("transformation", None, "key"),
    ],
)
def test_bad_locks_are_invalid_arguments(kind: object, key: object, field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        Lock(kind, key)  # type: ignore[arg-type]
    assert caught.value.violations[0].field == field


async def test_acquire_refuses_what_is_not_a_lock(database: Database) -> None:
    with pytest.raises(InvalidArgument):
        await LockManager(database).acquire("dxts:transformation:x")  # type: ignore[arg-type]


# --- on both databases (in-process exclusion on SQLite, GET_LOCK on MariaDB) --------------------


async def test_exclusion_and_release(database: Database) -> None:
    first, second = LockManager(database), LockManager(database)
    lock = Lock("transformation", new_id())
    async with first.try_hold(lock) as held:
        assert held
        assert await held.still_held()
        # Skips at once while the holder still holds it, from another manager and from the
        # holder's own manager alike.
        assert not await try_once(second, lock)
        assert not await try_once(first, lock)
        assert await held.still_held()
        # Other names are unaffected.
        assert await try_once(second, Lock("transformation", new_id()))
    assert not await held.still_held()
    assert await try_once(second, lock)
    await first.dispose()
    await second.dispose()


async def test_skipped_hold_is_falsy_and_releases_nothing(database: Database) -> None:
    manager = LockManager(database)
    lock = Lock("workgraph", new_id())
    ran = []
    async with manager.try_hold(lock) as outer:
        async with manager.try_hold(lock) as inner:
            assert not inner
            if inner:
                ran.append("inner")
        # Exiting the skipped hold must not have released the outer one.
        assert await outer.still_held()
        assert not await try_once(manager, lock)
    assert ran == []
    await manager.dispose()


async def test_released_when_the_block_raises(database: Database) -> None:
    manager = LockManager(database)
    lock = Lock("transformation", new_id())
    with pytest.raises(RuntimeError):
        async with manager.try_hold(lock) as held:
            assert held
            raise RuntimeError("sweep failed")
    assert await try_once(manager, lock)
    await manager.dispose()


async def test_released_when_the_holder_is_cancelled(database: Database) -> None:
    manager = LockManager(database)
    lock = Lock("transformation", new_id())
    inside = asyncio.Event()

    async def sweep() -> None:
        async with manager.try_hold(lock) as held:
            assert held
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.ensure_future(sweep())
    await asyncio.wait_for(inside.wait(), NO_HANG_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await try_once(manager, lock)
    await manager.dispose()


async def test_a_waiting_acquire_gets_the_lock_once_released(database: Database) -> None:
    holder, waiter = LockManager(database), LockManager(database)
    lock = Lock("submission", new_id())
    held = await holder.acquire(lock)
    assert held
    # Still taken after the wait: falsy, like an acquire that does not wait.
    assert not await asyncio.wait_for(waiter.acquire(lock, wait=0.1), NO_HANG_S)
    waiting = asyncio.ensure_future(waiter.acquire(lock, wait=NO_HANG_S))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await held.release()
    got = await asyncio.wait_for(waiting, NO_HANG_S)
    assert got and await got.still_held()
    assert not await try_once(holder, lock)
    await got.release()
    assert await try_once(holder, lock)
    with pytest.raises(InvalidArgument):
        await waiter.acquire(lock, wait=-1)
    await holder.dispose()
    await waiter.dispose()


async def test_sqlite_lock_is_shared_by_managers_of_one_database(tmp_path: Path) -> None:
    one = Database(f"sqlite+aiosqlite:///{tmp_path}/a.sqlite")
    other = Database(f"sqlite+aiosqlite:///{tmp_path}/b.sqlite")
    lock = Lock("transformation", new_id())
    async with LockManager(one).try_hold(lock) as held:
        assert held
        # Same database file, another manager (another component of `dxts up`): excluded.
        assert not await try_once(LockManager(Database(str(one.url))), lock)
        # Another database: a different lock.
        assert await try_once(LockManager(other), lock)


# --- MariaDB: GET_LOCK on dedicated connections ----------------------------------------------


@pytest.fixture(scope="module")
async def replica(mariadb: Database) -> AsyncIterator[Database]:
    """A second process's view: its own Database (own pool) on the same server database."""
    other = Database(mariadb.url.render_as_string(hide_password=False))
    await other.start()
    yield other
    await other.dispose()


async def lock_owner(database: Database, name: str) -> int | None:
    """The server connection id holding `name`, asked from a third connection."""
    async with database.engine.connect() as conn:
        owner = await conn.scalar(sa.text("SELECT IS_USED_LOCK(:name)"), {"name": name})
        await conn.rollback()
    return None if owner is None else int(owner)


async def test_mariadb_two_replicas_exclude_and_release(
    mariadb: Database, replica: Database
) -> None:
    mine, theirs = LockManager(mariadb), LockManager(replica)
    lock = Lock("transformation", new_id())
    held = await mine.acquire(lock)
    assert held
    assert await lock_owner(mariadb, LockManager(mariadb).server_name(lock)) is not None
    assert not await try_once(theirs, lock)
    assert await held.still_held()
    await held.release()
    assert await lock_owner(mariadb, LockManager(mariadb).server_name(lock)) is None
    assert await try_once(theirs, lock)
    await mine.dispose()
    await theirs.dispose()


async def test_mariadb_lock_connection_is_not_a_pooled_one(mariadb: Database) -> None:
    """The lock lives on a connection of its own: the shared pool never sees it."""
    manager = LockManager(mariadb)
    lock = Lock("transformation", new_id())
    pool = mariadb.engine.pool
    before = pool.checkedout()  # type: ignore[attr-defined]
    async with manager.try_hold(lock) as held:
        assert held
        assert pool.checkedout() == before  # type: ignore[attr-defined]
        owner = await lock_owner(mariadb, LockManager(mariadb).server_name(lock))
        async with mariadb.engine.connect() as conn:
            pooled = await conn.scalar(sa.text("SELECT CONNECTION_ID()"))
            await conn.rollback()
        assert owner != pooled
    # The holder's connection is closed with the hold, not parked anywhere: the server lets its
    # thread go a moment after the client's quit (under load, after the next read), a parked
    # connection never.
    for _ in range(100):
        async with mariadb.engine.connect() as conn:
            alive = await conn.scalar(
                sa.text("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = :id"),
                {"id": owner},
            )
            await conn.rollback()
        if not alive:
            break
        await asyncio.sleep(0.1)
    assert alive == 0
    await manager.dispose()


async def test_mariadb_killed_holder_releases_the_lock(
    mariadb: Database, replica: Database
) -> None:
    mine, theirs = LockManager(mariadb), LockManager(replica)
    lock = Lock("transformation", new_id())
    held = await mine.acquire(lock)
    assert held
    assert not await try_once(theirs, lock)
    owner = await lock_owner(mariadb, LockManager(mariadb).server_name(lock))
    assert owner is not None
    killer = create_async_engine(mariadb.url, poolclass=sa.pool.NullPool)
    async with killer.connect() as conn:
        await conn.execute(sa.text(f"KILL CONNECTION {owner}"))
    await killer.dispose()
    # The server finishes the killed thread asynchronously: wait (bounded) for the lock to free.
    for _ in range(200):
        if await lock_owner(mariadb, LockManager(mariadb).server_name(lock)) is None:
            break
        await asyncio.sleep(0.025)
    assert await try_once(theirs, lock)
    # The holder learns it lost the lock, and releasing a lost lock is harmless.
    assert not await held.still_held()
    await held.release()
    assert await try_once(theirs, lock)
    await mine.dispose()
    await theirs.dispose()


async def test_installations_sharing_a_server_do_not_exclude_each_other(
    mariadb: Database, mysql_test_url: str
) -> None:
    """GET_LOCK names are server-wide: the database name scopes them, so another database on
    the same server (another installation, another test run) takes the same Lock freely."""
    other_name = f"{mariadb.url.database}_other"
    admin = Database(mysql_test_url)
    await admin.start()
    async with admin.transaction(Isolation.READ_COMMITTED) as conn:
        await conn.execute(sa.text(f"CREATE DATABASE `{other_name}`"))
    other = Database(mariadb.url.set(database=other_name).render_as_string(hide_password=False))
    await other.start()
    mine, theirs = LockManager(mariadb), LockManager(other)
    lock = Lock("transformation", "shared-key")
    try:
        assert mine.server_name(lock) != theirs.server_name(lock)
        async with mine.try_hold(lock) as held_here, theirs.try_hold(lock) as held_there:
            assert held_here and held_there
            async with LockManager(mariadb).try_hold(lock) as again:
                assert not again  # still exclusive within one database
    finally:
        await mine.dispose()
        await theirs.dispose()
        await other.dispose()
        async with admin.transaction(Isolation.READ_COMMITTED) as conn:
            await conn.execute(sa.text(f"DROP DATABASE `{other_name}`"))
        await admin.dispose()
