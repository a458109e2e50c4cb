"""The null adaptor is restarted while parcels are in flight: the new one knows none of the
identifiers the old one gave. After the dispatcher's grace period each such parcel is recorded
"lost by the backend" → Failed, the failed-input hook sends its inputs back to be packed again,
the backend's capacity is freed for them, and the workgraph still reaches Completed with the
invariants intact (every input processed by exactly one Done parcel)."""

from __future__ import annotations

from pathlib import Path

from e2e_world import PACE_S, W, check_invariants, running, seeds, step, workgraph

from dxts.backends.null.settings import NullSettings
from dxts.core.db import Database
from dxts.core.ids import id_to_str
from dxts.v1 import execution_pb2

IN_FLIGHT = 4


async def test_parcels_an_adaptor_restart_lost_are_retried_and_the_workgraph_completes(
    database: Database, tmp_path: Path
) -> None:
    document = workgraph(
        {"seeds": seeds(8)},
        {"Sim": step("seeds")},
        {"sims": "Sim/out"},
        hooks={"Active": {"hook": "OutputTarget", "args": {"target_events": 8}}},
    )
    # Slow enough that parcels are still running when the adaptor restarts; its capacity is
    # what the lost parcels hold until they are recorded.
    null = NullSettings(name="null", outputs=["out"], delay_s=3600.0, capacity=IN_FLIGHT)
    # A Submit sent while the adaptor restarts gets no answer and leaves its parcels Reserved
    # until their lease ends and the recovery sweep submits them again (once in a CI run they
    # waited out the default five minutes): a short lease lets that happen within the test.
    async with running(database, tmp_path, null=null, lost_grace_s=1.0, lease_s=2.0) as world:
        wg = await world.submit(document)
        await world.start(wg)

        async def assigned() -> set[bytes]:
            parcels = await world.parcels(wg, "Sim")
            running = {p.ParcelID for p in parcels if p.Status == "Assigned"}
            return running if len(running) == IN_FLIGHT else set()

        lost = await world.until(f"{IN_FLIGHT} parcels Assigned to the null adaptor", assigned, wg)
        world.null.settings.delay_s = PACE_S  # the restarted adaptor finishes what it is given
        await world.restart_null()
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)

        by_id = {p.ParcelID: p for p in await world.parcels(wg, "Sim")}
        assert {by_id[p].Status for p in lost} == {"Failed"}
        for parcel_id in lost:
            got = await world.execution.GetParcel(
                execution_pb2.GetParcelRequest(parcel_id=id_to_str(parcel_id))
            )
            assert got.outcome.message.startswith("lost by the backend")
        census = await world.census(wg)
        assert census["Sim"]["inputs"] == {"Processed": 8}
        assert census["Sim"]["parcels"] == {"Failed": IN_FLIGHT, "Done": 8}
