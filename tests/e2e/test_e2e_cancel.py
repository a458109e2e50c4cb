"""Scenario 7 (SQLite and MariaDB): a cancellation from each state that allows one — New,
Scouting, Approving, ApprovingBlocked, Active, Finalizing — ends Cancelled, every member
Cancelled, every cleaning action Done, the files the members produced removed from the
catalogue and their bulk rows deleted.

Six workgraphs run side by side, each held in its state: Scouting by parcels that never finish,
Approving and Finalizing by an action that stays Pending (`Hold`), ApprovingBlocked by a
sign-off nobody gives, Active by two of its four parcels running on when the other two are done.
"""

from __future__ import annotations

from typing import Any

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

from dxts.backends.null.settings import NullRule, NullSettings

HOLD = [{"action": "Hold"}]
HOLD_APPROVAL = [{"action": "HoldApproval"}]


def document(prefix: str, *, finalizing: bool = False, **hint: Any) -> dict[str, Any]:
    actions = {"Finalizing": HOLD} if finalizing else None
    return workgraph(
        {"raw": listed(4, prefix)},
        {"Sim": step("raw", actions=actions)},
        {"sims": "Sim/out"},
        **hint,
    )


CASES: dict[str, tuple[dict[str, Any], str]] = {
    "new": (document("fast-new"), W.NEW),
    "scouting": (document("slow-scout", approving=HOLD_APPROVAL), W.SCOUTING),
    "approving": (document("fast-approving", approving=HOLD_APPROVAL), W.APPROVING),
    "blocked": (
        document("fast-blocked", approving=[{"action": "ManualApproval"}]),
        W.APPROVING_BLOCKED,
    ),
    "active": (document("active"), W.ACTIVE),
    "finalizing": (document("fast-final", finalizing=True), W.FINALIZING),
}


async def _held(world: World, wg: Submitted, name: str, state: str) -> bool:
    """In its state; Scouting with its four parcels running, Active with two parcels done and
    two running."""
    if (await world.statuses(wg))[0] != state:
        return False
    parcels = (await world.census(wg))["Sim"]["parcels"]
    if name == "scouting":
        return parcels == {"Assigned": 4}
    if name == "active":
        return parcels == {"Done": 2, "Assigned": 2}
    return True


async def test_a_cancellation_from_every_state_cleans_up(launch: Launch) -> None:
    null = NullSettings(
        name="null",
        outputs=["out"],
        delay_s=3600,
        rules=[
            NullRule(fate="success", lfn="/lhcb/e2e/fast-", delay_s=0),
            NullRule(fate="success", lfn="/lhcb/e2e/active/0.raw", delay_s=0),
            NullRule(fate="success", lfn="/lhcb/e2e/active/1.raw", delay_s=0),
        ],
    )
    async with launch(null=null) as world:
        submitted = {name: await world.submit(doc) for name, (doc, _) in CASES.items()}
        for name, wg in submitted.items():
            if name != "new":
                await world.start(wg)
        produced: dict[str, list[str]] = {}
        for name, wg in submitted.items():
            state = CASES[name][1]

            async def held(wg: Submitted = wg, name: str = name, state: str = state) -> bool:
                return await _held(world, wg, name, state)

            await world.until(f"{name} held in {state}", held, wg)
            produced[name] = await world.produced(wg, "Sim/out")
            await world.call("CancelWorkgraph", workgraph_id=wg.workgraph_id, reason="e2e")
        assert {name: len(files) for name, files in produced.items()} == {
            "new": 0,
            "scouting": 0,
            "approving": 4,
            "blocked": 4,
            "active": 2,
            "finalizing": 4,
        }
        for name, wg in submitted.items():
            await world.reach(wg, W.CANCELLED)
            await check_invariants(world, wg, final=W.CANCELLED, bulk_rows=False)
            assert (await world.statuses(wg))[1] == {"Sim": T.CANCELLED}
            cleaning = {
                key: row.Result
                for key, row in (await world.actions(wg)).items()
                if "/Cancelling/" in key
            }
            assert cleaning == {f"Sim/Cancelling/{n}": "Done" for n in (1, 2, 3, 4)}, name
            assert not await world.catalogue.files(produced[name]), name
            workgraph_log, _ = await world.logs(wg)
            path = [
                (r.OldStatus, r.NewStatus) for r in workgraph_log if r.EventType == "StateChange"
            ]
            assert path[-2:] == [(CASES[name][1], W.CANCELLING), (W.CANCELLING, W.CANCELLED)]
        # The two parcels running when the Active one was cancelled were cancelled at the
        # backend, and the scout's four: of the 20 parcels the backend accepted, the 14 fast
        # ones finished at once and the 6 that take an hour ended only by their cancellation;
        # nothing is still running anywhere.
        counters = await world.backend_counters()
        assert counters["accepted"] == 4 + 4 + 4 + 4 + 4
        assert counters["in_flight"] == 0
