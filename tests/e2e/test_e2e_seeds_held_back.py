"""Scenario (SQLite and MariaDB): a paused member downstream holds the Seeds member back.

Reco reads Sim's files and is held Paused from the start (`initial_state: Paused`). OutputTarget
would raise Sim's Seeds feeder two seeds at a time once its first step is processed, but while a
member downstream of it is Paused it keeps Sim at that first step: what it would issue would only
pile up at Reco. Resumed, Reco lets Sim continue to the target, step by step."""

from __future__ import annotations

import asyncio

from e2e_world import PACE_S, Launch, Submitted, T, W, World, check_invariants, seeds, step
from e2e_world import workgraph as document_of

FIRST_STEP = 2
TARGET = 6


async def _first_step_processed(world: World, wg: Submitted) -> bool:
    return (await world.census(wg))["Sim"]["inputs"] == {"Processed": FIRST_STEP}


async def test_a_paused_downstream_member_holds_the_seeds_at_their_first_step(
    launch: Launch,
) -> None:
    document = document_of(
        {"seeds": seeds(FIRST_STEP)},
        {"Sim": step("seeds"), "Reco": step("Sim/out", initial_state="Paused")},
        {"recos": "Reco/out"},
        hooks={
            "Active": {
                "hook": "OutputTarget",
                "args": {"target_events": TARGET, "step_events": FIRST_STEP},
            }
        },
    )
    async with launch() as world:
        wg = await world.submit(document)
        await world.start(wg)
        assert (await world.statuses(wg))[1]["Reco"] == T.PAUSED
        await world.until("Sim's first step processed", lambda: _first_step_processed(world, wg))
        # Several lifecycle rounds later: Sim, caught up with nothing in flight, is not raised.
        await asyncio.sleep(8 * PACE_S)
        assert await _first_step_processed(world, wg)
        assert (await world.members(wg))["Sim"].FeederArgs["target_events"] == FIRST_STEP
        _, logs = await world.logs(wg)
        assert [r for r in logs["Sim"] if r.EventType == "FeederArgs"] == []

        await world.call("ResumeTransformation", transformation_id=wg.members["Reco"])
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)
        census = await world.census(wg)
        assert census["Sim"]["inputs"] == {"Processed": TARGET}
        assert census["Reco"]["inputs"] == {"Processed": TARGET}
        _, logs = await world.logs(wg)
        raised = [
            r.Data["args"]["target_events"] for r in logs["Sim"] if r.EventType == "FeederArgs"
        ]
        assert raised == [4, 6]
