"""Data parcels: what a group of inputs becomes in a Data transformation.

The operation comes from the member's data-management declaration, which the definition
compiler keeps in `Transformations.Annotations["data_management"]` (`operation`: replicate or
remove, `destination`, `storage`); the DataManagement packer's arguments may override it. The
request is a DIRAC RMS body, the vocabulary the data backends carry out:

* replicate → `ReplicateAndRegister` to every destination, costing each destination the files
  it does not hold yet (added: one per distinct LFN, its whole size);
* remove with `storage` → `RemoveReplica` there, freeing what those storage elements hold;
* remove without `storage` → `RemoveFile`, freeing every replica the catalogue knows.

Each listed file names the ids of the inputs it stands for (`Inputs`): the backend reports
each file's fate by them (a status report), so one failed copy fails its inputs, not the
parcel's others.

Where a file's replicas are comes from the file catalogue when one is injected; without one
the deltas assume the request acts on every file (a replicate adds, a replica removal frees)
and a whole-file removal declares nothing, since it cannot say where the file was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dxts.core.catalogue import FileCatalogue
from dxts.core.errors import InvalidArgument
from dxts.core.plugins import (
    BadInput,
    DataParcel,
    InputRecord,
    PackerProposal,
    StorageDelta,
    Transformation,
)
from dxts.core.plugins.proposals import SE_MAX

REPLICATE = "replicate"
REMOVE = "remove"


def _names(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


class DataOperation(BaseModel):
    """What a data transformation does to each file it is fed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    operation: Literal["replicate", "remove"]
    destination: list[str] = Field(default_factory=list)
    storage: list[str] = Field(default_factory=list)

    @field_validator("destination", "storage", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> list[str]:
        return _names(value)

    @field_validator("destination", "storage")
    @classmethod
    def _storage_elements(cls, names: list[str]) -> list[str]:
        for name in names:
            if not name or len(name) > SE_MAX:
                raise ValueError(f"a storage element is 1-{SE_MAX} characters, got {name!r}")
        return list(dict.fromkeys(names))

    def check(self) -> DataOperation:
        if self.operation == REPLICATE and not self.destination:
            raise InvalidArgument("a replication needs a destination", field="destination")
        return self


def operation_of(transformation: Transformation, override: DataOperation | None) -> DataOperation:
    """The packer's override, else the member's declaration; InvalidArgument if neither."""
    if override is not None:
        return override.check()
    declared = transformation.annotations.get("data_management")
    if not isinstance(declared, Mapping) or "operation" not in declared:
        raise InvalidArgument(
            f"data transformation {transformation.id} declares no data-management operation "
            "(Annotations.data_management) and the packer was given none",
            field="packer_args.operation",
        )
    fields = {k: declared.get(k) for k in ("operation", "destination", "storage")}
    return DataOperation.model_validate({k: v for k, v in fields.items() if v is not None}).check()


@dataclass(frozen=True)
class _File:
    lfn: str
    size: int
    inputs: list[str]  # the ids of the inputs naming it, which the backend reports by


async def data_proposals(
    group: Sequence[InputRecord],
    operation: DataOperation,
    catalogue: FileCatalogue | None,
    metadata: dict[str, Any] | None = None,
) -> list[PackerProposal]:
    """One DataParcel over the group's files (BadInput for inputs that name no file)."""
    proposals: list[PackerProposal] = [
        BadInput(record.id, "a data transformation acts on files; this input has no LFN")
        for record in group
        if record.lfn is None
    ]
    carried = [record for record in group if record.lfn is not None]
    if not carried:
        return proposals
    by_lfn: dict[str, _File] = {}
    for record in carried:
        if record.lfn:
            file = by_lfn.setdefault(record.lfn, _File(record.lfn, record.lfn_size or 0, []))
            file.inputs.append(str(record.id))
    files = list(by_lfn.values())
    replicas = await catalogue.replicas([f.lfn for f in files]) if catalogue else None
    request, deltas = _request(files, operation, replicas)
    proposals.append(
        DataParcel(
            inputs=[record.id for record in carried],
            request=request,
            deltas=deltas,
            metadata=metadata or {},
        )
    )
    return proposals


def _request(
    files: list[_File], operation: DataOperation, replicas: Mapping[str, tuple[str, ...]] | None
) -> tuple[dict[str, Any], list[StorageDelta]]:
    listed = [{"LFN": f.lfn, "Size": f.size, "Inputs": f.inputs} for f in files]

    def held(file: _File, se: str) -> bool:
        return replicas is None or se in replicas.get(file.lfn, ())

    if operation.operation == REPLICATE:
        kind, targets = "ReplicateAndRegister", operation.destination
        deltas = [
            _delta(se, [f for f in files if replicas is None or not held(f, se)], sign=1)
            for se in targets
        ]
    elif operation.storage:
        kind, targets = "RemoveReplica", operation.storage
        deltas = [_delta(se, [f for f in files if held(f, se)], sign=-1) for se in targets]
    else:
        kind, targets = "RemoveFile", []
        ses = sorted({se for f in files for se in (replicas or {}).get(f.lfn, ())})
        deltas = [_delta(se, [f for f in files if held(f, se)], sign=-1) for se in ses]
    step: dict[str, Any] = {"Type": kind, "Files": listed}
    if targets:
        step["TargetSE"] = list(targets)
    return {"Operations": [step]}, [d for d in deltas if d is not None]


def _delta(se: str, files: list[_File], *, sign: int) -> StorageDelta | None:
    if not files:
        return None
    return StorageDelta(se, sign * len(files), sign * sum(f.size for f in files))
