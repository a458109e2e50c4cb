"""Scenario 8 (MariaDB): a finalizing action fails. One of the reconstruction's files
disappears from the catalogue while it runs, so its CheckOutputFiles fails at Finalizing: the
simulation upstream finalizes, the reconstruction goes FinalizingBlocked and holds back the
merge downstream (whose list does not run), while the workgraph stays Finalizing.
ReturnToActive takes the workgraph and every member — Finalized, FinalizingBlocked and
Finalizing — back to Active; drained again, it finalizes again and blocks again on the same
missing file; the operator forces the check and the workgraph completes."""

from __future__ import annotations

import pytest
from e2e_world import (
    Launch,
    Submitted,
    T,
    W,
    World,
    check_invariants,
    listed,
    step,
    workgraph,
)

from dxts.core.states import ActionResult

pytestmark = pytest.mark.mariadb_only


def document() -> dict[str, object]:
    return workgraph(
        {"raw": listed(4, "final")},
        {
            "Sim": step("raw", actions={"Finalizing": ["NoInputProcessedTwice"]}),
            "Reco": step(
                "Sim/out", actions={"Finalizing": ["CheckOutputFiles", "EveryInputSettled"]}
            ),
            "Merge": step(
                "Reco/out",
                packer="BySize",
                group_size=2,
                actions={"Finalizing": ["NoInputProcessedTwice"]},
            ),
        },
        {"merged": "Merge/out"},
    )


async def _blocked(world: World, wg: Submitted) -> bool:
    return (await world.statuses(wg)) == (
        W.FINALIZING,
        {"Sim": T.FINALIZED, "Reco": T.FINALIZING_BLOCKED, "Merge": T.FINALIZING},
    )


async def test_a_failed_finalisation_blocks_returns_to_active_and_is_forced(
    launch_mariadb: Launch,
) -> None:
    async with launch_mariadb() as world:
        wg = await world.submit(document())
        await world.start(wg)
        lost = (await world.until("a file", lambda: world.produced(wg, "Reco/out"), wg))[0]
        assert await world.catalogue.remove_files([lost]) == 1

        await world.until("Reco blocked", lambda: _blocked(world, wg), wg)
        actions = await world.actions(wg)
        check = actions["Reco/Finalizing/1"]
        assert check.Result == "Failed" and lost in check.Message
        assert actions["Reco/Finalizing/2"].Result is None
        assert actions["Sim/Finalizing/1"].Result == "Passed"  # upstream first
        assert actions["Merge/Finalizing/1"].Result is None  # held back

        await world.call("ReturnToActive", workgraph_id=wg.workgraph_id, reason="look again")
        workgraph_log, member_logs = await world.logs(wg)
        returned = [
            (r.OldStatus, r.NewStatus)
            for name in ("Sim", "Reco", "Merge")
            for r in member_logs[name]
            if r.EventType == "StateChange" and r.NewStatus == T.ACTIVE and r.OldStatus != T.NEW
        ]
        assert returned == [
            (T.FINALIZED, T.ACTIVE),
            (T.FINALIZING_BLOCKED, T.ACTIVE),
            (T.FINALIZING, T.ACTIVE),
        ]
        # Nothing is left to do: it drains at once, and blocks on the same file.
        await world.until("Reco blocked again", lambda: _blocked(world, wg), wg)
        check = (await world.actions(wg))["Reco/Finalizing/1"]
        await world.force(check.ActionID, ActionResult.PASSED, "the file is on tape")
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)

        actions = await world.actions(wg)
        assert [actions[k].Result for k in ("Reco/Finalizing/1", "Reco/Finalizing/2")] == [
            "Passed",
            "Passed",
        ]
        assert actions["Reco/Finalizing/1"].Author == "olivia"
        assert actions["Merge/Finalizing/1"].Result == "Passed"
        workgraph_log, _ = await world.logs(wg)
        path = [(r.OldStatus, r.NewStatus) for r in workgraph_log if r.EventType == "StateChange"]
        assert path == [
            (None, W.NEW),
            (W.NEW, W.ACTIVE),
            (W.ACTIVE, W.FINALIZING),
            (W.FINALIZING, W.ACTIVE),
            (W.ACTIVE, W.FINALIZING),
            (W.FINALIZING, W.COMPLETED),
        ]
