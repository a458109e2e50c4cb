"""`execution`: the feeder and packer runners against the plain SQL that does the same writes.

Figures:

* `feeder_ingest_inputs_per_s`: one feeder invocation (`run_feeder`) ingesting `feed_inputs`
  new file inputs: the plugin streamed, each input hashed by the core, batches of `feed_batch`
  inserted by one duplicate-ignoring statement with the row count journalled and the
  transformation row guarded, one transaction per batch. Baseline: the same rows (hashes and
  ids computed beforehand, untimed) inserted with the bulk recipe alone, `INSERT IGNORE`
  executemany in batches of `feed_batch`, one transaction each.
* `bulk_insert_rows_per_s`: `feed_inputs` Inputs rows (ids, hashes, LFNs, sizes, statuses,
  timestamps) inserted in batches of `feed_batch` by `dxts.core.bulk.insert_rows`, one
  transaction each. Baseline: the same rows through SQLAlchemy's own executemany
  (`conn.execute(sa.insert(table), rows)`), which processes every row's parameters in Python.
* `packer_inputs_per_s`, one line per packer (`PerInput`; `BySize` with `group_size` 10): one
  packer invocation (`run_packer`) over a pool of `pack_inputs` Unassigned inputs, claimed in
  chunks with SKIP LOCKED and written in batches (parcels, compute facets, ParcelInputs, the
  conditional Assigned move, journals). Baseline: a plain-SQL packing of an identical pool into
  parcels of the same size: claim a chunk (`FOR UPDATE SKIP LOCKED`), insert its parcels,
  facets and links, move its inputs with their LastParcelID read from the links (the runner's
  statement), one transaction per chunk, no plugin, no checks, no journals.
* `packer_peak_rss_mb`, one line per pool size in `rss_pools` (at `full` the largest is a
  million inputs): the process's peak resident set while one PerInput invocation packs the
  whole pool, sampled every few milliseconds from /proc. Not a rate: `value` is that peak in MB
  and `baseline` the resident set just before the invocation, so `ratio` is the growth; the
  lines side by side show whether it follows the pool (it should not: the runner streams the
  pool and keeps only undecided inputs).

Seeding pools and building rows is untimed; every timed round works on fresh rows of a
transformation of its own. `outcome_parcels_per_s` (outcome recording) is added by part 2 below
its marker.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.bench.execution_outcomes import run_outcomes
from dxts.bench.harness import Bench, Figure, Operation
from dxts.bench.seeding import TRIVIAL_TOOL, insert_transformations, utc_now
from dxts.core import content_store
from dxts.core.bulk import insert_rows
from dxts.core.counters import journal_inputs
from dxts.core.db import Database, Isolation
from dxts.core.ids import new_ids
from dxts.core.plugins import FileInput, PluginArgs, Registry
from dxts.core.plugins.points import PluginKind
from dxts.core.plugins.registry import analyse
from dxts.core.schema import definition, execution
from dxts.core.states import InputStatus, Kind
from dxts.execution.logic.feeding import run_feeder
from dxts.execution.logic.packing import run_packer
from dxts.execution.logic.transformations import ActiveTransformation

RC = Isolation.READ_COMMITTED
SEED_BATCH = 5_000


@dataclass(frozen=True)
class ExecutionParams:
    feed_inputs: int
    feed_batch: int
    feed_rounds: int
    pack_inputs: int
    pack_rounds: int
    claim_chunk: int
    pack_batch: int
    group_size: int
    rss_pools: tuple[int, ...]


SCALES = {
    "tiny": ExecutionParams(300, 100, 1, 300, 1, 100, 200, 10, (200, 400)),
    "small": ExecutionParams(20_000, 5_000, 3, 20_000, 3, 1_000, 2_000, 10, (20_000, 100_000)),
    "full": ExecutionParams(100_000, 5_000, 5, 100_000, 5, 1_000, 2_000, 10, (100_000, 1_000_000)),
}


async def run(bench: Bench, params: ExecutionParams) -> None:
    database = bench.database
    registry = _registry()
    await bench.compare(
        "feeder_ingest_inputs_per_s",
        unit="inputs/s",
        baseline=_raw_ingest(database, params),
        subject=_feed(database, registry, params),
        rounds=params.feed_rounds,
        params={
            "inputs": params.feed_inputs,
            "batch": params.feed_batch,
            "driver": database.engine.dialect.driver,
        },
    )
    await bench.compare(
        "bulk_insert_rows_per_s",
        unit="rows/s",
        baseline=_insert_inputs(database, params, through_driver=False),
        subject=_insert_inputs(database, params, through_driver=True),
        rounds=params.feed_rounds,
        params={
            "rows": params.feed_inputs,
            "batch": params.feed_batch,
            "table": execution.inputs.name,
            "baseline": "SQLAlchemy's executemany of sa.insert(table)",
        },
    )
    for packer, args, per_parcel in (
        ("PerInput", {}, 1),
        ("BySize", {"group_size": params.group_size}, params.group_size),
    ):
        await bench.compare(
            "packer_inputs_per_s",
            unit="inputs/s",
            baseline=_raw_pack(database, params, per_parcel),
            subject=_pack(database, registry, params, packer, args),
            rounds=params.pack_rounds,
            params={
                "packer": packer,
                "inputs_per_parcel": per_parcel,
                "pool": params.pack_inputs,
                "claim_chunk": params.claim_chunk,
                "batch": params.pack_batch,
            },
        )
    for pool in params.rss_pools:
        await _peak_rss(bench, database, registry, params, pool)
    # -- outcome recording (part 2): `outcome_parcels_per_s` goes here ----------------------
    await run_outcomes(bench)


# ----------------------------------------------------------------------------------- setup


class CountArgs(PluginArgs):
    prefix: str
    count: int


async def _bench_feeder(*, feeder_args: CountArgs) -> AsyncIterator[Any]:
    """`count` new file inputs under `prefix` (an async generator, like the built-in Seeds,
    Query and Edge feeders)."""
    for n in range(feeder_args.count):
        yield FileInput(lfn=f"{feeder_args.prefix}/{n:08d}.dst", lfn_size=1_000_000 + n)


def _registry() -> Registry:
    """The built-in packers (as installed) and the benchmark's feeder."""
    installed = Registry.discover()
    plugin, problems = analyse(PluginKind.FEEDER, "BenchCount", _bench_feeder, "(bench)")
    assert plugin is not None, problems
    packers = [installed.get(PluginKind.PACKER, name) for name in ("PerInput", "BySize")]
    return Registry([plugin, *packers])


async def _transformation(database: Database, packer: str) -> ActiveTransformation:
    """A fresh Active compute transformation, as definition would have stored it."""
    async with database.transaction(RC) as conn:
        (tid,) = await insert_transformations(conn, packer=packer, feeder="BenchCount")
        (process_id,) = await content_store.put_processes(conn, [TRIVIAL_TOOL])
        await conn.execute(
            sa.insert(definition.compute_transformations).values(
                TransformationID=tid, ProcessID=process_id
            )
        )
    return ActiveTransformation(
        id=tid,
        type="Bench",
        kind=Kind.COMPUTE,
        packer=packer,
        feeder="BenchCount",
        feeder_enabled=False,
        process_id=process_id,
    )


def _input_rows(transformation_id: bytes, count: int, prefix: str) -> list[dict[str, Any]]:
    now = utc_now()
    rows = []
    for n, input_id in enumerate(new_ids(count)):
        proposal = FileInput(lfn=f"{prefix}/{n:08d}.dst", lfn_size=1_000_000 + n)
        rows.append(
            {
                "TransformationID": transformation_id,
                "InputID": input_id,
                "InputHash": proposal.input_hash,
                "LFN": proposal.lfn,
                "LFNSize": proposal.lfn_size,
                "Descriptor": None,
                "Status": InputStatus.UNASSIGNED.value,
                "UpdatedAt": now,
            }
        )
    return rows


async def _pool(database: Database, packer: str, count: int) -> ActiveTransformation:
    """A transformation holding `count` Unassigned inputs, journalled as the feeder would."""
    t = await _transformation(database, packer)
    rows = _input_rows(t.id, count, f"/bench/pool/{t.id.hex()}")
    for start in range(0, count, SEED_BATCH):
        async with database.transaction(RC) as conn:
            batch = rows[start : start + SEED_BATCH]
            await conn.execute(sa.insert(execution.inputs), batch)
            created: list[tuple[tuple[bytes, str | None, str | None], int]] = [
                ((t.id, None, InputStatus.UNASSIGNED.value), len(batch))
            ]
            await journal_inputs(conn, created)
    return t


# ------------------------------------------------------------------------------------ feed


def _feed(database: Database, registry: Registry, params: ExecutionParams) -> Operation:
    prepared: list[ActiveTransformation] = []

    async def setup() -> None:
        t = await _transformation(database, "PerInput")
        args = {"prefix": f"/bench/feed/{t.id.hex()}", "count": params.feed_inputs}
        prepared[:] = [replace(t, feeder_args=args, feeder_enabled=True)]

    async def feed() -> int:
        result = await run_feeder(database, registry, prepared[0], batch=params.feed_batch)
        if result.error is not None or result.inserted != params.feed_inputs:
            raise RuntimeError(f"the feeder did not ingest everything: {result}")
        return result.inserted

    return Operation(feed, setup)


def _raw_ingest(database: Database, params: ExecutionParams) -> Operation:
    """The feeder's baseline: its rows through the bulk recipe alone, `INSERT IGNORE`."""
    return _insert_inputs(database, params, through_driver=True, ignore_duplicates=True)


def _insert_inputs(
    database: Database,
    params: ExecutionParams,
    *,
    through_driver: bool,
    ignore_duplicates: bool = False,
) -> Operation:
    """`feed_inputs` Inputs rows in batches of `feed_batch`, one transaction each: through
    `insert_rows` or through SQLAlchemy's own executemany."""
    rows: list[dict[str, Any]] = []

    async def setup() -> None:
        t = await _transformation(database, "PerInput")
        rows[:] = _input_rows(t.id, params.feed_inputs, f"/bench/bulk/{t.id.hex()}")

    async def insert() -> int:
        inserted = 0
        for start in range(0, len(rows), params.feed_batch):
            async with database.transaction(RC) as conn:
                batch = rows[start : start + params.feed_batch]
                if through_driver:
                    inserted += await insert_rows(
                        conn, execution.inputs, batch, ignore_duplicates=ignore_duplicates
                    )
                else:
                    inserted += (await conn.execute(sa.insert(execution.inputs), batch)).rowcount
        if inserted != len(rows):
            raise RuntimeError(f"{inserted} of {len(rows)} rows inserted")
        return inserted

    return Operation(insert, setup)


# ------------------------------------------------------------------------------------ pack


def _pack(
    database: Database,
    registry: Registry,
    params: ExecutionParams,
    packer: str,
    args: dict[str, Any],
) -> Operation:
    prepared: list[ActiveTransformation] = []

    async def setup() -> None:
        t = await _pool(database, packer, params.pack_inputs)
        prepared[:] = [replace(t, packer_args=args)]

    async def pack() -> int:
        result = await run_packer(
            database,
            registry,
            prepared[0],
            claim_chunk=params.claim_chunk,
            batch=params.pack_batch,
        )
        if result.error is not None or result.assigned != params.pack_inputs:
            raise RuntimeError(f"the packer did not pack everything: {result}")
        return result.assigned

    return Operation(pack, setup)


def _raw_pack(database: Database, params: ExecutionParams, per_parcel: int) -> Operation:
    prepared: list[ActiveTransformation] = []
    inputs, parcels, links = execution.inputs, execution.parcels, execution.parcel_inputs

    async def setup() -> None:
        prepared[:] = [await _pool(database, "PerInput", params.pack_inputs)]

    async def chunk(conn: AsyncConnection, t: ActiveTransformation) -> int:
        claimed = list(
            (
                await conn.execute(
                    sa.select(inputs.c.InputID)
                    .where(
                        inputs.c.TransformationID == t.id,
                        inputs.c.Status == InputStatus.UNASSIGNED.value,
                    )
                    .order_by(inputs.c.InputID)
                    .limit(params.claim_chunk)
                    .with_for_update(skip_locked=True)
                )
            ).scalars()
        )
        if not claimed:
            return 0
        now = utc_now()
        groups = [claimed[i : i + per_parcel] for i in range(0, len(claimed), per_parcel)]
        ids = new_ids(len(groups))
        await conn.execute(
            sa.insert(parcels),
            [
                {"ParcelID": p, "TransformationID": t.id, "Kind": "Compute", "UpdatedAt": now}
                for p in ids
            ],
        )
        await conn.execute(
            sa.insert(execution.compute_parcels),
            [{"ParcelID": p, "ProcessID": t.process_id, "Parameters": {}} for p in ids],
        )
        await conn.execute(
            sa.insert(links),
            [
                {"TransformationID": t.id, "ParcelID": p, "InputID": i}
                for p, group in zip(ids, groups, strict=True)
                for i in group
            ],
        )
        last_parcel = (
            sa.select(links.c.ParcelID)
            .where(
                links.c.TransformationID == inputs.c.TransformationID,
                links.c.InputID == inputs.c.InputID,
                links.c.ParcelID.in_(ids),
            )
            .scalar_subquery()
        )
        await conn.execute(
            sa.update(inputs)
            .where(inputs.c.TransformationID == t.id, inputs.c.InputID.in_(claimed))
            .values(Status=InputStatus.ASSIGNED.value, LastParcelID=last_parcel, UpdatedAt=now)
        )
        return len(claimed)

    async def pack() -> int:
        packed = 0
        while True:
            async with database.transaction(RC) as conn:
                done = await chunk(conn, prepared[0])
            if not done:
                return packed
            packed += done

    return Operation(pack, setup)


# ------------------------------------------------------------------------------------- rss


def _resident_mb() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class _PeakSampler:
    """The resident set's maximum, sampled in a thread while the loop works."""

    def __init__(self, every_s: float = 0.005) -> None:
        self.every_s = every_s
        self.peak = _resident_mb()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(self.every_s):
            self.peak = max(self.peak, _resident_mb())

    def __enter__(self) -> _PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, _resident_mb())


async def _peak_rss(
    bench: Bench, database: Database, registry: Registry, params: ExecutionParams, pool: int
) -> None:
    t = await _pool(database, "PerInput", pool)
    before = _resident_mb()
    started = time.perf_counter()
    with _PeakSampler() as sampler:
        result = await run_packer(
            database, registry, t, claim_chunk=params.claim_chunk, batch=params.pack_batch
        )
    elapsed = time.perf_counter() - started
    if result.error is not None or result.assigned != pool:
        raise RuntimeError(f"the packer did not pack the pool: {result}")
    figure = Figure(
        benchmark=bench.name,
        figure="packer_peak_rss_mb",
        value=round(sampler.peak, 1),
        unit="MB",
        baseline=round(before, 1),
        params={
            "scale": bench.scale,
            "database": database.dialect_name,
            "server_version": database.server.version_string if database.server else None,
            "packer": "PerInput",
            "pool": pool,
            "claim_chunk": params.claim_chunk,
            "batch": params.pack_batch,
            "seconds": round(elapsed, 1),
            "baseline_is": "resident set before the invocation (ratio = growth)",
        },
    )
    bench.figures.append(figure)
    print(figure.as_json(), file=bench.out, flush=True)
