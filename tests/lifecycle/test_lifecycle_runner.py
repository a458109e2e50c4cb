"""The action runner and the upstream-first order of the member lists, on SQLite and MariaDB."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from lifecycle_world import (
    OPERATOR,
    Member,
    Rig,
    action_rows,
    build,
    logs,
    rig,
    statuses,
    step,
)

from dxts.core.db import Database, Isolation
from dxts.core.ids import content_hash, id_to_str
from dxts.core.kernel.authorisation import rpc, serving
from dxts.core.plugins import ActionResult
from dxts.core.policy import Policy
from dxts.core.schema.definition import compute_transformations, requirements
from dxts.core.states import ActionResult as Result
from dxts.definition.logic import actions
from dxts.v1.definition_pb2_grpc import DefinitionServiceServicer as Definition

RC = Isolation.READ_COMMITTED


@pytest.fixture(scope="module")
async def engine(
    database: Database, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Rig]:
    built = await rig(database, tmp_path_factory.mktemp("runner"), archive_delay_s=3600.0)
    try:
        yield built
    finally:
        await built.lifecycle.stop()


def results(rows: dict[str, object], *keys: str) -> list[str | None]:
    return [rows[k].Result for k in keys]  # type: ignore[attr-defined]


async def test_the_runner_takes_the_lowest_position_retries_pending_and_blocks_on_failure(
    database: Database, engine: Rig
) -> None:
    world = await build(
        database,
        {
            "solo": Member(
                status="Finalizing", actions={"Finalizing": [step("r1"), step("r2"), step("r3")]}
            )
        },
        status="Finalizing",
    )
    keys = ("solo/Finalizing/1", "solo/Finalizing/2", "solo/Finalizing/3")
    script = engine.script
    script.queue("r2", ActionResult.pending("still cancelling"), ActionResult.passed("now"))
    script.queue("r3", ActionResult.failed("bad output"))
    start = len(script.calls)

    assert (await engine.sweep(world))[1] == {"solo": "Finalizing"}
    rows = await action_rows(database, world)
    assert results(rows, *keys) == ["Passed", "Pending", None]
    assert rows["solo/Finalizing/2"].Message == "still cancelling"
    assert rows["solo/Finalizing/2"].UpdatedAt is not None
    assert rows["solo/Finalizing/2"].Author is None  # the runner, not a person

    # Pending runs again (and only it: r1 has its result); r3 fails and blocks the member.
    assert (await engine.sweep(world))[1] == {"solo": "FinalizingBlocked"}
    rows = await action_rows(database, world)
    assert results(rows, *keys) == ["Passed", "Passed", "Failed"]
    assert rows["solo/Finalizing/3"].Message == "bad output"

    # Blocked: nothing runs until a person acts.
    assert (await engine.sweep(world))[1] == {"solo": "FinalizingBlocked"}
    assert [key for key, _ in script.calls[start:]] == ["r1", "r2", "r2", "r3"]

    # Forcing the failed action brings the member back; the runner continues, finds nothing
    # left and the member is Finalized (and the workgraph Completed).
    with serving(rpc(Definition.ForceAction)):
        await actions.force_action(
            database, OPERATOR, world.actions["solo/Finalizing/3"], Result.PASSED
        )
    assert await engine.sweep(world) == ("Completed", {"solo": "Completed"})
    assert [key for key, _ in script.calls[start:]] == ["r1", "r2", "r2", "r3"]
    _, member_log = await logs(database, world)
    runs = [
        (r.Data["action_id"], r.Data["result"]) for r in member_log if r.EventType == "ActionRun"
    ]
    assert runs == [
        (world.actions["solo/Finalizing/1"], "Passed"),
        (world.actions["solo/Finalizing/2"], "Pending"),
        (world.actions["solo/Finalizing/2"], "Passed"),
        (world.actions["solo/Finalizing/3"], "Failed"),
    ]


async def test_a_reset_action_runs_again(database: Database, engine: Rig) -> None:
    world = await build(
        database,
        {
            "solo": Member(
                status="Finalizing", actions={"Finalizing": [step("again-1"), step("again-2")]}
            )
        },
        status="Finalizing",
    )
    engine.script.queue("again-2", ActionResult.failed("no"))
    assert (await engine.sweep(world))[1] == {"solo": "FinalizingBlocked"}
    # Resetting the only Failed action leaves the blocked state; the action runs again.
    with serving(rpc(Definition.ResetAction)):
        await actions.reset_action(database, OPERATOR, world.actions["solo/Finalizing/2"])
    assert (await statuses(database, world))[1] == {"solo": "Finalizing"}
    start = len(engine.script.calls)
    assert (await engine.sweep(world))[1] == {"solo": "Completed"}
    assert [key for key, _ in engine.script.calls[start:]] == ["again-2"]


async def test_an_action_that_raises_records_nothing(database: Database, engine: Rig) -> None:
    world = await build(
        database,
        {"solo": Member(status="Finalizing", actions={"Finalizing": [step("raises")]})},
        status="Finalizing",
    )
    engine.script.queue("raises", RuntimeError("catalogue down"), RuntimeError("catalogue down"))
    assert (await engine.sweep(world))[1] == {"solo": "Finalizing"}
    assert (await engine.sweep(world))[1] == {"solo": "Finalizing"}
    assert results(await action_rows(database, world), "solo/Finalizing/1") == [None]
    _, member_log = await logs(database, world)
    failures = [r for r in member_log if r.EventType == "PluginFailed"]
    assert len(failures) == 1 and "catalogue down" in failures[0].Message  # once, not per sweep
    # Once it stops raising, the list goes on.
    assert (await engine.sweep(world))[1] == {"solo": "Completed"}


async def template_of(database: Database, transformation_id: bytes) -> dict[str, object]:
    async with database.transaction(RC) as conn:
        row = (
            await conn.execute(
                sa.select(requirements.c.RequirementsID, requirements.c.Requirements)
                .join(
                    compute_transformations,
                    compute_transformations.c.RequirementsTemplateID
                    == requirements.c.RequirementsID,
                )
                .where(compute_transformations.c.TransformationID == transformation_id)
            )
        ).one()
    assert bytes(row.RequirementsID) == content_hash(row.Requirements)
    return dict(row.Requirements)


async def test_an_approving_action_updates_the_members_requirements(
    database: Database, engine: Rig
) -> None:
    world = await build(
        database,
        {
            "sim": Member(),
            "merge": Member(status="New", feeder="Edge", source="sim", initial_state="Stopped"),
            "replicate": Member(kind="Data", status="New", feeder="Edge", source="merge"),
        },
        status="Approving",
        approving=[("ScriptedApproval", {"key": "needs"}), ("ScriptedApproval", {"key": "bad"})],
    )
    engine.script.queue(
        "needs",
        ActionResult.passed(
            "measured", updated_requirements={world.uid("sim"): {"memory_gb": 4, "cores": None}}
        ),
    )
    # The second proposes requirements for a data member: refused, nothing of it recorded.
    engine.script.queue(
        "bad",
        ActionResult.passed(updated_requirements={world.uid("replicate"): {"memory_gb": 1}}),
    )
    assert (await engine.sweep(world))[0] == "Approving"
    assert await template_of(database, world.ids["sim"]) == {"memory_gb": 4}
    assert await template_of(database, world.ids["merge"]) == {"cores": 1}
    rows = await action_rows(database, world)
    assert results(rows, "workgraph/Approving/1", "workgraph/Approving/2") == ["Passed", None]
    workgraph_log, member_log = await logs(database, world)
    (changed,) = [r for r in member_log if r.EventType == "Requirements"]
    assert world.name(bytes(changed.TransformationID)) == "sim"
    (refused,) = [r for r in workgraph_log if r.EventType == "PluginFailed"]
    assert id_to_str(world.ids["replicate"]) in refused.Message
    # Once the action behaves, approval starts the members held until then.
    assert await engine.sweep(world) == (
        "Active",
        {"sim": "Active", "merge": "Active", "replicate": "Active"},
    )


async def test_members_run_their_lists_upstream_first(database: Database, engine: Rig) -> None:
    """a → b → d (d runs after b), c independent: a blocked member holds back everything
    downstream of it while c goes on."""
    world = await build(
        database,
        {
            "a": Member(status="Finalizing", actions={"Finalizing": [step("up-a")]}),
            "b": Member(
                status="Finalizing",
                feeder="Edge",
                source="a",
                actions={"Finalizing": [step("up-b")]},
            ),
            "c": Member(status="Finalizing", actions={"Finalizing": [step("up-c")]}),
            "d": Member(status="Finalizing", after=("b",), actions={"Finalizing": [step("up-d")]}),
        },
        status="Finalizing",
    )
    engine.script.queue("up-a", ActionResult.failed("a is wrong"))
    start = len(engine.script.calls)
    assert await engine.sweep(world) == (
        "Finalizing",
        {"a": "FinalizingBlocked", "b": "Finalizing", "c": "Finalized", "d": "Finalizing"},
    )
    assert sorted(engine.script.keys()[start:]) == ["up-a", "up-c"]
    with serving(rpc(Definition.ForceAction)):
        await actions.force_action(
            database, OPERATOR, world.actions["a/Finalizing/1"], Result.PASSED
        )
    start = len(engine.script.calls)
    assert await engine.sweep(world) == (
        "Completed",
        {"a": "Completed", "b": "Completed", "c": "Completed", "d": "Completed"},
    )
    assert engine.script.keys()[start:] == ["up-b", "up-d"]


async def test_independent_members_run_together(database: Database, engine: Rig) -> None:
    """Every member without a dependency runs in the same round: a Pending one does not hold
    back the other."""
    world = await build(
        database,
        {
            "x": Member(status="Archiving", actions={"Archiving": [step("par-x")]}),
            "y": Member(status="Archiving", actions={"Archiving": [step("par-y")]}),
        },
        status="Archiving",
    )
    engine.script.queue("par-x", ActionResult.pending("deleting"))
    assert await engine.sweep(world) == ("Archiving", {"x": "Archiving", "y": "Archived"})
    assert await engine.sweep(world) == ("Archived", {"x": "Archived", "y": "Archived"})


async def test_an_actions_requirements_are_held_to_the_policy(
    database: Database, engine: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an approving action (EstimateResourceUsage's kind) writes into a template cannot
    lift the installation's policy for the workgraph's VO: memory over a `cap` limit is
    lowered to it, and the member's log says so; cores over a `refuse` limit are not applied:
    the action is Failed naming the limit, and the workgraph blocks for a person."""
    policy = Policy.model_validate(
        {
            "vos": {
                "lhcb": {
                    "requirements": {"memory_mb": {"max": 4096, "mode": "cap"}, "cores": {"max": 8}}
                }
            }
        }
    )
    monkeypatch.setattr(engine.lifecycle.engine, "policy", policy)
    world = await build(
        database,
        {"sim": Member()},
        status="Approving",
        approving=[("ScriptedApproval", {"key": "big"}), ("ScriptedApproval", {"key": "huge"})],
    )
    before = await template_of(database, world.ids["sim"])
    engine.script.queue(
        "big", ActionResult.passed(updated_requirements={world.uid("sim"): {"memory_mb": 64000}})
    )
    engine.script.queue(
        "huge", ActionResult.passed(updated_requirements={world.uid("sim"): {"cores": 64}})
    )
    assert (await engine.sweep(world))[0] == "ApprovingBlocked"
    assert await template_of(database, world.ids["sim"]) == {**before, "memory_mb": 4096}
    rows = await action_rows(database, world)
    assert results(rows, "workgraph/Approving/1", "workgraph/Approving/2") == ["Passed", "Failed"]
    assert rows["workgraph/Approving/2"].Message == (
        "ScriptedApproval proposed requirements over the installation's policy: "
        f"{id_to_str(world.ids['sim'])}: cores 64 is over the installation's limit of 8 "
        "(policy.requirements.cores.max)"
    )
    _, member_log = await logs(database, world)
    (changed,) = [r for r in member_log if r.EventType == "Requirements"]
    assert changed.Message.endswith(
        "(lowered to the installation's policy: memory_mb 64000 → 4096)"
    )
    assert changed.Data["capped_by_policy"] == {"memory_mb": 64000}
