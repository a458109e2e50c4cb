"""Scenario 6 (SQLite and MariaDB): a halt mid-run. Thirteen seeds in groups of three: four
parcels run (on a backend that takes an hour), one seed waits for its group. The operator
halts: every feeder is disabled, the parcels in flight are cancelled (their inputs
NotProcessed), the waiting seed is written off; one parcel — the backend cannot stop it — fails
after the halt, and its inputs are written off too instead of being retried. The workgraph
reaches Completed through Finalizing with every input NotProcessed."""

from __future__ import annotations

import sqlalchemy as sa
from e2e_world import RC, Launch, Submitted, W, World, check_invariants, seeds, step, workgraph

from dxts.backends.null.settings import NullRule, NullSettings
from dxts.core.schema import execution

SEEDS = 13


async def _running(world: World, wg: Submitted) -> bool:
    census = await world.census(wg)
    return census["Sim"]["parcels"] == {"Assigned": 4} and census["Sim"]["inputs"] == {
        "Assigned": 12,
        "Unassigned": 1,
    }


async def _parcel_of_seed(world: World, wg: Submitted, seed: int) -> bytes:
    """The parcel that carries the input of `seed` (the one the backend's rule matches)."""
    i, pi = execution.inputs, execution.parcel_inputs
    async with world.database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(i.c.Descriptor, pi.c.ParcelID)
            .select_from(
                i.join(
                    pi,
                    sa.and_(
                        pi.c.TransformationID == i.c.TransformationID,
                        pi.c.InputID == i.c.InputID,
                    ),
                )
            )
            .where(i.c.TransformationID == wg.tid("Sim"))
        )
        (parcel,) = {bytes(p) for descriptor, p in rows if (descriptor or {}).get("seed") == seed}
    return parcel


async def test_a_halt_cancels_writes_off_and_completes(launch: Launch) -> None:
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
    async with launch(null=null) as world:
        wg = await world.submit(document)
        await world.start(wg)
        await world.until("four parcels running, one seed waiting", lambda: _running(world, wg), wg)
        stubborn = await _parcel_of_seed(world, wg, 0)  # the backend cannot cancel it
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
        assert (await world.backend_counters())["started"] == 4
        workgraph_log, _ = await world.logs(wg)
        path = [(r.OldStatus, r.NewStatus) for r in workgraph_log if r.EventType == "StateChange"]
        assert path[-3:] == [
            (W.NEW, W.ACTIVE),
            (W.ACTIVE, W.FINALIZING),
            (W.FINALIZING, W.COMPLETED),
        ]
        assert [r.EventType for r in workgraph_log].count("HaltWorkgraph") == 1
