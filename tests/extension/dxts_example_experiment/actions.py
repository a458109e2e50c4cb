"""The experiment's actions: a catalogue check after removals, and the PPG sign-off."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from dxts.core.catalogue import FileCatalogue, parse_where
from dxts.core.errors import InvalidArgument
from dxts.core.plugins import ActionResult, Phase, PluginArgs, Transformation, action
from dxts_example_experiment.bookkeeping import BookkeepingArgs, in_sample

SHOWN = 5


class RemovedArgs(PluginArgs):
    catalogue: Literal["bookkeeping"] = "bookkeeping"
    storage: list[str] = Field(default_factory=list, description="the SEs emptied; [] = any")
    where: dict[str, Any] | None = Field(None, description="default: the feeder's selection")

    @field_validator("where")
    @classmethod
    def _query(cls, where: dict[str, Any] | None) -> dict[str, Any] | None:
        if where is not None:
            try:
                parse_where(where)
            except InvalidArgument as error:
                raise ValueError(str(error)) from None
        return where


@action("Finalizing")
async def removed_files_have_no_replica(
    *, transformation: Transformation, args: RemovedArgs, catalogue: FileCatalogue
) -> ActionResult:
    """Fail, listing the first few, if a file the removal was for still has a replica there."""
    fraction = None
    if args.where is not None:
        where = args.where
    elif transformation.feeder == "LHCbBookkeeping":
        selection = BookkeepingArgs.model_validate(transformation.feeder_args)
        where, fraction = selection.where(Phase.ACTIVE), selection.sampling_fraction
    else:
        return ActionResult.failed(
            f"cannot tell which files {transformation.feeder} fed: give `where` in the args"
        )
    checked, offenders = 0, []
    watermark = None
    while True:
        page = await catalogue.query(where, after=watermark, with_replicas=True)
        for file in page.files:
            if not in_sample(file.lfn, fraction):
                continue
            checked += 1
            left = [se for se in file.replicas if not args.storage or se in args.storage]
            if left:
                offenders.append(f"{file.lfn} at {', '.join(left)}")
        watermark = page.watermark
        if not page.more:
            break
    where_text = f" at {', '.join(args.storage)}" if args.storage else ""
    if offenders:
        return ActionResult.failed(
            f"{len(offenders)} of {checked} files still have a replica{where_text}: "
            + "; ".join(offenders[:SHOWN])
            + (" ..." if len(offenders) > SHOWN else "")
        )
    return ActionResult.passed(f"none of {checked} files has a replica{where_text}")


@action("Approving")
def ppg_approval() -> ActionResult:
    """The Physics Planning Group's sign-off: Failed until an operator forces it to Passed."""
    return ActionResult.failed("awaiting the PPG sign-off; force this action once it is given")
