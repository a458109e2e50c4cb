"""Scenario 10 (MariaDB): a join of two reconstructions, and a removal that waits on its
consumer.

The join: four files simulated, each reconstructed twice (RecoA, RecoB); the Join step is driven
by RecoA's files and joined, file by file, with what RecoB made of the same simulated file (the
built-in Join packer, its partner looked up through the schema). RecoB gives up on one file
(failed once, quarantined, written off): the Join's input for that file, which was waiting for
its partner, goes Problematic — set aside for a person — not NotProcessed; written off in turn,
the workgraph completes.

The removal: a data-management removal of the raw files, `after` the step that reads them,
must take a file only once that step has processed it, and not remove a file that step gave up
on: written off there, the removal's copy follows on its own (the removal's packer withholds a
file while the step has not processed it, for a second at a time here rather than its default
minute). The workgraph completes, the removal finalizing after the step (`after` is upstream)
and its OnlyUnprocessedRemain check passing: it removed exactly the files the step processed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from e2e_world import (
    RC,
    I,
    Submitted,
    W,
    World,
    check_invariants,
    done_parameters,
    listed,
    output_sources,
    running,
    selection,
    step,
    tool,
    workgraph,
)

from dxts.backends.null.settings import NullRule, NullSettings
from dxts.core.db import Database
from dxts.core.ids import id_to_str
from dxts.core.schema import execution

pytestmark = pytest.mark.mariadb_only
GIVE_UP = {"HandleFailedInput": {"hook": "RetryUntilMaxErrors", "args": {"max_errors": 1}}}


def joined() -> dict[str, Any]:
    join = {
        "hints": {
            "dirac:Transformation": {
                "driving_input": "files",
                "packer": {
                    "name": "JoinByName",
                    "args": {
                        "partner": "RecoB/out",
                        "partner_input": "partner",
                        "input_parameter": "files",
                    },
                },
            }
        },
        "run": tool("partner"),
        "in": {"files": "RecoA/out", "partner": "RecoB/out"},
        "out": ["out", "status-report"],
    }
    return workgraph(
        {"raw": listed(4, "join")},
        {
            "Sim": step("raw"),
            "RecoA": step("Sim/out"),
            "RecoB": step("Sim/out", hooks=GIVE_UP),
            "Join": join,
        },
        {"joined": "Join/out"},
    )


def _count(world: World, wg: Submitted, name: str, **expected: int) -> Any:
    async def check() -> bool:
        return dict((await world.census(wg))[name]["inputs"]) == expected

    return check


async def test_a_join_waits_for_its_partner_and_sets_aside_what_never_comes(
    mariadb: Database, tmp_path: Path
) -> None:
    async with running(mariadb, tmp_path) as world:
        wg = await world.submit(joined())
        # RecoB's first parcel fails; with one error allowed, its input is quarantined.
        world.null.settings.rules.append(
            NullRule(fate="failure", output_prefix=f"/{wg.members['RecoB']}/", times=1)
        )
        await world.start(wg)
        await world.until(
            "RecoB to give up on one file", _count(world, wg, "RecoB", Processed=3, Problematic=1)
        )
        # The Join's input for that file waits for its partner (withheld, still Unassigned).
        await world.until("three joins", _count(world, wg, "Join", Processed=3, Unassigned=1), wg)
        (waiting,) = [r for r in await world.inputs(wg, "Join") if r.Status == "Unassigned"]
        assert waiting.DelayedUntil is not None

        await world.call_execution(
            "WriteOffInputs",
            transformation_id=wg.members["RecoB"],
            selection=selection(I.PROBLEMATIC),
            reason="RecoB gives up",
        )
        await world.until(
            "the waiting join input set aside",
            _count(world, wg, "Join", Processed=3, Problematic=1),
            wg,
        )
        _, logs = await world.logs(wg)
        (reason,) = [r for r in logs["Join"] if r.EventType == "InputProblematic"]
        assert reason.Data["input_id"] == id_to_str(bytes(waiting.InputID))
        assert (await world.statuses(wg))[0] == W.ACTIVE  # the quarantine holds it open

        await world.call_execution(
            "WriteOffInputs",
            transformation_id=wg.members["Join"],
            selection=selection(I.PROBLEMATIC),
            reason="no partner",
        )
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)

        # Each join carries RecoA's file and RecoB's file made from the same simulated file.
        from_a = await output_sources(world, wg, "RecoA/out")
        from_b = await output_sources(world, wg, "RecoB/out")
        parameters = await done_parameters(world, wg, "Join")
        assert len(parameters) == 3
        for carried in parameters:
            (driving,) = carried["files"]
            (partner,) = carried["partner"]
            source = from_a[driving["location"].removeprefix("lfn:")]
            assert from_b[partner["location"].removeprefix("lfn:")] == source


def removal() -> dict[str, Any]:
    return workgraph(
        {"raw": listed(4, "removal")},
        {"Sim": step("raw", hooks=GIVE_UP)},
        {"sims": "Sim/out"},
        data_management=[
            {
                "id": "Remove",
                "operation": "remove",
                "files": "raw",
                "after": ["Sim"],
                "packer": {"name": "PerInput", "args": {"after_delay_s": 1}},
                "actions": {
                    "Finalizing": [{"action": "OnlyUnprocessedRemain", "args": {"consumer": "Sim"}}]
                },
            }
        ],
    )


async def test_a_removal_waits_for_its_consumer(mariadb: Database, tmp_path: Path) -> None:
    null = NullSettings(
        name="null",
        outputs=["out"],
        rules=[
            NullRule(fate="success", lfn="/lhcb/e2e/removal/0.raw", delay_s=3),
            NullRule(fate="failure", lfn="/lhcb/e2e/removal/1.raw", times=1),
        ],
    )
    async with running(mariadb, tmp_path, null=null) as world:
        wg = await world.submit(removal())
        await world.start(wg)

        async def removed_or_processed() -> tuple[str, str] | None:
            sim = {r.LFN: r.Status for r in await world.inputs(wg, "Sim")}
            remove = {r.LFN: r.Status for r in await world.inputs(wg, "Remove")}
            lfn = "/lhcb/e2e/removal/0.raw"
            if I.PROCESSED.value in (sim.get(lfn), remove.get(lfn)):
                return str(sim.get(lfn)), str(remove.get(lfn))
            return None

        sim_status, _ = await world.until(
            "raw file 0 processed by Sim or removed", removed_or_processed, wg
        )
        # The removal must not have taken the file before its consumer processed it.
        assert sim_status == I.PROCESSED.value, f"removed while Sim had it {sim_status}"
        # Sim gave up on raw file 1; written off there, the removal's copy follows on its own.
        await world.until(
            "Sim to give up on raw file 1", _count(world, wg, "Sim", Processed=3, Problematic=1), wg
        )
        await world.call_execution(
            "WriteOffInputs",
            transformation_id=wg.members["Sim"],
            selection=selection(I.PROBLEMATIC),
            reason="Sim gives up",
        )
        await world.until(
            "the removal to follow on raw file 1",
            _count(world, wg, "Remove", Processed=3, NotProcessed=1),
            wg,
        )
        (kept,) = [r for r in await world.inputs(wg, "Remove") if r.Status == "NotProcessed"]
        assert kept.LFN == "/lhcb/e2e/removal/1.raw"
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)
        # Finalizing after its consumer (`after` is upstream), it removed what Sim processed.
        actions = await world.actions(wg)
        assert actions["Remove/Finalizing/1"].Result == "Passed"
        _, logs = await world.logs(wg)
        finalized = {
            name: next(r.LogID for r in rows if r.NewStatus == "Finalized")
            for name, rows in logs.items()
        }
        assert finalized["Sim"] < finalized["Remove"]
        removed = [
            file["LFN"]
            for request in await _requests(world, wg, "Remove")
            for step in request["Operations"]
            for file in step["Files"]
        ]
        assert sorted(removed) == [f"/lhcb/e2e/removal/{n}.raw" for n in (0, 2, 3)]


async def _requests(world: World, wg: Submitted, name: str) -> list[Any]:
    p, d = execution.parcels, execution.data_parcels
    async with world.database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(d.c.Request)
            .select_from(p.join(d, d.c.ParcelID == p.c.ParcelID))
            .where(p.c.TransformationID == wg.tid(name))
        )
        return [r.Request for r in rows]
