"""The scenarios' own plugins, registered beside the installed ones (as an experiment's would be).

* `SplitByMask` (HandleFailedInput): a Failed input without a mask is subdivided into `parts`
  children, each the parent's descriptor plus an opaque `mask` ("k/parts"); a masked child that
  fails again is retried (ToUnassigned).
* `JoinByName` (packer): the built-in Join, whose `partner` is a TransformationOutputID — which
  a document cannot name, since the compiler mints it at submission — given here as
  "step/output" and resolved through `OutputNames`, which the world fills after submitting.
* `FailsOnce` (an Archiving or Cleaning action): Failed the first time it runs for a
  transformation in a state, Done after.
* `Hold` (a Finalizing action) and `HoldApproval` (an Approving one): Pending, always — an owner
  that stays in the state until something else (a cancellation) moves it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from pydantic import Field

from dxts.core.builtins.join import JoinArgs, join
from dxts.core.plugins import (
    ActionResult,
    Input,
    InputRecord,
    PackerProposal,
    Parcel,
    PluginArgs,
    SplitInto,
    ToUnassigned,
    Transformation,
    action,
    hook,
)
from dxts.core.plugins.points import PluginKind
from dxts.core.plugins.protocols.readers import PartnerLookup
from dxts.core.plugins.registry import Plugin, analyse


class OutputNames(dict[str, str]):
    """Each submitted workgraph's "step/output" → its TransformationOutputID."""


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


class JoinByNameArgs(PluginArgs):
    partner: str = Field(pattern=r"^[^/]+/[^/]+$", description="the joined output, step/output")
    partner_input: str = Field(min_length=1)
    input_parameter: str | None = None
    delay_minutes: float = Field(0.01, gt=0)


async def join_by_name(
    *,
    packer_args: JoinByNameArgs,
    inputs: AsyncIterator[InputRecord],
    transformation: Transformation,
    partners: PartnerLookup,
    names: OutputNames,
) -> AsyncIterator[PackerProposal]:
    args = JoinArgs(
        partner=uuid.UUID(names[packer_args.partner]),
        partner_input=packer_args.partner_input,
        input_parameter=packer_args.input_parameter,
        delay_minutes=packer_args.delay_minutes,
    )
    async for proposal in join(
        packer_args=args, inputs=inputs, transformation=transformation, partners=partners
    ):
        yield proposal


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


def scenario_plugins() -> list[Plugin]:
    found: list[Plugin] = []
    named: list[tuple[PluginKind, str, Any]] = [
        (PluginKind.HOOK, "SplitByMask", split_by_mask),
        (PluginKind.PACKER, "JoinByName", join_by_name),
        (PluginKind.ACTION, "Hold", hold),
        (PluginKind.ACTION, "FailsOnce", fails_once),
        (PluginKind.ACTION, "HoldApproval", hold_approval),
    ]
    for kind, name, function in named:
        plugin, problems = analyse(kind, name, function, "(tests/e2e)")
        assert plugin is not None, problems
        found.append(plugin)
    return found
