"""The completion sweeps: a turn records what is Completing (replicas side by side, each parcel
once) and decides what is Failed (one replica per transformation at a time), and the loops keep
going until asked to stop — on SQLite and MariaDB."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from definition_double import InMemoryTransformations
from recording_world import (
    World,
    assert_counters_exact,
    empty,
    feed,
    outcome,
    pack,
    parcel,
    report,
    statuses,
    transformation,
)

from dxts.core.catalogue import CatalogueSettings
from dxts.core.catalogue.local import LocalFileCatalogue
from dxts.core.db import Database, Isolation
from dxts.core.ids import id_to_str
from dxts.core.kernel.sweeps import SweepRunner
from dxts.core.locks import Lock, LockKind, LockManager
from dxts.core.plugins import Registry
from dxts.execution.edge.servicer_operations import record_outcome_messages as record_outcomes
from dxts.execution.logic.sweeps import Completion
from dxts.execution.logic.transformations import ActiveSnapshot
from dxts.execution.settings import ExecutionSettings
from dxts.execution.store.outcomes import lock_parcels
from dxts.v1 import common_pb2


async def scene(database: Database) -> tuple[World, bytes, bytes]:
    """A parcel Completing with a report, and another whose backend failed it."""
    await empty(database)
    world = await transformation(database)
    inputs = await feed(database, world, 2)
    done, failed = await pack(database, world, [inputs[:1], inputs[1:]])
    await record_outcomes(
        database,
        [
            outcome(done, report=report(**{id_to_str(inputs[0]): "SUCCESS"})),
            outcome(failed, result=common_pb2.OUTCOME_RESULT_FAILED),
        ],
    )
    return world, done, failed


def sweeps(
    database: Database, world: World, catalogue: LocalFileCatalogue, **settings: float
) -> Completion:
    return Completion(
        database,
        registry=Registry.discover(),
        catalogue=catalogue,
        snapshot=ActiveSnapshot(InMemoryTransformations([world.record()])),
        locks=LockManager(database),
        settings=ExecutionSettings(**settings),
    )


async def test_one_turn_of_each_sweep(database: Database, catalogue: LocalFileCatalogue) -> None:
    world, done, _ = await scene(database)
    completion = sweeps(database, world, catalogue)

    assert await completion.record_turn() == 1
    handled = await completion.failed_inputs_turn()

    assert (await parcel(database, done)).Status == "Done"
    assert handled[world.transformation_id].decided == {"ToUnassigned": 1}
    assert await statuses(database, world.transformation_id) == {
        "Processed": 1,
        "Unassigned": 1,
    }
    await assert_counters_exact(database)


async def test_a_turn_skips_what_another_replica_holds(
    database: Database, catalogue: LocalFileCatalogue
) -> None:
    world, _, _ = await scene(database)
    completion = sweeps(database, world, catalogue)
    other = LockManager(database)

    async with other.try_hold(Lock(LockKind.FAILED_INPUTS, world.transformation_id)) as held:
        assert held
        assert await completion.failed_inputs_turn() == {}
    assert await statuses(database, world.transformation_id) == {"Assigned": 1, "Failed": 1}


@pytest.mark.mariadb_only
async def test_a_turn_passes_by_a_parcel_another_replica_is_recording(
    mariadb: Database, tmp_path: Path
) -> None:
    """Replicas record side by side: a parcel locked by another's batch is not waited for nor
    recorded twice; once that batch ends, it is recorded if it is still Completing."""
    world, done, _ = await scene(mariadb)
    catalogue = LocalFileCatalogue(
        CatalogueSettings(url=f"sqlite+aiosqlite:///{tmp_path / 'catalogue.sqlite'}")
    )
    await catalogue.start()
    try:
        completion = sweeps(mariadb, world, catalogue)
        async with mariadb.transaction(Isolation.READ_COMMITTED) as conn:
            assert done in await lock_parcels(conn, [done])  # the other replica's batch
            assert await completion.record_turn() == 0
        assert (await parcel(mariadb, done)).Status == "Completing"
        assert await completion.record_turn() == 1
    finally:
        await catalogue.close()
    assert (await parcel(mariadb, done)).Status == "Done"
    await assert_counters_exact(mariadb)


async def test_the_loops_run_until_stopped(
    database: Database, catalogue: LocalFileCatalogue
) -> None:
    world, done, _ = await scene(database)
    completion = sweeps(
        database, world, catalogue, record_interval_s=0.05, failed_inputs_interval_s=0.05
    )
    settled = {"Processed": 1, "Unassigned": 1}
    runner = SweepRunner(completion.sweeps())
    runner.start()
    try:
        for _ in range(200):  # 10 s at most
            if await statuses(database, world.transformation_id) == settled:
                break
            await asyncio.sleep(0.05)
    finally:
        async with asyncio.timeout(10):
            await runner.stop(grace_s=10)
    assert await statuses(database, world.transformation_id) == settled
    assert not [task for task in asyncio.all_tasks() if task.get_name().startswith("sweep-")]
    assert (await parcel(database, done)).Status == "Done"
