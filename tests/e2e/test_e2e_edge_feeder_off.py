"""An Edge feeder disabled mid-run (SQLite and MariaDB), as the design describes the operator's
switch on a consumer: the reconstruction stops reading the simulation's files while the
simulation goes on producing them; with its feeder off its packer packs the remainder it held
back (an undersized group) and it drains, without waiting for its producer; switched on again,
its Edge feeder reads on from its bookmark, so every file the simulation made is reconstructed
exactly once and the workgraph completes with every member's reconciliation passing.

The simulation is paused while the reconstruction's feeder is off so that the workgraph stays
Active: a paused member does not drain, which keeps the cascade from closing the workgraph on
the gap (that gap is what the reconstruction's ReconcileFeederInputs would report at
Finalizing)."""

from __future__ import annotations

import asyncio

from e2e_world import (
    PACE_S,
    TERMINAL_INPUTS,
    Launch,
    Submitted,
    T,
    W,
    World,
    check_invariants,
    seeds,
    step,
    workgraph,
)

from dxts.backends.null.settings import NullSettings

SEEDS = 12
FINALIZING = ["NoInputProcessedTwice", "ReconcileFeederInputs"]


def document() -> dict[str, object]:
    return workgraph(
        # A few seeds in flight at a time, so that the simulation is still producing.
        {"seeds": seeds(SEEDS, max_in_flight=3)},
        {
            "Sim": step("seeds", actions={"Finalizing": FINALIZING}),
            "Reco": step(
                "Sim/out", packer="BySize", group_size=5, actions={"Finalizing": FINALIZING}
            ),
        },
        {"recos": "Reco/out"},
        hooks={"Active": {"hook": "OutputTarget", "args": {"target_events": SEEDS}}},
    )


async def set_feeder(world: World, wg: Submitted, name: str, enabled: bool) -> None:
    await world.call("SetFeeder", transformation_id=wg.members[name], enabled=enabled, reason="e2e")


async def test_an_edge_feeder_switched_off_mid_run_then_on_again(launch: Launch) -> None:
    null = NullSettings(name="null", outputs=["out"], delay_s=1.0)
    async with launch(null=null) as world:
        wg = await world.submit(document())
        await world.start(wg)

        async def reading() -> bool:
            sim_running = any(p.Status == "Assigned" for p in await world.parcels(wg, "Sim"))
            return sim_running and bool(await world.inputs(wg, "Reco"))

        await world.until("Reco reading while Sim runs", reading, wg)
        await set_feeder(world, wg, "Reco", False)
        await world.call("PauseTransformation", transformation_id=wg.members["Sim"], reason="e2e")

        async def settled() -> bool:
            sim = await world.parcels(wg, "Sim")
            reco = await world.inputs(wg, "Reco")
            return all(p.Status in ("Done", "Failed") for p in sim) and all(
                i.Status in TERMINAL_INPUTS for i in reco
            )

        await world.until("Sim's parcels done and Reco's inputs settled", settled, wg)
        taken = {i.LFN for i in await world.inputs(wg, "Reco")}
        await asyncio.sleep(8 * PACE_S)  # several feeder rounds with the switch off
        produced = await world.produced(wg, "Sim/out")
        assert {i.LFN for i in await world.inputs(wg, "Reco")} == taken  # nothing more read
        assert taken < set(produced)  # the simulation made more than it read
        # With its feeder off, the packer packed the undersized remainder: Reco is drained.
        assert all(i.Status == "Processed" for i in await world.inputs(wg, "Reco"))
        assert (await world.statuses(wg)) == (W.ACTIVE, {"Sim": T.PAUSED, "Reco": T.ACTIVE})

        await set_feeder(world, wg, "Reco", True)
        await world.call("ResumeTransformation", transformation_id=wg.members["Sim"], reason="e2e")
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)

        census = await world.census(wg)
        assert census["Sim"]["inputs"] == {"Processed": SEEDS}
        assert census["Reco"]["inputs"] == {"Processed": SEEDS}
        lfns = [i.LFN for i in await world.inputs(wg, "Reco")]
        assert sorted(lfns) == sorted(await world.produced(wg, "Sim/out"))  # each once
        actions = await world.actions(wg)
        assert {actions[f"{m}/Finalizing/{n}"].Result for m in wg.members for n in (1, 2)} == {
            "Passed"
        }
