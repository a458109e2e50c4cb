"""Requirements estimated from the scouts' measured usage (SQLite and MariaDB).

Each of the four scout parcels of Sim reports its own usage (null adaptor rules by seed):
1, 2, 3, 4 CPU hours, GB and twice that in wall hours. EstimateResourceUsage writes into Sim's
requirements template CPU at the 50th percentile, memory at the 75th and wall time at the 95th
(nearest rank), times a margin of 1.5, and logs from how many parcels it derived them. Merge,
fed Sim's files through an Edge, measures nothing of its own and inherits Sim's estimate scaled
by `downstream_scale`. The null adaptor then records what the dispatcher carried to it (each
job's requirements): the scouts of both members with no requirements, the next four parcels of
each with its estimate."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from e2e_world import W, check_invariants, running, seeds, step, workgraph

from dxts.backends.null.settings import NullRule, NullSettings, NullUsage
from dxts.core.db import Database
from dxts.core.states import ActionResult

HOUR, GB = 3600.0, 10**9


def measured(seed: int) -> NullRule:
    n = seed + 1
    usage = NullUsage(cpu_seconds=n * HOUR, wall_seconds=2 * n * HOUR, max_memory_bytes=n * GB)
    return NullRule(fate="success", descriptor={"seed": seed}, usage=usage)


def estimated() -> dict[str, object]:
    return workgraph(
        {"seeds": seeds(8, scouting_events=4)},
        {"Sim": step("seeds"), "Merge": step("Sim/out")},
        {"sims": "Sim/out", "merged": "Merge/out"},
        approving=[
            {
                "action": "EstimateResourceUsage",
                "args": {
                    "cpu_percentile": 50,
                    "memory_percentile": 75,
                    "wall_percentile": 95,
                    "margin": 1.5,
                    "downstream_scale": {"cpu_hours": 0.5, "memory_gb": 1.0, "wall_hours": 0.25},
                },
            },
            # Signed off once the template is written: the full production starts after it.
            {"action": "ManualApproval"},
        ],
        hooks={
            "ScoutingToApproving": {"hook": "ScoutUntilSettled", "args": {"min_sample": 4}},
            "Active": {"hook": "OutputTarget", "args": {"target_events": 8}},
        },
    )


async def test_scouts_usage_sets_the_templates_and_the_next_parcels_carry_them(
    database: Database, tmp_path: Path
) -> None:
    null = NullSettings(name="null", outputs=["out"], rules=[measured(s) for s in range(4)])
    async with running(database, tmp_path, null=null) as world:
        wg = await world.submit(estimated())
        await world.start(wg)
        await world.reach(wg, W.APPROVING_BLOCKED)
        sign_off = (await world.actions(wg))["workgraph/Approving/2"]
        await world.force(sign_off.ActionID, ActionResult.PASSED, "signed off")
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)

        sim_estimate = {"cpu_hours": 3.0, "memory_gb": 4.5, "wall_hours": 12.0}
        _, member_logs = await world.logs(wg)
        (sim_log,) = [r for r in member_logs["Sim"] if r.EventType == "Requirements"]
        assert sim_log.Data["requirements"] == sim_estimate
        assert sim_log.Data["derived"]["cpu_hours"] == {
            "percentile": 50,
            "parcels": 4,
            "measured": 2.0,
            "margin": 1.5,
        }
        assert sim_log.Data["derived"]["memory_gb"]["measured"] == 3.0
        assert sim_log.Data["derived"]["wall_hours"]["measured"] == 8.0

        merge_estimate = {"cpu_hours": 1.5, "memory_gb": 4.5, "wall_hours": 3.0}
        (merge_log,) = [r for r in member_logs["Merge"] if r.EventType == "Requirements"]
        assert merge_log.Data["requirements"] == merge_estimate
        assert merge_log.Data["derived"]["cpu_hours"] == {
            "inherited_from": "Sim",
            "estimate": 3.0,
            "scale": 0.5,
        }

        carried = Counter(
            _as_floats(job.requirements) for job in world._adaptor("null").jobs.values()
        )
        scouts, sims, merges = (
            _as_floats(json.dumps(e)) for e in ({}, sim_estimate, merge_estimate)
        )
        assert set(carried) == {scouts, sims, merges} and carried.total() == 16
        assert carried[sims] == 4
        # Sim's scouts' files reach Merge while the scout settles; one fed once it has settled
        # is packed after the estimate: Merge's scouts are at least one, at most four.
        assert 4 <= carried[merges] <= 7


def _as_floats(text: str) -> str:
    """Requirements in one spelling whatever JSON wrote a whole number as (3 or 3.0)."""
    values = json.loads(text) if text else {}
    return json.dumps({k: float(v) for k, v in values.items()}, sort_keys=True)
