"""The one scenario plugin that needs the in-process world: `JoinByName` (packer), the built-in
Join whose `partner` is a TransformationOutputID — which a document cannot name, since the
compiler mints it at submission — given here as "step/output" and resolved through
`OutputNames`, which the world fills after submitting. It is registered beside the installed
plugins by `e2e_world.running` only (a provider no standalone component has); the other test
plugins are installed (tests/e2e_plugins) and found by every component on its own.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

from pydantic import Field

from dxts.core.builtins.join import JoinArgs, join
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


def scenario_plugins() -> list[Plugin]:
    plugin, problems = analyse(PluginKind.PACKER, "JoinByName", join_by_name, "(tests/e2e)")
    assert plugin is not None, problems
    return [plugin]
