"""`raw`: what the database itself does, the yardstick every other benchmark's baseline shares.

Four figures, each a baseline reported alone (value = baseline, ratio 1.0), on the real dxts
tables:

* `insert_multirow`: one multi-row `INSERT ... VALUES` of a whole batch of Inputs rows per
  transaction (the statement the conventions prescribe);
* `insert_executemany`: the same rows through the driver's `executemany` (what a per-row
  parameter list costs, for comparison);
* `claim_skip_locked`: several connections claiming batches of Unassigned Parcels at READ
  COMMITTED with `SELECT ... ORDER BY ParcelID LIMIT n FOR UPDATE SKIP LOCKED` + `UPDATE`, as
  the dispatcher does (docs/dispatching.md); every parcel must be claimed exactly once;
* `single_row_commit`: one Inputs row per transaction, one connection: the commit latency
  floor (a per-row loop on purpose, which dxts code never does).

Rows carry a timestamp computed in Python, not the database clock: nothing here is ordered by
it, and a bound value keeps both insert forms eligible for the driver's batching.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.bench.harness import Bench, Operation
from dxts.bench.seeding import insert_transformations, utc_now
from dxts.core.db import Database, Isolation
from dxts.core.errors import FailedPrecondition
from dxts.core.ids import id_to_str, input_hash, new_ids
from dxts.core.schema import execution
from dxts.core.states import Kind, ParcelStatus

SEED_BATCH = 5_000


@dataclass(frozen=True)
class RawParams:
    insert_batch: int
    insert_rounds: int
    claim_parcels: int
    claim_batch: int
    claim_connections: int
    claim_rounds: int
    commits: int
    commit_rounds: int


SCALES = {
    "tiny": RawParams(50, 2, 200, 10, 4, 2, 20, 2),
    "small": RawParams(5_000, 5, 20_000, 100, 4, 3, 500, 3),
    "full": RawParams(5_000, 20, 100_000, 100, 4, 5, 5_000, 5),
}


async def run(bench: Bench, params: RawParams) -> None:
    database = bench.database
    transformation_id = await _seed_transformation(database)
    insert = {"table": "Inputs", "rows_per_transaction": params.insert_batch}
    await bench.compare(
        "insert_multirow",
        unit="rows/s",
        baseline=_insert(database, transformation_id, params.insert_batch, multirow=True),
        subject=None,
        rounds=params.insert_rounds,
        params={**insert, "statements_per_transaction": 1},
    )
    await bench.compare(
        "insert_executemany",
        unit="rows/s",
        baseline=_insert(database, transformation_id, params.insert_batch, multirow=False),
        subject=None,
        rounds=params.insert_rounds,
        params={**insert, "driver": database.engine.dialect.driver},
    )
    await bench.compare(
        "claim_skip_locked",
        unit="claims/s",
        baseline=_claim(database, transformation_id, params),
        subject=None,
        rounds=params.claim_rounds,
        params={
            "table": "Parcels",
            "parcels": params.claim_parcels,
            "batch": params.claim_batch,
            "connections": params.claim_connections,
            "isolation": Isolation.READ_COMMITTED.value,
        },
    )
    await bench.compare(
        "single_row_commit",
        unit="commits/s",
        baseline=_single_row_commits(database, transformation_id, params.commits),
        subject=None,
        rounds=params.commit_rounds,
        params={"table": "Inputs", "commits_per_round": params.commits, "connections": 1},
    )


async def _seed_transformation(database: Database) -> bytes:
    """One Active transformation (and its Ownership) for the Inputs and Parcels to belong to."""
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        (transformation_id,) = await insert_transformations(conn)
    return transformation_id


def _input_rows(transformation_id: bytes, count: int) -> list[dict[str, Any]]:
    now = utc_now()
    rows = []
    for input_id in new_ids(count):
        lfn = f"/dxts/bench/{id_to_str(input_id)}.dst"
        rows.append(
            {
                "TransformationID": transformation_id,
                "InputID": input_id,
                "InputHash": input_hash(lfn, None),
                "LFN": lfn,
                "LFNSize": 1_000_000,
                "UpdatedAt": now,
            }
        )
    return rows


def _insert(
    database: Database, transformation_id: bytes, count: int, *, multirow: bool
) -> Operation:
    batch: list[dict[str, Any]] = []

    async def setup() -> None:
        batch[:] = _input_rows(transformation_id, count)

    async def insert() -> int:
        async with database.transaction(Isolation.READ_COMMITTED) as conn:
            if multirow:
                await conn.execute(sa.insert(execution.inputs).values(batch))
            else:
                await conn.execute(sa.insert(execution.inputs), batch)
        return len(batch)

    return Operation(insert, setup)


def _claim(database: Database, transformation_id: bytes, params: RawParams) -> Operation:
    parcels = execution.parcels

    async def setup() -> None:
        async with database.transaction(Isolation.READ_COMMITTED) as conn:
            await conn.execute(sa.delete(parcels))
        ids = new_ids(params.claim_parcels)
        now = utc_now()
        for start in range(0, len(ids), SEED_BATCH):
            rows = [
                {
                    "ParcelID": parcel_id,
                    "TransformationID": transformation_id,
                    "Kind": Kind.COMPUTE.value,
                    "Status": ParcelStatus.UNASSIGNED.value,
                    "UpdatedAt": now,
                }
                for parcel_id in ids[start : start + SEED_BATCH]
            ]
            async with database.transaction(Isolation.READ_COMMITTED) as conn:
                await conn.execute(sa.insert(parcels).values(rows))

    async def claim_batch(conn: AsyncConnection) -> int:
        claimed = (
            (
                await conn.execute(
                    sa.select(parcels.c.ParcelID)
                    .where(
                        parcels.c.Kind == Kind.COMPUTE.value,
                        parcels.c.Status == ParcelStatus.UNASSIGNED.value,
                    )
                    .order_by(parcels.c.ParcelID)
                    .limit(params.claim_batch)
                    .with_for_update(skip_locked=True)
                )
            )
            .scalars()
            .all()
        )
        if not claimed:
            return 0
        result = await conn.execute(
            sa.update(parcels)
            .where(
                parcels.c.ParcelID.in_(claimed),
                parcels.c.Status == ParcelStatus.UNASSIGNED.value,
            )
            .values(Status=ParcelStatus.RESERVED.value, UpdatedAt=utc_now())
        )
        return int(result.rowcount)

    async def claimer() -> int:
        total = 0
        # A claim finding nothing means the rest is locked by the other claimers, who take it.
        while claimed := await database.run(claim_batch, isolation=Isolation.READ_COMMITTED):
            total += claimed
        return total

    async def claim_all() -> int:
        counts = await asyncio.gather(*(claimer() for _ in range(params.claim_connections)))
        if sum(counts) != params.claim_parcels:
            raise FailedPrecondition(
                f"claimed {sum(counts)} parcels of {params.claim_parcels}: SKIP LOCKED claims "
                "must take every parcel exactly once"
            )
        return sum(counts)

    return Operation(claim_all, setup)


def _single_row_commits(database: Database, transformation_id: bytes, count: int) -> Operation:
    rows: list[dict[str, Any]] = []

    async def setup() -> None:
        rows[:] = _input_rows(transformation_id, count)

    async def commit_each() -> int:
        for row in rows:
            async with database.transaction(Isolation.READ_COMMITTED) as conn:
                await conn.execute(sa.insert(execution.inputs).values(row))
        return len(rows)

    return Operation(commit_each, setup)
