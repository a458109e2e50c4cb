"""Scenario 6 (SQLite and MariaDB): a halt mid-run. Thirteen seeds in groups of three: four
parcels run (on a backend that takes an hour), one seed waits for its group. The operator
halts: every feeder is disabled, the parcels in flight are cancelled (their inputs
NotProcessed), the waiting seed is written off; one parcel — the backend cannot stop it — fails
after the halt, and its inputs are written off too instead of being retried. The workgraph
reaches Completed through Finalizing with every input NotProcessed."""

from __future__ import annotations

from pathlib import Path

from e2e_world import Submitted, W, World, check_invariants, running, seeds, step, workgraph

from dxts.backends.null.settings import NullRule, NullSettings
from dxts.core.db import Database
from dxts.core.ids import id_from_str

SEEDS = 13


async def _running(world: World, wg: Submitted) -> bool:
    census = await world.census(wg)
    return census["Sim"]["parcels"] == {"Assigned": 4} and census["Sim"]["inputs"] == {
        "Assigned": 12,
        "Unassigned": 1,
    }


async def test_a_halt_cancels_writes_off_and_completes(database: Database, tmp_path: Path) -> None:
    document = workgraph(
        {"seeds": seeds(SEEDS)},
        {"Sim": step("seeds", packer="BySize", group_size=3)},
        {"sims": "Sim/out"},
    )
    null = NullSettings(
        name="null",
        outputs=["out"],
        delay_s=3600,
        # Seed 0's parcel fails a few seconds in, whatever it is asked.
        rules=[NullRule(fate="failure", descriptor={"seed": 0}, delay_s=4, cancellable=False)],
    )
    async with running(database, tmp_path, null=null) as world:
        wg = await world.submit(document)
        await world.start(wg)
        await world.until("four parcels running, one seed waiting", lambda: _running(world, wg), wg)
        stubborn = next(
            id_from_str(job.parcel_id) for job in world.null.jobs.values() if not job.cancellable
        )
        await world.call("HaltWorkgraph", workgraph_id=wg.workgraph_id, reason="e2e")
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)

        census = await world.census(wg)
        assert census["Sim"]["inputs"] == {"NotProcessed": SEEDS}
        assert census["Sim"]["parcels"] == {"Cancelled": 3, "Failed": 1}
        failed = [p for p in await world.parcels(wg, "Sim") if p.Status == "Failed"]
        assert [bytes(p.ParcelID) for p in failed] == [stubborn]
        # The failed parcel's inputs were Failed after the halt, then written off: never
        # retried (no second parcel carries them).
        seed_zero = [
            r for r in await world.inputs(wg, "Sim") if bytes(r.LastParcelID or b"") == stubborn
        ]
        assert len(seed_zero) == 3 and {r.ErrorCount for r in seed_zero} == {1}
        assert sum(world.null.started.values()) == 4
        workgraph_log, _ = await world.logs(wg)
        path = [(r.OldStatus, r.NewStatus) for r in workgraph_log if r.EventType == "StateChange"]
        assert path[-3:] == [
            (W.NEW, W.ACTIVE),
            (W.ACTIVE, W.FINALIZING),
            (W.FINALIZING, W.COMPLETED),
        ]
        assert [r.EventType for r in workgraph_log].count("HaltWorkgraph") == 1
