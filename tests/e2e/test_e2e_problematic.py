"""Scenario 5 (MariaDB): quarantined inputs hold the drain. Two files fail in every parcel
until RetryUntilMaxErrors sets them aside as Problematic; the feeder is exhausted and
everything else processed, yet the workgraph stays Active, until an operator writes them off
and it completes. In a second run the operator resets the quarantined file instead: back to
Unassigned with its error count cleared, it is packed again, processed, and the workgraph
completes with every input Processed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from e2e_world import (
    PACE_S,
    I,
    Launch,
    Submitted,
    W,
    World,
    check_invariants,
    listed,
    selection,
    step,
    workgraph,
)

from dxts.backends.null.settings import NullRule, NullSettings

pytestmark = pytest.mark.mariadb_only
RETRY = {"HandleFailedInput": {"hook": "RetryUntilMaxErrors", "args": {"max_errors": 2}}}


def document(prefix: str) -> dict[str, Any]:
    return workgraph(
        {"raw": listed(6, prefix)}, {"Sim": step("raw", hooks=RETRY)}, {"sims": "Sim/out"}
    )


def problematic_only(world: World, wg: Submitted, expected: int) -> Any:
    async def check() -> bool:
        census = await world.census(wg)
        inputs = census["Sim"]["inputs"]
        return inputs == {"Processed": 6 - expected, "Problematic": expected}

    return check


async def test_quarantined_inputs_hold_the_drain_until_written_off_or_reset(
    launch_mariadb: Launch,
) -> None:
    null = NullSettings(
        name="null",
        outputs=["out"],
        rules=[
            NullRule(fate="failure", lfn="/lhcb/e2e/a/1.raw", times=2),
            NullRule(fate="failure", lfn="/lhcb/e2e/a/4.raw", times=2),
            NullRule(fate="failure", lfn="/lhcb/e2e/b/2.raw", times=2),
            # Two more parcels of the second run that do not succeed, and are not quarantines:
            # no status report (the parcel fails, its input is retried) and NOT_TRIED (the input
            # goes back to be packed again, no error counted).
            NullRule(fate="no_report", lfn="/lhcb/e2e/b/3.raw", times=1),
            NullRule(fate="not_tried", lfn="/lhcb/e2e/b/4.raw", times=1),
        ],
    )
    async with launch_mariadb(null=null) as world:
        first = await world.submit(document("a"))
        await world.start(first)
        await world.until("two inputs quarantined", problematic_only(world, first, 2), first)
        assert not (await world.feeders_on(first))["Sim"]  # the List feeder is exhausted
        await asyncio.sleep(8 * PACE_S)  # lifecycle rounds: the drain guard keeps it Active
        assert (await world.statuses(first))[0] == W.ACTIVE
        quarantined = [
            r for r in await world.inputs(first, "Sim") if r.Status == I.PROBLEMATIC.value
        ]
        assert sorted(r.LFN for r in quarantined) == ["/lhcb/e2e/a/1.raw", "/lhcb/e2e/a/4.raw"]
        assert {r.ErrorCount for r in quarantined} == {2}
        _, logs = await world.logs(first)
        reasons = [r.Message for r in logs["Sim"] if r.EventType == "InputProblematic"]
        assert len(reasons) == 2 and all("limit 2" in reason for reason in reasons)

        reply = await world.call_execution(
            "WriteOffInputs",
            transformation_id=first.members["Sim"],
            selection=selection(I.PROBLEMATIC),
            reason="not worth it",
        )
        assert reply.written_off_count == 2
        await world.reach(first, W.COMPLETED)
        await check_invariants(world, first)
        assert (await world.census(first))["Sim"]["inputs"] == {"Processed": 4, "NotProcessed": 2}

        second = await world.submit(document("b"))
        await world.start(second)
        await world.until("one input quarantined", problematic_only(world, second, 1), second)
        reply = await world.call_execution(
            "ResetInputs",
            transformation_id=second.members["Sim"],
            selection=selection(I.PROBLEMATIC),
            reason="the site is fixed",
        )
        assert reply.reset_count == 1
        await world.reach(second, W.COMPLETED)
        await check_invariants(world, second)
        assert (await world.census(second))["Sim"]["inputs"] == {"Processed": 6}
        rows = {r.LFN: r for r in await world.inputs(second, "Sim")}
        assert {lfn: r.ErrorCount for lfn, r in rows.items()} == {
            **{f"/lhcb/e2e/b/{n}.raw": 0 for n in range(6)},
            "/lhcb/e2e/b/3.raw": 1,  # the parcel without a report failed it once
        }
        parcels = {bytes(p.ParcelID): p for p in await world.parcels(second, "Sim")}
        assert all(parcels[bytes(r.LastParcelID)].Status == "Done" for r in rows.values())
        # b/2 twice, b/3 without a report, b/4 with nothing tried: each its own failed parcel.
        failed = [p for p in parcels.values() if p.Status == "Failed"]
        assert len(failed) == 4 and len(parcels) == 6 + 4
        reasons = [str((p.Annotations or {}).get("reason", "")) for p in failed]
        assert sum("status report" in reason for reason in reasons) == 1, reasons
