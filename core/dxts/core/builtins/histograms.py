"""MergeHistograms: one last parcel merging a member's histogram outputs once it completes
(docs/extensions.md, "Merging histograms").

A Finalizing action. Every parcel of a simulation or reconstruction member writes its monitoring
histograms under one declared output (`GAUSSHIST`, say); once the member has drained, the action
asks the core for one more parcel, of the member's owner, running the merge tool over every
histogram file its successful parcels produced, and waits for it: Pending while it runs, Passed
once it is Done, Failed in the backend's words if it failed. The parcel belongs to no
transformation (it carries no inputs and is not counted) and is created once: its request id
is the member's and the output's, so every later run of the action finds the same parcel.

The merge tool is a CWL CommandLineTool taking `histograms` (File[]) and producing `merged`
(File). dxts's own (`MERGE_TOOL`) sums JSON histograms bin by bin (`{"bins": {bin: count}}`);
an experiment gives its own (ROOT's `hadd`, say) as the `process` argument, with the same input
and output names.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dxts.core.builtins.lifecycle_hooks import member_name
from dxts.core.plugins import ActionResult, PluginArgs, Transformation, action
from dxts.core.plugins.protocols.lifecycle import ExecutionView, FinalParcels, needed
from dxts.core.states import ParcelStatus

P = ParcelStatus
MERGED = "merged-histograms.json"
_SUM_BINS = f"""
import json, sys
from collections import Counter
total = Counter()
for path in sys.argv[1:]:
    with open(path) as histogram:
        total.update(json.load(histogram)["bins"])
with open({MERGED!r}, "w") as merged:
    json.dump({{"bins": dict(sorted(total.items()))}}, merged)
"""
MERGE_TOOL: dict[str, Any] = {
    "cwlVersion": "v1.2",
    "class": "CommandLineTool",
    "id": "merge-histograms",
    "doc": "Sums JSON histograms bin by bin: dxts's stand-in for an experiment's merger.",
    "baseCommand": ["python3", "-c", _SUM_BINS],
    "inputs": {"histograms": {"type": "File[]", "inputBinding": {"position": 1}}},
    "outputs": {"merged": {"type": "File", "outputBinding": {"glob": MERGED}}},
}


class MergeArgs(PluginArgs):
    output: str = Field(min_length=1, description="the step output holding the histograms")
    process: dict[str, Any] | None = Field(
        None,
        description="the merge tool (a CWL CommandLineTool with input `histograms`, File[], "
        "and output `merged`); default: dxts's JSON bin summer",
    )


@action("Finalizing")
async def merge_histograms(
    *,
    transformation: Transformation,
    args: MergeArgs,
    execution: ExecutionView | None = None,
    final: FinalParcels | None = None,
) -> ActionResult:
    """Merge the member's histograms under `output` in one last parcel, and wait for it."""
    histograms = sorted(
        {
            output.lfn
            async for output in needed(execution, "ExecutionView").outputs(transformation.id)
            if output.name == args.output
        }
    )
    if not histograms:
        return ActionResult.passed(f"no histograms under {args.output} to merge")
    name = member_name(transformation)
    parcel_id = await needed(final, "FinalParcels").create_final_parcel(
        transformation.id,
        process=args.process or MERGE_TOOL,
        parameters={
            "histograms": [{"class": "File", "location": f"lfn:{lfn}"} for lfn in histograms]
        },
        annotations={
            "name": f"MergeHistograms {name}/{args.output}",
            "merges": {"transformation": str(transformation.id), "output": args.output},
        },
        request_id=f"MergeHistograms:{transformation.id}:{args.output}",
    )
    parcel = await needed(final, "FinalParcels").final_parcel(parcel_id)
    merging = f"{len(histograms)} histograms under {args.output} in parcel {parcel_id}"
    if parcel.status is P.DONE:
        return ActionResult.passed(f"merged {merging}")
    if parcel.status in (P.FAILED, P.CANCELLED):
        why = f": {parcel.message}" if parcel.message else ""
        return ActionResult.failed(f"merging {merging} ended {parcel.status}{why}")
    return ActionResult.pending(f"merging {merging} ({parcel.status})")
