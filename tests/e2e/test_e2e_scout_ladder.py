"""The scout's sample from the scouting hook's ladder of event counts (SQLite and MariaDB).

The Seeds feeder has no `scouting_events`: ScoutUntilSettled's `event_stages` [2, 4] set it.
The first round scouts 2 events and reaches Approving, where the sign-off nobody has given
blocks it; an ExtendScout without arguments advances the scout round, the hook sets the next
stage (4 events in all: two more), and the workgraph is back in Approving after exactly that
sample. Signed off, it runs the rest (6 events) to Completed."""

from __future__ import annotations

import json
from pathlib import Path

from e2e_world import Submitted, T, W, World, check_invariants, running, seeds, step, workgraph

from dxts.core.db import Database
from dxts.core.states import ActionResult

THRESHOLD = {"min_sample": 2, "min_success_rate": 0.9}


def laddered() -> dict[str, object]:
    return workgraph(
        {"seeds": seeds(6)},  # no scouting_events
        {"Sim": step("seeds")},
        {"sims": "Sim/out"},
        approving=[
            {"action": "CheckSuccessRate", "args": THRESHOLD},
            {"action": "ManualApproval"},
        ],
        hooks={
            "ScoutingToApproving": {
                "hook": "ScoutUntilSettled",
                "args": {**THRESHOLD, "event_stages": [2, 4]},
            },
            "Active": {"hook": "OutputTarget", "args": {"target_events": 6}},
        },
    )


async def test_a_ladder_of_event_counts_sets_the_scout_and_extend_scout_climbs_it(
    database: Database, tmp_path: Path
) -> None:
    async with running(database, tmp_path) as world:
        wg = await world.submit(laddered())
        await world.start(wg)
        assert (await world.statuses(wg)) == (W.SCOUTING, {"Sim": T.ACTIVE})

        await world.until("the first stage judged", lambda: _signed_off_asked(world, wg, 1), wg)
        assert (await world.census(wg))["Sim"]["inputs"] == {"Processed": 2}
        assert await _scouting_events(world, wg) == 2

        await world.call("ExtendScout", workgraph_id=wg.workgraph_id, reason="the next stage")
        await world.until("the second stage judged", lambda: _signed_off_asked(world, wg, 2), wg)
        assert (await world.census(wg))["Sim"]["inputs"] == {"Processed": 4}
        assert await _scouting_events(world, wg) == 4

        sign_off = (await world.actions(wg))["workgraph/Approving/2"]
        await world.force(sign_off.ActionID, ActionResult.PASSED, "signed off")
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)
        assert (await world.census(wg))["Sim"]["inputs"] == {"Processed": 6}

        workgraph_log, member_logs = await world.logs(wg)
        path = [(r.OldStatus, r.NewStatus) for r in workgraph_log if r.EventType == "StateChange"]
        assert path[:6] == [
            (None, W.NEW),
            (W.NEW, W.SCOUTING),
            (W.SCOUTING, W.APPROVING),
            (W.APPROVING, W.APPROVING_BLOCKED),  # the sign-off
            (W.APPROVING_BLOCKED, W.SCOUTING),  # the scout extended: the next stage
            (W.SCOUTING, W.APPROVING),
        ]
        samples = [
            r.Data["args"]["scouting_events"]
            for r in member_logs["Sim"]
            if r.EventType == "FeederArgs"
            and r.Data["args"].get("scouting_events") != r.Data["previous"].get("scouting_events")
        ]
        assert samples == [2, 4]  # set by the hook, one stage per round


async def _signed_off_asked(world: World, wg: Submitted, times: int) -> bool:
    """ManualApproval has run `times` times and the workgraph is blocked on it."""
    workgraph_log, _ = await world.logs(wg)
    runs = sum(
        r.EventType == "ActionRun" and r.Data["action"] == "ManualApproval" for r in workgraph_log
    )
    return runs == times and (await world.statuses(wg))[0] == W.APPROVING_BLOCKED


async def _scouting_events(world: World, wg: Submitted) -> int:
    args = (await world.members(wg))["Sim"].FeederArgs
    return int((json.loads(args) if isinstance(args, str) else args)["scouting_events"])
