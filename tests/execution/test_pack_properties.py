"""Property-based (SQLite, in-process): random feeds and packings keep the pool consistent.

Each example is a random run of steps on a fresh transformation: feeds of inputs with repeats
(some feeders failing part-way), and packings whose packer follows a random script of parcels,
bad and delayed inputs, proposals the core must refuse (an input never offered, one proposed
twice), an operator's write-off racing the packer, and a packer that raises, with or without
flush, in random batch and claim sizes. After every step:

* every input is in exactly one state, and it is Assigned exactly when it is linked to exactly
  one parcel, which is its LastParcelID (no input is ever in two parcels);
* every parcel carries at least one input and its compute facet;
* the exact counters equal COUNT(*) by status, for inputs and for parcels;
* the inputs are exactly the distinct identities the committed feeder batches held.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import runner_support as s
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dxts.core.db import Database
from dxts.core.plugins import (
    BadInput,
    ComputeParcel,
    DelayInput,
    FileInput,
    Input,
    InputRecord,
    PluginArgs,
)
from dxts.core.schema import execution, metadata
from dxts.core.state_machines import Actor
from dxts.core.states import InputStatus
from dxts.execution.logic.feeding import run_feeder
from dxts.execution.logic.packing import run_packer
from dxts.execution.store.common import move_inputs


class FeedArgs(PluginArgs):
    items: list[int]
    fail_at: int | None = None


def scripted_feeder(*, feeder_args: FeedArgs) -> Iterator[Any]:
    """Item n < 8 is a file, the rest seeds; repeats are the point. Raises at `fail_at`."""
    for index, item in enumerate(feeder_args.items):
        if index == feeder_args.fail_at:
            raise RuntimeError("the catalogue timed out")
        if item < 8:
            yield FileInput(lfn=f"/lhcb/prop/{item}", lfn_size=item)
        else:
            yield Input(descriptor={"seed": item})


class PackPlan(PluginArgs):
    plan: list[list[Any]]


def scripted_packer(database: Database) -> Any:
    async def packer(
        *, packer_args: PackPlan, inputs: AsyncIterator[InputRecord], transformation: Any
    ) -> AsyncIterator[Any]:
        records = [record async for record in inputs]
        cursor = 0
        for op, *arg in packer_args.plan:
            left = records[cursor:]
            if op == "parcel" and left:
                take = left[: arg[0]]
                cursor += len(take)
                yield ComputeParcel(inputs=[r.id for r in take])
            elif op in ("bad", "delay_future", "delay_past", "writeoff") and left:
                record = left[0]
                cursor += 1
                if op == "bad":
                    yield BadInput(record.id, "scripted")
                elif op == "writeoff":  # an operator's write-off lands after the claim
                    async with database.transaction(s.RC) as conn:
                        await move_inputs(
                            conn,
                            transformation.id.bytes,
                            [record.id.bytes],
                            source="Unassigned",
                            target="NotProcessed",
                            actor=Actor.OPERATOR,
                            now=datetime.now(UTC).replace(tzinfo=None),
                        )
                    yield ComputeParcel(inputs=[record.id])
                else:
                    hours = 1 if op == "delay_future" else -1
                    yield DelayInput([record.id], datetime.now(UTC) + timedelta(hours=hours))
            elif op == "unoffered":
                yield ComputeParcel(inputs=[uuid4()])
            elif op == "twice" and cursor:
                yield BadInput(records[cursor - 1].id)
            elif op == "raise":
                raise RuntimeError("the packer's lookup failed")

    return packer


feeds = st.builds(
    lambda items, fail, batch: ("feed", items, fail, batch),
    st.lists(st.integers(0, 15), min_size=1, max_size=12),
    st.one_of(st.none(), st.integers(0, 11)),
    st.integers(1, 5),
)
ops = st.one_of(
    st.tuples(st.just("parcel"), st.integers(1, 3)).map(list),
    st.sampled_from(["bad", "delay_future", "delay_past", "writeoff"]).map(lambda op: [op]),
    st.sampled_from(["unoffered", "twice", "raise"]).map(lambda op: [op]),
)
packs = st.builds(
    lambda plan, flush, batch, chunk: ("pack", plan, flush, batch, chunk),
    st.lists(ops, max_size=6).map(lambda plan: [op for op in plan if op]),
    st.booleans(),
    st.integers(1, 4),
    st.integers(1, 5),
)


@pytest.fixture(scope="module")
def sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path: Path = tmp_path_factory.mktemp("properties") / "dxts.sqlite"
    url = f"sqlite+aiosqlite:///{path}"

    async def create() -> None:
        database = Database(url)
        await database.start()
        async with database.engine.begin() as conn:
            await conn.run_sync(metadata.create_all)
        await database.dispose()

    asyncio.run(create())
    return url


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(st.one_of(feeds, packs), min_size=1, max_size=6))
def test_random_feeds_and_packings_keep_the_pool_consistent(
    sqlite_file: str, steps: list[tuple[Any, ...]]
) -> None:
    asyncio.run(_run(sqlite_file, steps))


async def _run(url: str, steps: list[tuple[Any, ...]]) -> None:
    database = Database(url)
    await database.start()
    try:
        plugins = s.registry(
            {"feeder": {"Script": scripted_feeder}, "packer": {"Script": scripted_packer(database)}}
        )
        t = await s.transformation(database, feeder="Script", packer="Script")
        identities: set[int] = set()
        for step in steps:
            if step[0] == "feed":
                _, items, fail_at, batch = step
                args = {"items": items, "fail_at": fail_at}
                result = await run_feeder(
                    database, plugins, replace(t, feeder_args=args), batch=batch
                )
                completes = fail_at is None or fail_at >= len(items)
                # A failing feeder loses its pending batch; the full batches before it stay.
                identities |= set(items if completes else items[: (fail_at // batch) * batch])
                assert (result.error is None) == completes
            else:
                _, plan, flush, batch, chunk = step
                await run_packer(
                    database,
                    plugins,
                    replace(t, packer_args={"plan": plan}),
                    flush=flush,
                    batch=batch,
                    claim_chunk=chunk,
                )
            await _check(database, t.id, len(identities))
    finally:
        await database.dispose()


async def _check(database: Database, transformation_id: bytes, distinct: int) -> None:
    inputs, links, parcels = execution.inputs, execution.parcel_inputs, execution.parcels
    compute = execution.compute_parcels
    async with database.transaction(s.RC) as conn:
        rows = list(
            await conn.execute(
                sa.select(inputs.c.InputID, inputs.c.Status, inputs.c.LastParcelID).where(
                    inputs.c.TransformationID == transformation_id
                )
            )
        )
        linked = list(
            await conn.execute(
                sa.select(links.c.InputID, links.c.ParcelID).where(
                    links.c.TransformationID == transformation_id
                )
            )
        )
        parcel_ids = set(
            (
                await conn.execute(
                    sa.select(parcels.c.ParcelID).where(
                        parcels.c.TransformationID == transformation_id
                    )
                )
            ).scalars()
        )
        facets = set(
            (
                await conn.execute(
                    sa.select(compute.c.ParcelID).where(compute.c.ParcelID.in_(parcel_ids))
                )
            ).scalars()
        )
    assert len(rows) == distinct
    parcels_of: dict[bytes, list[bytes]] = {}
    for input_id, parcel_id in linked:
        parcels_of.setdefault(bytes(input_id), []).append(bytes(parcel_id))
    for row in rows:
        assert row.Status in {status.value for status in InputStatus}
        carried = parcels_of.get(bytes(row.InputID), [])
        if row.Status == "Assigned":
            assert carried == [bytes(row.LastParcelID)]
        else:
            assert carried == [] and row.LastParcelID is None
    assert {p for ps in parcels_of.values() for p in ps} == parcel_ids == facets
    await s.assert_counters_exact(database, transformation_id)
