"""EveryPartnerJoined against doubles of what it reads: the partner output's files, this
member's successful parcels (the partner files each joined) and its upstream's counts."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from lifecycle_doubles import MemoryCounts, MemoryExecution

from dxts.core.builtins.partners import PartnerArgs, every_partner_joined
from dxts.core.errors import InvalidArgument
from dxts.core.plugins import Transformation
from dxts.core.plugins.protocols.lifecycle import OutputRecord, ParcelRecord
from dxts.core.states import ActionResult, InputStatus, Kind, ParcelStatus, TransformationStatus

PARTNER_OUTPUT = uuid.uuid4()
RECO_B = uuid.uuid4()


def compare() -> Transformation:
    return Transformation(
        id=uuid.uuid4(),
        type="Test",
        kind=Kind.COMPUTE,
        status=TransformationStatus.FINALIZING,
        feeder="Edge",
        feeder_args={},
        feeder_enabled=False,
        packer="ByPartner",
        packer_args={},
        annotations={"id": "Compare", "joined": {"other": str(PARTNER_OUTPUT)}},
        upstream_ids=(RECO_B,),
    )


def world(joined: list[list[str]], produced: list[str]) -> tuple[Transformation, MemoryExecution]:
    member = compare()
    execution = MemoryExecution()
    for lfns in joined:
        execution.parcel_rows[member.id].append(
            ParcelRecord(
                uuid.uuid4(),
                Kind.COMPUTE,
                ParcelStatus.DONE,
                annotations={"metadata": {"partners": lfns}},
            )
        )
    for lfn in produced:
        execution.output_rows[RECO_B].append(
            OutputRecord(PARTNER_OUTPUT, "out", False, uuid.uuid4(), lfn)
        )
    return member, execution


async def test_every_partner_joined_passes_once_each_partner_file_was_joined() -> None:
    member, execution = world([["/b/0", "/b/1"], ["/b/2"]], ["/b/0", "/b/1", "/b/2"])
    result = await every_partner_joined(
        transformation=member, args=PartnerArgs(), execution=execution, counts=MemoryCounts()
    )
    assert (result.result, result.message) == (
        ActionResult.PASSED,
        "all 3 partner files (other) were joined",
    )


async def test_every_partner_joined_waits_then_names_what_never_joined() -> None:
    member, execution = world([["/b/0"]], ["/b/0", "/b/1", "/b/2"])
    # A failed parcel's partners were not joined.
    execution.parcel_rows[member.id].append(
        ParcelRecord(
            uuid.uuid4(),
            Kind.COMPUTE,
            ParcelStatus.FAILED,
            annotations={"metadata": {"partners": ["/b/1"]}},
        )
    )
    counts = MemoryCounts()
    counts.set(RECO_B, {InputStatus.ASSIGNED: 1, InputStatus.PROCESSED: 2})
    waiting = await every_partner_joined(
        transformation=member, args=PartnerArgs(), execution=execution, counts=counts
    )
    assert waiting.result == ActionResult.PENDING
    assert waiting.message == "2 partner files not joined yet; 1 upstream inputs in flight"
    counts.set(RECO_B, {InputStatus.PROCESSED: 3})
    failed = await every_partner_joined(
        transformation=member, args=PartnerArgs(), execution=execution, counts=counts
    )
    assert (failed.result, failed.message) == (
        ActionResult.FAILED,
        "2 of 3 partner files (other) were never joined: /b/1; /b/2",
    )


async def test_every_partner_joined_needs_a_joined_input() -> None:
    member, execution = world([], [])
    bare = replace(member, annotations={"id": "Compare"})
    with pytest.raises(InvalidArgument, match="joins no input: name the partner's step input"):
        await every_partner_joined(transformation=bare, args=PartnerArgs(), execution=execution)
