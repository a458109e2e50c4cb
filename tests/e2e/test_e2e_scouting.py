"""Scenario 2 (MariaDB): a scout judged by the approving list [CheckSuccessRate,
EstimateResourceUsage, ManualApproval].

The simulation runs a four-seed scout while the replication of its files (data management that
sits only downstream) is held in New. The scout settles, the hook accepts it, CheckSuccessRate
passes and EstimateResourceUsage fails (it is given a CPU limit, and no scout parcel reports
its usage): ApprovingBlocked. The operator resets it — back to Approving, where it runs again
and fails again, since nothing it measures has changed — then forces it: Approving, where the
sign-off nobody has given blocks the workgraph again. Forcing the sign-off approves it: Active,
the held replication starts, and the workgraph completes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from e2e_world import (
    PACE_S,
    Submitted,
    T,
    W,
    World,
    check_counters,
    check_invariants,
    running,
    seeds,
    step,
    workgraph,
)

from dxts.core.db import Database
from dxts.core.states import ActionResult

pytestmark = pytest.mark.mariadb_only

THRESHOLD = {"min_sample": 4, "min_success_rate": 0.9}


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
    mariadb: Database, tmp_path: Path
) -> None:
    async with running(mariadb, tmp_path) as world:
        wg = await world.submit(scouted())
        await world.start(wg)
        assert (await world.statuses(wg)) == (W.SCOUTING, {"Sim": T.ACTIVE, "Replicate": T.NEW})

        await world.reach(wg, W.APPROVING_BLOCKED)
        actions = await world.actions(wg)
        check, estimate, sign_off = (actions[f"workgraph/Approving/{n}"] for n in (1, 2, 3))
        assert (check.Result, estimate.Result, sign_off.Result) == ("Passed", "Failed", None)
        assert "reported its usage" in estimate.Message
        await check_counters(world, wg)
        census = await world.census(wg)
        assert census["Sim"]["inputs"] == {"Processed": 4}  # the scout's sample, no more
        assert census["Replicate"] == {"inputs": {}, "parcels": {}}  # held

        await world.call("ResetAction", action_id=estimate.ActionID, reason="measure again")
        # Back to Approving, where the action runs again from its position, and fails again.
        await world.until(
            "EstimateResourceUsage to run again",
            lambda: _ran_twice(world, wg),
            wg,
        )
        assert (await world.statuses(wg))[0] == W.APPROVING_BLOCKED
        await world.force(estimate.ActionID, ActionResult.PASSED, "checked by hand")
        await world.until("the sign-off to block it", lambda: _awaits_sign_off(world, wg), wg)
        assert (await world.statuses(wg))[0] == W.APPROVING_BLOCKED
        assert (await world.statuses(wg))[1] == {"Sim": T.ACTIVE, "Replicate": T.NEW}
        # Feeder rounds later, still the scout's sample: nothing runs in full before approval.
        await asyncio.sleep(8 * PACE_S)
        assert (await world.census(wg))["Sim"]["inputs"] == {"Processed": 4}

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
            ("EstimateResourceUsage", "Failed"),
            ("ManualApproval", "Failed"),
        ]


async def _ran_twice(world: World, wg: Submitted) -> bool:
    workgraph_log, _ = await world.logs(wg)
    runs = [r for r in workgraph_log if r.EventType == "ActionRun"]
    return sum(r.Data["action"] == "EstimateResourceUsage" for r in runs) == 2


async def _awaits_sign_off(world: World, wg: Submitted) -> bool:
    actions = await world.actions(wg)
    return bool(actions["workgraph/Approving/3"].Result == "Failed")
