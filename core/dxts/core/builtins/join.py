"""Join: a step with two inputs sourced from other steps (docs/extensions.md, "The built-ins").

The pool holds the driving edge's files (fed by Edge); each driving input's partner under the
joined output is looked up through the schema by the injected `PartnerLookup`. A ready partner
makes a parcel with the driving input under its own step input and the partner's files under
`partner_input`; a partner not produced yet (or whose input is quarantined) delays the driving
input; one that never will be (its input ended NotProcessed) makes it Problematic.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from uuid import UUID

from pydantic import Field

from dxts.core.builtins.after import after_of, screen
from dxts.core.builtins.packers import PackArgs, chunks, cwl_value, driving_input
from dxts.core.errors import InvalidArgument
from dxts.core.plugins import (
    BadInput,
    ComputeParcel,
    DelayInput,
    InputRecord,
    PackerProposal,
    Transformation,
)
from dxts.core.plugins.protocols.readers import ConsumerLookup, PartnerLookup, PartnerState
from dxts.core.states import Kind


class JoinArgs(PackArgs):
    partner: UUID = Field(description="TransformationOutputID of the joined output")
    partner_input: str = Field(min_length=1, description="the step input the partner fills")
    delay_minutes: float = Field(15.0, gt=0, description="how long a waiting input is withheld")


def _driving_output(transformation: Transformation) -> UUID:
    text = transformation.feeder_args.get("transformation_output_id")
    try:
        return UUID(str(text))
    except ValueError:
        raise InvalidArgument(
            f"Join needs the driving edge's Edge feeder (FeederArgs.transformation_output_id); "
            f"{transformation.id} has {transformation.feeder} with {text!r}",
            field="feeder_args.transformation_output_id",
        ) from None


async def join(
    *,
    packer_args: JoinArgs,
    inputs: AsyncIterator[InputRecord],
    transformation: Transformation,
    partners: PartnerLookup,
    consumers: ConsumerLookup | None = None,
) -> AsyncIterator[PackerProposal]:
    """One parcel per driving input with its partner, looked up a chunk at a time (after the
    `after` wait, when the step has one)."""
    if transformation.kind is not Kind.COMPUTE:
        raise InvalidArgument("Join makes compute parcels", field="packer")
    driving = _driving_output(transformation)
    parameter = driving_input(transformation, packer_args)
    until = datetime.now(UTC) + timedelta(minutes=packer_args.delay_minutes)
    after = after_of(transformation)
    async for claimed in chunks(inputs):
        chunk, withheld = await screen(
            claimed, after=after, consumers=consumers, delay_s=packer_args.after_delay_s
        )
        for proposal in withheld:
            yield proposal
        lfns = [record.lfn for record in chunk if record.lfn is not None]
        found = await partners.partners(
            lfns, driving_output=driving, partner_output=packer_args.partner
        )
        waiting = []
        for record in chunk:
            if record.lfn is None:
                yield BadInput(record.id, "a joined input is a file: this one has no LFN")
                continue
            partner = found[record.lfn]
            if partner.state is PartnerState.NEVER:
                yield BadInput(record.id, partner.reason or "its partner will never be produced")
            elif partner.state is PartnerState.WAITING:
                waiting.append(record.id)
            else:
                parameters = {
                    packer_args.partner_input: [
                        {"class": "File", "location": f"lfn:{f.lfn}"} for f in partner.files
                    ]
                }
                if parameter:
                    parameters[parameter] = [cwl_value(record)]
                yield ComputeParcel(inputs=[record.id], parameters=parameters)
        if waiting:
            yield DelayInput(waiting, until)
