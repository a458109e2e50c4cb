"""Scenario 3 (MariaDB): the document's target ends the feed. The workgraph's Active hook
(OutputTarget) raises the Seeds feeder two seeds at a time, each time the work in flight has
settled, and disables it once the declared output holds exactly the target's six files; the
event target it was given (twenty) was only an upper bound, never reached."""

from __future__ import annotations

import pytest
from e2e_world import Launch, W, check_invariants, seeds, step, workgraph

pytestmark = pytest.mark.mariadb_only


async def test_the_target_raises_the_feeder_in_steps_then_ends_it(
    launch_mariadb: Launch,
) -> None:
    document = workgraph(
        {"seeds": seeds(2)},
        {"Sim": step("seeds")},
        {"sims": "Sim/out"},
        target={"output": "sims", "files": 6},
        hooks={"Active": {"hook": "OutputTarget", "args": {"target_events": 20, "step_events": 2}}},
    )
    async with launch_mariadb() as world:
        wg = await world.submit(document)
        await world.start(wg)
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)

        census = await world.census(wg)
        assert census["Sim"]["inputs"] == {"Processed": 6}
        assert len(await world.produced(wg, "Sim/out")) == 6
        _, logs = await world.logs(wg)
        raised = [
            r.Data["args"]["target_events"] for r in logs["Sim"] if r.EventType == "FeederArgs"
        ]
        assert raised == [4, 6]
        disabled = [r.Author for r in logs["Sim"] if r.EventType == "FeederDisabled"]
        assert disabled == ["hook OutputTarget"]
        member = (await world.members(wg))["Sim"]
        assert member.FeederArgs["target_events"] == 6
