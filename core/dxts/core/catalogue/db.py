"""Every SQL statement of the local file catalogue (its own tables; see `schema`).

Writers serialise on the one CatalogueSequence row: a registration increments it first and holds
its row lock until commit, and a removal locks it. So registrations commit in the order of the
Seq they allocated, a file is visible to readers only once every file with a smaller Seq is, and
existence checks under the lock cannot race another writer. Statements are bulk: one multi-row
INSERT per chunk of CHUNK rows, IN lists of at most CHUNK values.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.bulk import insert_rows
from dxts.core.catalogue.interface import CatalogueFile, Condition, Range
from dxts.core.catalogue.schema import (
    catalogue_files,
    catalogue_metadata,
    catalogue_metadata_values,
    catalogue_replicas,
    catalogue_sequence,
)
from dxts.core.db import db_now

CHUNK = 500
SEQUENCE_ROW = 1

files_t = catalogue_files
values_t = catalogue_metadata_values
replicas_t = catalogue_replicas


def chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def create_tables(conn: AsyncConnection) -> None:
    """Create the catalogue's tables if absent and its sequence row if missing."""
    await conn.run_sync(catalogue_metadata.create_all)
    row = {"SequenceID": SEQUENCE_ROW, "Value": 0}
    if conn.dialect.name == "sqlite":
        await conn.execute(sa.insert(catalogue_sequence).prefix_with("OR IGNORE").values(row))
    else:  # a no-op update rather than INSERT IGNORE, which logs a duplicate-key warning
        statement = mysql.insert(catalogue_sequence).values(row)
        await conn.execute(statement.on_duplicate_key_update(Value=catalogue_sequence.c.Value))


async def allocate_sequence(conn: AsyncConnection) -> int:
    """The next registration Seq; the row lock taken here is held until this transaction ends."""
    row = catalogue_sequence.c
    await conn.execute(
        sa.update(catalogue_sequence)
        .where(row.SequenceID == SEQUENCE_ROW)
        .values(Value=row.Value + 1)
    )
    result = await conn.execute(sa.select(row.Value).where(row.SequenceID == SEQUENCE_ROW))
    return int(result.scalar_one())


async def lock_writers(conn: AsyncConnection) -> None:
    """Take the writers' lock without allocating (removals)."""
    row = catalogue_sequence.c
    await conn.execute(sa.select(row.Value).where(row.SequenceID == SEQUENCE_ROW).with_for_update())


async def find_files(conn: AsyncConnection, lfns: Sequence[str]) -> dict[str, sa.Row[Any]]:
    """LFN → file row, for the registered ones among `lfns`."""
    found: dict[str, sa.Row[Any]] = {}
    for chunk in chunks(lfns):
        result = await conn.execute(sa.select(files_t).where(files_t.c.LFN.in_(chunk)))
        found.update((row.LFN, row) for row in result)
    return found


async def insert_files(
    conn: AsyncConnection, new: Sequence[tuple[bytes, CatalogueFile]], seq: int
) -> None:
    if not new:
        return
    now = await db_now(conn)
    rows = [
        {
            "FileID": file_id,
            "LFN": file.lfn,
            "Size": file.size,
            "Checksum": file.checksum,
            "Metadata": file.metadata or None,
            "Seq": seq,
            "RegisteredAt": now,
        }
        for file_id, file in new
    ]
    # One executemany of a plain INSERT with the clock read once: `.values(list)` compiles a
    # new statement for every batch.
    await insert_rows(conn, files_t, rows)
    values = [row for file_id, file in new for row in _value_rows(file_id, file.metadata)]
    await insert_rows(conn, values_t, values)


def _value_rows(file_id: bytes, metadata: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The queryable (scalar) metadata of one file, one row per key in its typed column."""
    for key, value in metadata.items():
        row: dict[str, Any] = dict.fromkeys(("StrValue", "IntValue", "FloatValue"))
        row.update(FileID=file_id, MetaKey=key)
        if isinstance(value, str):
            row["StrValue"] = value
        elif isinstance(value, bool | int):
            row["IntValue"] = int(value)
        elif isinstance(value, float):
            row["FloatValue"] = value
        else:
            continue
        yield row


async def find_replicas(conn: AsyncConnection, file_ids: Sequence[bytes]) -> dict[bytes, list[str]]:
    """FileID → storage elements holding it (files without replicas are left out)."""
    found: dict[bytes, list[str]] = {}
    for chunk in chunks(file_ids):
        result = await conn.execute(
            sa.select(replicas_t.c.FileID, replicas_t.c.StorageElement)
            .where(replicas_t.c.FileID.in_(chunk))
            .order_by(replicas_t.c.FileID, replicas_t.c.StorageElement)
        )
        for file_id, se in result:
            found.setdefault(file_id, []).append(se)
    return found


async def insert_replicas(conn: AsyncConnection, pairs: Sequence[tuple[bytes, str]]) -> None:
    rows = [{"FileID": file_id, "StorageElement": se} for file_id, se in pairs]
    await insert_rows(conn, replicas_t, rows)


async def delete_replicas(conn: AsyncConnection, pairs: Sequence[tuple[bytes, str]]) -> int:
    removed = 0
    key = sa.tuple_(replicas_t.c.FileID, replicas_t.c.StorageElement)
    for chunk in chunks(pairs):
        result = await conn.execute(sa.delete(replicas_t).where(key.in_(list(chunk))))
        removed += result.rowcount
    return removed


async def delete_files(conn: AsyncConnection, file_ids: Sequence[bytes]) -> int:
    removed = 0
    for chunk in chunks(file_ids):
        await conn.execute(sa.delete(values_t).where(values_t.c.FileID.in_(chunk)))
        await conn.execute(sa.delete(replicas_t).where(replicas_t.c.FileID.in_(chunk)))
        result = await conn.execute(sa.delete(files_t).where(files_t.c.FileID.in_(chunk)))
        removed += result.rowcount
    return removed


async def query_page(
    conn: AsyncConnection,
    where: dict[str, Condition],
    after: tuple[int, bytes] | None,
    limit: int,
    prefixes: Sequence[str] | None = None,
) -> list[sa.Row[Any]]:
    """Up to `limit` matching file rows strictly after (Seq, FileID) `after`, in that order;
    with `prefixes`, only those whose LFN starts with one of them."""
    statement = sa.select(files_t)
    if prefixes is not None:
        statement = statement.where(sa.or_(*(_under(prefix) for prefix in prefixes)))
    if after is not None:
        seq, file_id = after
        statement = statement.where(
            sa.or_(files_t.c.Seq > seq, sa.and_(files_t.c.Seq == seq, files_t.c.FileID > file_id))
        )
    for key, condition in where.items():
        statement = statement.where(
            sa.exists().where(
                values_t.c.FileID == files_t.c.FileID,
                values_t.c.MetaKey == key,
                _matches(condition),
            )
        )
    statement = statement.order_by(files_t.c.Seq, files_t.c.FileID).limit(limit)
    return list(await conn.execute(statement))


def _under(prefix: str) -> sa.ColumnElement[bool]:
    """LFN starts with `prefix`, case-sensitively on both databases: LIKE can use the LFN index,
    and the substring comparison makes it exact where SQLite's LIKE ignores case."""
    lfn = files_t.c.LFN
    return sa.and_(
        lfn.startswith(prefix, autoescape=True), sa.func.substr(lfn, 1, len(prefix)) == prefix
    )


def _matches(condition: Condition) -> sa.ColumnElement[bool]:
    if isinstance(condition, Range):
        return _in_range(condition)
    values = condition if isinstance(condition, list) else [condition]
    strings = [v for v in values if isinstance(v, str)]
    numbers = [int(v) if isinstance(v, bool) else v for v in values if not isinstance(v, str)]
    clauses = []
    if strings:
        clauses.append(values_t.c.StrValue.in_(strings))
    if numbers:
        clauses += [values_t.c.IntValue.in_(numbers), values_t.c.FloatValue.in_(numbers)]
    return sa.or_(*clauses)


def _in_range(condition: Range) -> sa.ColumnElement[bool]:
    def bounded(column: sa.ColumnElement[Any]) -> sa.ColumnElement[bool]:
        clauses = []
        if condition.min is not None:
            clauses.append(column >= condition.min)
        if condition.max is not None:
            clauses.append(column <= condition.max)
        return sa.and_(*clauses)

    if isinstance(condition.min, str) or isinstance(condition.max, str):
        return bounded(values_t.c.StrValue)
    return sa.or_(bounded(values_t.c.IntValue), bounded(values_t.c.FloatValue))
