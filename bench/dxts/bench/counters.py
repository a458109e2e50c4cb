"""`counters`: the journalled counters (docs/counters.md) against the plain SQL they replace.

Four figures, each measured against a plain-SQL baseline in the same run:

* `counter_read_ms`, one line per counted row count (`read_rows`, or `--rows N`): the latency
  of `TRANSFORMATION.read()` for one transformation's Input statuses (counter rows plus an
  unfolded journal backlog), against `SELECT Status, COUNT(*) FROM Inputs WHERE
  TransformationID = ? GROUP BY Status` on the same rows (the figure `count_star_ms`, reported
  as this line's baseline). Each read is its own READ COMMITTED transaction, for both. The row
  counts grow cumulatively in one transformation; before each line the counter is checked
  against COUNT(*) and the benchmark fails if they differ.
* `counter_writer_txn_per_s`: `writers` concurrent tasks (each transaction on a pooled
  connection of its own), each transaction moving `writer_batch` Inputs rows of one shared
  transformation between Unassigned and Assigned with a conditional UPDATE and journalling the
  move (`journal_input_transition`, two journal rows), no fold running. Baseline: the same
  transactions without the journal insert, on rows of a transformation of their own (whose
  counter it therefore leaves unmaintained: that is what it leaves out).
* `counter_writer_txn_per_s_folding`: the same with one fold task running alongside the whole
  round (again at once after a full batch, after `fold_pause_s` otherwise).
* `fold_rows_per_s`: journal rows folded per second, `fold()` in batches until the journal is
  empty. Baseline: the watermark fold in plain SQL, `INSERT INTO TransformationCounters ...
  SELECT key, SUM, MAX ... WHERE JournalID in [lo, lo + batch) GROUP BY key ON DUPLICATE KEY
  UPDATE` + `DELETE ... WHERE JournalID in the same range`, one READ COMMITTED transaction per
  batch: correct on this quiet journal, forbidden on a live one (ids do not commit in order),
  and free of the lock row, the SKIP LOCKED claim and the staged ids.

Before every journalling round and after the last, the shared transformation's counter must
equal COUNT(*) (folded first), and after the fold figure every folded key must read zero, or the
benchmark fails.

Seeding is untimed. Inputs rows are numbered: row n has InputID = an 8-byte time prefix + n,
InputHash = n (both sequential, so 10M rows insert in index order) and status cycling through
`READ_CYCLE`. On MariaDB they are inserted by `INSERT ... SELECT` from the SEQUENCE engine's
`seq_a_to_b` (`SEED_CHUNK` rows per statement); elsewhere by executemany, `SEED_BATCH` rows per
statement. Their creation is journalled in the same transaction and folded before measuring.
The fold figure's journal is prefilled directly (executemany, plain values) with rows over
`fold_keys` keys, +1 and -1 alternately per key, so the counters end at zero and never go
negative on the way.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.bench.harness import Bench, Operation
from dxts.bench.seeding import insert_transformations, utc_now
from dxts.core.counters import TRANSFORMATION, Entity, journal_input_transition, journal_inputs
from dxts.core.db import Database, Isolation, utcnow
from dxts.core.errors import FailedPrecondition, InvalidArgument
from dxts.core.ids import new_id
from dxts.core.schema import execution
from dxts.core.states import InputStatus

log = logging.getLogger(__name__)

RC = Isolation.READ_COMMITTED
SEED_BATCH = 5_000
SEED_CHUNK = 500_000
UNASSIGNED, ASSIGNED = InputStatus.UNASSIGNED.value, InputStatus.ASSIGNED.value
# A transformation well under way: 60 % Processed, 20 % Unassigned, 10 % Assigned, 10 % Failed.
READ_CYCLE = (
    (InputStatus.PROCESSED.value,) * 6
    + (UNASSIGNED,) * 2
    + (
        ASSIGNED,
        InputStatus.FAILED.value,
    )
)
inputs = execution.inputs
journal = TRANSFORMATION.journal_table
counters = TRANSFORMATION.counters_table
KEY = ("TransformationID", "Entity", "Status")


@dataclass(frozen=True)
class CountersParams:
    read_rows: tuple[int, ...]  # counted rows at each counter_read_ms line (cumulative)
    backlog_moves: int  # unfolded writer moves in the journal while reading (2 rows each)
    counter_reads: int  # read() calls per round
    count_star_rows: int  # COUNT(*) calls per round: max(1, this // rows), at most counter_reads
    writers: int
    writer_txns: int  # transactions per writer per round
    writer_batch: int  # rows moved per transaction
    fold_batch: int
    fold_pause_s: float  # the folder's pause after a batch that was not full
    fold_rows: int  # journal rows prefilled per fold round
    fold_keys: int  # distinct counter keys among them
    rounds: int


SCALES = {
    "tiny": CountersParams((300, 1_000), 5, 5, 2_000, 8, 4, 3, 50, 0.01, 400, 4, 1),
    "small": CountersParams(
        (10_000, 1_000_000), 100, 100, 200_000, 8, 75, 10, 1_000, 0.01, 20_000, 20, 3
    ),
    "full": CountersParams(
        (10_000, 1_000_000, 10_000_000),
        100,
        200,
        1_000_000,
        8,
        500,
        10,
        1_000,
        0.01,
        200_000,
        20,
        5,
    ),
}


def with_rows(params: CountersParams, rows: int) -> CountersParams:
    """`--rows N`: counter_read_ms at N counted rows only."""
    if not isinstance(rows, int) or rows < 1:
        raise InvalidArgument(f"rows must be a positive integer, got {rows!r}", field="rows")
    return replace(params, read_rows=(rows,))


async def run(bench: Bench, params: CountersParams) -> None:
    database = bench.database
    await _read_figures(bench, params)
    await _writer_figures(bench, params)
    await _fold_figure(bench, params)
    log.info("counters: done on %s", database.dialect_name)


# -- seeding ----------------------------------------------------------------------------------


async def _transformations(database: Database, count: int) -> list[bytes]:
    """`count` Active transformations (under one Ownership) for counted rows to belong to."""
    async with database.transaction(RC) as conn:
        return await insert_transformations(conn, count)


class _Population:
    """One transformation's numbered Inputs rows: row n is `input_id(n)` in `cycle[n % len]`."""

    def __init__(self, transformation_id: bytes, cycle: tuple[str, ...]) -> None:
        self.transformation_id = transformation_id
        self.cycle = cycle
        self.prefix = new_id()[:8]
        self.size = 0

    def input_id(self, n: int) -> bytes:
        return self.prefix + n.to_bytes(8, "big")

    def status(self, n: int) -> str:
        return self.cycle[n % len(self.cycle)]

    def counts(self, start: int, end: int) -> dict[str, int]:
        """How many of rows [start, end) each status has, without walking them."""
        counts: dict[str, int] = {}
        period = len(self.cycle)
        for residue, status in enumerate(self.cycle):
            first = start + (residue - start) % period
            counts[status] = counts.get(status, 0) + len(range(first, end, period))
        return counts

    async def grow(self, database: Database, size: int, fold_batch: int) -> None:
        """Add rows up to `size`, journalling each chunk's creation with it; then fold all."""
        in_database = database.dialect_name == "mariadb"
        step = SEED_CHUNK if in_database else SEED_BATCH
        started, first = time.perf_counter(), self.size
        for start in range(self.size, size, step):
            end = min(start + step, size)
            async with database.transaction(RC) as conn:
                if in_database:
                    await self._insert_select(conn, start, end)
                else:
                    await conn.execute(sa.insert(inputs), self._rows(start, end))
                created: dict[tuple[bytes, str | None, str | None], int] = {
                    (self.transformation_id, None, status): count
                    for status, count in self.counts(start, end).items()
                }
                await journal_inputs(conn, created)
            self.size = end
        await _fold_empty(database, fold_batch)
        log.info(
            "counters: seeded %d Inputs rows in %.1f s", size - first, time.perf_counter() - started
        )

    def _rows(self, start: int, end: int) -> list[dict[str, Any]]:
        now = utc_now()
        return [
            {
                "TransformationID": self.transformation_id,
                "InputID": self.input_id(n),
                "InputHash": n.to_bytes(16, "big"),
                "Status": self.status(n),
                "UpdatedAt": now,
            }
            for n in range(start, end)
        ]

    async def _insert_select(self, conn: AsyncConnection, start: int, end: int) -> None:
        # MariaDB's SEQUENCE engine: seq_a_to_b is a virtual table of the integers a..b.
        statuses = {f"s{i}": status for i, status in enumerate(self.cycle)}
        await conn.execute(
            sa.text(
                "INSERT INTO Inputs (TransformationID, InputID, InputHash, Status, UpdatedAt) "
                "SELECT :tid, CONCAT(:prefix, UNHEX(LPAD(HEX(seq), 16, '0'))), "
                "UNHEX(LPAD(HEX(seq), 32, '0')), "
                f"ELT(1 + seq % {len(self.cycle)}, {', '.join(':' + k for k in statuses)}), "
                f":now FROM seq_{start}_to_{end - 1}"
            ),
            {"tid": self.transformation_id, "prefix": self.prefix, "now": utc_now(), **statuses},
        )


async def _fold_empty(database: Database, batch: int) -> int:
    """Fold until a batch is not full: with no writer running, the journal is then empty."""
    folded = 0
    while True:
        result = await TRANSFORMATION.fold(database, batch)
        folded += result.folded
        if not result.full:
            return folded


# The writer's conditional UPDATE, built once: a writer running thousands of transactions a
# second sends the same statement with new parameters rather than building and hashing a new
# statement tree each time (that alone cost more client CPU than the journal).
_MOVE = (
    sa.update(inputs)
    .where(
        inputs.c.TransformationID == sa.bindparam("tid"),
        inputs.c.InputID.in_(sa.bindparam("ids", expanding=True)),
        inputs.c.Status == sa.bindparam("old"),
    )
    .values(Status=sa.bindparam("new"), UpdatedAt=utcnow())
)


async def _move(
    conn: AsyncConnection, transformation_id: bytes, ids: list[bytes], old: str, new: str
) -> int:
    """The writer's conditional UPDATE: these rows, only if still in `old`; the rows moved."""
    result = await conn.execute(
        _MOVE, {"tid": transformation_id, "ids": ids, "old": old, "new": new}
    )
    return result.rowcount


def _count_star(transformation_id: bytes) -> sa.Select[Any]:
    return (
        sa.select(inputs.c.Status, sa.func.count())
        .where(inputs.c.TransformationID == transformation_id)
        .group_by(inputs.c.Status)
    )


async def _check_counter(database: Database, transformation_id: bytes, what: str) -> None:
    """The counter's Input statuses must equal COUNT(*) over the rows, or the run is wrong."""
    async with database.transaction(RC) as conn:
        reading = await TRANSFORMATION.read(
            conn, {"TransformationID": transformation_id, "Entity": Entity.INPUT}
        )
        counted = {
            status: int(n) for status, n in await conn.execute(_count_star(transformation_id))
        }
    read = {key[2]: values["Count"] for key, values in reading.items()}
    if read != counted:
        raise FailedPrecondition(f"{what}: the counter reads {read}, COUNT(*) finds {counted}")


# -- counter_read_ms --------------------------------------------------------------------------


async def _read_figures(bench: Bench, params: CountersParams) -> None:
    database = bench.database
    [transformation_id] = await _transformations(database, 1)
    population = _Population(transformation_id, READ_CYCLE)
    scope = {"TransformationID": transformation_id, "Entity": Entity.INPUT}
    count_star = _count_star(transformation_id)
    seeding = (
        f"INSERT ... SELECT from seq_a_to_b, {SEED_CHUNK} rows per statement"
        if database.dialect_name == "mariadb"
        else f"executemany, {SEED_BATCH} rows per statement"
    )
    for rows in sorted(params.read_rows):
        previous = population.size
        await population.grow(database, rows, params.fold_batch)
        backlog = await _backlog(database, population, previous, params)
        await _check_counter(database, transformation_id, f"{rows} rows")
        star_reads = max(1, min(params.counter_reads, params.count_star_rows // rows))

        async def counter_reads() -> int:
            for _ in range(params.counter_reads):
                async with database.transaction(RC) as conn:
                    await TRANSFORMATION.read(conn, scope)
            return params.counter_reads

        async def count_star_reads(reads: int = star_reads) -> int:
            for _ in range(reads):
                async with database.transaction(RC) as conn:
                    (await conn.execute(count_star)).all()
            return reads

        await bench.compare(
            "counter_read_ms",
            unit="ms",
            baseline=Operation(count_star_reads),
            subject=Operation(counter_reads),
            rounds=params.rounds,
            latency=True,
            params={
                "rows": population.size,
                "statuses": dict(sorted(population.counts(0, population.size).items())),
                "journal_backlog_rows": backlog,
                "counter_reads_per_round": params.counter_reads,
                "count_star_reads_per_round": star_reads,
                "isolation": RC.value,
                "seeding": seeding,
                "baseline": "count_star_ms: SELECT Status, COUNT(*) FROM Inputs "
                "WHERE TransformationID = ? GROUP BY Status",
            },
        )
        await _fold_empty(database, params.fold_batch)


async def _backlog(
    database: Database, population: _Population, start: int, params: CountersParams
) -> int:
    """Writer moves left unfolded for the reads to sum: Unassigned → Assigned among the rows
    added since `start`, `writer_batch` rows per move; returns the journal rows written."""
    unassigned = (n for n in range(start, population.size) if population.status(n) == UNASSIGNED)
    wanted = list(itertools.islice(unassigned, params.backlog_moves * params.writer_batch))
    written = 0
    async with database.transaction(RC) as conn:
        for first in range(0, len(wanted), params.writer_batch):
            ids = [population.input_id(n) for n in wanted[first : first + params.writer_batch]]
            moved = await _move(conn, population.transformation_id, ids, UNASSIGNED, ASSIGNED)
            written += await journal_input_transition(
                conn, population.transformation_id, UNASSIGNED, ASSIGNED, moved
            )
    return written


# -- counter_writer_txn_per_s(_folding) -------------------------------------------------------


class _Writers:
    """`writers` tasks moving one transformation's rows, batch by batch, between two statuses.

    Each writer owns its own rows (no two writers wait on the same Inputs row); all of them
    journal under the same counter keys, the hot rows an in-place counter would serialise on.
    Each round moves every row once, the direction alternating from round to round.
    """

    def __init__(
        self, database: Database, population: _Population, params: CountersParams, journalled: bool
    ) -> None:
        self.database = database
        self.transformation_id = population.transformation_id
        self.journalled = journalled
        ids = [population.input_id(n) for n in range(population.size)]
        batches = [
            ids[first : first + params.writer_batch]
            for first in range(0, len(ids), params.writer_batch)
        ]
        self.slices = [batches[w :: params.writers] for w in range(params.writers)]
        self.statuses = (UNASSIGNED, ASSIGNED)

    async def round(self) -> int:
        old, new = self.statuses
        self.statuses = (new, old)
        wall, cpu = time.perf_counter(), time.process_time()
        done = await asyncio.gather(*(self._writer(batches, old, new) for batches in self.slices))
        # The writers share this process: say how much of one core their client side took.
        log.info(
            "counters: %s writers, %d txn, this process's CPU %.0f %% of the round",
            "journalling" if self.journalled else "plain",
            sum(done),
            100 * (time.process_time() - cpu) / (time.perf_counter() - wall),
        )
        return sum(done)

    async def _writer(self, batches: list[list[bytes]], old: str, new: str) -> int:
        for ids in batches:
            await self.database.run(self._transaction(ids, old, new), isolation=RC)
        return len(batches)

    def _transaction(
        self, ids: list[bytes], old: str, new: str
    ) -> Callable[[AsyncConnection], Any]:
        async def work(conn: AsyncConnection) -> None:
            moved = await _move(conn, self.transformation_id, ids, old, new)
            if moved != len(ids):
                raise FailedPrecondition(f"a writer moved {moved} rows of {len(ids)}")
            if self.journalled:
                await journal_input_transition(conn, self.transformation_id, old, new, moved)

        return work


async def _fold_alongside(
    database: Database, params: CountersParams, stop: asyncio.Event
) -> tuple[int, int]:
    """Fold until `stop`: again at once after a full batch; returns (folds, rows folded)."""
    folds = folded = 0
    while not stop.is_set():
        result = await TRANSFORMATION.fold(database, params.fold_batch)
        folds, folded = folds + 1, folded + result.folded
        if not result.full:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), params.fold_pause_s)
    return folds, folded


async def _writer_figures(bench: Bench, params: CountersParams) -> None:
    database = bench.database
    rows = params.writers * params.writer_txns * params.writer_batch
    plain_id, journalled_id = await _transformations(database, 2)
    populations = [_Population(tid, (UNASSIGNED,)) for tid in (plain_id, journalled_id)]
    for population in populations:
        await population.grow(database, rows, params.fold_batch)
    plain = _Writers(database, populations[0], params, journalled=False)
    journalled = _Writers(database, populations[1], params, journalled=True)

    async def checked_and_folded() -> None:
        # Every round, not only at the end: the moves alternate direction, so an error that is
        # the same each way would cancel out over an even number of rounds.
        await _fold_empty(database, params.fold_batch)
        await _check_counter(database, journalled_id, "after the writers")

    async def folding_round() -> int:
        stop = asyncio.Event()
        folder = asyncio.create_task(_fold_alongside(database, params, stop))
        try:
            moved = await journalled.round()
        finally:
            stop.set()
            folds, folded = await folder
        log.info("counters: %d folds folded %d journal rows alongside the writers", folds, folded)
        return moved

    shape = {
        "writers": params.writers,
        "transactions_per_writer_per_round": params.writer_txns,
        "rows_per_transaction": params.writer_batch,
        "rows_per_writer": params.writer_txns * params.writer_batch,
        "move": f"{UNASSIGNED} <-> {ASSIGNED}, alternating by round",
        "statement": "UPDATE Inputs SET Status = ?, UpdatedAt = UTC_TIMESTAMP(6) "
        "WHERE TransformationID = ? AND InputID IN (batch) AND Status = ?",
        "journal": "journal_input_transition: 2 journal rows per transaction, all writers on "
        "the same 2 keys",
        "isolation": RC.value,
        "connections": "one pooled connection per writer task at a time",
        "baseline": "the same transactions without the journal insert",
    }
    await bench.compare(
        "counter_writer_txn_per_s",
        unit="txn/s",
        baseline=Operation(plain.round),
        subject=Operation(journalled.round, checked_and_folded),
        rounds=params.rounds,
        params={**shape, "folding": False},
    )
    await bench.compare(
        "counter_writer_txn_per_s_folding",
        unit="txn/s",
        baseline=Operation(plain.round),
        subject=Operation(folding_round, checked_and_folded),
        rounds=params.rounds,
        params={
            **shape,
            "folding": True,
            "fold_batch": params.fold_batch,
            "fold_pause_s": params.fold_pause_s,
            "folder": "one task in the writers' process, again at once after a full batch",
        },
    )
    await checked_and_folded()


# -- fold_rows_per_s --------------------------------------------------------------------------


async def _fold_figure(bench: Bench, params: CountersParams) -> None:
    database = bench.database
    transformation_ids = await _transformations(database, (params.fold_keys + 1) // 2)
    keys = [
        (tid, Entity.INPUT.value, status)
        for tid in transformation_ids
        for status in (UNASSIGNED, ASSIGNED)
    ][: params.fold_keys]
    period = 2 * len(keys)
    rows = -(-params.fold_rows // period) * period  # whole +1/-1 cycles: every key nets zero
    bounds: list[int] = []

    async def prefill() -> None:
        bounds[:] = await _prefill(database, keys, rows)

    async def dxts_fold() -> int:
        folded = await _fold_empty(database, params.fold_batch)
        if folded != rows:
            raise FailedPrecondition(f"fold() folded {folded} journal rows of {rows}")
        return folded

    async def watermark_fold() -> int:
        lowest, highest = bounds
        folded = 0
        for start in range(lowest, highest + 1, params.fold_batch):
            upsert = _upsert_range(database.dialect_name, start, start + params.fold_batch)
            delete = sa.delete(journal).where(
                journal.c.JournalID >= start, journal.c.JournalID < start + params.fold_batch
            )

            async def work(
                conn: AsyncConnection, upsert: Any = upsert, delete: Any = delete
            ) -> int:
                await conn.execute(upsert)
                return int((await conn.execute(delete)).rowcount)

            folded += await database.run(work, isolation=RC)
        if folded != rows:
            raise FailedPrecondition(f"the watermark fold folded {folded} journal rows of {rows}")
        return folded

    await bench.compare(
        "fold_rows_per_s",
        unit="rows/s",
        baseline=Operation(watermark_fold, prefill),
        subject=Operation(dxts_fold, prefill),
        rounds=params.rounds,
        params={
            "journal_rows": rows,
            "fold_batch": params.fold_batch,
            "distinct_keys": len(keys),
            "isolation": RC.value,
            "prefill": f"executemany, {SEED_BATCH} rows per statement (untimed)",
            "baseline": "watermark fold in plain SQL, one transaction per batch: INSERT INTO "
            "TransformationCounters ... SELECT key, SUM(CountDelta), MAX(InsertedAt) FROM "
            "TransformationCounterJournal WHERE JournalID >= lo AND JournalID < lo + batch "
            "GROUP BY key ON DUPLICATE KEY UPDATE + DELETE of the same id range",
        },
    )
    async with database.transaction(RC) as conn:
        left = await TRANSFORMATION.read(conn, {"TransformationID": transformation_ids})
    if left:
        raise FailedPrecondition(f"the folded keys should read zero, found {dict(left)}")


async def _prefill(database: Database, keys: list[tuple[bytes, str, str]], rows: int) -> list[int]:
    """`rows` journal rows cycling over `keys`, +1 then -1 per key; returns [lowest, highest] id."""
    now = utc_now()

    def deltas() -> Iterator[dict[str, Any]]:
        for n in range(rows):
            key = keys[n % len(keys)]
            yield {
                **dict(zip(KEY, key, strict=True)),
                "CountDelta": 1 if (n // len(keys)) % 2 == 0 else -1,
                "InsertedAt": now,
            }

    stream = deltas()
    async with database.transaction(RC) as conn:
        while chunk := list(itertools.islice(stream, SEED_BATCH)):
            await conn.execute(sa.insert(journal), chunk)
        lowest, highest = (
            await conn.execute(
                sa.select(sa.func.min(journal.c.JournalID), sa.func.max(journal.c.JournalID))
            )
        ).one()
    return [int(lowest), int(highest)]


def _upsert_range(dialect: str, start: int, end: int) -> sa.Executable:
    """The baseline's fold of ids [start, end): sums by key added into the counter rows."""
    j = journal.c
    sums = (
        sa.select(
            j.TransformationID,
            j.Entity,
            j.Status,
            sa.func.sum(j.CountDelta),
            sa.func.max(j.InsertedAt),
        )
        .where(j.JournalID >= start, j.JournalID < end)
        .group_by(j.TransformationID, j.Entity, j.Status)
    )
    columns = [*KEY, "Count", "UpdatedAt"]
    if dialect == "sqlite":
        lite = sqlite.insert(counters).from_select(columns, sums)
        return lite.on_conflict_do_update(
            index_elements=[counters.c[k] for k in KEY],
            set_={
                "Count": counters.c.Count + lite.excluded.Count,
                "UpdatedAt": sa.func.max(counters.c.UpdatedAt, lite.excluded.UpdatedAt),
            },
        )
    my = mysql.insert(counters).from_select(columns, sums)
    return my.on_duplicate_key_update(
        {
            "Count": counters.c.Count + my.inserted.Count,
            "UpdatedAt": sa.func.greatest(counters.c.UpdatedAt, my.inserted.UpdatedAt),
        }
    )
