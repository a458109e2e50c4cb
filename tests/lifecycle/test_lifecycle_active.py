"""Scouting and Active: hook operations applied in order, halts, and the drain guard, on SQLite
and MariaDB."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa
from lifecycle_world import (
    SEEDS,
    Member,
    Rig,
    build,
    logs,
    members,
    rig,
    scripted,
    step,
)

from dxts.core.db import Database, Isolation
from dxts.core.errors import Unavailable
from dxts.core.plugins import Accept, ActionResult, Operation
from dxts.core.plugins.proposals import HOOK_MEMORY
from dxts.core.plugins.protocols.lifecycle import Flushed
from dxts.core.schema.definition import workgraphs
from dxts.core.states import InputStatus, ParcelStatus
from dxts.definition.logic.lifecycle.drain import undrained

I, P = InputStatus, ParcelStatus  # noqa: E741


@pytest.fixture(scope="module")
async def engine(
    database: Database, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Rig]:
    built = await rig(database, tmp_path_factory.mktemp("active"), archive_delay_s=3600.0)
    try:
        yield built
    finally:
        await built.lifecycle.stop()


# -- the drain guard -------------------------------------------------------------------------------


def test_what_drains_a_member() -> None:
    assert undrained("Active", False, {I.PROCESSED: 3, I.SPLIT: 1, I.NOT_PROCESSED: 1}) is None
    assert undrained("Paused", False) == "it is Paused"
    assert undrained("Active", True) == "its feeder is enabled"
    assert undrained("Active", False, {I.PROBLEMATIC: 2}) == "2 Problematic inputs"
    assert undrained("Active", False, {I.FAILED: 1}, {P.DONE: 3}) == "1 Failed inputs"
    assert undrained("Active", False, {}, {P.COMPLETING: 1, P.CANCELLED: 2}) == (
        "1 Completing parcels"
    )


async def draining(database: Database, engine: Rig, **changes: Any) -> Any:
    """Two drained members (x, and y fed by x), then `changes` applied; Finalizing lists that
    wait, so a workgraph that reaches Finalizing stays there."""
    shape = {
        "x": Member(feeder_enabled=False, actions={"Finalizing": [step("hold")]}),
        "y": Member(
            feeder="Edge", source="x", feeder_enabled=False, actions={"Finalizing": [step("hold")]}
        ),
    }
    for name, member in changes.pop("members", {}).items():
        shape[name] = member
    world = await build(database, shape, status="Active")
    engine.drained(world)
    for name, (inputs, parcels) in changes.pop("counts", {}).items():
        engine.counts.set(world.uid(name), inputs, parcels)
    engine.script.queue("hold", *[ActionResult.pending("waiting")] * 2)
    return world


async def test_every_member_drained_moves_the_workgraph_and_members_to_finalizing(
    database: Database, engine: Rig
) -> None:
    world = await draining(database, engine)
    assert await engine.sweep(world) == ("Finalizing", {"x": "Finalizing", "y": "Finalizing"})
    workgraph_log, member_log = await logs(database, world)
    moved = [r for r in workgraph_log if r.EventType == "StateChange"]
    assert [(r.OldStatus, r.NewStatus, r.Message) for r in moved] == [
        ("Active", "Finalizing", "every member drained")
    ]
    assert sorted(
        (world.name(bytes(r.TransformationID)), r.OldStatus, r.NewStatus)
        for r in member_log
        if r.EventType == "StateChange"
    ) == [("x", "Active", "Finalizing"), ("y", "Active", "Finalizing")]
    # One transaction: the workgraph and its members carry the one time it read.
    rows = await members(database, world)
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        moved_at = await conn.scalar(
            sa.select(workgraphs.c.UpdatedAt).where(workgraphs.c.WorkgraphID == world.workgraph_id)
        )
    assert {rows["x"].UpdatedAt, rows["y"].UpdatedAt} == {moved_at}


@pytest.mark.parametrize(
    "changes",
    [
        {"counts": {"y": ({I.PROCESSED: 3, I.PROBLEMATIC: 1}, {P.DONE: 3})}},
        {"counts": {"x": ({I.PROCESSED: 3, I.FAILED: 1}, {P.DONE: 3})}},
        {"counts": {"y": ({I.PROCESSED: 3}, {P.DONE: 2, P.COMPLETING: 1})}},
        {"counts": {"x": ({I.PROCESSED: 3}, {P.UNASSIGNED: 1})}},
        {
            "members": {
                "y": Member(status="Paused", feeder="Edge", source="x", feeder_enabled=False)
            }
        },
        {"members": {"x": Member(feeder_enabled=True)}},
    ],
    ids=["problematic", "failed", "completing", "unassigned-parcel", "paused", "feeding"],
)
async def test_an_undrained_member_holds_the_workgraph_active(
    database: Database, engine: Rig, changes: dict[str, Any]
) -> None:
    world = await draining(database, engine, **changes)
    assert (await engine.sweep(world))[0] == "Active"


async def test_the_guard_reads_no_counts_while_a_feeder_is_on(
    database: Database, engine: Rig
) -> None:
    world = await draining(database, engine, members={"x": Member(feeder_enabled=True)})
    before = engine.counts.calls
    await engine.lifecycle.sweep.sweep_workgraph(world.workgraph_id)
    assert engine.counts.calls == before  # no hooks bound and nothing to guard yet


# -- Active hooks ----------------------------------------------------------------------------------


async def test_the_workgraph_hook_applies_before_the_members_hooks_run(
    database: Database, engine: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    raised = {**SEEDS, "target_events": 2000}
    world = await build(
        database,
        {
            "sim": Member(hooks={"Active": scripted("ScriptedMemberHook", "m-sim")}),
            "merge": Member(
                feeder="Edge",
                source="sim",
                hooks={"Active": scripted("ScriptedMemberHook", "m-merge")},
            ),
            "held": Member(
                status="Paused", hooks={"Active": scripted("ScriptedMemberHook", "m-held")}
            ),
        },
        hooks={"Active": scripted("ScriptedWorkgraphHook", "wg")},
    )
    script = engine.script
    script.queue("wg", {world.uid("sim"): Operation(feeder_args=raised)})
    script.queue("m-merge", Operation(flush=True))
    script.queue("m-sim", Operation(pause=True))
    # The flush's packer fails: execution logs it on the member (PackerFailed), not definition.
    engine.execution.flushed = Flushed(failure="raised OSError: full", failure_class="PluginFailed")
    start = len(script.calls)
    with caplog.at_level(logging.WARNING, "dxts.definition.logic.lifecycle.operations"):
        swept = await engine.sweep(world)
    assert "its packer failed (PluginFailed): raised OSError: full" in caplog.text
    assert swept == (
        "Active",
        {"sim": "Paused", "merge": "Active", "held": "Paused"},
    )
    calls = script.calls[start:]
    assert calls[0][0] == "wg"
    assert sorted(key for key, _ in calls[1:]) == ["m-merge", "m-sim"]  # not the Paused one
    seen_by_sim = next(value for key, value in calls if key == "m-sim")
    assert seen_by_sim.feeder_args == raised  # the workgraph's operation came first
    rows = await members(database, world)
    assert rows["sim"].FeederArgs == raised
    assert "flushed_at" in rows["merge"].Annotations
    assert engine.execution.called("flush")[-1] == world.uid("merge")
    _, member_log = await logs(database, world)
    events = [
        (world.name(bytes(r.TransformationID)), r.EventType, r.Author)
        for r in member_log
        if r.EventType != "StateChange" or r.NewStatus == "Paused"
    ]
    assert events[0] == ("sim", "FeederArgs", "hook ScriptedWorkgraphHook")
    assert sorted(events[1:]) == [
        ("merge", "Flush", "hook ScriptedMemberHook"),
        ("sim", "StateChange", "hook ScriptedMemberHook"),
    ]


async def test_a_hooks_flush_execution_did_not_run_is_logged_on_the_member(
    database: Database, engine: Rig
) -> None:
    """Execution away (or its packer busy past the wait): no packer ran, so nothing logged the
    failure but the lifecycle: a FlushFailed row in the member's log, its class and words."""
    world = await build(
        database, {"sim": Member(hooks={"Active": scripted("ScriptedMemberHook", "m-sim")})}
    )
    engine.script.queue("m-sim", Operation(flush=True))
    engine.execution.flush_error = Unavailable("execution is restarting")
    await engine.sweep(world)
    _, member_log = await logs(database, world)
    rows = [
        (r.EventType, r.Author, r.Message, r.Data) for r in member_log if "Flush" in r.EventType
    ]
    assert rows == [
        ("Flush", "hook ScriptedMemberHook", None, None),
        (
            "FlushFailed",
            "hook ScriptedMemberHook",
            "execution is restarting",
            {"error": "Unavailable", "flush": True},
        ),
    ]


async def test_a_hooks_memory_is_kept_in_the_annotations_and_shown_back(
    database: Database, engine: Rig
) -> None:
    world = await build(
        database, {"sim": Member(hooks={"Active": scripted("ScriptedMemberHook", "m-memory")})}
    )
    engine.script.queue("m-memory", Operation(flush=True, remember={"seen": 3}))
    await engine.sweep(world)
    annotations = (await members(database, world))["sim"].Annotations
    assert annotations[HOOK_MEMORY] == {"seen": 3} and "flushed_at" in annotations
    start = len(engine.script.calls)
    await engine.sweep(world)
    shown = next(value for key, value in engine.script.calls[start:] if key == "m-memory")
    assert shown.annotations[HOOK_MEMORY] == {"seen": 3}


async def test_disabling_feeders_by_hook_leads_to_the_drain(
    database: Database, engine: Rig
) -> None:
    world = await build(
        database,
        {"sim": Member(actions={"Finalizing": [step("hold")]})},
        hooks={"Active": scripted("ScriptedWorkgraphHook", "wg-off")},
    )
    engine.drained(world)
    engine.script.queue("wg-off", {world.uid("sim"): Operation(feeder_enabled=False)})
    engine.script.queue("hold", ActionResult.pending())
    assert await engine.sweep(world) == ("Finalizing", {"sim": "Finalizing"})


async def test_a_halted_workgraph_runs_no_hook_but_drains(database: Database, engine: Rig) -> None:
    world = await build(
        database,
        {
            "sim": Member(
                feeder_enabled=False,
                hooks={"Active": scripted("ScriptedMemberHook", "h-m")},
                actions={"Finalizing": [step("hold")]},
            )
        },
        hooks={"Active": scripted("ScriptedWorkgraphHook", "h-wg")},
        annotations={"halted": True},
    )
    engine.counts.set(world.uid("sim"), {I.UNASSIGNED: 2})
    start = len(engine.script.calls)
    assert (await engine.sweep(world))[0] == "Active"
    engine.drained(world)
    engine.script.queue("hold", ActionResult.pending())
    assert (await engine.sweep(world))[0] == "Finalizing"
    assert not [key for key, _ in engine.script.calls[start:] if key.startswith("h-")]


async def test_an_invalid_operation_writes_nothing_and_is_reported_once(
    database: Database, engine: Rig
) -> None:
    world = await build(
        database, {"sim": Member()}, hooks={"Active": scripted("ScriptedWorkgraphHook", "wg-bad")}
    )
    bad = {world.uid("sim"): Operation(feeder_args={**SEEDS, "events_per_seed": 0})}
    engine.script.queue("wg-bad", bad, bad)
    await engine.sweep(world, times=2)
    assert (await members(database, world))["sim"].FeederArgs == SEEDS
    workgraph_log, member_log = await logs(database, world)
    failures = [r for r in workgraph_log if r.EventType == "PluginFailed"]
    assert len(failures) == 1 and "events_per_seed" in failures[0].Message
    assert not [r for r in member_log if r.EventType == "FeederArgs"]


# -- Scouting -----------------------------------------------------------------------------------


async def test_scouting_operations_are_applied_and_accept_moves_to_approving(
    database: Database, engine: Rig
) -> None:
    world = await build(
        database,
        {"sim": Member(feeder_enabled=False), "held": Member(status="New")},
        status="Scouting",
        hooks={"ScoutingToApproving": scripted("ScriptedScout", "scout")},
        approving=[("ScriptedApproval", {"key": "scout-check"})],
    )
    further = {**SEEDS, "scouting_events": 500}
    engine.script.queue(
        "scout",
        {world.uid("sim"): Operation(feeder_args=further, feeder_enabled=True)},
        Accept("early, the failure threshold is crossed"),
    )
    engine.script.queue("scout-check", ActionResult.pending())
    assert (await engine.sweep(world))[0] == "Scouting"
    row = (await members(database, world))["sim"]
    assert (row.FeederArgs, row.FeederEnabled) == (further, True)
    assert await engine.sweep(world) == ("Approving", {"sim": "Active", "held": "New"})
    workgraph_log, _ = await logs(database, world)
    assert [
        (r.NewStatus, r.Author, r.Message) for r in workgraph_log if r.EventType == "StateChange"
    ] == [
        (
            "Approving",
            "hook ScriptedScout",
            "scout accepted: early, the failure threshold is crossed",
        )
    ]


async def test_a_workgraph_without_a_scouting_hook_uses_the_default(
    database: Database, engine: Rig
) -> None:
    world = await build(
        database,
        {"sim": Member()},
        status="Scouting",
        approving=[("ScriptedApproval", {"key": "default-check"})],
    )
    engine.script.queue("default-check", ActionResult.pending())
    engine.counts.set(world.uid("sim"), {I.ASSIGNED: 2})
    assert (await engine.sweep(world))[0] == "Scouting"
    engine.counts.set(world.uid("sim"), {I.PROCESSED: 2})
    assert (await engine.sweep(world))[0] == "Approving"


async def test_the_document_target_ends_the_feeders_through_the_built_in_hook(
    database: Database, engine: Rig
) -> None:
    import uuid

    from dxts.core.plugins.protocols.lifecycle import OutputRecord

    spec = {
        "class": "Workflow",
        "$namespaces": {"dirac": "https://diracgrid.org/cwl#"},
        "hints": {"dirac:Workgraph": {"target": {"output": "datasets", "files": 2}}},
        "outputs": {"datasets": {"outputSource": "merge/merged"}},
    }
    world = await build(
        database,
        {
            "sim": Member(actions={"Finalizing": [step("hold")]}),
            "merge": Member(
                feeder="Edge",
                source="sim",
                feeder_enabled=False,
                actions={"Finalizing": [step("hold")]},
            ),
        },
        hooks={"Active": {"hook": "OutputTarget"}},
        spec=spec,
    )
    engine.drained(world)
    engine.script.queue("hold", ActionResult.pending(), ActionResult.pending())
    produced = engine.execution.output_rows[world.uid("merge")]
    files = [
        OutputRecord(
            transformation_output_id=uuid.UUID(bytes=world.outputs["merge"]),
            name="merged",
            intermediate=False,
            parcel_id=uuid.uuid4(),
            lfn=f"/merged/{world.uid('merge')}/{i}",
        )
        for i in range(2)
    ]
    produced.append(files[0])
    assert (await engine.sweep(world))[0] == "Active"
    assert (await members(database, world))["sim"].FeederEnabled
    produced.append(files[1])
    # The hook disables the external feeder; the drain guard in the same sweep sees it off.
    assert await engine.sweep(world) == ("Finalizing", {"sim": "Finalizing", "merge": "Finalizing"})
    _, member_log = await logs(database, world)
    assert [
        (world.name(bytes(r.TransformationID)), r.Author)
        for r in member_log
        if r.EventType == "FeederDisabled"
    ] == [("sim", "hook OutputTarget")]
