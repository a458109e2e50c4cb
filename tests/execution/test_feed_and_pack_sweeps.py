"""The feeder and packer sweeps of a built component, on SQLite and MariaDB: what they run, what
they skip, and that a failing round does not stop them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
import runner_support as s
import sqlalchemy as sa
from definition_double import InMemoryTransformations

from dxts.core.catalogue import CatalogueSettings, LocalFileCatalogue
from dxts.core.db import Database, Isolation
from dxts.core.ids import content_hash
from dxts.core.schema import execution
from dxts.core.states import TransformationStatus
from dxts.execution.component import Execution, build_execution
from dxts.execution.logic.feeding import run_feeder
from dxts.execution.logic.transformations import ActiveTransformation
from dxts.execution.settings import ExecutionSettings


class Flaky(InMemoryTransformations):
    """The definition service, unreachable for the next `failures` calls. `before_read` and
    `after_read` run once, as the next call starts and once it has read: what other sweeps do
    while a round asks."""

    failures = 0
    before_read: Callable[[], Awaitable[None]] | None = None
    after_read: Callable[[], Awaitable[None]] | None = None

    async def active(self) -> list[ActiveTransformation]:
        if self.failures:
            self.failures -= 1
            raise OSError("definition service unreachable")
        if self.before_read is not None:
            happening, self.before_read = self.before_read, None
            await happening()
        read = await super().active()
        if self.after_read is not None:
            happening, self.after_read = self.after_read, None
            await happening()
        return read


@pytest.fixture(scope="module")
def definitions(database: Database) -> Flaky:
    return Flaky(database=database)


@pytest.fixture(scope="module")
async def component(
    database: Database, definitions: Flaky, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Execution]:
    folder = tmp_path_factory.mktemp("catalogue")
    catalogue = LocalFileCatalogue(CatalogueSettings(url=f"sqlite+aiosqlite:///{folder}/c.sqlite"))
    await catalogue.start()
    built = await build_execution(
        database,
        settings=ExecutionSettings(
            feed_interval_s=0.05, pack_interval_s=0.05, record_interval_s=0.05
        ),
        registry=s.registry({}),
        catalogue=catalogue,
        definition_client=definitions,
        start_sweeps=False,
    )
    try:
        yield built
    finally:
        await built.stop()
        await catalogue.close()


def listed(prefix: str, n: int) -> dict[str, Any]:
    return {"inputs": [{"lfn": f"{prefix}/{i}", "lfn_size": 1} for i in range(n)]}


async def test_a_round_feeds_and_packs_every_transformation_that_should_run(
    database: Database, definitions: Flaky, component: Execution
) -> None:
    await s.empty(database)
    definitions.records.clear()
    running = await s.transformation(database, feeder_args=listed("/lhcb/sw/a", 3))
    halted = await s.transformation(database, feeder_args=listed("/lhcb/sw/b", 2), halted=True)
    paused = await s.transformation(database, feeder_args=listed("/lhcb/sw/c", 2))
    for record in (running, halted, replace(paused, status=TransformationStatus.PAUSED)):
        definitions.put(record)
    fed = await component.rounds.feed_round()
    assert [(r.inserted, r.exhausted) for r in fed] == [(3, True)]
    assert await s.input_rows(database, halted.id) == []
    assert await s.input_rows(database, paused.id) == []
    assert await component.rounds.feed_round() == []  # exhausted: FeederEnabled read back off
    packed = await component.rounds.pack_round()
    assert [(r.parcels, r.assigned) for r in packed] == [(3, 3)]
    assert s.by_status(await s.input_rows(database, running.id)) == {"Assigned": 3}
    await s.assert_counters_exact(database, running.id)


async def test_the_sweeps_run_until_stopped_and_outlive_a_failing_round(
    database: Database, definitions: Flaky, component: Execution
) -> None:
    await s.empty(database)
    definitions.records.clear()
    t = await s.transformation(database, feeder_args=listed("/lhcb/run", 4))
    definitions.put(t)
    definitions.failures = 2  # the first rounds cannot list anything
    await component.start()
    try:
        for _ in range(400):  # a bound, not a timing: each round takes a few milliseconds
            rows = await s.input_rows(database, t.id)
            if rows and s.by_status(rows) == {"Assigned": 4}:
                break
            await asyncio.sleep(0.025)
        assert s.by_status(await s.input_rows(database, t.id)) == {"Assigned": 4}
        assert definitions.failures == 0
    finally:
        await component.stop()
    assert not [task for task in asyncio.all_tasks() if task.get_name().startswith("sweep-")]


async def test_inputs_fed_while_a_pack_round_reads_wait_for_the_next_round(
    database: Database, definitions: Flaky, component: Execution
) -> None:
    """A pack round reads the transformations; meanwhile the requirements are estimated, the
    workgraph signed off and the feeder feeds (from a read that shows all that). The round,
    holding the older read, leaves those inputs; the next packs them with the estimate."""
    await s.empty(database)
    definitions.records.clear()
    t = await s.transformation(database, feeder_args=listed("/lhcb/late", 3))
    definitions.put(replace(t, requirements_template=None, scouting=True))
    rounds = component.rounds

    async def signed_off_and_fed() -> None:
        record = definitions.update(t.id, requirements_template=s.TEMPLATE, scouting=False)
        fed = await run_feeder(database, rounds.registry, record, batch=100)
        assert fed.inserted == 3

    definitions.after_read = signed_off_and_fed
    assert [r.offered for r in await rounds.pack_round()] == [0]
    assert s.by_status(await s.input_rows(database, t.id)) == {"Unassigned": 3}
    packed = await rounds.pack_round()
    assert [(r.parcels, r.assigned) for r in packed] == [(3, 3)]
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        carried = await conn.scalars(
            sa.select(execution.compute_parcels.c.RequirementsID)
            .join(
                execution.parcels,
                execution.parcels.c.ParcelID == execution.compute_parcels.c.ParcelID,
            )
            .where(execution.parcels.c.TransformationID == t.id)
        )
        assert [bytes(r) for r in carried] == [content_hash(s.TEMPLATE)] * 3
    await s.assert_counters_exact(database, t.id)


async def test_a_feeder_ended_while_a_pack_round_reads_does_not_split_a_group(
    database: Database, definitions: Flaky, component: Execution
) -> None:
    """Four inputs wait for parcels of three. As a pack round reads, the feeder feeds the last
    two and is turned off; the round, offered the four from before its read, must not take the
    feeder's end as the end of its inputs (a parcel of one, then one of two): it packs three
    and keeps one, and the next round packs that one with the last two."""
    await s.empty(database)
    definitions.records.clear()
    seeds = {"target_events": 4, "events_per_seed": 1}
    t = await s.transformation(
        database, feeder="Seeds", feeder_args=seeds, packer="BySize", packer_args={"group_size": 3}
    )
    definitions.put(t)
    rounds = component.rounds
    assert [r.inserted for r in await rounds.feed_round()] == [4]

    async def last_two_fed_and_feeder_off() -> None:
        record = definitions.update(t.id, feeder_args={**seeds, "target_events": 6})
        fed = await run_feeder(database, rounds.registry, record, batch=100)
        assert fed.inserted == 2
        await s.disable_feeder(database, t.id)

    definitions.before_read = last_two_fed_and_feeder_off
    first = await rounds.pack_round()
    assert [(r.offered, r.parcels, r.assigned) for r in first] == [(4, 1, 3)]
    second = await rounds.pack_round()
    assert [(r.offered, r.parcels, r.assigned) for r in second] == [(3, 1, 3)]
    assert s.by_status(await s.input_rows(database, t.id)) == {"Assigned": 6}
    await s.assert_counters_exact(database, t.id)
