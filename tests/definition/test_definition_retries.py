"""Two retries of the same command racing on two "replicas" (two Database pools over one
MariaDB database): the command is applied exactly once and both retries answer the same.

One test per kind of definition command: a workgraph command (start, and a halt, whose
forwarded requests are the same for both), a transformation command (pause), an action's force
and reset. A submission's concurrent retries are in test_definition_idempotency.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from definition_world import HELD, ExecutionDouble, Fixture, build_workgraph
from definition_world import log_rows as read_logs

from dxts.core.db import Database
from dxts.core.identity import Identity
from dxts.core.kernel.authorisation import rpc, serving
from dxts.core.states import ActionResult
from dxts.definition.logic import actions, transformation_commands, workgraph_commands
from dxts.definition.logic.authorise import Caller
from dxts.v1.definition_pb2_grpc import DefinitionServiceServicer as Definition

OPERATOR = Caller(Identity("lhcb", "olivia", frozenset({"operator"})))
# Members of an Active workgraph: two running, one paused by an operator.
ACTIVE = {"simulate": "Active", "reconstruct": "Paused", "replicate": "Active"}


async def race(
    first: Database,
    second: Database,
    answering: Callable[..., object],
    command: Callable[[Database], Awaitable[Any]],
) -> list[Any]:
    """The same command (same request id) on both replicas at once, each answering the RPC
    `answering` (a generated servicer's method) as its call would."""
    with serving(rpc(answering)):
        return list(await asyncio.gather(command(first), command(second)))


def events(rows: list[Any]) -> list[tuple[str, str | None, str | None]]:
    return [(r.EventType, r.OldStatus, r.NewStatus) for r in rows]


async def test_a_racing_retried_start_is_applied_once(mariadb: Database, replica: Database) -> None:
    fixture = await build_workgraph(mariadb)
    key = f"start-{uuid.uuid4()}"
    answers = await race(
        mariadb,
        replica,
        Definition.StartWorkgraph,
        lambda db: workgraph_commands.start(db, OPERATOR, fixture.workgraph_id, request_id=key),
    )
    assert answers[0] == answers[1] == {"status": "Scouting"}
    workgraph_log, member_log = await read_logs(mariadb, fixture)
    assert events(workgraph_log) == [
        ("StateChange", "New", "Scouting"),
        ("StartWorkgraph", None, None),
    ]
    assert len(member_log) == 2  # simulate and reconstruct started once, replicate held


async def test_a_racing_retried_halt_is_applied_once_and_forwards_the_same_requests(
    mariadb: Database, replica: Database
) -> None:
    fixture = await build_workgraph(mariadb, status="Active", members=ACTIVE)
    key = f"halt-{uuid.uuid4()}"
    execution = ExecutionDouble()
    answers = await race(
        mariadb,
        replica,
        Definition.HaltWorkgraph,
        lambda db: workgraph_commands.halt(
            db, OPERATOR, fixture.workgraph_id, execution=execution, request_id=key
        ),
    )
    assert answers[0] == answers[1]
    assert sorted(answers[0]["members"]) == sorted(fixture.tid(name) for name in fixture.ids)
    workgraph_log, member_log = await read_logs(mariadb, fixture)
    assert [r.EventType for r in workgraph_log] == ["HaltWorkgraph"]
    assert sorted(r.EventType for r in member_log) == ["FeederDisabled"] * 3
    forwarded = [(what, tid, request_id) for what, tid, request_id in execution.calls]
    assert len(forwarded) == 2 * 2 * len(fixture.ids)  # cancel and write-off, by each retry
    assert len(set(forwarded)) == 2 * len(fixture.ids)  # the same requests both times


async def test_a_racing_retried_pause_is_applied_once(mariadb: Database, replica: Database) -> None:
    fixture = await build_workgraph(mariadb, status="Active", members=ACTIVE)
    key = f"pause-{uuid.uuid4()}"
    simulate = fixture.ids["simulate"]
    answers = await race(
        mariadb,
        replica,
        Definition.PauseTransformation,
        lambda db: transformation_commands.pause(db, OPERATOR, simulate, request_id=key),
    )
    assert answers[0] == answers[1] == {"status": "Paused", "feeder_enabled": True}
    _, member_log = await read_logs(mariadb, fixture)
    assert events(member_log) == [
        ("StateChange", "Active", "Paused"),
        ("PauseTransformation", None, None),
    ]


async def blocked_approval(database: Database) -> Fixture:
    return await build_workgraph(
        database,
        status="ApprovingBlocked",
        members=HELD,
        results={"workgraph/Approving/1": "Failed", "workgraph/Approving/2": "Passed"},
    )


async def test_a_racing_retried_force_is_applied_once(mariadb: Database, replica: Database) -> None:
    fixture = await blocked_approval(mariadb)
    key = f"force-{uuid.uuid4()}"
    action_id = fixture.actions["workgraph/Approving/1"]
    answers = await race(
        mariadb,
        replica,
        Definition.ForceAction,
        lambda db: actions.force_action(
            db, OPERATOR, action_id, ActionResult.PASSED, message="site problem", request_id=key
        ),
    )
    assert answers[0] == answers[1]
    assert (answers[0]["action_id"], answers[0]["result"]) == (action_id, "Passed")
    workgraph_log, _ = await read_logs(mariadb, fixture)
    assert events(workgraph_log) == [
        ("StateChange", "ApprovingBlocked", "Approving"),
        ("ForceAction", None, None),
    ]


async def test_a_racing_retried_reset_is_applied_once(mariadb: Database, replica: Database) -> None:
    fixture = await blocked_approval(mariadb)
    key = f"reset-{uuid.uuid4()}"
    action_id = fixture.actions["workgraph/Approving/1"]
    answers = await race(
        mariadb,
        replica,
        Definition.ResetAction,
        lambda db: actions.reset_action(db, OPERATOR, action_id, request_id=key),
    )
    assert answers[0] == answers[1]
    assert answers[0]["action_id"] == action_id
    workgraph_log, _ = await read_logs(mariadb, fixture)
    assert events(workgraph_log) == [
        ("StateChange", "ApprovingBlocked", "Approving"),
        ("ResetAction", None, None),
    ]
