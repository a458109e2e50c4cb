"""The scenarios' plugins that need nothing but their arguments, installed as entry points.

* `SplitByMask` (HandleFailedInput): a Failed input without a mask is subdivided into `parts`
  children, each the parent's descriptor plus an opaque `mask` ("k/parts"); a masked child that
  fails again is retried (ToUnassigned).
* `FailsOnce` (an Archiving or Cleaning action): Failed the first time it runs for a
  transformation in a state (in the process that runs it), Done after.
* `Hold` (a Finalizing action) and `HoldApproval` (an Approving one): Pending, always — an owner
  that stays in the state until something else (a cancellation) moves it.
"""

from __future__ import annotations

import uuid

from pydantic import Field

from dxts.core.plugins import (
    ActionResult,
    Input,
    InputRecord,
    Parcel,
    PluginArgs,
    SplitInto,
    ToUnassigned,
    Transformation,
    action,
    hook,
)


class MaskArgs(PluginArgs):
    parts: int = Field(2, ge=2)


@hook("HandleFailedInput")
def split_by_mask(
    *, input: InputRecord, parcel: Parcel | None, args: MaskArgs
) -> SplitInto | ToUnassigned:
    descriptor = dict(input.descriptor or {})
    if "mask" in descriptor:
        return ToUnassigned()
    children = [
        Input(descriptor={**descriptor, "mask": f"{part}/{args.parts}"})
        for part in range(1, args.parts + 1)
    ]
    return SplitInto(children=children)


FAILED_ONCE: set[tuple[uuid.UUID, str]] = set()


@action("Archiving", "Cleaning")
def fails_once(*, transformation: Transformation) -> ActionResult:
    key = (transformation.id, str(transformation.status))
    if key in FAILED_ONCE:
        return ActionResult.done("fine this time")
    FAILED_ONCE.add(key)
    return ActionResult.failed("the storage element did not answer")


@action("Finalizing")
def hold() -> ActionResult:
    return ActionResult.pending("held by the test")


@action("Approving")
def hold_approval() -> ActionResult:
    return ActionResult.pending("held by the test")
