"""What the metrics and the drift watch read: journal depth and age, the InnoDB history list
length, and the keys of a counter whose value is negative."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from dxts.core.counters import Counter
from dxts.core.counters.construct import Key
from dxts.core.db import Database, Isolation, utcnow


@dataclass(frozen=True)
class JournalHealth:
    depth: int  # journal rows not folded yet
    oldest_age_s: float  # age of the oldest of them (0 when empty), by the database clock


async def journal_health(database: Database, counter: Counter) -> JournalHealth:
    journal = counter.journal_table
    statement = sa.select(sa.func.count(), sa.func.min(journal.c.InsertedAt), utcnow())
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        depth, oldest, now = (await conn.execute(statement.select_from(journal))).one()
    age = (now - oldest).total_seconds() if oldest is not None else 0.0
    return JournalHealth(int(depth), max(age, 0.0))


async def history_list_length(database: Database) -> int | None:
    """InnoDB's history list length (undo not yet purged); None on SQLite.

    Read from information_schema.INNODB_METRICS (`trx_rseg_history_len`, a counter both
    MariaDB and MySQL 8 keep enabled by default) rather than by parsing SHOW ENGINE INNODB
    STATUS, whose free-text layout differs between servers and versions.
    """
    if database.is_sqlite:
        return None
    statement = sa.text(
        "SELECT `COUNT` FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'"
    )
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        value = await conn.scalar(statement)
    return None if value is None else int(value)


async def negative_keys(database: Database, counter: Counter) -> list[Key]:
    """Every key of `counter` whose value (counters + journal) is negative: proof of drift.

    The whole counter in one statement, like `Counter.read`, but returning only the
    drifted keys, so that a periodic check costs one scan and no transfer.
    """
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return [tuple(row) for row in await conn.execute(_negative_statement(counter))]


def _negative_statement(counter: Counter) -> sa.Select[Any]:
    counters, journal = counter.counters_table.c, counter.journal_table.c
    both = sa.union_all(
        sa.select(
            *(counters[k] for k in counter.key_names), *(counters[m] for m in counter.measures)
        ),
        sa.select(
            *(journal[k] for k in counter.key_names),
            *(journal[f"{m}Delta"].label(_quoted(m)) for m in counter.measures),
        ),
    ).subquery("t")
    keys = [both.c[k] for k in counter.key_names]
    return (
        sa.select(*keys)
        .group_by(*keys)
        .having(sa.or_(*(sa.func.sum(both.c[m]) < 0 for m in counter.measures)))
    )


def _quoted(name: str) -> sa.sql.elements.quoted_name:
    return sa.sql.elements.quoted_name(name, True)
