"""Exact counts and summaries, from the journalled counters (one read statement each).

Counts are answered for every status of the entity's machine, zeros included, in machine
order, so a client never has to know which statuses exist. Any authenticated caller may read
counts: they say how much work there is, not what it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dxts.accounting.logic.members import Member, MemberLister
from dxts.accounting.store.counts import read_storage, read_transformation_counts
from dxts.core.counters import Entity
from dxts.core.db import Database
from dxts.core.errors import FieldViolation, InvalidArgument
from dxts.core.state_machines import LIVE_PARCEL_STATES
from dxts.core.states import (
    InputStatus,
    ParcelStatus,
    TransformationStatus,
    WorkgraphStatus,
    values,
)

# Ids per request: one IN list per read, kept far from any statement-size limit.
MAX_TRANSFORMATIONS = 1000
MAX_STORAGE_ELEMENTS = 1000
STORAGE_ELEMENT_LENGTH = 64

MACHINE_STATES: dict[Entity, tuple[str, ...]] = {
    Entity.INPUT: values(InputStatus),
    Entity.PARCEL: values(ParcelStatus),
}
PARCEL_ORDER = {status: position for position, status in enumerate(ParcelStatus)}


@dataclass(frozen=True)
class StatusCounts:
    """One transformation's entities of one kind, by status: every status of the machine."""

    transformation_id: bytes
    entity: Entity
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _check_count(transformation_ids: Sequence[bytes], field: str) -> None:
    if len(transformation_ids) > MAX_TRANSFORMATIONS:
        raise InvalidArgument(
            f"at most {MAX_TRANSFORMATIONS} transformations per call, "
            f"got {len(transformation_ids)}",
            field=field,
        )


async def get_counts(
    database: Database, transformation_ids: Sequence[bytes], entity: Entity
) -> list[StatusCounts]:
    """Per-status counts of `entity` for each id, in request order (unknown ids count zero)."""
    _check_count(transformation_ids, "transformation_ids")
    if not transformation_ids:
        return []
    reading = await read_transformation_counts(database, set(transformation_ids), [entity.value])
    return [
        StatusCounts(
            tid,
            entity,
            {s: reading[(tid, entity.value, s)]["Count"] for s in MACHINE_STATES[entity]},
        )
        for tid in transformation_ids
    ]


@dataclass(frozen=True)
class MemberSummary:
    member: Member
    inputs: StatusCounts
    parcels: StatusCounts


@dataclass(frozen=True)
class WorkgraphSummary:
    workgraph_id: bytes
    status: WorkgraphStatus
    members: list[MemberSummary]

    @property
    def member_counts(self) -> dict[str, int]:
        """Members by status: every transformation status, in machine order."""
        counts = dict.fromkeys(TransformationStatus, 0)
        for summary in self.members:
            counts[summary.member.status] += 1
        return {str(status): n for status, n in counts.items()}

    def totals(self, entity: Entity) -> dict[str, int]:
        """`entity`'s counts summed over the members."""
        totals = dict.fromkeys(MACHINE_STATES[entity], 0)
        for summary in self.members:
            counts = summary.inputs if entity is Entity.INPUT else summary.parcels
            for status, n in counts.counts.items():
                totals[status] += n
        return totals


async def workgraph_summary(
    database: Database, lister: MemberLister, workgraph_id: bytes, *, token: str | None
) -> WorkgraphSummary:
    """Every member's input and parcel counts (one read for all of them), and the totals.

    The members come from `lister` (the definition service): NotFound propagates from there.
    """
    workgraph = await lister.workgraph(workgraph_id, token=token)
    ids = [member.transformation_id for member in workgraph.members]
    reading = (
        await read_transformation_counts(database, set(ids), [e.value for e in Entity])
        if ids
        else None
    )

    def counts(tid: bytes, entity: Entity) -> StatusCounts:
        found = {
            s: reading[(tid, entity.value, s)]["Count"] if reading is not None else 0
            for s in MACHINE_STATES[entity]
        }
        return StatusCounts(tid, entity, found)

    return WorkgraphSummary(
        workgraph.workgraph_id,
        workgraph.status,
        [
            MemberSummary(
                member,
                counts(member.transformation_id, Entity.INPUT),
                counts(member.transformation_id, Entity.PARCEL),
            )
            for member in workgraph.members
        ],
    )


@dataclass(frozen=True)
class StorageUsage:
    """The DataParcels counter for one key, or its sum over transformations (id None)."""

    transformation_id: bytes | None
    storage_element: str
    status: ParcelStatus
    files_added: int
    bytes_added: int
    files_freed: int
    bytes_freed: int


@dataclass(frozen=True)
class StorageOutlook:
    """What the data parcels not yet ended are about to write to and free on one storage
    element (for one transformation, or summed: id None)."""

    transformation_id: bytes | None
    storage_element: str
    files_to_write: int
    bytes_to_write: int
    files_to_free: int
    bytes_to_free: int

    @property
    def net_files(self) -> int:
        return self.files_to_write - self.files_to_free

    @property
    def net_bytes(self) -> int:
        return self.bytes_to_write - self.bytes_to_free


@dataclass(frozen=True)
class StorageSummary:
    usage: list[StorageUsage]
    totals: list[StorageUsage]
    outlook: list[StorageOutlook]
    outlook_totals: list[StorageOutlook]


def storage_element_problems(storage_elements: Sequence[str]) -> list[FieldViolation]:
    """What is wrong with a request's storage element names (the servicer reports these with
    its own findings, so a caller hears of every problem at once)."""
    problems = [
        FieldViolation(
            f"storage_elements[{i}]",
            f"expected a storage element name of 1 to {STORAGE_ELEMENT_LENGTH} characters",
        )
        for i, name in enumerate(storage_elements)
        if not name or len(name) > STORAGE_ELEMENT_LENGTH
    ]
    if len(storage_elements) > MAX_STORAGE_ELEMENTS:
        problems.append(
            FieldViolation("storage_elements", f"at most {MAX_STORAGE_ELEMENTS} per call")
        )
    return problems


async def storage_summary(
    database: Database, transformation_ids: Sequence[bytes], storage_elements: Sequence[str]
) -> StorageSummary:
    """The DataParcels counter per (transformation, storage element, parcel status), summed
    per (storage element, status), and the outlook of the parcels not yet ended.

    Empty `transformation_ids` means every transformation, empty `storage_elements` every
    storage element; one read either way.
    """
    _check_count(transformation_ids, "transformation_ids")
    problems = storage_element_problems(storage_elements)
    if problems:
        raise InvalidArgument(problems)
    reading = await read_storage(
        database, set(transformation_ids) or None, set(storage_elements) or None
    )
    usage = sorted(
        (
            StorageUsage(
                tid,
                se,
                ParcelStatus(status),
                values["LFNCountAdded"],
                values["LFNSizeAdded"],
                values["LFNCountFreed"],
                values["LFNSizeFreed"],
            )
            for (tid, status, se), values in reading.items()
        ),
        key=lambda u: (u.transformation_id or b"", u.storage_element, PARCEL_ORDER[u.status]),
    )
    totals: dict[tuple[str, ParcelStatus], list[int]] = {}
    pending: dict[tuple[bytes, str], list[int]] = {}
    pending_totals: dict[str, list[int]] = {}
    for u in usage:
        quantities = (u.files_added, u.bytes_added, u.files_freed, u.bytes_freed)
        _add(totals, (u.storage_element, u.status), quantities)
        if u.status in LIVE_PARCEL_STATES and u.transformation_id is not None:
            _add(pending, (u.transformation_id, u.storage_element), quantities)
            _add(pending_totals, u.storage_element, quantities)
    return StorageSummary(
        usage,
        [
            StorageUsage(None, se, status, *sums)
            for (se, status), sums in sorted(
                totals.items(), key=lambda item: (item[0][0], PARCEL_ORDER[item[0][1]])
            )
        ],
        [StorageOutlook(tid, se, *sums) for (tid, se), sums in sorted(pending.items())],
        [StorageOutlook(None, se, *sums) for se, sums in sorted(pending_totals.items())],
    )


def _add(sums: dict[Any, list[int]], key: Any, quantities: tuple[int, ...]) -> None:
    row = sums.setdefault(key, [0] * len(quantities))
    for i, n in enumerate(quantities):
        row[i] += n
