"""The built-in packers: PerInput, BySize, ByRun, ByGroupSizeRun and DataManagement.

Each streams the claimed inputs once and keeps only its open groups: a group leaves as a parcel
the moment it is full, and an undersized group is held back while the feeder is active and
packed once the feeder is off or on a flush (draining is the packer's decision, not the core's).
What a group becomes depends on the transformation's Kind: a compute parcel whose parameters
fill the process's driving input, or a data parcel (`data`).

The driving input. A compute parcel's `parameters` are the CWL input object; the built-ins put
the group's inputs, as an array, under the step input named by the packer argument
`input_parameter`, else by `Annotations["driving_input"]` when the definition records it, and
leave the object empty otherwise (the backend still receives the parcel's input ids). A file
input becomes a CWL File at `lfn:<LFN>` (the backends stage those); any other input the text
of its canonical descriptor.

A transformation with `after` (Annotations["after"]), compute or data, packs a file only once
the transformations it waits on have processed it (`dxts.core.builtins.after`): each chunk is
screened before its inputs are grouped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from typing import Any

from pydantic import Field

from dxts.core.builtins.after import after_of, screen
from dxts.core.builtins.data import DataOperation, data_proposals, operation_of
from dxts.core.catalogue import FileCatalogue
from dxts.core.ids import canonical_json
from dxts.core.plugins import (
    BadInput,
    ComputeParcel,
    InputRecord,
    PackerProposal,
    PluginArgs,
    Transformation,
)
from dxts.core.plugins.protocols.readers import ConsumerLookup
from dxts.core.states import Kind

# Inputs read (and, with keep_storage_together, looked up in the catalogue) at a time.
CHUNK = 256


class PackArgs(PluginArgs):
    input_parameter: str | None = Field(
        None, min_length=1, description="the step input the group fills (default: driving)"
    )
    after_delay_s: float = Field(
        60.0,
        gt=0,
        description="a transformation with `after`: how long an input is withheld while "
        "a transformation it waits on has not processed its file",
    )


class GroupArgs(PackArgs):
    group_size: int = Field(ge=1, description="inputs per parcel")


class RunArgs(GroupArgs):
    run_key: str = Field("run", min_length=1, description="the descriptor key of the run")


class GroupSizeRunArgs(RunArgs):
    keep_storage_together: bool = Field(
        False, description="group only files whose replicas are at the same storage elements"
    )


class DataManagementArgs(PackArgs):
    group_size: int = Field(1, ge=1)
    operation: DataOperation | None = Field(
        None, description="default: the member's data-management declaration"
    )


def cwl_value(record: InputRecord) -> Any:
    """An input as the process receives it: a File to stage, or its descriptor's text."""
    if record.lfn is not None:
        value: dict[str, Any] = {"class": "File", "location": f"lfn:{record.lfn}"}
        if record.lfn_size is not None:
            value["size"] = record.lfn_size
        return value
    return canonical_json(record.descriptor).decode()


def driving_input(transformation: Transformation, args: PackArgs) -> str | None:
    named = args.input_parameter or transformation.annotations.get("driving_input")
    return named if isinstance(named, str) and named else None


class Emitter:
    """Turns a group into proposals for the transformation's Kind."""

    def __init__(
        self,
        transformation: Transformation,
        args: PackArgs,
        catalogue: FileCatalogue | None,
        consumers: ConsumerLookup | None,
        operation: DataOperation | None = None,
    ) -> None:
        self.kind = transformation.kind
        self.parameter = driving_input(transformation, args)
        self.catalogue = catalogue
        self.operation = operation_of(transformation, operation) if self.kind is Kind.DATA else None
        self.after = after_of(transformation)
        self.consumers = consumers
        self.after_delay_s = args.after_delay_s

    async def screen(
        self, chunk: Sequence[InputRecord]
    ) -> tuple[list[InputRecord], list[PackerProposal]]:
        """The `after` wait: what may be grouped, and the proposals for what may not."""
        return await screen(
            chunk, after=self.after, consumers=self.consumers, delay_s=self.after_delay_s
        )

    async def emit(self, group: Sequence[InputRecord]) -> list[PackerProposal]:
        if self.operation is not None:
            return await data_proposals(group, self.operation, self.catalogue)
        parameters = {self.parameter: [cwl_value(r) for r in group]} if self.parameter else {}
        return [ComputeParcel(inputs=[r.id for r in group], parameters=parameters)]


async def chunks(
    inputs: AsyncIterator[InputRecord], size: int = CHUNK
) -> AsyncIterator[list[InputRecord]]:
    chunk: list[InputRecord] = []
    async for record in inputs:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


Key = Callable[[InputRecord], Hashable]


async def grouped(
    inputs: AsyncIterator[InputRecord],
    *,
    group_size: int,
    emitter: Emitter,
    release_rest: bool,
    key: Key | None = None,
    refuse: Callable[[InputRecord], str | None] | None = None,
    replicas_key: bool = False,
) -> AsyncIterator[PackerProposal]:
    """Group by `key` (and, with `replicas_key`, by the storage elements holding the file);
    full groups leave at once, the rest only with `release_rest`. `refuse` names why an
    input cannot be packed at all (a BadInput)."""
    open_groups: dict[Hashable, list[InputRecord]] = {}
    async for claimed in chunks(inputs):
        chunk, withheld = await emitter.screen(claimed)
        for proposal in withheld:
            yield proposal
        held: dict[str, tuple[str, ...]] = {}
        if replicas_key and emitter.catalogue is not None:
            held = await emitter.catalogue.replicas([r.lfn for r in chunk if r.lfn])
        for record in chunk:
            reason = refuse(record) if refuse else None
            if reason is not None:
                yield BadInput(record.id, reason)
                continue
            group_key: Hashable = key(record) if key else None
            if replicas_key:
                group_key = (group_key, tuple(sorted(held.get(record.lfn or "", ()))))
            group = open_groups.setdefault(group_key, [])
            group.append(record)
            if len(group) == group_size:
                del open_groups[group_key]
                for proposal in await emitter.emit(group):
                    yield proposal
    if release_rest:
        for group in open_groups.values():
            for proposal in await emitter.emit(group):
                yield proposal


async def per_input(
    *,
    packer_args: PackArgs,
    inputs: AsyncIterator[InputRecord],
    transformation: Transformation,
    catalogue: FileCatalogue | None = None,
    consumers: ConsumerLookup | None = None,
) -> AsyncIterator[PackerProposal]:
    """One parcel per input, at once."""
    emitter = Emitter(transformation, packer_args, catalogue, consumers)
    async for proposal in grouped(inputs, group_size=1, emitter=emitter, release_rest=True):
        yield proposal


async def by_size(
    *,
    packer_args: GroupArgs,
    inputs: AsyncIterator[InputRecord],
    transformation: Transformation,
    flush: bool,
    feeder_active: bool,
    catalogue: FileCatalogue | None = None,
    consumers: ConsumerLookup | None = None,
) -> AsyncIterator[PackerProposal]:
    """Parcels of `group_size` inputs in feed order; the last, smaller one once the feeder is
    off or on a flush."""
    emitter = Emitter(transformation, packer_args, catalogue, consumers)
    async for proposal in grouped(
        inputs,
        group_size=packer_args.group_size,
        emitter=emitter,
        release_rest=flush or not feeder_active,
    ):
        yield proposal


def _run_of(run_key: str) -> tuple[Key, Callable[[InputRecord], str | None]]:
    def key(record: InputRecord) -> Hashable:
        return canonical_json((record.descriptor or {})[run_key])

    def refuse(record: InputRecord) -> str | None:
        if run_key not in (record.descriptor or {}):
            return f"no {run_key!r} in the descriptor to group by"
        return None

    return key, refuse


async def by_run(
    *,
    packer_args: RunArgs,
    inputs: AsyncIterator[InputRecord],
    transformation: Transformation,
    flush: bool,
    feeder_active: bool,
    catalogue: FileCatalogue | None = None,
    consumers: ConsumerLookup | None = None,
) -> AsyncIterator[PackerProposal]:
    """Parcels of up to `group_size` inputs of one run (descriptor `run_key`); each run's
    undersized rest once the feeder is off or on a flush. No run: BadInput."""
    key, refuse = _run_of(packer_args.run_key)
    emitter = Emitter(transformation, packer_args, catalogue, consumers)
    async for proposal in grouped(
        inputs,
        group_size=packer_args.group_size,
        emitter=emitter,
        release_rest=flush or not feeder_active,
        key=key,
        refuse=refuse,
    ):
        yield proposal


async def by_group_size_run(
    *,
    packer_args: GroupSizeRunArgs,
    inputs: AsyncIterator[InputRecord],
    transformation: Transformation,
    flush: bool,
    feeder_active: bool,
    catalogue: FileCatalogue | None = None,
    consumers: ConsumerLookup | None = None,
) -> AsyncIterator[PackerProposal]:
    """ByRun, and with `keep_storage_together` also by where each file's replicas are (from
    the catalogue), so a parcel's files can be read at one site. Inputs without a run form
    groups of their own (a simulation's seeds have none)."""
    run_key = packer_args.run_key

    def key(record: InputRecord) -> Hashable:
        descriptor = record.descriptor or {}
        return canonical_json(descriptor[run_key]) if run_key in descriptor else None

    emitter = Emitter(transformation, packer_args, catalogue, consumers)
    async for proposal in grouped(
        inputs,
        group_size=packer_args.group_size,
        emitter=emitter,
        release_rest=flush or not feeder_active,
        key=key,
        replicas_key=packer_args.keep_storage_together,
    ):
        yield proposal


async def data_management(
    *,
    packer_args: DataManagementArgs,
    inputs: AsyncIterator[InputRecord],
    transformation: Transformation,
    flush: bool,
    feeder_active: bool,
    catalogue: FileCatalogue | None = None,
    consumers: ConsumerLookup | None = None,
) -> AsyncIterator[PackerProposal]:
    """Replicate/remove requests of `group_size` files, with their per-storage-element deltas
    (the operation from the args, else the member's declaration); for a Data transformation
    whose declaration is not enough, or a standalone one."""
    emitter = Emitter(transformation, packer_args, catalogue, consumers, packer_args.operation)
    if emitter.operation is None:
        raise ValueError(f"DataManagement packs Data transformations; {transformation.id} is not")
    async for proposal in grouped(
        inputs,
        group_size=packer_args.group_size,
        emitter=emitter,
        release_rest=flush or not feeder_active,
    ):
        yield proposal
