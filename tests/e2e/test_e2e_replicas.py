"""MariaDB, every component its own process: two execution replicas and two dispatchers share one
workgraph's work — Seeds → Sim (one seed a parcel) → Merge (five files a parcel) — to Completed
with nothing done twice.

Each execution replica feeds, packs, records and decides failed inputs on its own sweeps, and
each dispatcher claims and polls on its own: the work is partitioned by the named locks (a
transformation's feeder, packer and failed inputs; a backend's poll), by SKIP LOCKED (claims,
recording) and by conditional UPDATEs. The rows say every input was processed by exactly one
parcel and the exact counters equal a recount of the rows (`check_invariants`); the processes'
own counters say each parcel was created, claimed, submitted and recorded once in all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from e2e_cluster import ClusterWorld, running_cluster
from e2e_world import W, check_invariants, seeds, step, workgraph

from dxts.backends.null.settings import NullSettings
from dxts.core.db import Database

pytestmark = pytest.mark.mariadb_only

SEEDS = 60
GROUP = 5
# Eight processes on a shared two-core machine: the Finalizing lists alone took 100-150 s here.
COMPLETED_WITHIN_S = 300.0
FINALIZING = ["NoInputProcessedTwice", "ReconcileFeederInputs", "CheckOutputFiles"]


def simulation() -> dict[str, object]:
    return workgraph(
        {"seeds": seeds(SEEDS)},
        {
            "Sim": step("seeds", actions={"Finalizing": FINALIZING}),
            "Merge": step(
                "Sim/out", packer="BySize", group_size=GROUP, actions={"Finalizing": FINALIZING}
            ),
        },
        {"merged": "Merge/out"},
        hooks={"Active": {"hook": "OutputTarget", "args": {"target_events": SEEDS}}},
    )


def total(world: ClusterWorld, component: str, metric: str, **labels: str) -> float:
    """A counter summed over every replica of `component`."""
    cluster = world.cluster
    return sum(cluster.counter(name, metric, **labels) for name in cluster.replicas_of(component))


async def test_two_replicas_of_execution_and_dispatcher_share_a_workgraph_without_repeats(
    mariadb: Database, mysql_test_url: str, tmp_path: Path
) -> None:
    null = NullSettings(name="null", outputs=["out"])
    async with running_cluster(
        mariadb, mysql_test_url, tmp_path, null=null, execution_replicas=2, dispatcher_replicas=2
    ) as world:
        assert isinstance(world, ClusterWorld)
        assert world.cluster.replicas_of("execution") == ["execution", "execution-2"]
        assert world.cluster.replicas_of("dispatcher") == ["dispatcher", "dispatcher-2"]
        wg = await world.submit(simulation())
        await world.start(wg)
        await world.reach(wg, W.COMPLETED, timeout_s=COMPLETED_WITHIN_S)
        await check_invariants(world, wg)  # processed once, counters equal to a recount
        seen = await world.census(wg)
        merged = await world.produced(wg, "Merge/out")

        parcels = SEEDS + SEEDS // GROUP
        assert seen["Sim"]["inputs"] == {"Processed": SEEDS}
        assert seen["Sim"]["parcels"] == {"Done": SEEDS}
        assert seen["Merge"]["inputs"] == {"Processed": SEEDS}
        assert seen["Merge"]["parcels"] == {"Done": SEEDS // GROUP}
        assert len(merged) == SEEDS // GROUP
        counted: dict[str, Any] = {
            "fed": total(world, "execution", "dxts_execution_inputs_fed"),
            "created": total(world, "execution", "dxts_execution_parcels_created"),
            "outcomes": total(
                world, "execution", "dxts_execution_outcomes", disposition="recorded"
            ),
            "recorded": total(world, "execution", "dxts_execution_parcels_recorded"),
            "claimed": total(world, "dispatcher", "dxts_dispatcher_claimed"),
            "submitted": total(world, "dispatcher", "dxts_dispatcher_submitted"),
        }
        assert counted == {
            "fed": 2 * SEEDS,
            "created": parcels,
            "outcomes": parcels,
            "recorded": parcels,
            "claimed": parcels,
            "submitted": parcels,
        }
        # Every replica took part: each ran its sweeps against the shared work.
        sweeps = (("execution", "recorder"), ("dispatcher", "dispatch-claim-compute-0"))
        for component, sweep in sweeps:
            for name in world.cluster.replicas_of(component):
                assert world.cluster.counter(name, "dxts_sweep_rounds", sweep=sweep) > 0, name
        counters = await world.backend_counters()
        assert counters["started"] == counters["accepted"] == parcels
