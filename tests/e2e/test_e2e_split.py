"""Scenario 9 (MariaDB): inputs subdivided, with masks and lineage.

* Recovery split: seed 5's parcel reports it SPLIT into two masked portions, one done and one
  not. The parcel is PartiallyDone; the parent is Split; the done portion is a Processed child
  claimed by a born-Done recovery parcel (never submitted); the other is an Unassigned child,
  packed and processed like any input.
* HandleFailedInput subdivision: seed 2's parcel fails; the transformation's hook
  (`SplitByMask`) replaces the input by two children, each the parent's descriptor plus a mask;
  the parent is Split, the children are processed.

Children point at their parent (ParentInputID, also what ListInputs filters on); every parent
ends Split, every leaf Processed.
"""

from __future__ import annotations

from typing import Any

import pytest
from e2e_world import I, Launch, W, check_invariants, step, workgraph

from dxts.backends.null.settings import NullRule, NullSettings
from dxts.core.grpc.convert import enum_to_proto
from dxts.core.ids import id_to_str
from dxts.v1 import execution_pb2

pytestmark = pytest.mark.mariadb_only
SEEDS = 8


def seeds_listed() -> dict[str, Any]:
    return {
        "type": {"type": "array", "items": ["File", "string"]},
        "dirac:Feeder": {
            "name": "List",
            "args": {"inputs": [{"descriptor": {"seed": n}} for n in range(SEEDS)]},
        },
    }


async def test_splits_carry_masks_and_lineage(launch_mariadb: Launch) -> None:
    document = workgraph(
        {"seeds": seeds_listed()},
        {"Sim": step("seeds", hooks={"HandleFailedInput": {"hook": "SplitByMask"}})},
        {"sims": "Sim/out"},
    )
    null = NullSettings(
        name="null",
        outputs=["out"],
        rules=[
            NullRule(fate="split", descriptor={"seed": 5}, times=1),
            NullRule(fate="failure", descriptor={"seed": 2}, times=1),
        ],
    )
    async with launch_mariadb(null=null) as world:
        wg = await world.submit(document)
        await world.start(wg)
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)

        rows = await world.inputs(wg, "Sim")
        by_id = {bytes(r.InputID): r for r in rows}
        parents = {r.Descriptor["seed"]: r for r in rows if r.ParentInputID is None}
        assert {seed: r.Status for seed, r in parents.items()} == {
            n: I.SPLIT.value if n in (2, 5) else I.PROCESSED.value for n in range(SEEDS)
        }
        children = {
            seed: sorted(
                (r for r in rows if r.ParentInputID == parent.InputID),
                key=lambda r: r.Descriptor["mask"],
            )
            for seed, parent in parents.items()
        }
        assert {seed: len(found) for seed, found in children.items() if found} == {2: 2, 5: 2}
        leaves = [r for r in rows if r.Status not in (I.SPLIT.value,)]
        assert {r.Status for r in leaves} == {I.PROCESSED.value}

        # HandleFailedInput: the parent's descriptor with a mask, its failure history kept.
        assert [c.Descriptor for c in children[2]] == [
            {"seed": 2, "mask": "1/2"},
            {"seed": 2, "mask": "2/2"},
        ]
        assert parents[2].ErrorCount == 1 and {c.ErrorCount for c in children[2]} == {1}

        # The recovery split: the backend's portions, masked, one claimed by a recovery parcel.
        parent_id = id_to_str(bytes(parents[5].InputID))
        assert [c.Descriptor for c in children[5]] == [
            {"split_of": parent_id, "part": 0, "mask": "1/2"},
            {"split_of": parent_id, "part": 1, "mask": "2/2"},
        ]
        parcels = {bytes(p.ParcelID): p for p in await world.parcels(wg, "Sim")}
        split_parcel = parcels[bytes(parents[5].LastParcelID)]
        assert split_parcel.Status == "PartiallyDone"
        done, retried = (parcels[bytes(c.LastParcelID)] for c in children[5])
        assert (done.Backend, done.Directed, done.Status) == (None, "recovery", "Done")
        assert (retried.Backend, retried.Status) == ("null", "Done")
        # Never submitted: the backend accepted only the parcels of the null backend.
        null_parcels = sum(p.Backend == "null" for p in parcels.values())
        assert (await world.backend_counters())["accepted"] == null_parcels
        assert sum(p.Directed == "recovery" for p in parcels.values()) == 1
        failed = parcels[bytes(parents[2].LastParcelID)]
        assert failed.Status == "Failed"
        assert {c.ErrorCount for c in children[5]} == {0, 1}  # the failed portion failed once

        # The lineage as the service shows it.
        listed = await world.execution.ListInputs(
            execution_pb2.ListInputsRequest(
                transformation_id=wg.members["Sim"], parent_input_id=parent_id
            )
        )
        assert sorted(i.input_id for i in listed.inputs) == sorted(
            id_to_str(bytes(c.InputID)) for c in children[5]
        )
        assert {i.status for i in listed.inputs} == {
            enum_to_proto(I.PROCESSED)  # type: ignore[misc]
        }
        assert all(bytes(c.ParentInputID) in by_id for c in children[5] + children[2])
