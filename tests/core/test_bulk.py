"""`insert_rows` stores exactly what `conn.execute(sa.insert(table), rows)` stores, on both
databases: every type the bulk tables use (ids, an enum, JSON, timestamps, big integers,
NULLs), byte for byte as the database holds it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from dxts.core.bulk import insert_rows
from dxts.core.db import Database, Isolation
from dxts.core.ids import new_id
from dxts.core.schema.types import Enum, Json, Lfn, Timestamp, Uuid

probes = sa.MetaData()
probe = sa.Table(
    "BulkProbe",
    probes,
    sa.Column("ProbeID", Uuid(), primary_key=True),
    sa.Column("Batch", sa.String(8), nullable=False),
    sa.Column("Kind", Enum("ProbeKind", ("Compute", "Data")), nullable=False),
    sa.Column("Document", Json(), nullable=True),
    sa.Column("LFN", Lfn(), nullable=True),
    sa.Column("Size", sa.BigInteger(), nullable=True),
    sa.Column("At", Timestamp(), nullable=False),
)
defaulted = sa.Table(
    "BulkDefaulted",
    probes,
    sa.Column("ProbeID", Uuid(), primary_key=True),
    sa.Column("Made", sa.Integer(), nullable=False, default=7),
)
RC = Isolation.READ_COMMITTED


@pytest.fixture(scope="module")
async def database(db_url: str) -> AsyncIterator[Database]:
    database = Database(db_url)
    await database.start()
    async with database.engine.begin() as conn:
        await conn.run_sync(probes.create_all)
    try:
        yield database
    finally:
        async with database.engine.begin() as conn:
            await conn.run_sync(probes.drop_all)
        await database.dispose()


def _rows(batch: str) -> list[dict[str, Any]]:
    at = datetime(2026, 12, 2, 21, 30, 5, 123456, tzinfo=UTC).replace(tzinfo=None)
    documents: list[Any] = [
        {"metadata": {"run": 7, "tags": ["a", "é"]}, "quote": 'say "hi"\n'},
        None,
        [1, 2.5, True, None],
        {"big": 2**62, "nested": {"deep": {"deeper": "ü"}}},
    ]
    return [
        {
            "ProbeID": new_id(),
            "Batch": batch,
            "Kind": ("Compute", "Data")[n % 2],
            "Document": document,
            "LFN": f"/lhcb/MC/2026/probe/{n}.dst" if n % 3 else None,
            "Size": 2**40 + n if n % 2 else None,
            "At": at,
        }
        for n, document in enumerate(documents)
    ]


async def _stored(database: Database, batch: str) -> list[tuple[Any, ...]]:
    """The rows of `batch` as the database holds them: raw text, not SQLAlchemy's reading."""

    async def work(conn: Any) -> list[tuple[Any, ...]]:
        result = await conn.exec_driver_sql(
            "SELECT Kind, Document, LFN, Size, At FROM BulkProbe WHERE Batch = "
            + ("?" if conn.dialect.name == "sqlite" else "%s")
            + " ORDER BY ProbeID",
            (batch,),
        )
        return [tuple(row) for row in result]

    return await database.run(work, isolation=RC)


async def test_what_is_stored_is_what_sqlalchemy_stores(database: Database) -> None:
    by_sqlalchemy, by_driver = _rows("sa"), _rows("bulk")

    async def work(conn: Any) -> int:
        await conn.execute(sa.insert(probe), by_sqlalchemy)
        return await insert_rows(conn, probe, by_driver)

    assert await database.run(work, isolation=RC) == len(by_driver)
    stored = await _stored(database, "bulk")
    assert stored == await _stored(database, "sa")
    assert len(stored) == 4

    async def read(conn: Any) -> list[dict[str, Any]]:
        result = await conn.execute(
            sa.select(probe).where(probe.c.Batch == "bulk").order_by(probe.c.ProbeID)
        )
        return [dict(row._mapping) for row in result]

    assert await database.run(read, isolation=RC) == by_driver


async def test_duplicates_are_skipped_and_not_counted(database: Database) -> None:
    first = _rows("dup")

    async def work(conn: Any) -> int:
        await insert_rows(conn, probe, first[:2])
        again = [{**first[0], "Size": 1}, *first[1:]]  # the first two repeat their keys
        return await insert_rows(conn, probe, again, ignore_duplicates=True)

    assert await database.run(work, isolation=RC) == 2
    stored = await _stored(database, "dup")
    assert len(stored) == 4
    assert stored[0][3] is None  # the repeated row's Size (1) was not written over the first


async def test_rows_naming_different_columns_are_refused(database: Database) -> None:
    rows = _rows("ragged")
    del rows[1]["LFN"]

    async def work(conn: Any) -> int:
        return await insert_rows(conn, probe, rows)

    with pytest.raises(ValueError, match="every row must name the same columns"):
        await database.run(work, isolation=RC)
    assert await _stored(database, "ragged") == []


async def test_a_column_sqlalchemy_would_fill_per_row_must_be_given(database: Database) -> None:
    async def work(conn: Any) -> int:
        return await insert_rows(conn, defaulted, [{"ProbeID": new_id()}])

    with pytest.raises(ValueError, match="BulkDefaulted: rows must name exactly"):
        await database.run(work, isolation=RC)


async def test_no_rows_is_no_statement(database: Database) -> None:
    async def work(conn: Any) -> int:
        return await insert_rows(conn, probe, [])

    assert await database.run(work, isolation=RC) == 0
