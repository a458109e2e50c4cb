"""Typed records of execution's rows: what the stores hand up, and logic and the edge read.

The stores build them from the columns they select (`Record.of(row)`); everything above a store
reads these fields, never a column, so a renamed or added column changes the store and one
constructor here. They sit beside the layers, not in one, because all three use them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


def _id(value: Any) -> bytes | None:
    return bytes(value) if value is not None else None


@dataclass(frozen=True)
class InputRecord:
    """One Inputs row."""

    transformation_id: bytes
    input_id: bytes
    parent_input_id: bytes | None
    lfn: str | None
    lfn_size: int | None
    descriptor: Any  # the JSON descriptor, as stored
    status: str
    error_count: int
    delayed_until: datetime | None
    last_parcel_id: bytes | None
    updated_at: datetime

    @classmethod
    def of(cls, row: Any) -> InputRecord:
        return cls(
            transformation_id=bytes(row.TransformationID),
            input_id=bytes(row.InputID),
            parent_input_id=_id(row.ParentInputID),
            lfn=row.LFN,
            lfn_size=row.LFNSize,
            descriptor=row.Descriptor,
            status=row.Status,
            error_count=row.ErrorCount,
            delayed_until=row.DelayedUntil,
            last_parcel_id=_id(row.LastParcelID),
            updated_at=row.UpdatedAt,
        )


@dataclass(frozen=True)
class ParcelRecord:
    """One Parcels row; `process_id` is its compute facet's, when the read joined it."""

    parcel_id: bytes
    transformation_id: bytes | None
    kind: str
    status: str
    backend: str | None
    annotations: Any  # the JSON annotations, as stored
    updated_at: datetime
    completed_at: datetime | None
    process_id: bytes | None = None

    @classmethod
    def of(cls, row: Any, *, process_id: Any = None) -> ParcelRecord:
        return cls(
            parcel_id=bytes(row.ParcelID),
            transformation_id=_id(row.TransformationID),
            kind=row.Kind,
            status=row.Status,
            backend=row.Backend,
            annotations=row.Annotations,
            updated_at=row.UpdatedAt,
            completed_at=row.CompletedAt,
            process_id=_id(process_id),
        )


@dataclass(frozen=True)
class ComputeFacet:
    """A compute parcel's ComputeParcels row."""

    process_id: bytes | None
    requirements_id: bytes | None
    resolved_hints_id: bytes | None
    parameters: Any  # the JSON parameters, as stored

    @classmethod
    def of(cls, row: Any) -> ComputeFacet:
        return cls(
            process_id=_id(row.ProcessID),
            requirements_id=_id(row.RequirementsID),
            resolved_hints_id=_id(row.ResolvedHintsID),
            parameters=row.Parameters,
        )


@dataclass(frozen=True)
class StorageDelta:
    """One DataParcelDeltas row: what a data parcel adds to and frees on a storage element."""

    storage_element: str
    files_added: int
    bytes_added: int
    files_freed: int
    bytes_freed: int

    @classmethod
    def of(cls, row: Any) -> StorageDelta:
        return cls(
            storage_element=row.StorageElement,
            files_added=row.FilesAdded,
            bytes_added=row.BytesAdded,
            files_freed=row.FilesFreed,
            bytes_freed=row.BytesFreed,
        )


@dataclass(frozen=True)
class DataFacet:
    """A data parcel's request (None for a compute parcel) and its storage deltas."""

    request: Any  # the JSON request, as stored
    deltas: list[StorageDelta]


@dataclass(frozen=True)
class Submitter:
    """Who submitted a user parcel (its UserParcels row)."""

    vo: str
    sub: str


@dataclass(frozen=True)
class Annotated:
    """A parcel's id and its annotations (the JSON, as stored)."""

    parcel_id: bytes
    annotations: Any


@dataclass(frozen=True)
class UserParcelRecord:
    """A user parcel: the parcel, its submitter and its compute facet (None if it has none)."""

    parcel: ParcelRecord
    submitter: Submitter
    compute: ComputeFacet | None


@dataclass(frozen=True)
class FailedInput:
    """A Failed input with what the HandleFailedInput hook reads of its last parcel (its kind,
    status, backend, annotations and requirements; `parcel_status` None when it has none)."""

    input_id: bytes
    parent_input_id: bytes | None
    lfn: str | None
    lfn_size: int | None
    descriptor: Any  # the JSON descriptor, as stored
    error_count: int
    last_parcel_id: bytes | None
    parcel_kind: str | None
    parcel_status: str | None
    backend: str | None
    annotations: Any  # the last parcel's JSON annotations, as stored
    requirements: Any  # its requirements document, as stored
