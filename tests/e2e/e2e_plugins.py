"""The scenario plugins that need the in-process world, registered beside the installed plugins
by `e2e_world.running` only; the other test plugins are installed (tests/e2e_plugins) and found
by every component on its own.

* `JoinByName` (packer): the built-in Join whose `partner` is a TransformationOutputID — which a
  document cannot name, since the compiler mints it at submission — given here as
  "step/output" and resolved through `OutputNames`, which the world fills after submitting (a
  provider no standalone component has);
* `FailsOnFlush` (packer): holds every input back for a flush, and raises on a flush, in words
  a person can act on (a packer whose flush path is broken).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

from pydantic import Field

from dxts.core.builtins.join import JoinArgs, join
from dxts.core.builtins.packers import PackArgs
from dxts.core.plugins import InputRecord, PackerProposal, PluginArgs, Transformation
from dxts.core.plugins.points import PluginKind
from dxts.core.plugins.protocols.readers import PartnerLookup
from dxts.core.plugins.registry import Plugin, analyse


class OutputNames(dict[str, str]):
    """Each submitted workgraph's "step/output" → its TransformationOutputID."""


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


FLUSH_FAILURE = "the staging area is full: cannot pack the inputs held back"


async def fails_on_flush(
    *, packer_args: PackArgs, inputs: AsyncIterator[InputRecord], flush: bool
) -> AsyncIterator[PackerProposal]:
    async for _ in inputs:
        pass
    if flush:
        raise RuntimeError(FLUSH_FAILURE)
    return
    yield  # pragma: no cover - an async generator that proposes nothing


def scenario_plugins() -> list[Plugin]:
    found = []
    for name, function in (("JoinByName", join_by_name), ("FailsOnFlush", fails_on_flush)):
        plugin, problems = analyse(PluginKind.PACKER, name, function, "(tests/e2e)")
        assert plugin is not None, problems
        found.append(plugin)
    return found
