"""Scenario 2 (MariaDB): a scout judged by the approving list [CheckSuccessRate,
EstimateResourceUsage, ManualApproval].

The simulation runs a four-seed scout while the replication of its files (data management that
sits only downstream) is held in New. Its backend (the null adaptor) reports every parcel as
having used 3 CPU hours. The scout settles, the hook accepts it, CheckSuccessRate passes and
EstimateResourceUsage fails on that measurement, recorded by execution as each parcel's usage
(it is given a limit of 2 CPU hours per parcel): ApprovingBlocked. The operator extends the
scout to six seeds — scouting further, not again: two more seeds — and the list runs again from
the start, to the same failure. The operator resets it — back to Approving, where it runs again
and fails again, since nothing it measures has changed — then forces it: Approving, where the
sign-off nobody has given blocks the workgraph again. Forcing the sign-off approves it: Active,
the held replication starts, and the workgraph completes.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from e2e_world import (
    PACE_S,
    Launch,
    Submitted,
    T,
    W,
    World,
    check_counters,
    check_invariants,
    seeds,
    step,
    workgraph,
)

from dxts.backends.null.settings import NullSettings, NullUsage
from dxts.core.states import ActionResult

pytestmark = pytest.mark.mariadb_only

THRESHOLD = {"min_sample": 4, "min_success_rate": 0.9}
SEEDS_ARGS = {"target_events": 8, "events_per_seed": 1, "scouting_events": 4}
# What every simulation parcel reports it used: over EstimateResourceUsage's 2 CPU hours.
MEASURED = NullUsage(cpu_seconds=3 * 3600, wall_seconds=4 * 3600, max_memory_bytes=2 * 10**9)


def scouted() -> dict[str, object]:
    return workgraph(
        {"seeds": seeds(8, scouting_events=4)},
        {"Sim": step("seeds")},
        {"sims": "Sim/out"},
        approving=[
            {"action": "CheckSuccessRate", "args": THRESHOLD},
            {"action": "EstimateResourceUsage", "args": {"max_cpu_hours": 2}},
            {"action": "ManualApproval", "args": {"role": "mc_production_manager"}},
        ],
        hooks={
            "ScoutingToApproving": {"hook": "ScoutUntilSettled", "args": THRESHOLD},
            "Active": {"hook": "OutputTarget", "args": {"target_events": 8}},
        },
        data_management=[
            {"id": "Replicate", "operation": "replicate", "files": "sims", "destination": "TAPE"}
        ],
    )


async def test_a_scout_is_blocked_reset_signed_off_and_run(
    launch_mariadb: Launch,
) -> None:
    null = NullSettings(name="null", outputs=["out"], usage=MEASURED)
    async with launch_mariadb(null=null) as world:
        wg = await world.submit(scouted())
        await world.start(wg)
        assert (await world.statuses(wg)) == (W.SCOUTING, {"Sim": T.ACTIVE, "Replicate": T.NEW})

        await world.reach(wg, W.APPROVING_BLOCKED)
        actions = await world.actions(wg)
        check, estimate, sign_off = (actions[f"workgraph/Approving/{n}"] for n in (1, 2, 3))
        assert (check.Result, estimate.Result, sign_off.Result) == ("Passed", "Failed", None)
        assert estimate.Message == "Sim used 3 cpu_hours per parcel (at most 2)"
        await check_counters(world, wg)
        census = await world.census(wg)
        assert census["Sim"]["inputs"] == {"Processed": 4}  # the scout's sample, no more
        assert census["Replicate"] == {"inputs": {}, "parcels": {}}  # held

        extended = {**SEEDS_ARGS, "scouting_events": 6}
        await world.call(
            "ExtendScout",
            workgraph_id=wg.workgraph_id,
            reason="a bigger sample",
            feeder_args_json={wg.members["Sim"]: json.dumps(extended)},
        )
        await world.until("the extended scout judged", lambda: _ran(world, wg, 2), wg)
        assert (await world.census(wg))["Sim"]["inputs"] == {"Processed": 6}

        await world.call("ResetAction", action_id=estimate.ActionID, reason="measure again")
        # Back to Approving, where the action runs again from its position, and fails again.
        await world.until("EstimateResourceUsage to run again", lambda: _ran(world, wg, 3), wg)
        await world.force(estimate.ActionID, ActionResult.PASSED, "checked by hand")
        await world.until("the sign-off to block it", lambda: _awaits_sign_off(world, wg), wg)
        assert (await world.statuses(wg))[0] == W.APPROVING_BLOCKED
        assert (await world.statuses(wg))[1] == {"Sim": T.ACTIVE, "Replicate": T.NEW}
        # Feeder rounds later, still the scout's sample: nothing runs in full before approval.
        await asyncio.sleep(8 * PACE_S)
        assert (await world.census(wg))["Sim"]["inputs"] == {"Processed": 6}

        await world.force(sign_off.ActionID, ActionResult.PASSED, "signed off")
        await world.reach(wg, W.ACTIVE, W.FINALIZING, W.COMPLETED)
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)

        census = await world.census(wg)
        assert census["Sim"]["inputs"] == {"Processed": 8}
        assert census["Replicate"]["inputs"] == {"Processed": 8}
        workgraph_log, _ = await world.logs(wg)
        path = [(r.OldStatus, r.NewStatus) for r in workgraph_log if r.EventType == "StateChange"]
        assert path == [
            (None, W.NEW),
            (W.NEW, W.SCOUTING),
            (W.SCOUTING, W.APPROVING),
            (W.APPROVING, W.APPROVING_BLOCKED),  # the estimate failed
            (W.APPROVING_BLOCKED, W.SCOUTING),  # the scout extended
            (W.SCOUTING, W.APPROVING),
            (W.APPROVING, W.APPROVING_BLOCKED),  # the estimate failed again
            (W.APPROVING_BLOCKED, W.APPROVING),  # reset
            (W.APPROVING, W.APPROVING_BLOCKED),  # failed again
            (W.APPROVING_BLOCKED, W.APPROVING),  # forced
            (W.APPROVING, W.APPROVING_BLOCKED),  # the sign-off
            (W.APPROVING_BLOCKED, W.APPROVING),  # signed off
            (W.APPROVING, W.ACTIVE),
            (W.ACTIVE, W.FINALIZING),
            (W.FINALIZING, W.COMPLETED),
        ]
        runs = [
            (r.Data["action"], r.Data["result"])
            for r in workgraph_log
            if r.EventType == "ActionRun"
        ]
        assert runs == [
            ("CheckSuccessRate", "Passed"),
            ("EstimateResourceUsage", "Failed"),
            ("CheckSuccessRate", "Passed"),  # the list runs again after the extended scout
            ("EstimateResourceUsage", "Failed"),
            ("EstimateResourceUsage", "Failed"),
            ("ManualApproval", "Failed"),
        ]


async def _ran(world: World, wg: Submitted, times: int) -> bool:
    """EstimateResourceUsage has run `times` times, and the workgraph is blocked."""
    workgraph_log, _ = await world.logs(wg)
    runs = [r for r in workgraph_log if r.EventType == "ActionRun"]
    estimates = sum(r.Data["action"] == "EstimateResourceUsage" for r in runs)
    return estimates == times and (await world.statuses(wg))[0] == W.APPROVING_BLOCKED


async def _awaits_sign_off(world: World, wg: Submitted) -> bool:
    actions = await world.actions(wg)
    return bool(actions["workgraph/Approving/3"].Result == "Failed")
