"""The journalled counter (docs/counters.md): exact counts with insert-only writers.

A counter is declared once, by its key columns, its measures (signed, additive) and the counted
tables a rebuild recounts. The declaration derives, in the shared metadata:

* `<Name>Counters`: the key, one BIGINT per measure and `UpdatedAt`; primary key = the key.
* `<Name>CounterJournal`: `JournalID` (auto-increment), the key, one `<measure>Delta` per
  measure, `InsertedAt` from the database clock; an index on the key.

Neither has a foreign key: a writer's journal insert must never wait on a parent row, and the
rows of a transformation are dropped on their own schedule (delete_scope). Every generated
identifier is quoted (`Count` is also an SQL function).

The five operations, each with the isolation its argument needs:

* `journal(conn, deltas)`: inside the caller's transaction, one multi-row INSERT ... VALUES.
* `read(conn, where)`: one statement over both tables (two would take two snapshots at READ
  COMMITTED, and a fold committing between them would move a delta out of sight).
* `fold(database, batch)`: READ COMMITTED, which takes no gap locks, so the claim never makes
  a writer's journal insert wait (at REPEATABLE READ it does: see the tests).
* `rebuild(database, scope)`: REPEATABLE READ, one snapshot for recount, counters and journal.
* `delete_scope(database, scope)`: READ COMMITTED, for a transformation whose rows are gone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum as PyEnum
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.counters import locks
from dxts.core.counters.locks import Operation
from dxts.core.db import Database, Isolation, utcnow
from dxts.core.errors import FieldViolation, InvalidArgument
from dxts.core.schema.metadata import MYSQL_TABLE_OPTIONS, metadata
from dxts.core.schema.types import Timestamp

log = logging.getLogger(__name__)

Key = tuple[Any, ...]
# A key predicate: key column name -> one value (equality) or a list/tuple/set of values (IN).
Scope = Mapping[str, Any]

# Bound parameters per statement, under SQLite's default ceiling (32766): a journal call with
# more distinct keys than fit is written in several INSERTs (real calls carry far fewer), and
# a fold claims at most this many ids.
MAX_PARAMETERS = 30_000
_MYSQL = mysql.dialect()
BIGINT = 2**63


class _Columns(Protocol):
    """A table's `.c`, or a source's key expressions: looked up by key column name."""

    def __getitem__(self, name: str, /) -> Any: ...


@dataclass(frozen=True)
class KeyColumn:
    """One key column of a counter: its name and its column type."""

    name: str
    type: sa.types.TypeEngine[Any]


@dataclass(frozen=True)
class Source:
    """A counted table, for rebuilds: what each of its rows contributes, under which key.

    `key` maps every key column to an expression over `table` (or a constant), `measures`
    every measure to the per-row amount (an expression, or a constant such as 1 for a count);
    rows outside `where` are not counted.
    """

    table: sa.FromClause
    key: Mapping[str, Any]
    measures: Mapping[str, Any]
    where: sa.ColumnElement[bool] | None = None


@dataclass(frozen=True)
class Drift:
    """A read saw a negative value: proof that the counter has drifted from its tables."""

    counter: str
    key: Key
    values: Mapping[str, int]


DriftListener = Callable[[Drift], None]
_drift_listeners: list[DriftListener] = []


def on_drift(listener: DriftListener) -> Callable[[], None]:
    """Call `listener` for every negative key any read sees; returns the unsubscribe function.

    The accounting service subscribes to alert and to start a scoped rebuild; a listener that
    raises is logged and does not fail the read.
    """
    _drift_listeners.append(listener)
    return lambda: _drift_listeners.remove(listener)


class Reading(dict[Key, dict[str, int]]):
    """What read() found: key -> {measure: value}; a key with no rows reads as all zeros.

    Keys whose values are all zero are left out, so iterating lists what is there; indexing a
    missing key returns zeros (`.get` keeps dict's meaning). `negative` lists the drifted keys,
    which is what the accounting service's `negative counter` gauge exports.
    """

    def __init__(self, measures: Sequence[str]) -> None:
        super().__init__()
        self.measures = tuple(measures)

    def __missing__(self, key: Key) -> dict[str, int]:
        return dict.fromkeys(self.measures, 0)

    @property
    def negative(self) -> list[Key]:
        return [key for key, values in self.items() if min(values.values()) < 0]


@dataclass(frozen=True)
class FoldResult:
    folded: int  # journal rows folded into the counters (and deleted)
    full: bool  # the batch was full: run again at once


def _check_key_value(column: KeyColumn, value: Any, path: str) -> tuple[Any, FieldViolation | None]:
    """A key value validated against its column type (and a StrEnum turned into its value)."""
    kind = column.type
    if isinstance(value, PyEnum):
        value = value.value
    if isinstance(kind, sa.Enum):
        if value not in kind.enums:
            return value, FieldViolation(path, f"{value!r} is not one of {kind.enums}")
    elif isinstance(kind, sa.LargeBinary):
        if not isinstance(value, bytes) or (kind.length and len(value) != kind.length):
            return value, FieldViolation(path, f"expected {kind.length} bytes, got {value!r}")
    elif isinstance(kind, sa.String) and (
        not isinstance(value, str) or not value or (kind.length and len(value) > kind.length)
    ):
        return value, FieldViolation(
            path, f"expected a non-empty string of at most {kind.length} characters"
        )
    return value, None


class Counter:
    """A declared journalled counter: its two tables and its five operations."""

    def __init__(
        self,
        name: str,
        *,
        key: Sequence[KeyColumn],
        measures: Sequence[str],
        sources: Sequence[Source],
        indexes: Sequence[Sequence[str]] = (),
    ) -> None:
        key_names = [column.name for column in key]
        if not key or not measures or not sources:
            raise ValueError(f"counter {name}: a key, measures and counted tables are required")
        if len(set(key_names) | set(measures)) != len(key_names) + len(measures):
            raise ValueError(f"counter {name}: key and measure names must be distinct")
        for source in sources:
            if set(source.key) != set(key_names) or set(source.measures) != set(measures):
                raise ValueError(f"counter {name}: a source must give every key and measure")
        if name in locks.declared:
            raise ValueError(f"counter {name} is declared twice")
        self.name = name
        self.key_names = tuple(key_names)
        self.measures = tuple(measures)
        self.sources = tuple(sources)
        self._columns = {column.name: column for column in key}
        self.counters_table = sa.Table(
            f"{name}Counters",
            metadata,
            *(sa.Column(c.name, c.type, primary_key=True, quote=True) for c in key),
            *(sa.Column(m, sa.BigInteger(), nullable=False, quote=True) for m in measures),
            sa.Column("UpdatedAt", Timestamp(), nullable=False, quote=True),
            *(sa.Index(None, *columns) for columns in indexes),
            quote=True,
            **MYSQL_TABLE_OPTIONS,
        )
        journal_name = f"{name}CounterJournal"
        self.journal_table = sa.Table(
            journal_name,
            metadata,
            sa.Column(
                "JournalID",
                sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                primary_key=True,
                autoincrement=True,
                quote=True,
            ),
            *(sa.Column(c.name, c.type, nullable=False, quote=True) for c in key),
            *(
                sa.Column(f"{m}Delta", sa.BigInteger(), nullable=False, quote=True)
                for m in measures
            ),
            # Set by the database (the clock the fold's MAX(InsertedAt) compares): a default,
            # so journal() sends plain values only and its rows go as one multi-row INSERT.
            sa.Column(
                "InsertedAt", Timestamp(), nullable=False, server_default=utcnow(), quote=True
            ),
            # Named here: the convention's name would pass MySQL's 64-character limit.
            sa.Index(f"ix_{journal_name}_key", *key_names),
            *(sa.Index(None, *columns) for columns in indexes),
            quote=True,
            **MYSQL_TABLE_OPTIONS,
        )
        # The fold's claimed ids on MariaDB/MySQL (see _stage): a session temporary table,
        # outside the shared metadata (migrations must not see it).
        self._claim_table = sa.Table(
            f"{name}FoldClaim",
            sa.MetaData(),
            sa.Column("JournalID", sa.BigInteger(), primary_key=True, autoincrement=False),
            prefixes=["TEMPORARY"],
            quote=True,
        )
        quote = _MYSQL.identifier_preparer.quote_identifier
        journal_q, claim_q, id_q = (
            quote(journal_name),
            quote(self._claim_table.name),
            quote("JournalID"),
        )
        self._delete_claimed = sa.text(
            f"DELETE {journal_q} FROM {claim_q} STRAIGHT_JOIN {journal_q} "
            f"ON {journal_q}.{id_q} = {claim_q}.{id_q}"
        )
        self._delta_names = tuple(f"{m}Delta" for m in measures)
        self._journal_insert = sa.insert(self.journal_table)
        per_row = len(key_names) + len(measures)
        self._rows_per_insert = MAX_PARAMETERS // per_row
        locks.declared.append(name)

    def __repr__(self) -> str:
        return f"Counter({self.name!r})"

    # -- validation ---------------------------------------------------------------------------

    def _check_key(self, key: Any, path: str, problems: list[FieldViolation]) -> Key:
        if not isinstance(key, tuple) or len(key) != len(self.key_names):
            problems.append(FieldViolation(path, f"expected a tuple {self.key_names}"))
            return ()
        normalised = []
        for name, value in zip(self.key_names, key, strict=True):
            value, problem = _check_key_value(self._columns[name], value, f"{path}.{name}")
            if problem:
                problems.append(problem)
            normalised.append(value)
        return tuple(normalised)

    def _check_values(self, values: Any, path: str, problems: list[FieldViolation]) -> list[int]:
        if (
            not isinstance(values, Sequence)
            or len(values) != len(self.measures)
            or not all(
                isinstance(v, int) and not isinstance(v, bool) and -BIGINT < v < BIGINT
                for v in values
            )
        ):
            problems.append(FieldViolation(path, f"expected one integer per {self.measures}"))
            return [0] * len(self.measures)
        return list(values)

    def _predicate(
        self, columns: _Columns, scope: Scope | None, path: str
    ) -> list[sa.ColumnElement[bool]]:
        """`scope` as conditions on `columns` (a table's columns, or a source's expressions)."""
        problems: list[FieldViolation] = []
        clauses = []
        for name, wanted in (scope or {}).items():
            column = self._columns.get(name)
            if column is None:
                problems.append(FieldViolation(f"{path}.{name}", f"not a key of {self.name}"))
                continue
            many = isinstance(wanted, list | tuple | set | frozenset)
            checked = [
                _check_key_value(column, value, f"{path}.{name}")
                for value in (wanted if many else [wanted])
            ]
            problems.extend(p for _, p in checked if p)
            expression = sa.literal(columns[name]) if _is_constant(columns[name]) else columns[name]
            values = [v for v, _ in checked]
            clauses.append(expression.in_(values) if many else expression == values[0])
        if problems:
            raise InvalidArgument(problems)
        return clauses

    # -- journal ------------------------------------------------------------------------------

    async def journal(
        self,
        conn: AsyncConnection,
        deltas: Mapping[Key, Sequence[int]] | Iterable[tuple[Key, Sequence[int]]],
    ) -> int:
        """Append signed deltas inside the caller's transaction; returns the rows written.

        `deltas` pairs a key tuple (in key order) with one integer per measure; repeated keys
        are summed here and all-zero sums dropped, so a call writes one row per key with a
        change, in one INSERT ... VALUES (never INSERT ... SELECT, which under MariaDB's
        default auto-increment lock mode holds a table lock for the whole statement).
        """
        pairs = deltas.items() if isinstance(deltas, Mapping) else deltas
        problems: list[FieldViolation] = []
        sums: dict[Key, list[int]] = {}
        for i, pair in enumerate(pairs):
            if not isinstance(pair, tuple) or len(pair) != 2:
                problems.append(FieldViolation(f"deltas[{i}]", "expected a (key, values) pair"))
                continue
            key = self._check_key(pair[0], f"deltas[{i}].key", problems)
            values = self._check_values(pair[1], f"deltas[{i}].values", problems)
            total = sums.setdefault(key, [0] * len(self.measures))
            for j, value in enumerate(values):
                total[j] += value
        if problems:
            raise InvalidArgument(problems)
        delta_names = self._delta_names
        rows = [
            {
                **dict(zip(self.key_names, key, strict=True)),
                **dict(zip(delta_names, total, strict=True)),
            }
            for key, total in sums.items()
            if any(total)
        ]
        # Executemany form with plain values: compiled once, and sent by the driver as one
        # multi-row INSERT (InsertedAt is the column's default, not an expression per row).
        for start in range(0, len(rows), self._rows_per_insert):
            await conn.execute(self._journal_insert, rows[start : start + self._rows_per_insert])
        return len(rows)

    # -- read ---------------------------------------------------------------------------------

    async def read(self, conn: AsyncConnection, where: Scope | None = None) -> Reading:
        """Exact values of every key matching `where`, in one statement.

        Runs in the caller's transaction (READ COMMITTED or REPEATABLE READ: one statement is
        one snapshot either way). A negative value is logged as an error and signalled to the
        `on_drift` listeners; the reading still returns it as found.
        """
        counters, journal = self.counters_table.c, self.journal_table.c
        both = sa.union_all(
            sa.select(
                *(counters[k] for k in self.key_names), *(counters[m] for m in self.measures)
            ).where(*self._predicate(counters, where, "where")),
            sa.select(
                *(journal[k] for k in self.key_names),
                *(journal[f"{m}Delta"].label(_quoted(m)) for m in self.measures),
            ).where(*self._predicate(journal, where, "where")),
        ).subquery("t")
        statement = sa.select(
            *(both.c[k] for k in self.key_names),
            *(sa.func.sum(both.c[m]).label(_quoted(m)) for m in self.measures),
        ).group_by(*(both.c[k] for k in self.key_names))
        reading = Reading(self.measures)
        width = len(self.key_names)
        for row in await conn.execute(statement):
            values = {m: int(v) for m, v in zip(self.measures, row[width:], strict=True)}
            if any(values.values()):
                reading[tuple(row[:width])] = values
        for key in reading.negative:
            self._signal_drift(Drift(self.name, key, reading[key]))
        return reading

    @staticmethod
    def _signal_drift(drift: Drift) -> None:
        log.error("counter %s drifted: %r reads %r", drift.counter, drift.key, drift.values)
        for listener in list(_drift_listeners):
            try:
                listener(drift)
            except Exception:
                log.exception("drift listener %r failed", listener)

    # -- fold ---------------------------------------------------------------------------------

    async def claim(self, conn: AsyncConnection, batch: int) -> list[int]:
        """The fold's claim: the oldest `batch` journal ids no uncommitted writer holds.

        SKIP LOCKED passes over rows still being written (picked up next cycle); it renders
        as nothing on SQLite, whose one writer makes it unnecessary. Taken at REPEATABLE READ
        this same statement gap-locks the end of the index and makes writers wait.
        """
        journal = self.journal_table.c
        result = await conn.execute(
            sa.select(journal.JournalID)
            .order_by(journal.JournalID)
            .limit(batch)
            .with_for_update(skip_locked=True)
        )
        return list(result.scalars())

    async def fold(self, database: Database, batch: int = 1000) -> FoldResult:
        """Move up to `batch` journal rows, oldest first, into the counters (READ COMMITTED).

        Never by a JournalID watermark (ids do not commit in order): exactly the claimed ids
        are summed, upserted and deleted. Returns how many were folded and whether the batch
        (at most MAX_PARAMETERS ids) was full: then fold again at once.
        """
        if not isinstance(batch, int) or not 0 < batch <= MAX_PARAMETERS:
            # A fuller journal is folded by folding again at once, never by one huge batch.
            raise InvalidArgument(f"batch must be from 1 to {MAX_PARAMETERS}", field="batch")

        async def work(conn: AsyncConnection) -> FoldResult:
            await locks.take(conn, self.name, Operation.FOLD)
            ids = await self.claim(conn, batch)
            if not ids:
                return FoldResult(0, False)
            claimed, delete = await self._stage(conn, ids)
            await conn.execute(self._upsert(conn.dialect.name, claimed))
            await conn.execute(delete)
            return FoldResult(len(ids), len(ids) == batch)

        return await database.run(work, isolation=Isolation.READ_COMMITTED)

    async def _stage(
        self, conn: AsyncConnection, ids: list[int]
    ) -> tuple[sa.ColumnElement[bool], sa.Executable]:
        """The condition selecting exactly `ids` in the journal, and the statement deleting them.

        On MariaDB/MySQL the ids go through a session temporary table and the delete is driven
        from it (STRAIGHT_JOIN, then the journal's primary key). Given an IN list, or a join it
        may reorder, MariaDB plans a scan of a small journal, and at READ COMMITTED a locking
        scan waits on every writer's uncommitted row: the fold would stall behind writers
        (measured; see the tests). The table is created once per session (its DDL is not
        transactional there) and emptied before each use. SQLite, with one writer and no row
        locks, takes an IN list.
        """
        journal = self.journal_table
        if conn.dialect.name == "sqlite":
            claimed = journal.c.JournalID.in_(ids)
            return claimed, sa.delete(journal).where(claimed)
        claim = self._claim_table
        created: set[str] = conn.info.setdefault("dxts.counters.claim_tables", set())
        if claim.name in created:
            await conn.execute(sa.delete(claim))  # what an earlier fold on this session left
        else:
            await conn.execute(sa.schema.CreateTable(claim))
            created.add(claim.name)
        for start in range(0, len(ids), MAX_PARAMETERS):
            chunk = ids[start : start + MAX_PARAMETERS]
            # executemany form: the driver sends one multi-row INSERT without SQLAlchemy
            # compiling a bind parameter per id (measured: a third of the fold's time).
            await conn.execute(sa.insert(claim), [{"JournalID": i} for i in chunk])
        return journal.c.JournalID.in_(sa.select(claim.c.JournalID)), self._delete_claimed

    def _upsert(self, dialect: str, claimed: sa.ColumnElement[bool]) -> sa.Executable:
        """INSERT the claimed rows' sums into the counters, adding to rows already there."""
        counters, journal = self.counters_table, self.journal_table.c
        sums = (
            sa.select(
                *(journal[k] for k in self.key_names),
                *(sa.func.sum(journal[f"{m}Delta"]) for m in self.measures),
                sa.func.max(journal.InsertedAt),
            )
            .where(claimed)
            .group_by(*(journal[k] for k in self.key_names))
        )
        columns = [*self.key_names, *self.measures, "UpdatedAt"]
        if dialect == "sqlite":
            lite = sqlite.insert(counters).from_select(columns, sums)
            return lite.on_conflict_do_update(
                index_elements=[counters.c[k] for k in self.key_names],
                set_={
                    **{m: counters.c[m] + lite.excluded[m] for m in self.measures},
                    "UpdatedAt": sa.func.max(counters.c.UpdatedAt, lite.excluded.UpdatedAt),
                },
            )
        my = mysql.insert(counters).from_select(columns, sums)
        return my.on_duplicate_key_update(
            {
                **{m: counters.c[m] + my.inserted[m] for m in self.measures},
                "UpdatedAt": sa.func.greatest(counters.c.UpdatedAt, my.inserted.UpdatedAt),
            }
        )

    # -- rebuild and delete_scope -------------------------------------------------------------

    async def rebuild(
        self, database: Database, scope: Scope | None = None
    ) -> dict[Key, dict[str, int]]:
        """Recount `scope` from the counted tables and journal the differences; returns them.

        REPEATABLE READ, and the `rebuild` lock is the first statement, so the one snapshot
        (taken by the next statement) follows any earlier rebuild's corrections. That one
        statement computes recount - counters - journal per key over the union of keys (each
        branch signed, UNION ALL, GROUP BY, HAVING a non-zero sum); the corrections go through
        journal(). It runs beside live writers and folds: whatever they commit after the
        snapshot is a delta of its own, which the correction neither includes nor undoes.
        """
        statement = self._discrepancy(scope)

        async def work(conn: AsyncConnection) -> dict[Key, dict[str, int]]:
            await locks.take(conn, self.name, Operation.REBUILD)
            width = len(self.key_names)
            corrections = {
                tuple(row[:width]): [int(v) for v in row[width:]]
                for row in await conn.execute(statement)
            }
            await self.journal(conn, corrections)
            return {k: dict(zip(self.measures, v, strict=True)) for k, v in corrections.items()}

        corrections = await database.run(work, isolation=Isolation.REPEATABLE_READ)
        if corrections:
            log.warning("rebuild of %s %r corrected %r", self.name, dict(scope or {}), corrections)
        return corrections

    def _discrepancy(self, scope: Scope | None) -> sa.Select[Any]:
        counters, journal = self.counters_table.c, self.journal_table.c
        branches: list[sa.Select[Any]] = [
            sa.select(
                *(_labelled(source.key[k], k, self._columns[k].type) for k in self.key_names),
                *(_labelled(source.measures[m], m, sa.BigInteger()) for m in self.measures),
            )
            .select_from(source.table)
            .where(
                *([] if source.where is None else [source.where]),
                *self._predicate(source.key, scope, "scope"),
            )
            for source in self.sources
        ]
        branches.append(
            sa.select(
                *(counters[k] for k in self.key_names),
                *((-counters[m]).label(_quoted(m)) for m in self.measures),
            ).where(*self._predicate(counters, scope, "scope"))
        )
        branches.append(
            sa.select(
                *(journal[k] for k in self.key_names),
                *((-journal[f"{m}Delta"]).label(_quoted(m)) for m in self.measures),
            ).where(*self._predicate(journal, scope, "scope"))
        )
        union = sa.union_all(*branches).subquery("t")
        sums = [sa.func.sum(union.c[m]) for m in self.measures]
        return (
            sa.select(
                *(union.c[k] for k in self.key_names),
                *(total.label(_quoted(m)) for total, m in zip(sums, self.measures, strict=True)),
            )
            .group_by(*(union.c[k] for k in self.key_names))
            .having(sa.or_(*(total != 0 for total in sums)))
        )

    async def delete_scope(self, database: Database, scope: Scope) -> int:
        """Delete the scope's counter and journal rows (READ COMMITTED); returns rows deleted.

        For a transformation whose counted rows have already been deleted (archiving,
        cleaning): the scope is unwritable, so its counts are dropped rather than compensated.
        Takes `rebuild` then `fold` first, so that neither a rebuild's corrections nor a fold's
        upsert can land after the delete.
        """
        if not scope:
            raise InvalidArgument("delete_scope needs a non-empty scope", field="scope")
        counters, journal = self.counters_table, self.journal_table
        delete_counters = sa.delete(counters).where(*self._predicate(counters.c, scope, "scope"))
        in_scope = self._predicate(journal.c, scope, "scope")

        async def work(conn: AsyncConnection) -> int:
            await locks.take(conn, self.name, Operation.REBUILD)
            await locks.take(conn, self.name, Operation.FOLD)
            deleted = (await conn.execute(delete_counters)).rowcount
            if conn.dialect.name == "sqlite":
                return deleted + (await conn.execute(sa.delete(journal).where(*in_scope))).rowcount
            # Like the fold: exactly these rows, never a scan that waits on other writers. A
            # consistent read finds them all: the scope has no writer left.
            ids = list(
                (await conn.execute(sa.select(journal.c.JournalID).where(*in_scope))).scalars()
            )
            if ids:
                _, delete = await self._stage(conn, ids)
                deleted += (await conn.execute(delete)).rowcount
            return deleted

        return await database.run(work, isolation=Isolation.READ_COMMITTED)


def _quoted(name: str) -> sa.sql.elements.quoted_name:
    return sa.sql.elements.quoted_name(name, True)


def _is_constant(value: Any) -> bool:
    return not isinstance(value, sa.ColumnElement)


def _labelled(value: Any, name: str, kind: sa.types.TypeEngine[Any]) -> sa.Label[Any]:
    """A source's expression (or constant) under the counter's column name and type.

    The type matters on the Python side only: a UNION's rows are read with the first branch's
    types, and a source's own ENUM (Inputs.Status) would refuse another source's values.
    """
    expression = sa.literal(value, kind) if _is_constant(value) else sa.type_coerce(value, kind)
    return expression.label(_quoted(name))
