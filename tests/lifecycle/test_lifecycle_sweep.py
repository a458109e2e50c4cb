"""The sweep through every state, on SQLite and MariaDB: scouting → approving → active →
finalizing → completed → archiving → archived; cancelling → cancelled; the archive delay; the
per-workgraph lock; standalone transformations."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from lifecycle_doubles import MemoryCounts, MemoryExecution
from lifecycle_world import (
    OPERATOR,
    Member,
    Rig,
    build,
    build_standalone,
    logs,
    rig,
    scripted,
    statuses,
    step,
)

from dxts.core.db import Database, Isolation, db_now
from dxts.core.kernel.authorisation import rpc, serving
from dxts.core.locks import Lock
from dxts.core.plugins import (
    ActionResult,
    Operation,
    PluginRegistryError,
    Transformation,
    action,
)
from dxts.core.plugins.protocols.lifecycle import CleanMode
from dxts.core.plugins.registry import Registry
from dxts.core.schema.definition import transformations
from dxts.core.states import ActionResult as Result
from dxts.core.states import InputStatus, ParcelStatus
from dxts.definition.component import build_lifecycle
from dxts.definition.logic import actions
from dxts.definition.settings import LifecycleSettings
from dxts.v1.definition_pb2_grpc import DefinitionServiceServicer as Definition

I, P = InputStatus, ParcelStatus  # noqa: E741
RC = Isolation.READ_COMMITTED


@pytest.fixture(scope="module")
async def engine(
    database: Database, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Rig]:
    built = await rig(database, tmp_path_factory.mktemp("sweep"), archive_delay_s=0.0)
    try:
        yield built
    finally:
        await built.lifecycle.stop()


def state_changes(rows: list[object]) -> list[tuple[str | None, str | None, str]]:
    return [(r.OldStatus, r.NewStatus, r.Author) for r in rows if r.EventType == "StateChange"]  # type: ignore[attr-defined]


async def test_a_workgraph_walks_from_scouting_to_archived(database: Database, engine: Rig) -> None:
    lists = {
        "Finalizing": [("NoInputProcessedTwice", None)],
        "Archiving": [("CleanDatabaseEntries", None)],
    }
    world = await build(
        database,
        {
            "sim": Member(actions=lists),
            "reco": Member(feeder="Edge", source="sim", actions=lists),
            "replicate": Member(
                status="New",
                kind="Data",
                feeder="Edge",
                source="reco",
                initial_state="Stopped",
                actions={
                    "Finalizing": [("EveryInputSettled", None)],
                    "Archiving": [("CleanDatabaseEntries", None)],
                },
            ),
        },
        status="Scouting",
        hooks={"ScoutingToApproving": {"hook": "ScoutUntilSettled", "args": {"min_sample": 2}}},
        approving=[
            ("CheckSuccessRate", {"min_sample": 2}),
            ("ManualApproval", {"role": "mc_production_manager"}),
        ],
    )
    # The scout is still running in reco: nothing moves.
    engine.counts.set(world.uid("sim"), {I.PROCESSED: 3})
    engine.counts.set(world.uid("reco"), {I.ASSIGNED: 1})
    assert await engine.sweep(world) == (
        "Scouting",
        {"sim": "Active", "reco": "Active", "replicate": "New"},
    )
    # Settled: accepted, approved by the check, held by the sign-off nobody has given.
    engine.counts.set(world.uid("reco"), {I.PROCESSED: 2})
    assert (await engine.sweep(world))[0] == "ApprovingBlocked"
    with serving(rpc(Definition.ForceAction)):
        await actions.force_action(
            database, OPERATOR, world.actions["workgraph/Approving/2"], Result.PASSED
        )
    # Approved: the member held until approval starts.
    assert await engine.sweep(world) == (
        "Active",
        {"sim": "Active", "reco": "Active", "replicate": "Active"},
    )
    # Still feeding: not drained.
    engine.drained(world)
    assert (await engine.sweep(world))[0] == "Active"
    async with database.transaction(RC) as conn:
        await conn.execute(
            sa.update(transformations)
            .where(transformations.c.TransformationID.in_(list(world.ids.values())))
            .values(FeederEnabled=False, UpdatedAt=await db_now(conn))
        )
    # Drained: finalized upstream first, completed, archived (no archive delay here).
    assert await engine.sweep(world) == (
        "Archived",
        {"sim": "Archived", "reco": "Archived", "replicate": "Archived"},
    )
    assert [tid for name, tid, mode in engine.execution.calls if mode == CleanMode.ARCHIVE] == [
        world.uid("sim"),
        world.uid("reco"),
        world.uid("replicate"),
    ]
    workgraph_log, member_log = await logs(database, world)
    assert state_changes(workgraph_log) == [
        ("Scouting", "Approving", "hook ScoutUntilSettled"),
        ("Approving", "ApprovingBlocked", "dxts-lifecycle"),
        ("ApprovingBlocked", "Approving", "olivia"),
        ("Approving", "Active", "dxts-lifecycle"),
        ("Active", "Finalizing", "dxts-lifecycle"),
        ("Finalizing", "Completed", "dxts-lifecycle"),
        ("Completed", "Archiving", "dxts-lifecycle"),
        ("Archiving", "Archived", "dxts-lifecycle"),
    ]
    runs = [r for r in workgraph_log if r.EventType == "ActionRun"]
    assert [(r.Data["action"], r.Data["result"]) for r in runs] == [
        ("CheckSuccessRate", "Passed"),
        ("ManualApproval", "Failed"),
    ]
    finalized = [
        world.name(bytes(r.TransformationID))
        for r in member_log
        if r.EventType == "StateChange" and r.NewStatus == "Finalized"
    ]
    assert finalized == ["sim", "reco", "replicate"]


async def test_a_file_fed_after_the_scouts_counts_were_read_is_flushed_before_accepting(
    database: Database, engine: Rig
) -> None:
    """The interleaving of the walkthrough's stuck scout: the lifecycle reads the counts (reco
    settled on the one file fed so far), reco's feeder then feeds sim's second file, and only
    then does ScoutUntilSettled list reco's inputs to see that every file sim made was fed. It
    was there, Unassigned: the scout was accepted without it, and BySize held it back with no
    flush to come. Now the scout waits, flushes reco the next round, and accepts once it is
    processed."""
    from dxts.core.plugins import InputRecord
    from dxts.core.plugins.protocols.lifecycle import OutputRecord

    world = await build(
        database,
        {"sim": Member(), "reco": Member(feeder="Edge", source="sim")},
        status="Scouting",
        hooks={"ScoutingToApproving": {"hook": "ScoutUntilSettled", "args": {"min_sample": 2}}},
        approving=[("ManualApproval", {"role": "mc_production_manager"})],
    )
    sim, reco = world.uid("sim"), world.uid("reco")
    made = uuid.UUID(bytes=world.outputs["sim"])
    engine.execution.output_rows[sim] += [
        OutputRecord(made, "sim-out", False, uuid.uuid4(), f"/sim/{n}") for n in range(2)
    ]
    first = InputRecord(uuid.uuid4(), "/sim/0", 1, None, I.PROCESSED)
    second = InputRecord(uuid.uuid4(), "/sim/1", 1, None)
    engine.execution.input_rows[reco].append(first)
    engine.counts.set(sim, {I.PROCESSED: 2})
    engine.counts.set(reco, {I.PROCESSED: 1})

    def fed() -> None:
        engine.execution.input_rows[reco].append(second)
        engine.counts.set(reco, {I.PROCESSED: 1, I.UNASSIGNED: 1})

    def flushed() -> int:
        return engine.execution.called("flush").count(reco)

    engine.counts.after_read = fed
    assert (await engine.sweep(world))[0] == "Scouting"
    assert flushed() == 0
    # The next round sees it waiting to be packed: reco is flushed, and still not accepted.
    assert (await engine.sweep(world))[0] == "Scouting"
    assert flushed() == 1
    engine.execution.input_rows[reco][-1] = replace(second, status=I.PROCESSED)
    engine.counts.set(reco, {I.PROCESSED: 2})
    assert (await engine.sweep(world))[0] == "ApprovingBlocked"


async def test_a_cancelled_workgraph_cleans_upstream_first(database: Database, engine: Rig) -> None:
    cleaning = {
        "Cancelling": [
            ("CancelInFlightParcels", None),
            ("RemoveOutputFiles", None),
            ("CleanDatabaseEntries", None),
        ]
    }
    world = await build(
        database,
        {
            "sim": Member(status="Cancelling", actions=cleaning),
            "reco": Member(status="Cancelling", feeder="Edge", source="sim", actions=cleaning),
        },
        status="Cancelling",
    )
    engine.counts.set(world.uid("sim"), {I.UNASSIGNED: 3, I.ASSIGNED: 2}, {P.ASSIGNED: 2})
    assert await engine.sweep(world) == (
        "Cancelling",
        {"sim": "Cancelling", "reco": "Cancelling"},
    )
    assert engine.execution.called("cancel_in_flight") == [world.uid("sim")]
    assert engine.execution.called("write_off_waiting") == [world.uid("sim")]
    # The backends confirm: every parcel terminal, the rest of both lists runs.
    engine.counts.set(world.uid("sim"), {I.NOT_PROCESSED: 5}, {P.CANCELLED: 2})
    assert await engine.sweep(world) == ("Cancelled", {"sim": "Cancelled", "reco": "Cancelled"})
    cleaned = [(t, m) for name, t, m in engine.execution.calls if name == "clean_transformation"]
    assert cleaned[-2:] == [
        (world.uid("sim"), CleanMode.CLEAN),
        (world.uid("reco"), CleanMode.CLEAN),
    ]


async def test_completed_waits_for_the_archive_delay(database: Database, engine: Rig) -> None:
    settings = engine.lifecycle.engine.settings
    settings.archive_delay_s = 3600.0
    try:
        fresh = await build(database, {"sim": Member(status="Completed")}, status="Completed")
        assert (await engine.sweep(fresh))[0] == "Completed"
        async with database.transaction(RC) as conn:
            old = await db_now(conn) - timedelta(hours=2)
        stale = await build(
            database, {"sim": Member(status="Completed")}, status="Completed", updated_at=old
        )
        assert await engine.sweep(stale) == ("Archived", {"sim": "Archived"})
    finally:
        settings.archive_delay_s = 0.0


async def test_a_workgraph_held_by_another_replica_is_skipped(
    database: Database, engine: Rig
) -> None:
    world = await build(
        database,
        {"sim": Member(status="Finalizing")},
        status="Finalizing",
    )
    sweep = engine.lifecycle.sweep
    async with sweep.locks.try_hold(Lock("lifecycle", world.workgraph_id)) as held:
        assert held
        assert not await sweep.sweep_workgraph(world.workgraph_id)
        assert (await statuses(database, world))[0] == "Finalizing"
    assert await sweep.sweep_workgraph(world.workgraph_id)
    assert (await statuses(database, world))[0] != "Finalizing"


async def test_sweep_once_covers_every_owner_with_work(database: Database, engine: Rig) -> None:
    finishing = await build(database, {"sim": Member(status="Finalizing")}, status="Finalizing")
    new = await build(database, {"sim": Member(status="New")}, status="New")
    swept = await engine.lifecycle.sweep.sweep_once()
    assert swept >= 1
    assert (await statuses(database, finishing))[0] == "Archived"
    assert (await statuses(database, new))[0] == "New"  # nothing to do before a start


async def test_a_standalone_transformation_runs_its_hook_and_its_lists(
    database: Database, engine: Rig
) -> None:
    active = await build_standalone(
        database,
        Member(hooks={"Active": scripted("ScriptedMemberHook", "alone-active")}),
    )
    engine.script.queue("alone-active", Operation(pause=True))
    await engine.lifecycle.sweep.sweep_standalone(active)
    finalizing = await build_standalone(
        database,
        Member(
            status="Finalizing",
            actions={"Finalizing": [step("alone-1"), step("alone-2")]},
        ),
    )
    engine.script.queue("alone-2", ActionResult.pending("wait"))
    await engine.lifecycle.sweep.sweep_standalone(finalizing)
    async with database.transaction(RC) as conn:
        found = dict(
            (
                await conn.execute(
                    sa.select(transformations.c.TransformationID, transformations.c.Status).where(
                        transformations.c.TransformationID.in_([active, finalizing])
                    )
                )
            ).all()
        )
    assert found[active] == "Paused"
    assert found[finalizing] == "Finalizing"  # alone-2 is Pending
    await engine.lifecycle.sweep.sweep_standalone(finalizing)
    async with database.transaction(RC) as conn:
        status = await conn.scalar(
            sa.select(transformations.c.Status).where(
                transformations.c.TransformationID == finalizing
            )
        )
    assert status == "Finalized"  # a standalone takes Finalized → Completed by operator


def test_lifecycle_settings_read_the_shared_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("abc\n")
    monkeypatch.setenv("DXTS_ACCOUNTING_ADDRESS", "accounting:50051")
    monkeypatch.setenv("DXTS_SERVICE_TOKEN_FILE", str(token))
    monkeypatch.setenv("DXTS_LIFECYCLE_ARCHIVE_DELAY_S", "60")
    settings = LifecycleSettings()
    assert settings.accounting_address == "accounting:50051"
    assert settings.token() == "abc"
    assert settings.archive_delay_s == 60


class Bookkeeping:
    """Something only an experiment's process provides."""


@action("Finalizing")
def needs_bookkeeping(*, transformation: Transformation, bk: Bookkeeping) -> ActionResult:
    return ActionResult.passed()


async def test_the_engine_refuses_to_start_with_a_plugin_it_cannot_serve(
    database: Database,
) -> None:
    registry = Registry.of({"action": {"NeedsBookkeeping": needs_bookkeeping}})
    with pytest.raises(PluginRegistryError, match=r"NeedsBookkeeping.*annotated Bookkeeping"):
        await build_lifecycle(
            database,
            settings=LifecycleSettings(),
            registry=registry,
            counts=MemoryCounts(),
            execution=MemoryExecution(),
        )


async def test_an_action_reads_its_siblings_from_the_definition_rows(
    database: Database, engine: Rig
) -> None:
    from dxts.core.plugins import InputRecord

    world = await build(
        database,
        {
            "reco": Member(status="Finalizing"),
            "removal": Member(
                status="Finalizing",
                kind="Data",
                feeder="Edge",
                source="reco",
                after=("reco",),
                actions={"Finalizing": [("OnlyUnprocessedRemain", {"consumer": "reco"})]},
            ),
        },
        status="Finalizing",
    )
    processed = replace(
        InputRecord(id=world.uid("reco"), lfn="/f", lfn_size=1, descriptor=None), status=I.PROCESSED
    )
    engine.execution.input_rows[world.uid("reco")].append(processed)
    engine.execution.input_rows[world.uid("removal")].append(processed)
    assert (await engine.sweep(world))[1]["removal"] != "FinalizingBlocked"
    _, member_log = await logs(database, world)
    (run,) = [r for r in member_log if r.EventType == "ActionRun"]
    assert run.Data["result"] == "Passed" and "the 1 files reco processed" in run.Message


async def test_two_replicas_never_sweep_one_workgraph_at_once(
    database: Database, engine: Rig
) -> None:
    """A second replica (its own lock connections) skips a workgraph the first is sweeping."""
    from dxts.core.locks import LockManager
    from dxts.definition.logic.lifecycle.sweep import LifecycleSweep

    world = await build(
        database,
        {"sim": Member(status="Finalizing", actions={"Finalizing": [("Gated", {"key": "g"})]})},
        status="Finalizing",
    )
    script = engine.script
    script.entered.clear()
    script.opened.clear()
    other_locks = LockManager(database)
    other = LifecycleSweep(engine.lifecycle.engine, other_locks)
    try:
        first = asyncio.create_task(engine.lifecycle.sweep.sweep_workgraph(world.workgraph_id))
        await asyncio.wait_for(script.entered.wait(), 10)
        assert not await other.sweep_workgraph(world.workgraph_id)
        script.opened.set()
        assert await asyncio.wait_for(first, 10)
    finally:
        script.opened.set()
        await other_locks.dispose()
    assert [key for key, _ in script.calls].count("g") == 1
    assert (await statuses(database, world))[0] == "Archived"
