"""Database access: transactions, isolation, retries, cancellation, version checks."""

from __future__ import annotations

import asyncio
import datetime
import gc
from pathlib import Path

import pytest
import sqlalchemy as sa

from dxts.core import db as dbmod
from dxts.core.db import Database, Isolation, check_server_version, utcnow
from dxts.core.errors import Aborted, InvalidArgument, Unavailable
from dxts.core.ids import new_id
from dxts.core.schema import definition


async def test_commit_and_rollback(database: Database) -> None:
    workgraph_id = new_id()
    row = {"WorkgraphID": workgraph_id, "Type": "T", "StrippedSpec": {}, "UpdatedAt": utcnow()}
    with pytest.raises(RuntimeError):
        async with database.transaction(Isolation.READ_COMMITTED) as conn:
            await conn.execute(sa.insert(definition.workgraphs).values(row))
            raise RuntimeError("boom")
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        found = await conn.scalar(
            sa.select(sa.func.count()).where(definition.workgraphs.c.WorkgraphID == workgraph_id)
        )
        assert found == 0
        await conn.execute(sa.insert(definition.workgraphs).values(row))
    async with database.transaction(Isolation.REPEATABLE_READ) as conn:
        stored = (
            await conn.execute(
                sa.select(definition.workgraphs).where(
                    definition.workgraphs.c.WorkgraphID == workgraph_id
                )
            )
        ).one()
    assert stored.Status == "New"
    assert stored.UpdatedAt.microsecond or stored.UpdatedAt.second >= 0


async def test_ping(database: Database) -> None:
    assert await database.ping()


async def test_isolation_must_be_declared(database: Database) -> None:
    with pytest.raises(InvalidArgument):
        async with database.transaction("READ COMMITTED"):  # type: ignore[arg-type]
            pass


def test_bad_urls_are_refused() -> None:
    with pytest.raises(InvalidArgument):
        Database("not a url")
    with pytest.raises(InvalidArgument):
        Database("postgresql+asyncpg://localhost/x")


@pytest.mark.parametrize(
    ("version", "ok"),
    [
        ("10.11.19-MariaDB-0+deb12u1", True),
        ("10.6.0-MariaDB", True),
        ("10.5.22-MariaDB", False),
        ("8.0.36", True),
        ("5.7.44-log", False),
        ("11.4.2-MariaDB", True),
    ],
)
def test_server_version_floor(version: str, ok: bool) -> None:
    if ok:
        check_server_version(version)
    else:
        with pytest.raises(Unavailable, match="too old"):
            check_server_version(version)


async def test_unreachable_server_is_unavailable() -> None:
    database = Database("mysql+asyncmy://root@127.0.0.1:1/nothing")
    with pytest.raises(Unavailable):
        await database.start()


async def test_deadlock_retries_then_aborts(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = 0

    class FakeOrig(Exception):
        pass

    async def always_deadlocks(conn: object) -> None:
        nonlocal calls
        calls += 1
        raise sa.exc.OperationalError("UPDATE", {}, FakeOrig(dbmod.MYSQL_DEADLOCK, "Deadlock"))

    with pytest.raises(Aborted, match="3 attempts"):
        await database.run(always_deadlocks, isolation=Isolation.READ_COMMITTED, retries=2)
    assert calls == 3

    attempts = 0

    async def deadlocks_once(conn: object) -> str:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise sa.exc.OperationalError("UPDATE", {}, FakeOrig(dbmod.MYSQL_DEADLOCK, "x"))
        return "done"

    assert await database.run(deadlocks_once, isolation=Isolation.READ_COMMITTED) == "done"


async def test_real_deadlock_is_retried_on_mariadb(mariadb: Database) -> None:
    """Two transactions lock two rows in opposite orders: one is the victim and is retried."""
    a, b = new_id(), new_id()
    async with mariadb.transaction(Isolation.READ_COMMITTED) as conn:
        for workgraph_id in (a, b):
            await conn.execute(
                sa.insert(definition.workgraphs).values(
                    WorkgraphID=workgraph_id, Type="T", StrippedSpec={}, UpdatedAt=utcnow()
                )
            )
    both_locked_first = asyncio.Barrier(2)
    attempts: list[str] = []
    table = definition.workgraphs

    def worker(first: bytes, second: bytes, name: str):  # type: ignore[no-untyped-def]
        async def work(conn: sa.ext.asyncio.AsyncConnection) -> None:
            attempts.append(name)
            await conn.execute(
                sa.update(table).where(table.c.WorkgraphID == first).values(Type=name)
            )
            if attempts.count(name) == 1:
                await both_locked_first.wait()
            await conn.execute(
                sa.update(table).where(table.c.WorkgraphID == second).values(Type=name)
            )

        return work

    await asyncio.gather(
        mariadb.run(worker(a, b, "one"), isolation=Isolation.READ_COMMITTED),
        mariadb.run(worker(b, a, "two"), isolation=Isolation.READ_COMMITTED),
    )
    assert len(attempts) == 3  # one of the two was the deadlock victim and ran again


async def test_cancelled_query_never_leaks_into_the_next_user(mysql_test_url: str) -> None:
    """A deadline cancels a running query: the pooled connection must not serve stale rows."""
    from dxts.core.settings import DatabaseSettings

    database = Database(
        mysql_test_url, DatabaseSettings(url=mysql_test_url, pool_size=1, max_overflow=0)
    )
    await database.start()
    try:

        async def slow() -> None:
            async with database.transaction(Isolation.READ_COMMITTED) as conn:
                await conn.execute(sa.text("SELECT 'stale', SLEEP(3)"))

        with pytest.raises(TimeoutError):
            await asyncio.wait_for(slow(), timeout=0.3)
        for expected in range(5):
            async with database.transaction(Isolation.READ_COMMITTED) as conn:
                value = await conn.scalar(sa.text(f"SELECT {expected}"))
            assert value == expected
        # The killed query is gone from the server, not left sleeping.
        await asyncio.sleep(0.3)
        async with database.transaction(Isolation.READ_COMMITTED) as conn:
            sleeping = await conn.scalar(
                sa.text(
                    "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                    "WHERE INFO LIKE 'SELECT ''stale'', SLEEP%'"
                )
            )
        assert sleeping == 0
    finally:
        await database.dispose()


async def test_a_cancelled_sqlite_transaction_releases_the_write_lock(tmp_path: Path) -> None:
    """A transaction cancelled mid-statement must not leave its connection holding the write
    lock until a garbage collection: the next writer, here another engine on the same file
    (the restarted process), gets it at once."""
    from dxts.core.settings import DatabaseSettings

    url = f"sqlite+aiosqlite:///{tmp_path / 'state.sqlite'}"
    first = Database(url)
    await first.start()
    slow_count = sa.text(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000000) "
        "SELECT COUNT(*) FROM n"
    )

    async def slow() -> None:
        async with first.transaction(Isolation.READ_COMMITTED) as conn:
            await conn.execute(slow_count)

    gc.disable()  # the cycle must not be collected by chance while the test runs
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(slow(), timeout=0.2)
        await first.dispose()
        second = Database(url, DatabaseSettings(url=url, sqlite_busy_timeout_ms=3000))
        await second.start()  # its first connection begins IMMEDIATE: the write lock
        try:
            async with second.transaction(Isolation.READ_COMMITTED) as conn:
                assert await conn.scalar(sa.text("SELECT 1")) == 1
        finally:
            await second.dispose()
    finally:
        gc.enable()


async def test_db_now_reads_the_database_clock(database: Database) -> None:
    from dxts.core.db import db_now

    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        first = await db_now(conn)
        second = await db_now(conn)
    assert isinstance(first, datetime.datetime)
    assert first.tzinfo is None
    assert second >= first
    assert abs((datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - first)
               .total_seconds()) < 60


async def test_each_transaction_runs_at_the_level_it_asks_for(mariadb: Database) -> None:
    """Sessions start at READ COMMITTED; another level is set for its transaction only."""
    query = sa.text("SELECT @@tx_isolation")
    for isolation in (Isolation.READ_COMMITTED, Isolation.REPEATABLE_READ,
                      Isolation.READ_COMMITTED, Isolation.SERIALIZABLE, Isolation.READ_COMMITTED):
        async with mariadb.transaction(isolation) as conn:
            level = await conn.scalar(query)
        assert level == isolation.value.replace(" ", "-")
