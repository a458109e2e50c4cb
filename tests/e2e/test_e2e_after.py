"""The `after` wait on every member (both databases).

A stripping step `after` the staging that replicates its files to a buffer: the staging is slow
on one file and gives up on another; the step never packs a file before the staging processed
it, and the file the staging gave up on (written off) is written off in the step on its own.

A removal `after` its consumer: when the consumer's copy is written off the removal's copy
follows at once (no second write-off); when the consumer's copy is reset and processed, the
removal's quarantine is lifted and the file is removed.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from e2e_world import (
    RC,
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
from dxts.core.db import Database
from dxts.core.schema import execution
from dxts.core.states import Kind

GIVE_UP = {"HandleFailedInput": {"hook": "RetryUntilMaxErrors", "args": {"max_errors": 1}}}


def staged(prefix: str) -> dict[str, Any]:
    strip = step("raw", after=["Stage"])
    strip["hints"]["dirac:Transformation"]["packer"]["args"]["after_delay_s"] = 0.5
    return workgraph(
        {"raw": listed(4, prefix)},
        {"Strip": strip},
        {"stripped": "Strip/out"},
        data_management=[
            {
                "id": "Stage",
                "operation": "replicate",
                "files": "raw",
                "destination": "BUFFER",
                "initial_state": "Active",
            }
        ],
    )


def _count(world: World, wg: Submitted, name: str, **expected: int) -> Any:
    async def check() -> bool:
        return dict((await world.census(wg))[name]["inputs"]) == expected

    return check


async def _packed_lfns(world: World, wg: Submitted, name: str) -> set[str]:
    pi, i = execution.parcel_inputs, execution.inputs
    async with world.database.transaction(RC) as conn:
        rows = await conn.execute(
            sa.select(i.c.LFN)
            .select_from(
                pi.join(
                    i,
                    sa.and_(
                        i.c.TransformationID == pi.c.TransformationID,
                        i.c.InputID == pi.c.InputID,
                    ),
                )
            )
            .where(pi.c.TransformationID == wg.tid(name))
        )
        return {str(r.LFN) for r in rows}


async def test_a_step_after_its_staging_never_packs_an_unstaged_file(
    launch: Launch, database: Database, shape: str
) -> None:
    prefix = f"staging-{database.dialect_name}-{shape}"
    slow, lost = f"/lhcb/e2e/{prefix}/0.raw", f"/lhcb/e2e/{prefix}/1.raw"
    data = NullSettings(
        name="null-data",
        kind=Kind.DATA,
        rules=[
            NullRule(fate="success", lfn=slow, delay_s=3),
            NullRule(fate="failure", lfn=lost),
        ],
    )
    async with launch(null_data=data) as world:
        wg = await world.submit(staged(prefix))
        await world.start(wg)

        async def staged_or_packed() -> tuple[str, bool] | None:
            # Packed first, then the staging's status: Processed is final, so a file seen packed
            # and then not Processed was packed before the staging processed it (read the other
            # way round, the staging could finish and the step pack between the two reads).
            packed = slow in await _packed_lfns(world, wg, "Strip")
            stage = {r.LFN: r.Status for r in await world.inputs(wg, "Stage")}
            if stage.get(slow) == I.PROCESSED.value or packed:
                return str(stage.get(slow)), packed
            return None

        stage_status, _ = await world.until("the slow file staged or packed", staged_or_packed, wg)
        assert stage_status == I.PROCESSED.value, f"packed while staging had it {stage_status}"
        # The staging fails on the lost file until it is quarantined; the step waits for it.
        await world.until("the staging to give up", _has(world, wg, "Stage", I.PROBLEMATIC), wg)
        assert lost not in await _packed_lfns(world, wg, "Strip")
        await world.call_execution(
            "WriteOffInputs",
            transformation_id=wg.members["Stage"],
            selection=selection(I.PROBLEMATIC),
            reason="the tape lost it",
        )
        # The step's copy follows the staging's write-off on its own.
        await world.until(
            "the step to follow", _count(world, wg, "Strip", Processed=3, NotProcessed=1), wg
        )
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)
        assert lost not in await _packed_lfns(world, wg, "Strip")


def _has(world: World, wg: Submitted, name: str, status: I) -> Any:
    async def check() -> bool:
        return (await world.census(wg))[name]["inputs"].get(status.value, 0) > 0

    return check


def removal(prefix: str) -> dict[str, Any]:
    return workgraph(
        {"raw": listed(4, prefix)},
        {"Sim": step("raw", hooks=GIVE_UP)},
        {"sims": "Sim/out"},
        data_management=[
            {
                "id": "Remove",
                "operation": "remove",
                "files": "raw",
                "after": ["Sim"],
                "packer": {"name": "PerInput", "args": {"after_delay_s": 0.5}},
            }
        ],
    )


async def test_a_removal_follows_its_consumers_write_off(
    launch: Launch, database: Database, shape: str
) -> None:
    prefix = f"follow-{database.dialect_name}-{shape}"
    lost = f"/lhcb/e2e/{prefix}/1.raw"
    null = NullSettings(name="null", outputs=["out"], rules=[NullRule(fate="failure", lfn=lost)])
    async with launch(null=null) as world:
        wg = await world.submit(removal(prefix))
        await world.start(wg)
        await world.until(
            "Sim to give up", _count(world, wg, "Sim", Processed=3, Problematic=1), wg
        )
        await world.call_execution(
            "WriteOffInputs",
            transformation_id=wg.members["Sim"],
            selection=selection(I.PROBLEMATIC),
            reason="Sim gives up",
        )
        # One write-off: the removal's copy follows, and the workgraph completes.
        await world.reach(wg, W.COMPLETED)
        census = await world.census(wg)
        assert dict(census["Remove"]["inputs"]) == {"Processed": 3, "NotProcessed": 1}
        (followed,) = [r for r in await world.inputs(wg, "Remove") if r.Status == "NotProcessed"]
        assert lost == followed.LFN
        _, logs = await world.logs(wg)
        assert [r.EventType for r in logs["Remove"] if r.EventType == "AfterWrittenOff"]
        await check_invariants(world, wg)


async def test_a_removal_quarantine_is_lifted_when_its_consumer_is_reset_and_processed(
    launch: Launch, database: Database, shape: str
) -> None:
    prefix = f"lift-{database.dialect_name}-{shape}"
    flaky = f"/lhcb/e2e/{prefix}/2.raw"
    null = NullSettings(
        name="null", outputs=["out"], rules=[NullRule(fate="failure", lfn=flaky, times=1)]
    )
    async with launch(null=null) as world:
        wg = await world.submit(removal(prefix))
        await world.start(wg)
        await world.until(
            "Sim to give up", _count(world, wg, "Sim", Processed=3, Problematic=1), wg
        )
        await world.until(
            "the removal to quarantine it",
            _count(world, wg, "Remove", Processed=3, Problematic=1),
            wg,
        )
        await world.call_execution(
            "ResetInputs",
            transformation_id=wg.members["Sim"],
            selection=selection(I.PROBLEMATIC),
            reason="try again",
        )
        await world.reach(wg, W.COMPLETED)
        census = await world.census(wg)
        assert dict(census["Sim"]["inputs"]) == {"Processed": 4}
        assert dict(census["Remove"]["inputs"]) == {"Processed": 4}
        _, logs = await world.logs(wg)
        assert [r for r in logs["Remove"] if r.EventType == "AfterQuarantineLifted"]
        await check_invariants(world, wg)
