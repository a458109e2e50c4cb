"""The installation's policy holds against any document, and its quotas stop a runaway feeder
(issue 33, findings 4 and 5), played from the outside: plain users and operators of several
VOs submit documents and steer through the definition service with their own tokens, on both
databases, over one world whose installation file carries the policy below.

* VO lhcb requires a sign-off (`required_approving`), which no submitter gives to herself
  (`self_sign_off: false`), caps cores (refused) and memory (capped), and allows the partition
  `short` only.
* Every VO may create at most 30 inputs per feeder invocation and have 3 workgraphs not ended
  per user; VO belle instead 50 inputs per member, VO hourly 40 inputs per user per hour.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml
from e2e_world import VO, Submitted, W, World, bundle, running, seeds, step, workgraph

from dxts.cli.inspect import member_reasons
from dxts.cli.workgraphs import MemberView, WorkgraphView
from dxts.core.config import CONFIG_FILE_VARIABLE
from dxts.core.db import Database, Isolation
from dxts.core.errors import FailedPrecondition, InvalidArgument, PermissionDenied
from dxts.core.grpc import DevKeys, channel
from dxts.core.grpc.convert import enum_to_proto
from dxts.core.ids import id_from_str
from dxts.core.schema import definition
from dxts.core.schema.execution import feeder_states, inputs
from dxts.core.states import ActionResult
from dxts.v1 import definition_pb2, definition_pb2_grpc

POLICY = {
    "quotas": {"inputs_per_invocation": 30, "active_workgraphs_per_user": 3},
    "vos": {
        VO: {
            "required_approving": [{"action": "ManualApproval"}],
            "self_sign_off": False,
            "requirements": {
                "cores": {"max": 8},
                "memory_mb": {"max": 4096, "mode": "cap"},
                "partitions": ["short"],
            },
        },
        "belle": {"quotas": {"inputs_per_invocation": None, "inputs_per_member": 50}},
        "hourly": {"quotas": {"inputs_per_invocation": None, "inputs_per_user_hour": 40}},
    },
}
SETTLED = {"min_sample": 2, "min_success_rate": 0.5}
BOMB = {"target_events": 10**18}  # Seeds with no batch: one invocation would never end


@pytest.fixture(scope="module")
async def world(
    database: Database, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[World]:
    directory: Path = tmp_path_factory.mktemp("policy")
    config = directory / "dxts.yaml"
    config.write_text(yaml.safe_dump({"policy": POLICY}))
    before = os.environ.get(CONFIG_FILE_VARIABLE)
    os.environ[CONFIG_FILE_VARIABLE] = str(config)  # what every component reads, as deployed
    try:
        async with running(database, directory) as started:
            yield started
    finally:
        if before is None:
            del os.environ[CONFIG_FILE_VARIABLE]
        else:
            os.environ[CONFIG_FILE_VARIABLE] = before


@asynccontextmanager
async def person(world: World, vo: str, sub: str, *roles: str) -> AsyncIterator[Any]:
    """A DefinitionService client with the token of `sub` of `vo` holding `roles`."""
    token = DevKeys.load_or_create(world.data_dir).issue(vo, sub, roles)
    async with channel(world.stack.address("definition"), token=token) as opened:
        yield definition_pb2_grpc.DefinitionServiceStub(opened)  # type: ignore[no-untyped-call]


async def submit(client: Any, document: dict[str, Any], *, start: bool = True) -> Submitted:
    reply = await client.SubmitWorkgraph(
        definition_pb2.SubmitWorkgraphRequest(request_id=str(uuid.uuid4()), bundle=bundle(document))
    )
    if start:
        await client.StartWorkgraph(
            definition_pb2.StartWorkgraphRequest(
                request_id=str(uuid.uuid4()), workgraph_id=reply.workgraph_id, reason="go"
            )
        )
    got = await client.GetWorkgraph(
        definition_pb2.GetWorkgraphRequest(workgraph_id=reply.workgraph_id)
    )
    return Submitted(reply.workgraph_id, {m.step: m.transformation_id for m in got.members}, {})


async def force(client: Any, action_id: int) -> None:
    await client.ForceAction(
        definition_pb2.ForceActionRequest(
            request_id=str(uuid.uuid4()),
            action_id=action_id,
            result=enum_to_proto(ActionResult.PASSED),  # type: ignore[arg-type]
            message="signed off",
        )
    )


def simulation(events: int | None = None, **hint: Any) -> dict[str, Any]:
    """One Seeds-fed step; `events` None: the bomb."""
    fed = seeds(events, scouting_events=2) if events else seeds(1, **BOMB)
    return workgraph({"seeds": fed}, {"Sim": step("seeds", **hint)}, {"sims": "Sim/out"})


def one_violation(error: InvalidArgument) -> tuple[str, str]:
    (violation,) = error.violations
    return violation.field, violation.description


# -- findings 4: what a document cannot change --------------------------------------------------


async def test_an_empty_approving_list_still_needs_the_installations_sign_off(
    world: World,
) -> None:
    document = simulation(4)
    document["hints"]["dirac:Workgraph"] |= {
        "approving": [],
        "hooks": {"ScoutingToApproving": {"hook": "ScoutUntilSettled", "args": SETTLED}},
    }
    async with (
        person(world, VO, "ursula", "user") as ursula,
        person(world, VO, "oscar", "operator") as oscar,
    ):
        hers = await submit(ursula, document)
        his = await submit(oscar, document)
        for wg in (hers, his):
            assert (await world.statuses(wg))[0] == W.SCOUTING  # not Active: a scout first
        for wg in (hers, his):
            await world.reach(wg, W.APPROVING_BLOCKED)
        sign_offs = [(await world.actions(wg))["workgraph/Approving/1"] for wg in (hers, his)]
        assert [a.Action for a in sign_offs] == ["ManualApproval"] * 2
        # A plain user cannot approve her own scout, nor an operator his own here.
        with pytest.raises(PermissionDenied):
            await force(ursula, sign_offs[0].ActionID)
        with pytest.raises(PermissionDenied, match=r"policy\.self_sign_off"):
            await force(oscar, sign_offs[1].ActionID)
        await force(oscar, sign_offs[0].ActionID)  # another operator of the VO signs off
        await force(world.definition, sign_offs[1].ActionID)
        for wg in (hers, his):
            await world.reach(wg, W.ACTIVE, W.FINALIZING, W.COMPLETED)


async def test_a_plain_users_role_cannot_be_the_sign_off(world: World) -> None:
    document = simulation(4)
    document["hints"]["dirac:Workgraph"]["approving"] = [
        {"action": "ManualApproval", "args": {"role": "user"}}
    ]
    async with person(world, VO, "ulla", "user") as ulla:
        with pytest.raises(InvalidArgument) as refused:
            await submit(ulla, document, start=False)
    field, description = one_violation(refused.value)
    assert field == "hints.dirac:Workgraph.approving[0].args.role"
    assert description.startswith("policy: ") and "'user' role" in description


@pytest.mark.parametrize(
    ("asked", "limit"),
    [
        ({"cores": 100_000}, "cores 100000 is over the installation's limit of 8"),
        ({"partition": "admin-only"}, "admin-only not allowed: the installation allows the"),
    ],
)
async def test_requirements_over_the_installations_limits_are_refused(
    world: World, asked: dict[str, Any], limit: str
) -> None:
    async with person(world, VO, "uma", "user") as uma:
        with pytest.raises(InvalidArgument) as refused:
            await submit(uma, simulation(4, requirements_template=asked), start=False)
    field, description = one_violation(refused.value)
    (key,) = asked
    assert field == f"steps.Sim.hints.dirac:Transformation.requirements_template.{key}"
    assert limit in description and "(policy.requirements." in description


async def test_memory_over_a_cap_in_cap_mode_is_lowered_to_it(world: World) -> None:
    asked = {"memory_mb": 10**9, "cores": 2, "partition": "short"}
    async with person(world, VO, "ute", "user") as ute:
        wg = await submit(ute, simulation(4, requirements_template=asked), start=False)
    compute, stored = definition.compute_transformations.c, definition.requirements.c
    async with world.database.transaction(Isolation.READ_COMMITTED) as conn:
        template = await conn.scalar(  # what the dispatcher sends the backend
            sa.select(stored.Requirements)
            .join_from(
                definition.compute_transformations,
                definition.requirements,
                stored.RequirementsID == compute.RequirementsTemplateID,
            )
            .where(compute.TransformationID == id_from_str(wg.members["Sim"]))
        )
    assert template == {"memory_mb": 4096, "cores": 2, "partition": "short"}


# -- finding 5: quotas ------------------------------------------------------------------------


async def count_inputs(world: World, wg: Submitted) -> int:
    async with world.database.transaction(Isolation.READ_COMMITTED) as conn:
        found = await conn.scalar(
            sa.select(sa.func.count())
            .select_from(inputs)
            .where(inputs.c.TransformationID == id_from_str(wg.members["Sim"]))
        )
    return int(found or 0)


async def held_reason(world: World, client: Any, wg: Submitted) -> str | None:
    """Why a quota holds the member's feeder, as the owner reads it (GetDrainStatus, the
    contract `dxts why` reads): None when nothing does."""
    status = await client.GetDrainStatus(
        definition_pb2.GetDrainStatusRequest(workgraph_id=wg.workgraph_id)
    )
    (member,) = status.members
    held = [r.message for r in member.reasons if r.kind == "feeder" and r.state == "Held"]
    return held[0] if held else None


async def why(client: Any, wg: Submitted) -> list[str]:
    """What `dxts why` prints of the workgraph's one member, from what the owner reads."""
    got = await client.GetWorkgraph(
        definition_pb2.GetWorkgraphRequest(workgraph_id=wg.workgraph_id)
    )
    status = await client.GetDrainStatus(
        definition_pb2.GetDrainStatusRequest(workgraph_id=wg.workgraph_id)
    )
    (transformation,), (drain,) = got.members, status.members
    member = MemberView(transformation, drain.status, {}, {}, holding=list(drain.reasons))
    return member_reasons(WorkgraphView(got.workgraph, [member], []), member)


async def until_held(world: World, client: Any, wg: Submitted) -> str:
    async def check() -> str | None:
        return await held_reason(world, client, wg)

    return await world.until("the feeder held by a quota", check, wg)


@pytest.mark.parametrize(
    ("vo", "limit", "named"),
    [("gridpp", 30, "inputs_per_invocation"), ("belle", 50, "inputs_per_member")],
)
async def test_a_seeds_bomb_stops_at_the_limit_with_its_member_held(
    world: World, vo: str, limit: int, named: str
) -> None:
    async with person(world, vo, "bomber", "user") as bomber:
        wg = await submit(bomber, simulation())
        reason = await until_held(world, bomber, wg)
        assert f"limit of {limit} inputs" in reason and named in reason
        assert await count_inputs(world, wg) == limit
        assert f"  its feeder Seeds is {reason}" in await why(bomber, wg)
    async with world.database.transaction(Isolation.READ_COMMITTED) as conn:
        stored = await conn.scalar(
            sa.select(feeder_states.c.HeldReason).where(
                feeder_states.c.TransformationID == id_from_str(wg.members["Sim"])
            )
        )
    assert stored == reason
    # Enabling the feeder again releases it, and the quota holds it again at the next limit:
    # the member's total when that is the limit, another invocation's worth otherwise.
    async with person(world, vo, "bomber", "user") as bomber:
        await bomber.SetFeeder(
            definition_pb2.SetFeederRequest(
                request_id=str(uuid.uuid4()), transformation_id=wg.members["Sim"], enabled=True
            )
        )
        total = limit if named == "inputs_per_member" else 2 * limit
        await world.until(f"{total} inputs", lambda: _has(world, wg, total), wg)
        await until_held(world, bomber, wg)
        assert await count_inputs(world, wg) == total
    # The installation goes on: another VO's user feeds and is not held.
    async with person(world, "other", "olga", "user") as olga:
        calm = await submit(olga, simulation(5))
        await world.until("olga's 5 inputs", lambda: _has(world, calm, 5), calm)
        assert await held_reason(world, olga, calm) is None


async def _has(world: World, wg: Submitted, count: int) -> bool:
    return await count_inputs(world, wg) == count


async def test_a_users_inputs_per_hour_are_limited_across_her_workgraphs(world: World) -> None:
    async with person(world, "hourly", "hana", "user") as hana:
        first = await submit(hana, simulation(30))
        await world.until("30 inputs", lambda: _has(world, first, 30), first)
        second = await submit(hana, simulation(30))
        reason = await until_held(world, hana, second)
        assert "40 inputs created per user per hour" in reason and "hana" in reason
        assert await count_inputs(world, second) == 10
        assert await held_reason(world, hana, first) is None  # it wanted no more


async def test_workgraphs_active_per_user_are_limited(world: World) -> None:
    async with person(world, "gridpp", "walter", "user") as walter:
        for _ in range(3):
            await submit(walter, simulation(2), start=False)
        with pytest.raises(FailedPrecondition, match="active_workgraphs_per_user"):
            await submit(walter, simulation(2), start=False)
    async with person(world, "gridpp", "wanda", "user") as wanda:
        await submit(wanda, simulation(2), start=False)  # the quota is each user's
