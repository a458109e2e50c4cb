"""Archiving and cleaning actions that fail (MariaDB): the member goes ArchivingBlocked (or
CancellingBlocked) and the workgraph waits in Archiving (or Cancelling) until an operator
forces the action Done or resets it to run again; then Archived (or Cancelled)."""

from __future__ import annotations

import pytest
from e2e_world import (
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

from dxts.core.states import ActionResult

pytestmark = pytest.mark.mariadb_only
ARCHIVING = ["FailsOnce", "CleanIntermediates", "CleanDatabaseEntries"]
CLEANING = [
    "FailsOnce",
    "CancelInFlightParcels",
    "RemoveOutputFiles",
    "RemoveIntermediateFiles",
    "CleanDatabaseEntries",
]


def document(state: str, actions: list[str]) -> dict[str, object]:
    return workgraph(
        {"seeds": seeds(3)},
        {"Sim": step("seeds", actions={state: actions})},
        {"sims": "Sim/out"},
        hooks={"Active": {"hook": "OutputTarget", "args": {"target_events": 3}}},
    )


async def _blocked(world: World, wg: Submitted, workgraph: str, member: str) -> bool:
    return (await world.statuses(wg)) == (workgraph, {"Sim": member})


async def test_failed_housekeeping_blocks_until_forced_or_reset(
    launch_mariadb: Launch,
) -> None:
    async with launch_mariadb(archive_delay_s=0.5) as world:
        archived = await world.submit(document("Archiving", ARCHIVING))
        cancelled = await world.submit(document("Cleaning", CLEANING))
        await world.start(archived)
        await world.call("CancelWorkgraph", workgraph_id=cancelled.workgraph_id, reason="e2e")

        await world.until(
            "Sim ArchivingBlocked",
            lambda: _blocked(world, archived, W.ARCHIVING, T.ARCHIVING_BLOCKED),
            archived,
        )
        fails = (await world.actions(archived))["Sim/Archiving/1"]
        assert fails.Result == "Failed"
        await world.force(fails.ActionID, ActionResult.DONE, "cleaned by hand")
        await world.reach(archived, W.ARCHIVED)
        await check_invariants(world, archived, final=W.ARCHIVED, bulk_rows=False)

        await world.until(
            "Sim CancellingBlocked",
            lambda: _blocked(world, cancelled, W.CANCELLING, T.CANCELLING_BLOCKED),
            cancelled,
        )
        fails = (await world.actions(cancelled))["Sim/Cancelling/1"]
        await world.call("ResetAction", action_id=fails.ActionID, reason="try again")
        await world.reach(cancelled, W.CANCELLED)
        await check_invariants(world, cancelled, final=W.CANCELLED, bulk_rows=False)

        results = {
            name: {k: (r.Result, r.Author) for k, r in (await world.actions(wg)).items()}
            for name, wg in (("archived", archived), ("cancelled", cancelled))
        }
        assert results["archived"]["Sim/Archiving/1"] == ("Done", "olivia")
        assert [results["archived"][f"Sim/Archiving/{n}"][0] for n in (2, 3)] == ["Done", "Done"]
        assert results["cancelled"]["Sim/Cancelling/1"] == ("Done", None)  # ran again
        assert {results["cancelled"][f"Sim/Cancelling/{n}"][0] for n in range(1, 6)} == {"Done"}
        _, logs = await world.logs(archived)
        path = [(r.OldStatus, r.NewStatus) for r in logs["Sim"] if r.EventType == "StateChange"]
        assert path[-3:] == [
            (T.ARCHIVING, T.ARCHIVING_BLOCKED),
            (T.ARCHIVING_BLOCKED, T.ARCHIVING),
            (T.ARCHIVING, T.ARCHIVED),
        ]
        _, logs = await world.logs(cancelled)
        path = [(r.OldStatus, r.NewStatus) for r in logs["Sim"] if r.EventType == "StateChange"]
        assert path == [
            (None, T.NEW),
            (T.NEW, T.CANCELLING),
            (T.CANCELLING, T.CANCELLING_BLOCKED),
            (T.CANCELLING_BLOCKED, T.CANCELLING),
            (T.CANCELLING, T.CANCELLED),
        ]
