"""ByPartner and EveryPartnerJoined: a step that compares two members' outputs partner by
partner (docs/extensions.md, "Joining partners").

Two reconstructions of the same files, compared file by file: the step's driving input is fed
with the first member's files (its Edge feeder), and another input is sourced from the second
member's output. The definition compiler records, for each such joined input, the output it
joins (`Annotations["joined"]`: step input → TransformationOutputID), so a document names the
partner by the step input alone. The shared key of a set is the source file: a driving file's
partner is what the other member made from the same file its own parcel read, looked up
through the schema by the injected `PartnerLookup` (the lookup the built-in Join uses).

* `ByPartner` (packer): one *set* per driving input, the driving file with its partner's
  files; `group_size` complete sets per parcel, the driving files under the driving input, the
  partners' files under `partner_input`. A set whose partner is not produced yet is withheld
  (DelayInput), one whose partner never will be is set aside (BadInput → Problematic); an
  undersized group waits while the feeder is active and leaves once it is off or on a flush,
  like every grouping packer. Each parcel records the partner files it joined in its metadata
  (`partners`), which is what EveryPartnerJoined reads.
* `EveryPartnerJoined` (Finalizing action): every file the partner output holds was joined by
  a successful parcel of this member. Pending while a member upstream of it still has inputs
  in flight (a partner may still come); Failed naming the partner files never joined (their
  driving file was written off, say), which an operator reviews and forces.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from pydantic import Field

from dxts.core.builtins.after import after_of, screen_with_companions
from dxts.core.builtins.packers import PackArgs, chunks, cwl_value, driving_input
from dxts.core.builtins.thresholds import listed
from dxts.core.errors import InvalidArgument
from dxts.core.plugins import (
    ActionResult,
    BadInput,
    ComputeParcel,
    DelayInput,
    InputRecord,
    PackerProposal,
    PluginArgs,
    Transformation,
    action,
)
from dxts.core.plugins.protocols.lifecycle import (
    LIVE_INPUTS,
    SUCCEEDED_PARCELS,
    Counts,
    ExecutionView,
    needed,
)
from dxts.core.plugins.protocols.readers import (
    ConsumerLookup,
    PartnerLookup,
    PartnerState,
    ProducedFile,
)
from dxts.core.states import Kind

# What the compiler records on a member: its joined step inputs and the output each joins.
JOINED = "joined"
# The parcel metadata key holding the partner files a parcel joined.
PARTNERS = "partners"


class PartnerArgs(PluginArgs):
    partner_input: str | None = Field(
        None,
        min_length=1,
        description="the step input the partner fills (default: the step's one joined input)",
    )


class ByPartnerArgs(PackArgs, PartnerArgs):
    group_size: int = Field(1, ge=1, description="complete sets (driving file + partner) a parcel")
    delay_minutes: float = Field(15.0, gt=0, description="how long a waiting set is withheld")


def partner_of(transformation: Transformation, args: PartnerArgs) -> tuple[str, UUID]:
    """(the partner's step input, the TransformationOutputID it joins), from what the compiler
    recorded; a step with no joined input, or several and none named, is an error naming why."""
    joined = transformation.annotations.get(JOINED)
    joined = joined if isinstance(joined, Mapping) else {}
    name = args.partner_input
    if name is None:
        if len(joined) != 1:
            raise InvalidArgument(
                f"{transformation.id} joins {', '.join(sorted(joined)) or 'no input'}: name the "
                "partner's step input (partner_input)",
                field="packer_args.partner_input",
            )
        (name,) = joined
    if name not in joined:
        raise InvalidArgument(
            f"step input {name!r} joins no other step's output (joined inputs: "
            f"{', '.join(sorted(joined)) or 'none'})",
            field="packer_args.partner_input",
        )
    try:
        return name, UUID(str(joined[name]))
    except ValueError:
        raise InvalidArgument(
            f"Annotations.joined[{name!r}] is {joined[name]!r}, not a TransformationOutputID",
            field="annotations.joined",
        ) from None


def _driving_output(transformation: Transformation) -> UUID:
    text = transformation.feeder_args.get("transformation_output_id")
    try:
        return UUID(str(text))
    except ValueError:
        raise InvalidArgument(
            f"ByPartner's pool is fed along the driving edge (Edge feeder); {transformation.id} "
            f"is fed by {transformation.feeder} with {text!r}",
            field="feeder_args.transformation_output_id",
        ) from None


class _Sets:
    """Complete sets waiting to fill a parcel of `size`."""

    def __init__(self, size: int, driving: str | None, partner_input: str) -> None:
        self.size, self.driving, self.partner_input = size, driving, partner_input
        self.open: list[tuple[InputRecord, tuple[ProducedFile, ...]]] = []

    def add(self, record: InputRecord, files: tuple[ProducedFile, ...]) -> ComputeParcel | None:
        self.open.append((record, files))
        return self.parcel() if len(self.open) == self.size else None

    def parcel(self) -> ComputeParcel | None:
        if not self.open:
            return None
        sets, self.open = self.open, []
        partners = [f.lfn for _, files in sets for f in files]
        parameters: dict[str, Any] = {
            self.partner_input: [{"class": "File", "location": f"lfn:{lfn}"} for lfn in partners]
        }
        if self.driving:
            parameters[self.driving] = [cwl_value(record) for record, _ in sets]
        return ComputeParcel(
            inputs=[record.id for record, _ in sets],
            parameters=parameters,
            metadata={PARTNERS: partners},
        )


async def by_partner(
    *,
    packer_args: ByPartnerArgs,
    inputs: AsyncIterator[InputRecord],
    transformation: Transformation,
    flush: bool,
    feeder_active: bool,
    partners: PartnerLookup,
    consumers: ConsumerLookup | None = None,
) -> AsyncIterator[PackerProposal]:
    """Parcels of `group_size` complete sets (a driving file and its partner's files); sets
    waiting for their partner are withheld, those whose partner never comes set aside."""
    if transformation.kind is not Kind.COMPUTE:
        raise InvalidArgument("ByPartner makes compute parcels", field="packer")
    partner_input, partner_output = partner_of(transformation, packer_args)
    driving = _driving_output(transformation)
    sets = _Sets(packer_args.group_size, driving_input(transformation, packer_args), partner_input)
    until = datetime.now(UTC) + timedelta(minutes=packer_args.delay_minutes)
    after = after_of(transformation)
    async for claimed in chunks(inputs):
        lfns = [record.lfn for record in claimed if record.lfn is not None]
        found = await partners.partners(lfns, driving_output=driving, partner_output=partner_output)
        # Only a set whose partner is ready waits on `after` (for its partner's files); the
        # others are delayed or set aside on their partner's account below.
        joined = [r for r in claimed if r.lfn and found[r.lfn].state is PartnerState.READY]
        companions = {r.id: [f.lfn for f in found[str(r.lfn)].files] for r in joined}
        screened, withheld = await screen_with_companions(
            joined,
            companions,
            after=after,
            consumers=consumers,
            delay_s=packer_args.after_delay_s,
        )
        for proposal in withheld:
            yield proposal
        passed = {r.id for r in screened}
        chunk = [r for r in claimed if r.id in passed or r.id not in companions]
        waiting = []
        for record in chunk:
            if record.lfn is None:
                yield BadInput(record.id, "a partner set is keyed by a file: this input has none")
                continue
            partner = found[record.lfn]
            if partner.state is PartnerState.NEVER:
                yield BadInput(record.id, partner.reason or "its partner will never be produced")
            elif partner.state is PartnerState.WAITING:
                waiting.append(record.id)
            else:
                parcel = sets.add(record, partner.files)
                if parcel is not None:
                    yield parcel
        if waiting:
            yield DelayInput(waiting, until)
    if flush or not feeder_active:
        rest = sets.parcel()
        if rest is not None:
            yield rest


@action("Finalizing")
async def every_partner_joined(
    *,
    transformation: Transformation,
    args: PartnerArgs,
    execution: ExecutionView | None = None,
    counts: Counts | None = None,
) -> ActionResult:
    """Every file under the partner output was joined by a successful parcel of this member;
    Pending while an upstream member still has inputs in flight."""
    execution = needed(execution, "ExecutionView")
    partner_input, partner_output = partner_of(transformation, args)
    produced = sorted({o.lfn async for o in execution.outputs_of(partner_output)})
    joined: set[str] = set()
    async for parcel in execution.parcels(transformation.id, SUCCEEDED_PARCELS):
        metadata = parcel.annotations.get("metadata") or {}
        joined.update(str(lfn) for lfn in metadata.get(PARTNERS) or ())
    missing = [lfn for lfn in produced if lfn not in joined]
    if not missing:
        return ActionResult.passed(
            f"all {len(produced)} partner files ({partner_input}) were joined"
        )
    if transformation.upstream_ids:
        overview = await needed(counts, "Counts").inputs(list(transformation.upstream_ids))
        live = sum(n.get(status, 0) for n in overview.values() for status in LIVE_INPUTS)
        if live:
            return ActionResult.pending(
                f"{len(missing)} partner files not joined yet; {live} upstream inputs in flight"
            )
    return ActionResult.failed(
        f"{len(missing)} of {len(produced)} partner files ({partner_input}) were never joined: "
        f"{listed(missing)}"
    )
