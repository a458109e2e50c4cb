"""Scenario 4 (SQLite and MariaDB): a member paused mid-run. Its parcels in flight finish, no
new parcel is made while it is paused, and the workgraph waits in Active (a paused member does
not drain); resumed, it carries on and the workgraph completes."""

from __future__ import annotations

import asyncio

from e2e_world import (
    PACE_S,
    TERMINAL_PARCELS,
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


async def _in_flight(world: World, wg: Submitted) -> list[bytes]:
    return [bytes(p.ParcelID) for p in await world.parcels(wg, "Sim") if p.Status == "Assigned"]


async def test_a_paused_member_finishes_its_parcels_and_waits(launch: Launch) -> None:
    document = workgraph(
        # At most three seeds in flight, so that seeds keep coming while parcels run.
        {"seeds": seeds(SEEDS, max_in_flight=3)},
        {"Sim": step("seeds")},
        {"sims": "Sim/out"},
        hooks={"Active": {"hook": "OutputTarget", "args": {"target_events": SEEDS}}},
    )
    null = NullSettings(name="null", outputs=["out"], delay_s=1.0)
    async with launch(null=null) as world:
        wg = await world.submit(document)
        await world.start(wg)
        in_flight = await world.until("a Sim parcel in flight", lambda: _in_flight(world, wg), wg)
        await world.call("PauseTransformation", transformation_id=wg.members["Sim"], reason="e2e")
        assert (await world.statuses(wg)) == (W.ACTIVE, {"Sim": T.PAUSED})

        async def settled() -> list[str] | None:
            found = [str(p.Status) for p in await world.parcels(wg, "Sim")]
            return found if all(s in TERMINAL_PARCELS for s in found) else None

        await world.until("the parcels in flight to finish", settled, wg)
        parcels = {bytes(p.ParcelID): str(p.Status) for p in await world.parcels(wg, "Sim")}
        assert all(parcels[p] == "Done" for p in in_flight)
        # Several packer, feeder and lifecycle rounds later: no new parcel, nothing drained.
        await asyncio.sleep(8 * PACE_S)
        assert {bytes(p.ParcelID) for p in await world.parcels(wg, "Sim")} == set(parcels)
        assert len(parcels) < SEEDS
        assert (await world.statuses(wg)) == (W.ACTIVE, {"Sim": T.PAUSED})

        await world.call("ResumeTransformation", transformation_id=wg.members["Sim"], reason="e2e")
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)
        census = await world.census(wg)
        assert census["Sim"]["inputs"] == {"Processed": SEEDS}
        _, logs = await world.logs(wg)
        path = [(r.OldStatus, r.NewStatus) for r in logs["Sim"] if r.EventType == "StateChange"]
        assert path == [
            (None, T.NEW),
            (T.NEW, T.ACTIVE),
            (T.ACTIVE, T.PAUSED),
            (T.PAUSED, T.ACTIVE),
            (T.ACTIVE, T.FINALIZING),
            (T.FINALIZING, T.FINALIZED),
            (T.FINALIZED, T.COMPLETED),
        ]
