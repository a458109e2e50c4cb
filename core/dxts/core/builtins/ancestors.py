"""LHCbAncestors and AncestorLookup: a file processed together with its raw ancestors
(docs/extensions.md, "Files with their ancestors").

Stripping reconstructed data reads each reconstructed file together with the raw file(s) it was
made from. Where a file came from is the catalogue's lineage: a file's metadata lists its direct
parents under `ancestors` (the key is an argument), each parent's metadata its own, up to the
raw files, which list none. Both plugins walk it a generation at a time, one bulk catalogue
read per generation for a whole page or chunk.

* `LHCbAncestors` (feeder): the files a catalogue selection matches (the Query feeder's
  arguments and watermark bookmark), each yielded with its ancestors `depth` generations up
  (default: to the raw files) in its descriptor, `{"ancestors": [...]}`, so that what a parcel
  will carry is fixed when the file is fed and visible on the input.
* `AncestorLookup` (packer): `group_size` files per parcel, the files under the driving input
  and their ancestors under `ancestor_input`. The ancestors are the descriptor's when a feeder
  put them there, else looked up in the catalogue the same way. A file whose ancestor the
  catalogue does not hold is set aside (Problematic) naming it; with `after` (the staging of
  the ancestors to a buffer, say) a file waits until that member has processed it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from pydantic import Field

from dxts.core.builtins.after import after_of, screen_with_companions
from dxts.core.builtins.feeders import BuiltinSettings, QueryArgs, in_sample
from dxts.core.builtins.packers import PackArgs, chunks, cwl_value, driving_input
from dxts.core.catalogue import FileCatalogue
from dxts.core.errors import InvalidArgument
from dxts.core.ids import content_hash
from dxts.core.plugins import (
    BadInput,
    ComputeParcel,
    FeederProposal,
    FileInput,
    InputRecord,
    NoMoreInputs,
    PackerProposal,
    PluginArgs,
    SetFeederState,
    Transformation,
)
from dxts.core.plugins.protocols.readers import ConsumerLookup
from dxts.core.states import Kind

ANCESTORS = "ancestors"
# Generations walked when no depth is given: far enough for any real lineage, and a bound on a
# catalogue whose lineage loops.
MAX_DEPTH = 16


class LineageArgs(PluginArgs):
    depth: int | None = Field(
        None, ge=1, le=MAX_DEPTH, description="generations up (default: to the raw files)"
    )
    lineage_key: str = Field(
        ANCESTORS, min_length=1, description="the metadata key listing a file's parents"
    )


class Lineage:
    """A file's ancestors `depth` generations up the catalogue's lineage."""

    def __init__(self, catalogue: FileCatalogue, args: LineageArgs) -> None:
        self.catalogue, self.key = catalogue, args.lineage_key
        self.depth = args.depth or MAX_DEPTH
        self.raw_only = args.depth is None

    def _parents(self, metadata: dict[str, Any]) -> list[str]:
        listed = metadata.get(self.key) or []
        return [str(lfn) for lfn in listed] if isinstance(listed, list) else [str(listed)]

    async def of(self, files: dict[str, dict[str, Any]]) -> dict[str, tuple[list[str], list[str]]]:
        """For each LFN (with its metadata): (its ancestors, those the catalogue lacks). Without
        a depth the raw files are kept (those with no parents); with one, every generation."""
        answer: dict[str, tuple[list[str], list[str]]] = {}
        frontier = {lfn: self._parents(metadata) for lfn, metadata in files.items()}
        found: dict[str, list[str]] = {lfn: [] for lfn in files}
        missing: dict[str, list[str]] = {lfn: [] for lfn in files}
        for generation in range(self.depth):
            wanted = sorted({p for parents in frontier.values() for p in parents})
            if not wanted:
                break
            known = await self.catalogue.files(wanted)
            last = generation == self.depth - 1
            following: dict[str, list[str]] = {}
            for lfn, parents in frontier.items():
                up: list[str] = []
                for parent in parents:
                    if parent not in known:
                        missing[lfn].append(parent)
                        continue
                    grand = self._parents(known[parent].metadata)
                    if not self.raw_only or not grand or last:
                        found[lfn].append(parent)
                    up.extend(grand)
                if up and not last:
                    following[lfn] = up
            frontier = following
        for lfn in files:
            answer[lfn] = (list(dict.fromkeys(found[lfn])), sorted(set(missing[lfn])))
        return answer


class AncestorsFeederArgs(QueryArgs, LineageArgs):
    """A catalogue selection (as Query's) whose files are fed with their ancestors."""


async def lhcb_ancestors(
    *,
    feeder_args: AncestorsFeederArgs,
    feeder_state: dict[str, Any],
    scouting: bool,
    catalogue: FileCatalogue,
    settings: BuiltinSettings,
) -> AsyncIterator[FeederProposal]:
    """Page through the selection after the watermark (as Query does); each page's files are
    yielded with their ancestors in the descriptor, then the page's bookmark."""
    where = feeder_args.where(scouting)
    fraction = None
    if scouting and not feeder_args.scouting_runs:
        fraction = feeder_args.scouting_fraction or settings.scouting_fraction
    fingerprint = content_hash({"where": where, "fraction": fraction, "lineage": "up"}).hex()
    watermark = feeder_state.get("watermark") if feeder_state.get("query") == fingerprint else None
    keys = feeder_args.descriptor_keys or [feeder_args.run_key]
    lineage = Lineage(catalogue, feeder_args)
    while True:
        page = await catalogue.query(where, after=watermark, limit=feeder_args.page_size)
        sampled = [f for f in page.files if in_sample(f.lfn, fraction)]
        ancestry = await lineage.of({f.lfn: f.metadata for f in sampled})
        for file in sampled:
            descriptor = {key: file.metadata[key] for key in keys if key in file.metadata}
            ancestors, missing = ancestry[file.lfn]
            descriptor[ANCESTORS] = ancestors
            if missing:
                descriptor["missing_ancestors"] = missing
            yield FileInput(lfn=file.lfn, lfn_size=file.size, descriptor=descriptor)
        watermark = page.watermark
        yield SetFeederState({"query": fingerprint, "watermark": watermark})
        if not page.more:
            break
    if feeder_args.exhaust_after_pass:
        yield NoMoreInputs()


class AncestorLookupArgs(PackArgs, LineageArgs):
    ancestor_input: str = Field(
        min_length=1, description="the step input the ancestors fill (the raw files)"
    )
    group_size: int = Field(1, ge=1, description="files (with their ancestors) per parcel")


def _from_descriptor(record: InputRecord) -> tuple[list[str], list[str]] | None:
    descriptor = record.descriptor or {}
    if ANCESTORS not in descriptor:
        return None
    missing = descriptor.get("missing_ancestors") or []
    return [str(a) for a in descriptor[ANCESTORS]], [str(m) for m in missing]


def _parcel(
    group: Sequence[tuple[InputRecord, list[str]]], driving: str | None, ancestor_input: str
) -> ComputeParcel:
    ancestors = list(dict.fromkeys(a for _, found in group for a in found))
    parameters: dict[str, Any] = {
        ancestor_input: [{"class": "File", "location": f"lfn:{lfn}"} for lfn in ancestors]
    }
    if driving:
        parameters[driving] = [cwl_value(record) for record, _ in group]
    return ComputeParcel(
        inputs=[record.id for record, _ in group],
        parameters=parameters,
        metadata={ANCESTORS: ancestors},
    )


async def _lineages(
    chunk: Iterable[InputRecord], lineage: Lineage
) -> dict[str, tuple[list[str], list[str]]]:
    known = {r.lfn: found for r in chunk if r.lfn and (found := _from_descriptor(r)) is not None}
    unknown = sorted({r.lfn for r in chunk if r.lfn and r.lfn not in known})
    if unknown:
        files = await lineage.catalogue.files(unknown)
        looked = await lineage.of({lfn: files[lfn].metadata for lfn in unknown if lfn in files})
        known.update(looked)
        known.update({lfn: ([], [f"{lfn} itself"]) for lfn in unknown if lfn not in files})
    return known


async def ancestor_lookup(
    *,
    packer_args: AncestorLookupArgs,
    inputs: AsyncIterator[InputRecord],
    transformation: Transformation,
    flush: bool,
    feeder_active: bool,
    catalogue: FileCatalogue,
    consumers: ConsumerLookup | None = None,
) -> AsyncIterator[PackerProposal]:
    """Parcels of `group_size` files with their ancestors; a file whose lineage the catalogue
    cannot complete is set aside; an undersized group waits while the feeder is active."""
    if transformation.kind is not Kind.COMPUTE:
        raise InvalidArgument("AncestorLookup makes compute parcels", field="packer")
    lineage = Lineage(catalogue, packer_args)
    driving = driving_input(transformation, packer_args)
    after = after_of(transformation)
    group: list[tuple[InputRecord, list[str]]] = []
    async for claimed in chunks(inputs):
        lineages = await _lineages(claimed, lineage)
        # Only a file whose lineage is complete waits on `after` (for its ancestors); the
        # others are set aside below.
        complete = [r for r in claimed if r.lfn and lineages[r.lfn][0] and not lineages[r.lfn][1]]
        companions = {r.id: lineages[str(r.lfn)][0] for r in complete}
        screened, withheld = await screen_with_companions(
            complete,
            companions,
            after=after,
            consumers=consumers,
            delay_s=packer_args.after_delay_s,
        )
        for proposal in withheld:
            yield proposal
        passed = {r.id for r in screened}
        for record in (r for r in claimed if r.id in passed or r.id not in companions):
            if record.lfn is None:
                yield BadInput(record.id, "an input with ancestors is a file: this one has none")
                continue
            found, missing = lineages[record.lfn]
            if missing:
                yield BadInput(
                    record.id, f"ancestors not in the catalogue: {', '.join(missing[:5])}"
                )
                continue
            if not found:
                yield BadInput(record.id, "the catalogue's lineage gives it no ancestor")
                continue
            group.append((record, found))
            if len(group) == packer_args.group_size:
                yield _parcel(group, driving, packer_args.ancestor_input)
                group = []
    if group and (flush or not feeder_active):
        yield _parcel(group, driving, packer_args.ancestor_input)
