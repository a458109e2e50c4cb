"""Forward lineage and why a workgraph is not finishing, as data (both databases).

Four raw files → Sim (one a parcel) → Reco (two a parcel). While Sim holds one file Problematic
and Reco is paused, GetDrainStatus names both reasons, member by member; once it has completed,
ListDescendants of a raw file lists the Sim input that took it, the Sim parcel and what it made,
then the Reco input that took that and the Reco parcel's product — bounded by depth, paged.
"""

from __future__ import annotations

from typing import Any

import pytest
from e2e_world import I, Launch, Submitted, W, World, check_invariants, listed, selection, step
from e2e_world import workgraph as document

from dxts.backends.null.settings import NullRule, NullSettings
from dxts.core.db import Database
from dxts.core.errors import InvalidArgument, NotFound
from dxts.v1 import common_pb2, definition_pb2, execution_pb2

GIVE_UP = {"HandleFailedInput": {"hook": "RetryUntilMaxErrors", "args": {"max_errors": 1}}}


def chain(prefix: str) -> dict[str, Any]:
    return document(
        {"raw": listed(4, prefix)},
        {
            "Sim": step("raw", hooks=GIVE_UP),
            "Reco": step("Sim/out", packer="BySize", group_size=2),
        },
        {"recos": "Reco/out"},
    )


async def _drain(world: World, wg: Submitted) -> definition_pb2.GetDrainStatusResponse:
    return await world.definition.GetDrainStatus(
        definition_pb2.GetDrainStatusRequest(workgraph_id=wg.workgraph_id)
    )


def _reasons(reply: definition_pb2.GetDrainStatusResponse) -> dict[str, set[tuple[Any, ...]]]:
    return {
        m.step: {(r.kind, r.state, r.count, r.message) for r in m.reasons} for m in reply.members
    }


async def _descendants(world: World, lfn: str, **fields: Any) -> Any:
    return await world.execution.ListDescendants(
        execution_pb2.ListDescendantsRequest(lfn=lfn, **fields)
    )


async def test_why_it_is_not_finishing_then_what_was_made_from_a_file(
    launch: Launch, database: Database, shape: str
) -> None:
    prefix = f"lineage-{database.dialect_name}-{shape}"
    lost = f"/lhcb/e2e/{prefix}/3.raw"
    null = NullSettings(name="null", outputs=["out"], rules=[NullRule(fate="failure", lfn=lost)])
    async with launch(null=null) as world:
        wg = await world.submit(chain(prefix))
        await world.start(wg)
        await world.call(
            "PauseTransformation", transformation_id=wg.members["Reco"], reason="look first"
        )

        async def quarantined() -> bool:
            return (await world.census(wg))["Sim"]["inputs"].get("Problematic", 0) == 1

        await world.until("Sim to give up on one file", quarantined, wg)
        held = await _drain(world, wg)
        assert not held.drained and list(held.reasons) == []
        reasons = _reasons(held)
        assert ("inputs", "Problematic", 1, "1 Problematic inputs") in reasons["Sim"]
        assert ("status", "Paused", 0, "it is Paused") in reasons["Reco"]
        assert {m.step: m.drained for m in held.members} == {"Sim": False, "Reco": False}

        await world.call_execution(
            "WriteOffInputs",
            transformation_id=wg.members["Sim"],
            selection=selection(I.PROBLEMATIC),
            reason="lost",
        )
        await world.call(
            "ResumeTransformation", transformation_id=wg.members["Reco"], reason="go on"
        )
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)
        done = await _drain(world, wg)
        assert done.drained and all(m.drained and not m.reasons for m in done.members)

        raw = f"/lhcb/e2e/{prefix}/0.raw"
        walk = await _descendants(world, raw)
        assert not walk.truncated and not walk.next_page_token
        first, second = walk.records
        assert (first.depth, first.input.transformation_id) == (1, wg.members["Sim"])
        assert first.input.lfn == raw and first.input.status == common_pb2.INPUT_STATUS_PROCESSED
        assert first.parcel.status == common_pb2.PARCEL_STATUS_DONE and first.process_id
        (made,) = first.outputs
        assert (second.depth, second.input.transformation_id) == (2, wg.members["Reco"])
        assert second.input.lfn == made.lfn
        assert [o.output_name for o in second.outputs] == ["out"]
        assert made.lfn in set(await world.produced(wg, "Sim/out"))

        # Bounded by depth; paged one record at a time, the same walk.
        shallow = await _descendants(world, raw, max_depth=1)
        assert [r.depth for r in shallow.records] == [1]
        paged, token = [], ""
        while True:
            page = await _descendants(
                world, raw, paging=common_pb2.Paging(page_size=1, page_token=token)
            )
            paged.extend(page.records)
            token = page.next_page_token
            if not token:
                break
        assert paged == list(walk.records)

        # The written-off file was taken in and never made into anything.
        (dead_end,) = (await _descendants(world, lost)).records
        assert dead_end.input.status == common_pb2.INPUT_STATUS_NOT_PROCESSED
        assert not dead_end.outputs

        with pytest.raises(NotFound, match="/no/such/file"):
            await _descendants(world, "/no/such/file")
        with pytest.raises(InvalidArgument, match="page token"):
            await _descendants(world, raw, paging=common_pb2.Paging(page_token="bm90LWEtdG9rZW4"))
