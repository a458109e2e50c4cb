"""MergeHistograms against doubles: the member's histogram outputs, and the last parcel it asks
the core for (created once, by its request id) and waits on."""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lifecycle_doubles import MemoryExecution
from test_partner_actions import compare

from dxts.core.builtins.histograms import MERGE_TOOL, MergeArgs, merge_histograms
from dxts.core.plugins.protocols.lifecycle import FinalParcel, OutputRecord
from dxts.core.states import ActionResult, ParcelStatus

P = ParcelStatus


@dataclass
class MemoryFinalParcels:
    """`FinalParcels`: one parcel per request id, whose status a test sets."""

    created: dict[str, tuple[uuid.UUID, dict[str, Any]]] = field(default_factory=dict)
    status: ParcelStatus = P.UNASSIGNED
    message: str = ""

    async def create_final_parcel(
        self,
        transformation_id: uuid.UUID,
        *,
        process: dict[str, Any],
        parameters: dict[str, Any],
        annotations: dict[str, Any],
        request_id: str,
    ) -> uuid.UUID:
        if request_id not in self.created:
            asked = {"process": process, "parameters": parameters, "annotations": annotations}
            self.created[request_id] = (uuid.uuid4(), asked)
        return self.created[request_id][0]

    async def final_parcel(self, parcel_id: uuid.UUID) -> FinalParcel:
        return FinalParcel(parcel_id, self.status, self.message)


async def test_merge_histograms_asks_for_one_parcel_and_waits_for_it() -> None:
    member = compare()
    execution, final = MemoryExecution(), MemoryFinalParcels()
    for n in range(3):
        for name in ("GAUSSHIST", "sim"):
            execution.output_rows[member.id].append(
                OutputRecord(uuid.uuid4(), name, False, uuid.uuid4(), f"/lhcb/{name}/{n}")
            )
    args = MergeArgs(output="GAUSSHIST")

    async def run() -> Any:
        return await merge_histograms(
            transformation=member, args=args, execution=execution, final=final
        )

    first = await run()
    (request_id,) = final.created
    parcel_id, asked = final.created[request_id]
    assert asked["process"] == MERGE_TOOL
    assert asked["parameters"] == {
        "histograms": [{"class": "File", "location": f"lfn:/lhcb/GAUSSHIST/{n}"} for n in range(3)]
    }
    assert (first.result, first.message) == (
        ActionResult.PENDING,
        f"merging 3 histograms under GAUSSHIST in parcel {parcel_id} (Unassigned)",
    )
    final.status, final.message = P.FAILED, "hadd: cannot open file"
    failed = await run()
    assert (failed.result, failed.message) == (
        ActionResult.FAILED,
        f"merging 3 histograms under GAUSSHIST in parcel {parcel_id} ended Failed: "
        "hadd: cannot open file",
    )
    final.status = P.DONE
    done = await run()
    assert done.result == ActionResult.PASSED and len(final.created) == 1  # the same parcel


async def test_merge_histograms_passes_with_nothing_to_merge() -> None:
    result = await merge_histograms(
        transformation=compare(),
        args=MergeArgs(output="GAUSSHIST"),
        execution=MemoryExecution(),
        final=MemoryFinalParcels(),
    )
    assert (result.result, result.message) == (
        ActionResult.PASSED,
        "no histograms under GAUSSHIST to merge",
    )


def test_the_built_in_merge_tool_sums_json_histograms_bin_by_bin(tmp_path: Path) -> None:
    paths = []
    for n, bins in enumerate([{"0": 1, "1": 2}, {"1": 3, "2": 4}]):
        path = tmp_path / f"h{n}.json"
        path.write_text(json.dumps({"bins": bins}))
        paths.append(str(path))
    subprocess.run([*MERGE_TOOL["baseCommand"], *paths], cwd=tmp_path, check=True)
    merged = json.loads(
        (tmp_path / MERGE_TOOL["outputs"]["merged"]["outputBinding"]["glob"]).read_text()
    )
    assert merged == {"bins": {"0": 1, "1": 5, "2": 4}}
