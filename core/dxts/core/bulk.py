"""Bulk inserts handed to the driver as one executemany of a plain INSERT compiled once.

`conn.execute(sa.insert(table), rows)` builds, for every row, a parameter dictionary from the
compiled statement and runs each value through its type's bind processor one row at a time
(`construct_params`): for the thousands of rows a packing or recording batch inserts, that
Python work costs more than the driver's own. Here the statement is compiled once per dialect,
table, columns and duplicate handling, each column's values go through the same processor
SQLAlchemy would apply (a JSON column's serializer, SQLite's date format), column by column, and
the driver gets the rows as tuples: asyncmy sends them as multi-row `INSERT ... VALUES`
statements, sqlite3 runs its own executemany. What is stored is what `conn.execute` stores.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection


@dataclass(frozen=True)
class _Statement:
    sql: str
    columns: tuple[tuple[str, Callable[[Any], Any] | None], ...]  # in the statement's order


_compiled: dict[tuple[str, sa.Table, frozenset[str], bool], _Statement] = {}


def _statement(
    dialect: sa.Dialect, table: sa.Table, keys: frozenset[str], ignore: bool
) -> _Statement:
    cache_key = (dialect.name, table, keys, ignore)
    found = _compiled.get(cache_key)
    if found is not None:
        return found
    statement: sa.Insert = sa.insert(table)
    if ignore:
        statement = (
            sqlite.insert(table).on_conflict_do_nothing()
            if dialect.name == "sqlite"
            else statement.prefix_with("IGNORE")
        )
    compiled = statement.compile(dialect=dialect, column_keys=sorted(keys))
    order = compiled.positiontup
    if order is None or set(order) != keys or len(order) != len(keys):
        # A column with a Python-side default would be filled by SQLAlchemy per row: name it.
        raise ValueError(f"{table.name}: rows must name exactly the inserted columns, not {order}")
    columns = tuple(
        (name, table.c[name].type.dialect_impl(dialect).bind_processor(dialect)) for name in order
    )
    found = _compiled[cache_key] = _Statement(compiled.string, columns)
    return found


async def insert_rows(
    conn: AsyncConnection,
    table: sa.Table,
    rows: Sequence[Mapping[str, Any]],
    *,
    ignore_duplicates: bool = False,
) -> int:
    """Insert `rows` (plain values, every row naming the same columns) in one executemany;
    returns the rows inserted. `ignore_duplicates` skips a row repeating a unique key (MariaDB
    `INSERT IGNORE`, which also downgrades other errors to warnings, so the rows must be
    validated against the columns first; SQLite `ON CONFLICT DO NOTHING`)."""
    if not rows:
        return 0
    keys = frozenset(rows[0])
    if any(len(row) != len(keys) for row in rows):
        raise ValueError(f"{table.name}: every row must name the same columns")
    statement = _statement(conn.dialect, table, keys, ignore_duplicates)
    values: list[list[Any]] = []
    for name, process in statement.columns:
        column = [row[name] for row in rows]
        values.append([process(value) for value in column] if process else column)
    result = await conn.exec_driver_sql(statement.sql, list(zip(*values, strict=True)))
    return int(result.rowcount)
