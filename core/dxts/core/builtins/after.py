"""The `after` wait: a file is taken only once every transformation a member waits on has
processed it (dirac-hints `after`, on a step's `dirac:Transformation` as on a data-management
declaration).

A removal of an intermediate, or of a workgraph input, must not take a file its reader still
needs; a stripping step must not read a file its staging has not put on the buffer yet. The
wait is the same for compute and data members. What became of the file there is a lookup of its
LFN in the reader's Inputs (their (TransformationID, LFN) index), made through the injected
`ConsumerLookup` once per chunk. Per input:

* every consumer has it Processed (or Split: its children carry it on) → it may be packed;
* a consumer gave up on it (NotProcessed, or holds it Problematic) → BadInput: set aside
  (Problematic). Execution revisits what was set aside before each packer run
  (`dxts.execution.logic.after_review`): it follows the consumer's write-off, or goes back to
  Unassigned once the consumer's copy has been reset and processed;
* otherwise (not fed yet, or Unassigned/Assigned/Failed there) → DelayInput for `delay_s`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from uuid import UUID

from dxts.core.errors import FailedPrecondition, InvalidArgument
from dxts.core.plugins import BadInput, DelayInput, InputRecord, PackerProposal, Transformation
from dxts.core.plugins.protocols.readers import ConsumerLookup
from dxts.core.states import InputStatus

DONE = frozenset({InputStatus.PROCESSED, InputStatus.SPLIT})
GAVE_UP = frozenset({InputStatus.NOT_PROCESSED, InputStatus.PROBLEMATIC})

Consumed = Mapping[UUID, Mapping[str, Sequence[InputStatus]]]


def after_of(transformation: Transformation) -> tuple[UUID, ...]:
    """The TransformationIDs the definition compiler recorded in Annotations["after"]."""
    listed = transformation.annotations.get("after") or []
    try:
        return tuple(UUID(str(text)) for text in listed)
    except ValueError:
        raise InvalidArgument(
            f"{transformation.id} waits on {listed!r}: Annotations.after holds TransformationIDs",
            field="annotations.after",
        ) from None


def verdict(lfn: str, consumed: Consumed) -> tuple[bool, str | None]:
    """(may it be packed, why it is set aside: None unless a consumer gave up on it)."""
    ready = True
    for consumer, files in consumed.items():
        statuses = set(files.get(lfn, ()))
        if statuses & GAVE_UP:
            given = "/".join(sorted(statuses & GAVE_UP))
            return False, f"consumer {consumer} gave up on it ({given})"
        ready = ready and bool(statuses) and statuses <= DONE
    return ready, None


async def screen(
    chunk: Sequence[InputRecord],
    *,
    after: Sequence[UUID],
    consumers: ConsumerLookup | None,
    delay_s: float,
) -> tuple[list[InputRecord], list[PackerProposal]]:
    """The chunk's inputs that may be packed, and the proposals for those that may not yet or
    never. Inputs without an LFN pass through: the data parcel refuses them itself."""
    if not after:
        return list(chunk), []
    if consumers is None:
        raise FailedPrecondition("the `after` wait needs a ConsumerLookup and none is provided")
    lfns = sorted({record.lfn for record in chunk if record.lfn is not None})
    found = await consumers.consumed(lfns, consumers=after) if lfns else {}
    consumed: Consumed = {consumer: found.get(consumer, {}) for consumer in after}
    ready: list[InputRecord] = []
    proposals: list[PackerProposal] = []
    waiting: list[UUID] = []
    for record in chunk:
        if record.lfn is None:
            ready.append(record)
            continue
        go, reason = verdict(record.lfn, consumed)
        if reason is not None:
            proposals.append(BadInput(record.id, reason))
        elif go:
            ready.append(record)
        else:
            waiting.append(record.id)
    if waiting:
        proposals.append(DelayInput(waiting, datetime.now(UTC) + timedelta(seconds=delay_s)))
    return ready, proposals


def _companion_verdict(
    record: InputRecord, companions: Sequence[str], consumed: Consumed
) -> tuple[bool, str | None]:
    """Per consumer: its verdict on the record's own file when it was fed that file, else on
    every companion file (the files staged for it: its partner's, its ancestors)."""
    assert record.lfn is not None
    ready = True
    for consumer, files in consumed.items():
        names = [record.lfn] if record.lfn in files or not companions else list(companions)
        for name in names:
            go, reason = verdict(name, {consumer: files})
            if reason is not None:
                return False, f"{name}: {reason}" if name != record.lfn else reason
            ready = ready and go
    return ready, None


async def screen_with_companions(
    chunk: Sequence[InputRecord],
    companions: Mapping[UUID, Sequence[str]],
    *,
    after: Sequence[UUID],
    consumers: ConsumerLookup | None,
    delay_s: float,
) -> tuple[list[InputRecord], list[PackerProposal]]:
    """The `after` wait of a packer that carries other files beside each input (ByPartner's
    partners, AncestorLookup's ancestors): a member waited on that was fed the input's own file
    judges that file, one that was not judges the companions — a staging of the raw ancestors
    or of the partner files is waited on for those files, never for a file it will not see."""
    if not after:
        return list(chunk), []
    if consumers is None:
        raise FailedPrecondition("the `after` wait needs a ConsumerLookup and none is provided")
    names = {r.lfn for r in chunk if r.lfn is not None}
    names |= {name for listed in companions.values() for name in listed}
    found = await consumers.consumed(sorted(names), consumers=after) if names else {}
    consumed: Consumed = {consumer: found.get(consumer, {}) for consumer in after}
    ready: list[InputRecord] = []
    proposals: list[PackerProposal] = []
    waiting: list[UUID] = []
    for record in chunk:
        if record.lfn is None:
            ready.append(record)
            continue
        go, reason = _companion_verdict(record, companions.get(record.id, ()), consumed)
        if reason is not None:
            proposals.append(BadInput(record.id, reason))
        elif go:
            ready.append(record)
        else:
            waiting.append(record.id)
    if waiting:
        proposals.append(DelayInput(waiting, datetime.now(UTC) + timedelta(seconds=delay_s)))
    return ready, proposals
