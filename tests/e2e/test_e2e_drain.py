"""A drain, a member held Paused from the start, and a member its own hook pauses (MariaDB).

Three members read the same seeds, one a feed round: Sim (whose files Reco groups by four),
Calib (`initial_state: Paused`: held until an operator starts it) and Fragile, whose Active hook
(PeriodicFlush) pauses it once its failure rate crosses the threshold — its first two seeds
fail and are quarantined. The operator writes those off and resumes Fragile, starts Calib, then
drains the workgraph: the outermost feeders (the three Seeds) are disabled, what is in flight
finishes, Reco — fed only once Sim is drained — packs its undersized remainder because its own
feeder is off, and the workgraph completes with far fewer seeds than were asked for.
"""

from __future__ import annotations

import pytest
from e2e_world import (
    I,
    Launch,
    Submitted,
    T,
    W,
    World,
    check_invariants,
    seeds,
    selection,
    step,
    workgraph,
)

from dxts.backends.null.settings import NullRule, NullSettings

pytestmark = pytest.mark.mariadb_only
ASKED = 200
FRAGILE_HOOKS = {
    "Active": {
        "hook": "PeriodicFlush",
        "args": {"flush_every_s": None, "min_sample": 2, "min_success_rate": 0.9},
    },
    "HandleFailedInput": {"hook": "RetryUntilMaxErrors", "args": {"max_errors": 1}},
}


async def test_a_drain_with_members_paused_by_operator_and_by_hook(
    launch_mariadb: Launch,
) -> None:
    document = workgraph(
        {"seeds": seeds(ASKED, batch=1)},
        {
            "Sim": step("seeds"),
            "Reco": step("Sim/out", packer="BySize", group_size=4),
            "Calib": step("seeds", initial_state="Paused"),
            "Fragile": step("seeds", hooks=FRAGILE_HOOKS),
        },
        {"recos": "Reco/out", "calibs": "Calib/out", "fragiles": "Fragile/out"},
    )
    async with launch_mariadb(null=NullSettings(name="null", outputs=["out"])) as world:
        wg = await world.submit(document)
        await world.configure_null(
            rules=[NullRule(fate="failure", output_prefix=f"/{wg.members['Fragile']}/", times=2)]
        )
        await world.start(wg)
        assert (await world.statuses(wg))[1] == {
            "Sim": T.ACTIVE,
            "Reco": T.ACTIVE,
            "Calib": T.PAUSED,
            "Fragile": T.ACTIVE,
        }
        await world.member_reaches(wg, "Fragile", T.PAUSED)
        _, logs = await world.logs(wg)
        (paused,) = [r for r in logs["Fragile"] if r.NewStatus == T.PAUSED]
        assert paused.Author == "hook PeriodicFlush"
        census = await world.census(wg)
        assert census["Calib"]["inputs"] == {}  # held: nothing fed while Paused
        assert census["Fragile"]["inputs"][I.PROBLEMATIC.value] == 2

        await world.call_execution(
            "WriteOffInputs",
            transformation_id=wg.members["Fragile"],
            selection=selection(I.PROBLEMATIC),
            reason="bad seeds",
        )
        for name in ("Fragile", "Calib"):
            await world.call("ResumeTransformation", transformation_id=wg.members[name])
        await world.until(
            "Calib to process a seed",
            lambda: _processed(world, wg, "Calib"),
            wg,
        )
        await world.call("DrainWorkgraph", workgraph_id=wg.workgraph_id, reason="enough")
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)

        census = await world.census(wg)
        fed = sum(census["Sim"]["inputs"].values())
        assert 0 < fed < ASKED and census["Sim"]["inputs"] == {"Processed": fed}
        assert census["Reco"]["inputs"] == {"Processed": fed}
        assert sum(census["Reco"]["parcels"].values()) == -(-fed // 4)  # the remainder packed
        assert census["Fragile"]["inputs"][I.NOT_PROCESSED.value] == 2
        workgraph_log, logs = await world.logs(wg)
        assert [r.EventType for r in workgraph_log].count("DrainWorkgraph") == 1
        disabled = {
            name: [r.Author for r in rows if r.EventType == "FeederDisabled"]
            for name, rows in logs.items()
        }
        # The drain disabled the outermost feeders; Reco's Edge feeder ended itself.
        assert disabled == {
            "Sim": ["olivia"],
            "Calib": ["olivia"],
            "Fragile": ["olivia"],
            "Reco": [],
        }
        path = [(r.OldStatus, r.NewStatus) for r in logs["Calib"] if r.EventType == "StateChange"]
        assert path[:3] == [(None, T.NEW), (T.NEW, T.PAUSED), (T.PAUSED, T.ACTIVE)]


async def _processed(world: World, wg: Submitted, name: str) -> bool:
    census = await world.census(wg)
    return bool(census[name]["inputs"].get(I.PROCESSED.value))
