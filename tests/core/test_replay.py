"""Replaying a transaction that lost its connection: on a new connection, once it commits, for a
bounded wait, and never past a named lock that was lost to another holder.

A lost connection is made the way a failover makes it: the server side of the connection goes
away mid-transaction (`KILL CONNECTION` from another session, as a dying Galera node or a proxy
cutting its sessions does). The Galera cluster itself is not needed for that; its one property
dxts sets (causal reads) is checked against it when `DXTS_GALERA_URL` names one.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import Database, Isolation
from dxts.core.locks import Lock, LockManager
from dxts.core.replay import ConnectionLost, LockLost
from dxts.core.settings import DatabaseSettings

RC = Isolation.READ_COMMITTED
probe = sa.Table(
    "replay_probe",
    sa.MetaData(),
    sa.Column("ProbeID", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("Attempt", sa.Integer, nullable=False),
)


async def created(database: Database) -> AsyncIterator[sa.Table]:
    async with database.engine.begin() as conn:
        await conn.run_sync(probe.metadata.create_all)
    try:
        yield probe
    finally:
        async with database.engine.begin() as conn:
            await conn.run_sync(probe.metadata.drop_all)


@pytest.fixture
async def table(database: Database) -> AsyncIterator[sa.Table]:
    """The probe table, on SQLite and on MariaDB."""
    async for made in created(database):
        yield made


@pytest.fixture
async def mariadb_table(mariadb: Database) -> AsyncIterator[sa.Table]:
    async for made in created(mariadb):
        yield made


async def rows(database: Database) -> list[tuple[int, int]]:
    async with database.transaction(RC) as conn:
        found = await conn.execute(sa.select(probe.c.ProbeID, probe.c.Attempt))
        return sorted((int(a), int(b)) for a, b in found.all())


async def kill_own_connection(conn: AsyncConnection, database: Database) -> None:
    """End `conn`'s server session from another session, then use it: the driver's 2013."""
    thread = await conn.scalar(sa.text("SELECT CONNECTION_ID()"))
    async with database.engine.connect() as killer:
        await killer.execute(sa.text(f"KILL CONNECTION {int(thread)}"))
    await conn.execute(sa.text("SELECT 1"))


async def test_an_error_that_says_never_is_not_replayed(
    database: Database, table: sa.Table
) -> None:
    attempts = 0

    async def insert_twice(conn: AsyncConnection) -> None:
        nonlocal attempts
        attempts += 1
        await conn.execute(sa.insert(table).values(ProbeID=1, Attempt=attempts))
        await conn.execute(sa.insert(table).values(ProbeID=1, Attempt=attempts))

    with pytest.raises(sa.exc.IntegrityError):
        await database.run(insert_twice, isolation=RC)
    assert attempts == 1
    assert await rows(database) == []


async def test_a_lost_connection_is_replayed_on_a_new_one_and_commits_once(
    mariadb: Database, mariadb_table: sa.Table
) -> None:
    table = mariadb_table
    attempts: list[int] = []

    async def work(conn: AsyncConnection) -> int:
        attempts.append(int(await conn.scalar(sa.text("SELECT CONNECTION_ID()"))))
        await conn.execute(sa.insert(table).values(ProbeID=len(attempts), Attempt=len(attempts)))
        if len(attempts) == 1:
            await kill_own_connection(conn, mariadb)
        return len(attempts)

    assert await mariadb.run(work, isolation=RC) == 2
    assert len(set(attempts)) == 2, "the replay ran on a connection of its own"
    # The first attempt's insert died with its connection; only the replay's committed.
    assert await rows(mariadb) == [(2, 2)]


async def test_a_database_that_stays_away_ends_the_replays_after_the_wait(
    mysql_test_url: str,
) -> None:
    database = Database(mysql_test_url, DatabaseSettings(url=mysql_test_url, failover_wait_s=0.5))
    await database.start()
    attempts = 0

    async def always_cut(conn: AsyncConnection) -> None:
        nonlocal attempts
        attempts += 1
        await kill_own_connection(conn, database)

    try:
        with pytest.raises(ConnectionLost, match="still unreachable after"):
            await database.run(always_cut, isolation=RC)
    finally:
        await database.dispose()
    assert attempts >= 2


async def lock_thread(database: Database, name: str) -> int | None:
    async with database.transaction(RC) as conn:
        owner = await conn.scalar(sa.text("SELECT IS_USED_LOCK(:name)"), {"name": name})
        return None if owner is None else int(owner)


async def kill(database: Database, thread: int) -> None:
    async with database.engine.connect() as conn:
        await conn.execute(sa.text(f"KILL CONNECTION {thread}"))


async def test_a_lock_lost_with_its_connection_is_taken_again_before_the_replay(
    mariadb: Database, mariadb_table: sa.Table
) -> None:
    table = mariadb_table
    locks = LockManager(mariadb)
    lock = Lock("replay-test", "retaken")
    name = locks.server_name(lock)
    attempts = 0

    async def work(conn: AsyncConnection) -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            # The node dies: the lock's connection and the transaction's both go.
            thread = await lock_thread(mariadb, name)
            assert thread is not None
            await kill(mariadb, thread)
            await kill_own_connection(conn, mariadb)
        await conn.execute(sa.insert(table).values(ProbeID=attempts, Attempt=attempts))

    try:
        async with locks.try_hold(lock) as held:
            assert held
            first_owner = await lock_thread(mariadb, name)
            await mariadb.run(work, isolation=RC)
            assert await held.still_held()
            assert await lock_thread(mariadb, name) not in (None, first_owner)
        assert await lock_thread(mariadb, name) is None, "released at the end of the block"
    finally:
        await locks.dispose()
    assert attempts == 2
    assert await rows(mariadb) == [(2, 2)]


async def test_a_lock_another_holder_took_meanwhile_stops_the_replay(
    mariadb: Database, mariadb_table: sa.Table
) -> None:
    locks, other_replica = LockManager(mariadb), LockManager(mariadb)
    lock = Lock("replay-test", "taken-over")
    name = locks.server_name(lock)
    attempts = 0
    taken_over = None

    async def work(conn: AsyncConnection) -> None:
        nonlocal attempts, taken_over
        attempts += 1
        thread = await lock_thread(mariadb, name)
        assert thread is not None
        await kill(mariadb, thread)
        taken_over = await other_replica.acquire(lock)  # another replica gets there first
        assert taken_over
        await kill_own_connection(conn, mariadb)

    try:
        with pytest.raises(LockLost, match="another holder has it now"):
            async with locks.try_hold(lock) as held:
                assert held
                await mariadb.run(work, isolation=RC)
        assert attempts == 1, "nothing ran again without the lock"
        assert taken_over is not None and await taken_over.still_held()
    finally:
        if taken_over is not None:
            await taken_over.release()
        await locks.dispose()
        await other_replica.dispose()
    assert await rows(mariadb) == []


async def test_a_single_server_reads_without_a_sync_wait(mariadb: Database) -> None:
    assert mariadb.server is not None and not mariadb.server.galera
    async with mariadb.transaction(RC) as conn:
        assert int(await conn.scalar(sa.text("SELECT @@SESSION.wsrep_sync_wait"))) == 0


@pytest.mark.skipif(not os.environ.get("DXTS_GALERA_URL"), reason="set DXTS_GALERA_URL")
async def test_a_galera_session_reads_causally() -> None:
    """Against `scripts/galera start`: every pooled session waits for the node to apply what
    the cluster committed before its reads."""
    database = Database(os.environ["DXTS_GALERA_URL"])
    await database.start()
    try:
        assert database.server is not None and database.server.galera
        async with database.transaction(RC) as conn:
            assert int(await conn.scalar(sa.text("SELECT @@SESSION.wsrep_sync_wait"))) == 1
    finally:
        await database.dispose()
