"""Every operator command from every state, over gRPC, on SQLite and MariaDB.

Allowed commands land with their log rows and member fan-out; refused ones answer
FAILED_PRECONDITION naming the current state and change no row (every row a command could touch
is compared before and after). The expected outcomes are written out by hand below, not derived
from the state machine module they test.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa
from definition_world import (
    HELD,
    MEMBERS,
    ExecutionDouble,
    Fixture,
    Stub,
    action_results,
    build_standalone,
    build_workgraph,
    log_rows,
    member_rows,
    snapshot,
    statuses,
)

from dxts.core.db import Database, Isolation
from dxts.core.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from dxts.core.ids import id_to_str
from dxts.core.plugins.protocols.lifecycle import Flushed
from dxts.core.schema import definition as schema
from dxts.definition.logic import queries
from dxts.v1 import common_pb2, definition_pb2

pb = definition_pb2

WORKGRAPH_STATES = (
    "New",
    "Scouting",
    "Approving",
    "ApprovingBlocked",
    "Active",
    "Finalizing",
    "Completed",
    "Archiving",
    "Archived",
    "Cancelling",
    "Cancelled",
)


def _all(status: str) -> dict[str, str]:
    return dict.fromkeys(MEMBERS, status)


# Members of a fixture workgraph in each state (a mix wherever the state admits one).
MEMBERS_UNDER = {
    "New": _all("New"),
    "Scouting": HELD,
    "Approving": HELD,
    "ApprovingBlocked": HELD,
    "Active": {"simulate": "Active", "reconstruct": "Paused", "replicate": "Active"},
    "Finalizing": {
        "simulate": "Finalized",
        "reconstruct": "FinalizingBlocked",
        "replicate": "Finalizing",
    },
    "Completed": _all("Completed"),
    "Archiving": {
        "simulate": "Archived",
        "reconstruct": "ArchivingBlocked",
        "replicate": "Archiving",
    },
    "Archived": _all("Archived"),
    "Cancelling": {
        "simulate": "Cancelled",
        "reconstruct": "CancellingBlocked",
        "replicate": "Cancelling",
    },
    "Cancelled": _all("Cancelled"),
}

# command → allowed source state → (workgraph status after, member statuses after).
EXPECTED: dict[str, dict[str, tuple[str, dict[str, str]]]] = {
    "start": {
        "New": ("Scouting", {"simulate": "Active", "reconstruct": "Active", "replicate": "New"})
    },
    "extend_scout": {
        "Approving": ("Scouting", HELD),
        "ApprovingBlocked": ("Scouting", HELD),
    },
    "drain": {"Active": ("Active", MEMBERS_UNDER["Active"])},
    "halt": {"Active": ("Active", MEMBERS_UNDER["Active"])},
    "cancel": {
        state: ("Cancelling", _all("Cancelling"))
        for state in ("New", "Scouting", "Approving", "ApprovingBlocked", "Active", "Finalizing")
    },
    "return_to_active": {"Finalizing": ("Active", _all("Active"))},
}

# Feeder events each allowed command writes, by member (beside the state changes).
FEEDER_EVENTS = {
    "extend_scout": {("simulate", "FeederEnabled")},  # the member running in the scout
    "drain": {("simulate", "FeederDisabled")},  # the outermost feeder only
    "halt": {(name, "FeederDisabled") for name in MEMBERS},
}
# The log row each command writes in its workgraph's log (the kernel's: the RPC's name).
COMMAND_EVENTS = {
    "start": "StartWorkgraph",
    "extend_scout": "ExtendScout",
    "drain": "DrainWorkgraph",
    "halt": "HaltWorkgraph",
    "cancel": "CancelWorkgraph",
    "return_to_active": "ReturnToActive",
}


async def run_command(stub: Stub, command: str, fixture: Fixture, request_id: str = "") -> Any:
    common = {"workgraph_id": fixture.wid, "request_id": request_id, "reason": "test"}
    if command == "start":
        return await stub.StartWorkgraph(pb.StartWorkgraphRequest(**common))
    if command == "extend_scout":
        return await stub.ExtendScout(pb.ExtendScoutRequest(**common))
    if command == "drain":
        return await stub.DrainWorkgraph(pb.DrainWorkgraphRequest(**common))
    if command == "halt":
        return await stub.HaltWorkgraph(pb.HaltWorkgraphRequest(**common))
    if command == "cancel":
        return await stub.CancelWorkgraph(pb.CancelWorkgraphRequest(**common))
    assert command == "return_to_active"
    return await stub.ReturnToActive(pb.ReturnToActiveRequest(**common))


def new_rows(before: list[Any], after: list[Any]) -> list[Any]:
    assert after[: len(before)] == before  # logs are append-only
    return after[len(before) :]


@pytest.mark.parametrize("state", WORKGRAPH_STATES)
@pytest.mark.parametrize("command", sorted(EXPECTED))
async def test_workgraph_command_from_every_state(
    database: Database,
    stubs: dict[str, Stub],
    execution: ExecutionDouble,
    command: str,
    state: str,
) -> None:
    members = MEMBERS_UNDER[state]
    fixture = await build_workgraph(
        database,
        status=state,
        members=members,
        feeders_enabled=command != "extend_scout",
        results={"simulate/Cancelling/1": "Done", "simulate/Archiving/1": "Done"},
    )
    before = await snapshot(database, fixture)
    calls = len(execution.calls)
    allowed = EXPECTED[command].get(state)

    if allowed is None:
        with pytest.raises(FailedPrecondition) as refused:
            await run_command(stubs["operator"], command, fixture)
        assert refused.value.current_state == state
        assert state in str(refused.value)
        assert await snapshot(database, fixture) == before
        assert len(execution.calls) == calls
        return

    reply = await run_command(stubs["operator"], command, fixture)
    workgraph_after, members_after = allowed
    assert reply.workgraph.status == common_pb2.WorkgraphStatus.Value(
        "WORKGRAPH_STATUS_"
        + {"ApprovingBlocked": "APPROVING_BLOCKED"}.get(workgraph_after, workgraph_after.upper())
    )
    assert await statuses(database, fixture) == (workgraph_after, members_after)

    after = await snapshot(database, fixture)
    workgraph_log = new_rows(before["workgraph_log"], after["workgraph_log"])
    if workgraph_after != state:
        assert [(r.EventType, r.OldStatus, r.NewStatus, r.Author) for r in workgraph_log] == [
            ("StateChange", state, workgraph_after, "olivia"),
            (COMMAND_EVENTS[command], None, None, "olivia"),
        ]
    else:
        assert [r.EventType for r in workgraph_log] == [COMMAND_EVENTS[command]]
    names = {v: k for k, v in fixture.ids.items()}
    member_log = new_rows(before["transformation_log"], after["transformation_log"])
    moved = {
        (name, "StateChange", members[name], members_after[name])
        for name in MEMBERS
        if members[name] != members_after[name]
    }
    feeders = {(name, event, None, None) for name, event in FEEDER_EVENTS.get(command, set())}
    assert {
        (names[bytes(r.TransformationID)], r.EventType, r.OldStatus, r.NewStatus)
        for r in member_log
    } == moved | feeders
    assert len(member_log) == len(moved | feeders)

    results = await action_results(database, fixture)
    # Entering Cancelling resets that list's results; other lists keep theirs.
    assert results["simulate/Cancelling/1"][0] == (None if command == "cancel" else "Done")
    assert results["simulate/Archiving/1"][0] == "Done"


async def test_drain_disables_only_the_outermost_feeders(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Active", members=MEMBERS_UNDER["Active"])
    await stubs["operator"].DrainWorkgraph(pb.DrainWorkgraphRequest(workgraph_id=fixture.wid))
    rows = await member_rows(database, fixture)
    assert {n: r.FeederEnabled for n, r in rows.items()} == {
        "simulate": False,
        "reconstruct": True,
        "replicate": True,
    }


async def test_halt_marks_the_workgraph_and_forwards_per_member(
    database: Database, stubs: dict[str, Stub], execution: ExecutionDouble
) -> None:
    fixture = await build_workgraph(database, status="Active", members=MEMBERS_UNDER["Active"])
    calls = len(execution.calls)
    reply = await stubs["operator"].HaltWorkgraph(
        pb.HaltWorkgraphRequest(workgraph_id=fixture.wid, request_id="halt-1")
    )
    assert reply.workgraph.halted
    rows = await member_rows(database, fixture)
    assert not any(r.FeederEnabled for r in rows.values())
    forwarded = execution.calls[calls:]
    assert sorted((c[0], c[1]) for c in forwarded) == sorted(
        (kind, fixture.ids[name])
        for name in MEMBERS
        for kind in ("cancel_in_flight", "write_off_waiting")
    )
    assert all(c[2].startswith("halt-1:") for c in forwarded)
    # Every member's transformation view carries the mark execution reads.
    members = await stubs["service"].ListTransformations(
        pb.ListTransformationsRequest(workgraph_id=fixture.wid)
    )
    assert [t.halted for t in members.transformations] == [True, True, True]


async def test_halt_retried_after_execution_was_down_forwards_the_same_requests(
    database: Database, stubs: dict[str, Stub], execution: ExecutionDouble
) -> None:
    from dxts.core.errors import Unavailable

    fixture = await build_workgraph(database, status="Active", members=MEMBERS_UNDER["Active"])
    execution.fail = Unavailable("execution is down")
    try:
        with pytest.raises(Unavailable):
            await stubs["operator"].HaltWorkgraph(
                pb.HaltWorkgraphRequest(workgraph_id=fixture.wid, request_id="halt-2")
            )
    finally:
        execution.fail = None
    marked = await snapshot(database, fixture)
    calls = len(execution.calls)
    await stubs["operator"].HaltWorkgraph(
        pb.HaltWorkgraphRequest(workgraph_id=fixture.wid, request_id="halt-2")
    )
    assert await snapshot(database, fixture) == marked  # applied once, by the first call
    assert len(execution.calls) - calls == 6
    assert {c[2].split(":")[0] for c in execution.calls[calls:]} == {"halt-2"}


async def test_start_without_an_approving_list_goes_active_and_starts_every_member(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, approving=False, initial={"reconstruct": "Paused"})
    await stubs["owner"].StartWorkgraph(pb.StartWorkgraphRequest(workgraph_id=fixture.wid))
    assert await statuses(database, fixture) == (
        "Active",
        {"simulate": "Active", "reconstruct": "Paused", "replicate": "Active"},
    )


async def test_start_without_a_member_in_the_scout_does_not_scout(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(
        database, initial={"simulate": "Paused", "reconstruct": "Stopped"}
    )
    await stubs["owner"].StartWorkgraph(pb.StartWorkgraphRequest(workgraph_id=fixture.wid))
    assert await statuses(database, fixture) == (
        "Active",
        {"simulate": "Paused", "reconstruct": "Active", "replicate": "Active"},
    )


async def test_a_member_that_cannot_follow_blocks_the_whole_transition(
    database: Database, stubs: dict[str, Stub]
) -> None:
    """The workgraph may be cancelled from Active, but a member that is (wrongly) Completed
    cannot follow it: nothing moves, the workgraph included."""
    fixture = await build_workgraph(
        database,
        status="Active",
        members={"simulate": "Active", "reconstruct": "Completed", "replicate": "Active"},
    )
    before = await snapshot(database, fixture)
    with pytest.raises(FailedPrecondition) as refused:
        await stubs["operator"].CancelWorkgraph(pb.CancelWorkgraphRequest(workgraph_id=fixture.wid))
    assert refused.value.current_state == "Active"
    assert "reconstruct" in str(refused.value)
    assert await snapshot(database, fixture) == before


async def test_return_to_active_can_clear_the_bookmarks(
    database: Database, stubs: dict[str, Stub], execution: ExecutionDouble
) -> None:
    fixture = await build_workgraph(
        database,
        status="Finalizing",
        members=MEMBERS_UNDER["Finalizing"],
        feeders_enabled=False,
        halted=True,
    )
    calls = len(execution.calls)
    reply = await stubs["operator"].ReturnToActive(
        pb.ReturnToActiveRequest(workgraph_id=fixture.wid, clear_bookmarks=True)
    )
    assert not reply.workgraph.halted
    rows = await member_rows(database, fixture)
    assert {(r.Status, r.FeederEnabled) for r in rows.values()} == {("Active", True)}
    # The bookmarks are execution's: it is asked to forget them, before the switches go on.
    assert execution.calls[calls:] == [("reset_feeders", tuple(sorted(fixture.ids.values())), True)]


async def test_return_to_active_keeps_bookmarks_unless_asked(
    database: Database, stubs: dict[str, Stub], execution: ExecutionDouble
) -> None:
    fixture = await build_workgraph(
        database, status="Finalizing", members=MEMBERS_UNDER["Finalizing"], feeders_enabled=False
    )
    calls = len(execution.calls)
    await stubs["operator"].ReturnToActive(pb.ReturnToActiveRequest(workgraph_id=fixture.wid))
    rows = await member_rows(database, fixture)
    assert {r.FeederEnabled for r in rows.values()} == {False}
    assert execution.calls[calls:] == []  # execution keeps its bookmarks


async def test_extend_scout_sets_new_feeder_arguments(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Approving", members=HELD)
    args = {"target_events": 1000, "events_per_seed": 10, "scouting_events": 300}
    bad = {"target_events": 1000, "events_per_seed": 10}  # no scouting sample
    before = await snapshot(database, fixture)
    with pytest.raises(InvalidArgument) as refused:
        await stubs["operator"].ExtendScout(
            pb.ExtendScoutRequest(
                workgraph_id=fixture.wid,
                feeder_args_json={fixture.tid("simulate"): _json(bad)},
            )
        )
    assert refused.value.violations[0].field.startswith(
        f"feeder_args_json[{fixture.tid('simulate')}]"
    )
    assert await snapshot(database, fixture) == before
    await stubs["operator"].ExtendScout(
        pb.ExtendScoutRequest(
            workgraph_id=fixture.wid, feeder_args_json={fixture.tid("simulate"): _json(args)}
        )
    )
    assert (await member_rows(database, fixture))["simulate"].FeederArgs == args


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


# -- members --------------------------------------------------------------------------------------

MEMBER_STATES = (
    "New",
    "Active",
    "Paused",
    "Finalizing",
    "FinalizingBlocked",
    "Finalized",
    "Completed",
    "Archiving",
    "ArchivingBlocked",
    "Archived",
    "Cancelling",
    "CancellingBlocked",
    "Cancelled",
)
# The workgraph state a member state is found under.
WORKGRAPH_OF = {
    "New": "New",
    "Active": "Active",
    "Paused": "Active",
    "Finalizing": "Finalizing",
    "FinalizingBlocked": "Finalizing",
    "Finalized": "Finalizing",
    "Completed": "Completed",
    "Archiving": "Archiving",
    "ArchivingBlocked": "Archiving",
    "Archived": "Archiving",
    "Cancelling": "Cancelling",
    "CancellingBlocked": "Cancelling",
    "Cancelled": "Cancelling",
}
MEMBER_EXPECTED = {"pause": {"Active": "Paused"}, "resume": {"Paused": "Active"}}


@pytest.mark.parametrize("state", MEMBER_STATES)
@pytest.mark.parametrize("command", sorted(MEMBER_EXPECTED))
async def test_member_command_from_every_state(
    database: Database, stubs: dict[str, Stub], command: str, state: str
) -> None:
    workgraph = WORKGRAPH_OF[state]
    fixture = await build_workgraph(
        database, status=workgraph, members={**MEMBERS_UNDER[workgraph], "simulate": state}
    )
    before = await snapshot(database, fixture)
    request = {"transformation_id": fixture.tid("simulate"), "reason": "test"}
    call = (
        stubs["owner"].PauseTransformation(pb.PauseTransformationRequest(**request))
        if command == "pause"
        else stubs["owner"].ResumeTransformation(pb.ResumeTransformationRequest(**request))
    )
    target = MEMBER_EXPECTED[command].get(state)
    if target is None:
        with pytest.raises(FailedPrecondition) as refused:
            await call
        assert refused.value.current_state == state
        assert await snapshot(database, fixture) == before
        return
    reply = await call
    assert reply.transformation.step == "simulate"
    workgraph_status, members = await statuses(database, fixture)
    assert (workgraph_status, members["simulate"]) == (workgraph, target)
    _, member_log = await log_rows(database, fixture)
    added = new_rows(before["transformation_log"], member_log)
    event = {"pause": "PauseTransformation", "resume": "ResumeTransformation"}[command]
    assert [
        (bytes(r.TransformationID), r.EventType, r.OldStatus, r.NewStatus, r.Author) for r in added
    ] == [
        (fixture.ids["simulate"], "StateChange", state, target, "ursula"),
        (fixture.ids["simulate"], event, None, None, "ursula"),
    ]


async def test_a_member_cannot_be_paused_while_its_workgraph_is_new(
    database: Database, stubs: dict[str, Stub]
) -> None:
    """New → Paused is a workgraph-start edge: a member cannot take it by operator."""
    fixture = await build_workgraph(database)
    with pytest.raises(FailedPrecondition) as refused:
        await stubs["operator"].TransitionTransformation(
            pb.TransitionTransformationRequest(
                transformation_id=fixture.tid("simulate"),
                target=common_pb2.TRANSFORMATION_STATUS_PAUSED,
            )
        )
    assert refused.value.current_state == "New"


async def test_a_member_cannot_leave_a_blocked_state_while_an_action_is_failed(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(
        database,
        status="Finalizing",
        members=MEMBERS_UNDER["Finalizing"],
        results={"reconstruct/Finalizing/1": "Failed"},
    )
    request = pb.TransitionTransformationRequest(
        transformation_id=fixture.tid("reconstruct"),
        target=common_pb2.TRANSFORMATION_STATUS_FINALIZING,
    )
    with pytest.raises(FailedPrecondition) as refused:
        await stubs["operator"].TransitionTransformation(request)
    assert refused.value.current_state == "FinalizingBlocked"
    await stubs["operator"].ResetAction(
        pb.ResetActionRequest(action_id=fixture.actions["reconstruct/Finalizing/1"])
    )
    # Resetting the only failed action already unblocked it.
    assert (await statuses(database, fixture))[1]["reconstruct"] == "Finalizing"


@pytest.mark.parametrize(
    ("start", "target", "allowed"),
    [
        ("New", "Active", True),
        ("New", "Paused", True),
        ("Active", "Cancelling", True),
        ("Finalized", "Active", True),
        ("New", "Finalized", False),
        ("Cancelled", "Active", False),
    ],
)
async def test_a_standalone_transformation_takes_workgraph_edges_itself(
    database: Database, stubs: dict[str, Stub], start: str, target: str, allowed: bool
) -> None:
    tid = await build_standalone(database, status=start)
    request = pb.TransitionTransformationRequest(
        transformation_id=id_to_str(tid),
        target=common_pb2.TransformationStatus.Value("TRANSFORMATION_STATUS_" + target.upper()),
    )
    if not allowed:
        with pytest.raises(FailedPrecondition) as refused:
            await stubs["owner"].TransitionTransformation(request)
        assert refused.value.current_state == start
        return
    reply = await stubs["owner"].TransitionTransformation(request)
    assert reply.transformation.status == request.target
    assert reply.transformation.workgraph_id == ""


# -- feeders and flush ----------------------------------------------------------------------------


async def test_set_feeder_disables_enables_and_changes_arguments(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Active", members=MEMBERS_UNDER["Active"])
    tid = fixture.tid("simulate")
    reply = await stubs["owner"].SetFeeder(
        pb.SetFeederRequest(transformation_id=tid, enabled=False)
    )
    assert not reply.transformation.feeder_enabled
    args = {"target_events": 5000, "events_per_seed": 50}
    reply = await stubs["owner"].SetFeeder(
        pb.SetFeederRequest(transformation_id=tid, enabled=True, feeder_args_json=_json(args))
    )
    assert reply.transformation.feeder_enabled
    assert (await member_rows(database, fixture))["simulate"].FeederArgs == args
    _, member_log = await log_rows(database, fixture)
    assert [r.EventType for r in member_log] == [
        "FeederDisabled",
        "SetFeeder",
        "FeederArgs",
        "FeederEnabled",
        "SetFeeder",
    ]


async def test_set_feeder_refuses_bad_arguments_with_their_field(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Scouting", members=HELD)
    before = await snapshot(database, fixture)
    # Valid after the scout, but the workgraph is scouting: the sample is missing.
    with pytest.raises(InvalidArgument) as refused:
        await stubs["owner"].SetFeeder(
            pb.SetFeederRequest(
                transformation_id=fixture.tid("simulate"),
                feeder_args_json=_json({"target_events": 10, "events_per_seed": 0}),
            )
        )
    fields = {v.field for v in refused.value.violations}
    assert "feeder_args_json.events_per_seed" in fields
    assert await snapshot(database, fixture) == before


@pytest.mark.parametrize(
    ("status", "members", "halted", "current"),
    [
        ("Finalizing", MEMBERS_UNDER["Finalizing"], False, "Finalized"),
        ("Active", MEMBERS_UNDER["Active"], True, "Active"),
    ],
)
async def test_set_feeder_is_refused_when_the_feeder_cannot_run(
    database: Database,
    stubs: dict[str, Stub],
    status: str,
    members: dict[str, str],
    halted: bool,
    current: str,
) -> None:
    fixture = await build_workgraph(
        database, status=status, members=members, halted=halted, feeders_enabled=False
    )
    before = await snapshot(database, fixture)
    with pytest.raises(FailedPrecondition) as refused:
        await stubs["owner"].SetFeeder(
            pb.SetFeederRequest(transformation_id=fixture.tid("simulate"), enabled=True)
        )
    assert refused.value.current_state == current
    assert await snapshot(database, fixture) == before


async def test_flush_is_forwarded_for_an_active_transformation_only(
    database: Database, stubs: dict[str, Stub], execution: ExecutionDouble
) -> None:
    fixture = await build_workgraph(database, status="Active", members=MEMBERS_UNDER["Active"])
    calls = len(execution.calls)
    await stubs["owner"].FlushTransformation(
        pb.FlushTransformationRequest(transformation_id=fixture.tid("simulate"), request_id="f1")
    )
    assert execution.calls[calls:] == [("flush", fixture.ids["simulate"], "f1")]
    assert execution.tokens[-1]  # the caller's own token is forwarded
    # What the packer did comes back to the caller, its failure included (words and class).
    execution.flushed = Flushed(
        offered=3,
        parcels=1,
        assigned=2,
        failure="packer 'X' (x) raised OSError: disk full",
        failure_class="PluginFailed",
    )
    reply = await stubs["owner"].FlushTransformation(
        pb.FlushTransformationRequest(transformation_id=fixture.tid("simulate"), request_id="f2")
    )
    assert (reply.inputs_offered, reply.parcels_created, reply.inputs_assigned) == (3, 1, 2)
    assert (reply.failure, reply.failure_class) == (
        "packer 'X' (x) raised OSError: disk full",
        "PluginFailed",
    )
    calls += 1
    with pytest.raises(FailedPrecondition) as refused:
        await stubs["owner"].FlushTransformation(
            pb.FlushTransformationRequest(transformation_id=fixture.tid("reconstruct"))
        )
    assert refused.value.current_state == "Paused"
    assert len(execution.calls) == calls + 1


# -- actions -------------------------------------------------------------------------------------


async def test_operator_forces_a_failed_check_and_the_workgraph_unblocks(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(
        database,
        status="ApprovingBlocked",
        members=HELD,
        results={"workgraph/Approving/1": "Failed", "workgraph/Approving/2": "Passed"},
    )
    reply = await stubs["operator"].ForceAction(
        pb.ForceActionRequest(
            action_id=fixture.actions["workgraph/Approving/1"],
            result=common_pb2.ACTION_RESULT_PASSED,
            message="looked at the failures: site problem",
        )
    )
    assert (reply.action.result, reply.action.author) == (common_pb2.ACTION_RESULT_PASSED, "olivia")
    assert await statuses(database, fixture) == ("Approving", HELD)
    results = await action_results(database, fixture)
    # Leaving the blocked state does not reset the list: the runner continues after them.
    assert results["workgraph/Approving/2"] == ("Passed", None)
    workgraph_log, _ = await log_rows(database, fixture)
    assert [(r.EventType, r.OldStatus, r.NewStatus) for r in workgraph_log] == [
        ("StateChange", "ApprovingBlocked", "Approving"),
        ("ForceAction", None, None),
    ]


async def test_a_plain_user_cannot_force_an_approving_action(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(
        database,
        status="ApprovingBlocked",
        members=HELD,
        results={"workgraph/Approving/1": "Failed"},
    )
    before = await snapshot(database, fixture)
    for action in ("workgraph/Approving/1", "workgraph/Approving/2"):
        with pytest.raises(PermissionDenied):
            await stubs["owner"].ForceAction(
                pb.ForceActionRequest(
                    action_id=fixture.actions[action], result=common_pb2.ACTION_RESULT_PASSED
                )
            )
    assert await snapshot(database, fixture) == before


async def test_the_role_a_sign_off_names_may_force_it_and_nothing_else(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(
        database,
        status="ApprovingBlocked",
        members=HELD,
        results={"workgraph/Approving/1": "Passed", "workgraph/Approving/2": "Failed"},
    )
    with pytest.raises(PermissionDenied):
        await stubs["manager"].ForceAction(
            pb.ForceActionRequest(
                action_id=fixture.actions["workgraph/Approving/1"],
                result=common_pb2.ACTION_RESULT_FAILED,
            )
        )
    await stubs["manager"].ForceAction(
        pb.ForceActionRequest(
            action_id=fixture.actions["workgraph/Approving/2"],
            result=common_pb2.ACTION_RESULT_PASSED,
        )
    )
    results = await action_results(database, fixture)
    assert results["workgraph/Approving/2"] == ("Passed", "mona")
    assert (await statuses(database, fixture))[0] == "Approving"


async def test_force_checks_the_result_and_the_running_list(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Active", members=MEMBERS_UNDER["Active"])
    before = await snapshot(database, fixture)
    with pytest.raises(InvalidArgument) as refused:
        await stubs["operator"].ForceAction(
            pb.ForceActionRequest(
                action_id=fixture.actions["simulate/Archiving/1"],
                result=common_pb2.ACTION_RESULT_PASSED,  # housekeeping is Done, not Passed
            )
        )
    assert refused.value.violations[0].field == "result"
    with pytest.raises(FailedPrecondition) as not_running:
        await stubs["operator"].ForceAction(
            pb.ForceActionRequest(
                action_id=fixture.actions["simulate/Finalizing/1"],
                result=common_pb2.ACTION_RESULT_PASSED,
            )
        )
    assert not_running.value.current_state == "Active"
    assert await snapshot(database, fixture) == before


async def test_force_authorises_before_it_looks_at_the_result(
    database: Database, stubs: dict[str, Stub]
) -> None:
    """A caller who may not steer the action learns nothing of its kind from a wrong result:
    the same refusal as for a right one, and for another VO the same as for no action."""
    fixture = await build_workgraph(database, status="Active", members=MEMBERS_UNDER["Active"])
    housekeeping = fixture.actions["simulate/Archiving/1"]
    for result in (common_pb2.ACTION_RESULT_PASSED, common_pb2.ACTION_RESULT_DONE):
        with pytest.raises(PermissionDenied):
            await stubs["colleague"].ForceAction(
                pb.ForceActionRequest(action_id=housekeeping, result=result)
            )
    answers = []
    for action_id in (housekeeping, 10**15):
        with pytest.raises(NotFound) as hidden:
            await stubs["outsider"].ForceAction(
                pb.ForceActionRequest(action_id=action_id, result=common_pb2.ACTION_RESULT_PASSED)
            )
        answers.append(str(hidden.value).replace(str(action_id), "N"))
    assert answers[0] == answers[1]


async def test_reset_clears_a_result_and_records_who(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(
        database,
        status="Finalizing",
        members=MEMBERS_UNDER["Finalizing"],
        results={"replicate/Finalizing/1": "Pending"},
    )
    reply = await stubs["owner"].ResetAction(
        pb.ResetActionRequest(action_id=fixture.actions["replicate/Finalizing/1"], reason="again")
    )
    assert reply.action.result == common_pb2.ACTION_RESULT_UNSPECIFIED
    assert (await action_results(database, fixture))["replicate/Finalizing/1"] == (None, "ursula")


def changed_before_the_read(
    monkeypatch: pytest.MonkeyPatch,
    database: Database,
    reader: str,
    key: sa.Column[Any],
    **values: Any,
) -> None:
    """Make `queries.<reader>` first commit `values` to the row it reads (its `key` the id read):
    what another component may commit between a command's commit and the reply's read-back."""
    read_back = getattr(queries, reader)

    async def after_the_change(db: Database, viewer: Any, wanted: Any) -> Any:
        async with database.transaction(Isolation.READ_COMMITTED) as conn:
            await conn.execute(sa.update(key.table).where(key == wanted).values(**values))
        return await read_back(db, viewer, wanted)

    monkeypatch.setattr(queries, reader, after_the_change)


async def test_reset_answers_what_it_did_though_the_action_ran_again_meanwhile(
    database: Database, stubs: dict[str, Stub], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lifecycle may run a reset action again, and fail it again, before the reply reads it
    back: the reply still says what the reset did (no result: it runs again)."""
    fixture = await build_workgraph(
        database,
        status="Finalizing",
        members=MEMBERS_UNDER["Finalizing"],
        results={"replicate/Finalizing/1": "Pending"},
    )
    action_id = fixture.actions["replicate/Finalizing/1"]
    changed_before_the_read(
        monkeypatch, database, "get_action", schema.actions.c.ActionID, Result="Failed"
    )
    reply = await stubs["owner"].ResetAction(pb.ResetActionRequest(action_id=action_id))
    assert reply.action.result == common_pb2.ACTION_RESULT_UNSPECIFIED
    assert (await action_results(database, fixture))["replicate/Finalizing/1"][0] == "Failed"


async def test_resume_answers_what_it_left_though_the_feeder_turned_off_meanwhile(
    database: Database, stubs: dict[str, Stub], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resumed member's feeder may reach its target and turn itself off before the reply reads
    the member back: the reply still says what the resume left (Active, the feeder on)."""
    fixture = await build_workgraph(
        database, status="Active", members={**MEMBERS_UNDER["Active"], "simulate": "Paused"}
    )
    changed_before_the_read(
        monkeypatch,
        database,
        "get_transformation",
        schema.transformations.c.TransformationID,
        FeederEnabled=False,
    )
    reply = await stubs["owner"].ResumeTransformation(
        pb.ResumeTransformationRequest(transformation_id=fixture.tid("simulate"))
    )
    assert reply.transformation.feeder_enabled
    assert reply.transformation.status == common_pb2.TRANSFORMATION_STATUS_ACTIVE
    assert not (await member_rows(database, fixture))["simulate"].FeederEnabled


@pytest.mark.parametrize("command", list(EXPECTED))
async def test_a_workgraph_command_answers_the_status_it_left_though_it_moved_on_meanwhile(
    database: Database, stubs: dict[str, Stub], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """The lifecycle may move a workgraph on between a command's commit and the reply's read
    (a drained one with nothing in flight to Finalizing): the reply says what the command left."""
    source, (target, _) = next(iter(EXPECTED[command].items()))
    fixture = await build_workgraph(database, status=source, members=MEMBERS_UNDER[source])
    moved_on = "Completed" if target != "Completed" else "Archiving"
    changed_before_the_read(
        monkeypatch, database, "get_workgraph", schema.workgraphs.c.WorkgraphID, Status=moved_on
    )
    reply = await run_command(stubs["operator"], command, fixture)
    assert reply.workgraph.status == common_pb2.WorkgraphStatus.Value(
        "WORKGRAPH_STATUS_" + {"ApprovingBlocked": "APPROVING_BLOCKED"}.get(target, target.upper())
    )
    assert (await statuses(database, fixture))[0] == moved_on


# -- rights ---------------------------------------------------------------------------------------


async def test_another_vo_can_neither_see_nor_steer(
    database: Database, stubs: dict[str, Stub], execution: ExecutionDouble
) -> None:
    fixture = await build_workgraph(database, status="Active", members=MEMBERS_UNDER["Active"])
    outsider = stubs["outsider"]
    before = await snapshot(database, fixture)
    calls = len(execution.calls)
    tid = fixture.tid("simulate")
    attempts = [
        outsider.GetWorkgraph(pb.GetWorkgraphRequest(workgraph_id=fixture.wid)),
        outsider.GetTransformation(pb.GetTransformationRequest(transformation_id=tid)),
        outsider.CancelWorkgraph(pb.CancelWorkgraphRequest(workgraph_id=fixture.wid)),
        outsider.HaltWorkgraph(pb.HaltWorkgraphRequest(workgraph_id=fixture.wid)),
        outsider.PauseTransformation(pb.PauseTransformationRequest(transformation_id=tid)),
        outsider.SetFeeder(pb.SetFeederRequest(transformation_id=tid, enabled=False)),
        outsider.FlushTransformation(pb.FlushTransformationRequest(transformation_id=tid)),
        outsider.ResetAction(
            pb.ResetActionRequest(action_id=fixture.actions["simulate/Finalizing/1"])
        ),
        outsider.UpdateAnnotations(
            pb.UpdateAnnotationsRequest(workgraph_id=fixture.wid, merge_patch_json='{"a": "b"}')
        ),
    ]
    for attempt in attempts:
        with pytest.raises(NotFound):
            await attempt
    listed = await outsider.ListWorkgraphs(pb.ListWorkgraphsRequest())
    assert fixture.wid not in {w.workgraph_id for w in listed.workgraphs}
    assert await snapshot(database, fixture) == before
    assert len(execution.calls) == calls


async def test_a_plain_user_steers_only_its_own(database: Database, stubs: dict[str, Stub]) -> None:
    fixture = await build_workgraph(database)
    before = await snapshot(database, fixture)
    seen = await stubs["colleague"].GetWorkgraph(pb.GetWorkgraphRequest(workgraph_id=fixture.wid))
    assert seen.workgraph.owner_sub == "ursula"
    with pytest.raises(PermissionDenied):
        await stubs["colleague"].StartWorkgraph(pb.StartWorkgraphRequest(workgraph_id=fixture.wid))
    with pytest.raises(PermissionDenied):
        await stubs["colleague"].SetFeeder(
            pb.SetFeederRequest(transformation_id=fixture.tid("simulate"), enabled=False)
        )
    assert await snapshot(database, fixture) == before
    await stubs["owner"].StartWorkgraph(pb.StartWorkgraphRequest(workgraph_id=fixture.wid))
    assert (await statuses(database, fixture))[0] == "Scouting"


async def test_a_retried_command_is_answered_without_being_applied_twice(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database)
    request = pb.StartWorkgraphRequest(workgraph_id=fixture.wid, request_id="start-once")
    first = await stubs["owner"].StartWorkgraph(request)
    applied = await snapshot(database, fixture)
    again = await stubs["owner"].StartWorkgraph(request)
    assert again.workgraph.status == first.workgraph.status
    assert await snapshot(database, fixture) == applied
    with pytest.raises(FailedPrecondition):  # another request is another start
        await stubs["owner"].StartWorkgraph(
            pb.StartWorkgraphRequest(workgraph_id=fixture.wid, request_id="start-twice")
        )


# -- concurrency ----------------------------------------------------------------------------------


async def test_concurrent_starts_apply_exactly_once(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database)
    outcomes = await asyncio.gather(
        *(
            stubs["operator"].StartWorkgraph(
                pb.StartWorkgraphRequest(workgraph_id=fixture.wid, request_id=f"race-{i}")
            )
            for i in range(6)
        ),
        return_exceptions=True,
    )
    started = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, FailedPrecondition)]
    assert (len(started), len(refused)) == (1, 5)
    assert {r.current_state for r in refused} == {"Scouting"}
    workgraph_log, member_log = await log_rows(database, fixture)
    assert [(r.EventType, r.OldStatus, r.NewStatus) for r in workgraph_log] == [
        ("StateChange", "New", "Scouting"),
        ("StartWorkgraph", None, None),
    ]
    assert len(member_log) == 2  # simulate and reconstruct started, replicate held


async def test_a_pause_racing_a_cancel_leaves_a_consistent_workgraph(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Active", members=MEMBERS_UNDER["Active"])
    pause, cancel = await asyncio.gather(
        stubs["owner"].PauseTransformation(
            pb.PauseTransformationRequest(transformation_id=fixture.tid("simulate"))
        ),
        stubs["operator"].CancelWorkgraph(pb.CancelWorkgraphRequest(workgraph_id=fixture.wid)),
        return_exceptions=True,
    )
    assert not isinstance(cancel, BaseException)
    assert await statuses(database, fixture) == ("Cancelling", _all("Cancelling"))
    _, member_log = await log_rows(database, fixture)
    simulate = [
        (r.OldStatus, r.NewStatus)
        for r in member_log
        if bytes(r.TransformationID) == fixture.ids["simulate"]
    ]
    if isinstance(pause, FailedPrecondition):  # the cancel went first
        assert pause.current_state == "Cancelling"
        assert simulate == [("Active", "Cancelling")]
    else:
        assert simulate == [("Active", "Paused"), (None, None), ("Paused", "Cancelling")]
