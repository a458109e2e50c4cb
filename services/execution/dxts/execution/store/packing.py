"""SQL of the packer runner: the claim, and one batch of decisions turned into rows (the Join
packer's partner lookup is `partners`).

The claim (`claim_chunk`) is `SELECT ... FOR UPDATE SKIP LOCKED` over the transformation's
Unassigned inputs whose DelayedUntil has passed, in InputID order after a key (the
(TransformationID, Status) index carries InputID, so each chunk is one index range), run in a
READ COMMITTED transaction of its own that ends as soon as the rows are read. Rows another
transaction holds at that moment are skipped, never waited on. Why the locks are not kept
while the packer decides is in `dxts.execution.logic.packing`.

A batch (`write_batch`) is one transaction: the merged requirement sets (content-addressed),
the parcels with their facets (ComputeParcels or DataParcels + DataParcelDeltas), their
ParcelInputs and a DirectedParcels row for each the packer directed to a backend, then the
inputs moved by conditional UPDATEs — Assigned (with LastParcelID, the parcel the batch put
each in), Problematic, or only DelayedUntil set — each required to match exactly the rows the
batch names while they are still Unassigned, then the journals
(inputs, parcels, the data counter). A short row count raises `ClaimLost` and the whole batch
rolls back: nothing is assigned twice and nothing half-written.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core import content_store
from dxts.core.bulk import insert_rows
from dxts.core.counters import StorageDelta as Quantities
from dxts.core.counters import journal_data_parcels, journal_inputs, journal_parcels
from dxts.core.db import utcnow
from dxts.core.errors import Aborted
from dxts.core.ids import canonical_json, new_ids
from dxts.core.logs import LogEntry, log_transformations
from dxts.core.plugins import ComputeParcel, DataParcel, InputRecord, StorageDelta
from dxts.core.schema.execution import (
    BY_PRIMARY_KEY,
    compute_parcels,
    data_parcel_deltas,
    data_parcels,
    directed_parcels,
    inputs,
    parcel_inputs,
    parcels,
)
from dxts.core.state_machines import INPUT, PARCEL, Actor
from dxts.core.states import InputStatus, Kind, ParcelStatus
from dxts.execution.store import handles
from dxts.execution.store.common import case_size, chunked

AUTHOR = "execution"
UNASSIGNED = InputStatus.UNASSIGNED.value
# Inputs per Assigned UPDATE: its CASE is scanned for each row, so the cost grows with the
# square of this.
ASSIGN_CHUNK = 500


class ClaimLost(Aborted):
    """Inputs a batch decided on were no longer Unassigned when it wrote: rolled back."""


async def any_unassigned_from(
    conn: AsyncConnection, transformation_id: bytes, first: bytes
) -> bool:
    """Whether an Unassigned input of the transformation has an InputID of `first` or after."""
    c = inputs.c
    found = await conn.scalar(
        sa.select(c.InputID)
        .with_hint(inputs, "FORCE INDEX (ix_Inputs_TransformationID_Status)", "mysql")
        .where(
            c.TransformationID == transformation_id,
            c.Status == UNASSIGNED,
            c.InputID >= first,
        )
        .limit(1)
    )
    return found is not None


async def claim_chunk(
    conn: AsyncConnection,
    transformation_id: bytes,
    *,
    after: bytes | None,
    limit: int,
    before: bytes | None = None,
) -> list[InputRecord]:
    """Up to `limit` claimable inputs after InputID `after` (and before `before`), skipping rows
    others hold; a withheld input is claimable once the database clock has passed its
    DelayedUntil."""
    c = inputs.c
    conditions = [
        c.TransformationID == transformation_id,
        c.Status == UNASSIGNED,
        sa.or_(c.DelayedUntil.is_(None), c.DelayedUntil <= utcnow()),
    ]
    if after is not None:
        conditions.append(c.InputID > after)
    if before is not None:
        conditions.append(c.InputID < before)
    rows = await conn.execute(
        sa.select(c.InputID, c.LFN, c.LFNSize, c.Descriptor, c.ErrorCount, c.ParentInputID)
        # The (TransformationID, Status) index is in InputID order within a status; MariaDB,
        # seeing ORDER BY InputID LIMIT n, may instead walk the primary key through every
        # input already Assigned or Processed.
        .with_hint(inputs, "FORCE INDEX (ix_Inputs_TransformationID_Status)", "mysql")
        .where(*conditions)
        .order_by(c.InputID)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return [
        InputRecord(
            id=UUID(bytes=bytes(input_id)),
            lfn=lfn,
            lfn_size=lfn_size,
            descriptor=descriptor,
            error_count=int(error_count),
            parent_id=UUID(bytes=bytes(parent_id)) if parent_id else None,
        )
        for input_id, lfn, lfn_size, descriptor, error_count, parent_id in rows
    ]


async def input_states(
    conn: AsyncConnection, transformation_id: bytes, input_ids: Sequence[bytes]
) -> dict[bytes, tuple[str, datetime | None]]:
    """Status and DelayedUntil of the given inputs (for explaining a refused proposal)."""
    rows = await conn.execute(
        sa.select(inputs.c.InputID, inputs.c.Status, inputs.c.DelayedUntil)
        .with_hint(inputs, BY_PRIMARY_KEY, "mysql")
        .where(inputs.c.TransformationID == transformation_id, inputs.c.InputID.in_(input_ids))
    )
    return {bytes(r.InputID): (r.Status, r.DelayedUntil) for r in rows}


class Decided(NamedTuple):
    """A parcel decided on, with what its rows need and nothing more. The proposal object is let
    go at once: a batch of thousands of parcels then holds tuples, which the garbage collector
    stops tracking, rather than objects it would traverse at every collection until written."""

    input_ids: tuple[bytes, ...]  # as stored (from the claim, not re-encoded)
    metadata: dict[str, Any]
    requirements: dict[str, Any] | None = None  # compute: the additions to the template
    parameters: dict[str, Any] | None = None  # compute: the CWL input object
    request: dict[str, Any] | None = None  # data: the request
    deltas: tuple[StorageDelta, ...] = ()  # data: the cost per storage element
    backend: str | None = None  # where a retry directive sends it (None: the dispatcher's choice)

    @classmethod
    def of(cls, proposal: ComputeParcel | DataParcel, input_ids: Sequence[bytes]) -> Decided:
        if isinstance(proposal, ComputeParcel):
            return cls(
                tuple(input_ids), proposal.metadata, proposal.requirements, proposal.parameters
            )
        return cls(
            tuple(input_ids),
            proposal.metadata,
            request=proposal.request,
            deltas=tuple(proposal.deltas),
        )


class NewParcel(NamedTuple):
    parcel_id: bytes
    decided: Decided


@dataclass
class Batch:
    """Decisions of one transaction, every input named once."""

    parcels: list[Decided] = field(default_factory=list)
    bad: list[tuple[bytes, str]] = field(default_factory=list)
    delays: dict[datetime, list[bytes]] = field(default_factory=dict)
    size: int = 0  # inputs decided
    retried: set[bytes] = field(default_factory=set)  # packed inputs that failed before

    def __bool__(self) -> bool:
        return self.size > 0


@dataclass(frozen=True)
class Target:
    """What the batch needs to know of the transformation."""

    transformation_id: bytes
    kind: Kind
    process_id: bytes | None
    requirements_template: dict[str, Any] | None


@dataclass(frozen=True)
class Written:
    parcels: int
    assigned: int
    problematic: int
    delayed: int


async def write_batch(
    conn: AsyncConnection, target: Target, batch: Batch, *, now: datetime
) -> Written:
    """Every row of the batch, in the caller's transaction (see the module docstring). The
    parcels' ids are minted here, one batch at a time, in proposal order."""
    tid = target.transformation_id
    ids = new_ids(len(batch.parcels))
    new = [NewParcel(i, d) for i, d in zip(ids, batch.parcels, strict=True)]
    if new:
        await _insert_parcels(conn, target, new, now)
    assigned = await _assign(conn, tid, new, now)
    problematic = await _problematic(conn, tid, batch.bad, now)
    delayed = await _delay(conn, tid, batch.delays, now)
    moves: list[tuple[tuple[bytes, str | None, str | None], int]] = [
        ((tid, UNASSIGNED, InputStatus.ASSIGNED.value), assigned),
        ((tid, UNASSIGNED, InputStatus.PROBLEMATIC.value), problematic),
    ]
    await journal_inputs(conn, moves)
    return Written(len(new), assigned, problematic, delayed)


async def _insert_parcels(
    conn: AsyncConnection, target: Target, new: Sequence[NewParcel], now: datetime
) -> None:
    PARCEL.check(None, ParcelStatus.UNASSIGNED, Actor.CORE)
    tid = target.transformation_id
    await insert_rows(
        conn,
        parcels,
        [
            {
                "ParcelID": p.parcel_id,
                "TransformationID": tid,
                "Kind": target.kind.value,
                "Status": ParcelStatus.UNASSIGNED.value,
                "Annotations": {"metadata": p.decided.metadata} if p.decided.metadata else None,
                "UpdatedAt": now,
            }
            for p in new
        ],
    )
    directed = [
        {"ParcelID": p.parcel_id, "Backend": p.decided.backend} for p in new if p.decided.backend
    ]
    if directed:
        await insert_rows(conn, directed_parcels, directed)
    await handles.mint(conn, [p.parcel_id for p in new])
    if target.kind is Kind.COMPUTE:
        await _compute_facets(conn, target, new)
    else:
        await _data_facets(conn, tid, new)
    await insert_rows(
        conn,
        parcel_inputs,
        [
            {"TransformationID": tid, "ParcelID": p.parcel_id, "InputID": input_id}
            for p in new
            for input_id in p.decided.input_ids
        ],
    )
    created: list[tuple[tuple[bytes, str | None, str | None], int]] = [
        ((tid, None, ParcelStatus.UNASSIGNED.value), len(new))
    ]
    await journal_parcels(conn, created)


def merged_requirements(
    template: dict[str, Any] | None, additions: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The parcel's requirements: its additions merged key by key over the template."""
    merged = {**(template or {}), **(additions or {})}
    return merged or None


async def _compute_facets(conn: AsyncConnection, target: Target, new: Sequence[NewParcel]) -> None:
    """ComputeParcels rows. Parcels adding the same requirements (most add none) share one
    merged set, merged and content-hashed once per batch rather than once per parcel."""
    merged: dict[bytes | None, dict[str, Any] | None] = {}  # additions, canonical → merged set
    spelled: list[bytes | None] = []
    for p in new:
        additions = p.decided.requirements
        key = canonical_json(additions) if additions else None
        if key not in merged:
            merged[key] = merged_requirements(target.requirements_template, additions)
        spelled.append(key)
    stored = [(key, value) for key, value in merged.items() if value is not None]
    hashes = (
        await content_store.put_requirements(conn, [value for _, value in stored]) if stored else []
    )
    stored_as = {key: h for (key, _), h in zip(stored, hashes, strict=True)}
    await insert_rows(
        conn,
        compute_parcels,
        [
            {
                "ParcelID": p.parcel_id,
                "ProcessID": target.process_id,
                "RequirementsID": stored_as.get(key),
                "Parameters": p.decided.parameters,
            }
            for p, key in zip(new, spelled, strict=True)
        ],
    )


async def _data_facets(conn: AsyncConnection, tid: bytes, new: Sequence[NewParcel]) -> None:
    await insert_rows(
        conn,
        data_parcels,
        [{"ParcelID": p.parcel_id, "Request": p.decided.request} for p in new],
    )
    rows, moves = [], []
    for p in new:
        for delta in p.decided.deltas:
            added = delta.files > 0 or delta.bytes > 0
            quantities = Quantities(
                files_added=delta.files if added else 0,
                bytes_added=delta.bytes if added else 0,
                files_freed=0 if added else -delta.files,
                bytes_freed=0 if added else -delta.bytes,
            )
            rows.append(
                {
                    "ParcelID": p.parcel_id,
                    "StorageElement": delta.se,
                    "FilesAdded": quantities.files_added,
                    "BytesAdded": quantities.bytes_added,
                    "FilesFreed": quantities.files_freed,
                    "BytesFreed": quantities.bytes_freed,
                }
            )
            moves.append(((tid, None, ParcelStatus.UNASSIGNED.value, delta.se), quantities))
    if rows:
        await insert_rows(conn, data_parcel_deltas, rows)
        await journal_data_parcels(conn, moves)


def _short(what: str, moved: int, expected: int) -> ClaimLost:
    return ClaimLost(
        f"{expected - moved} of {expected} inputs to be {what} were no longer Unassigned "
        "(changed by another transaction since the claim): the batch is rolled back"
    )


async def _assign(
    conn: AsyncConnection, tid: bytes, new: Sequence[NewParcel], now: datetime
) -> int:
    """Unassigned → Assigned, each with LastParcelID, the parcel the batch put it in.

    The batch knows each input's parcel, so the statement is given it: a CASE on the InputID
    (`_assigning`), driven by the inputs' primary keys. Reading it back from the ParcelInputs
    just written (a correlated subquery over the batch's parcel ids) was planned by MariaDB as
    a range over the links' primary key per parcel id for every input: seconds per batch,
    holding the inputs' row locks the outcome recorder waits on."""
    INPUT.check(UNASSIGNED, InputStatus.ASSIGNED, Actor.PACKER)
    expected = moved = 0
    for chunk in _by_inputs(new, ASSIGN_CHUNK):
        pairs = [(i, p.parcel_id) for p in chunk for i in p.decided.input_ids]
        expected += len(pairs)
        size = case_size(len(pairs))
        params: dict[str, Any] = {"tid": tid, "ids": [i for i, _ in pairs], "now": now}
        for n, (input_id, parcel_id) in enumerate(pairs):
            params[f"input_{n}"], params[f"parcel_{n}"] = input_id, parcel_id
        for n in range(len(pairs), size):
            params[f"input_{n}"] = params[f"parcel_{n}"] = None
        moved += (await conn.execute(_assigning(size), params)).rowcount
    if moved != expected:
        raise _short("assigned", moved, expected)
    return moved


@functools.lru_cache(maxsize=64)
def _assigning(size: int) -> sa.Update:
    """The UPDATE of `_assign` for up to `size` inputs, built once per size (`case_size`) so
    that SQLAlchemy's compiled cache serves it: `input_<n>` → `parcel_<n>`, unused slots
    NULL."""
    id_type = inputs.c.InputID.type
    return (
        sa.update(inputs)
        .with_hint(BY_PRIMARY_KEY, dialect_name="mysql")
        .where(
            inputs.c.TransformationID == sa.bindparam("tid", type_=id_type),
            inputs.c.InputID.in_(sa.bindparam("ids", expanding=True)),
            inputs.c.Status == UNASSIGNED,
        )
        .values(
            Status=InputStatus.ASSIGNED.value,
            UpdatedAt=sa.bindparam("now", type_=inputs.c.UpdatedAt.type),
            LastParcelID=sa.case(
                {
                    sa.bindparam(f"input_{n}", type_=id_type): sa.bindparam(
                        f"parcel_{n}", type_=id_type
                    )
                    for n in range(size)
                },
                value=inputs.c.InputID,
            ),
        )
    )


def _by_inputs(new: Sequence[NewParcel], size: int) -> Iterator[Sequence[NewParcel]]:
    """Whole parcels, about `size` inputs at a time (a parcel larger than that on its own)."""
    start = count = 0
    for end, parcel in enumerate(new, 1):
        count += len(parcel.decided.input_ids)
        if count >= size:
            yield new[start:end]
            start, count = end, 0
    if start < len(new):
        yield new[start:]


async def _problematic(
    conn: AsyncConnection, tid: bytes, bad: Sequence[tuple[bytes, str]], now: datetime
) -> int:
    """BadInput: Unassigned → Problematic, each with a log row keeping the reason."""
    if not bad:
        return 0
    INPUT.check(UNASSIGNED, InputStatus.PROBLEMATIC, Actor.PACKER)
    moved = 0
    for chunk in chunked([input_id for input_id, _ in bad]):
        result = await conn.execute(
            sa.update(inputs)
            .with_hint(BY_PRIMARY_KEY, dialect_name="mysql")
            .where(
                inputs.c.TransformationID == tid,
                inputs.c.InputID.in_(chunk),
                inputs.c.Status == UNASSIGNED,
            )
            .values(Status=InputStatus.PROBLEMATIC.value, UpdatedAt=now)
        )
        moved += result.rowcount
    if moved != len(bad):
        raise _short("set aside as Problematic", moved, len(bad))
    await log_transformations(
        conn,
        [
            LogEntry(
                tid,
                "InputProblematic",
                AUTHOR,
                message=reason,
                data={"input_id": str(UUID(bytes=input_id)), "by": "packer"},
            )
            for input_id, reason in bad
        ],
    )
    return moved


async def _delay(
    conn: AsyncConnection, tid: bytes, delays: dict[datetime, list[bytes]], now: datetime
) -> int:
    """DelayInput: DelayedUntil only (no status change, nothing journalled)."""
    moved = expected = 0
    for until, ids in delays.items():
        expected += len(ids)
        for chunk in chunked(ids):
            result = await conn.execute(
                sa.update(inputs)
                .with_hint(BY_PRIMARY_KEY, dialect_name="mysql")
                .where(
                    inputs.c.TransformationID == tid,
                    inputs.c.InputID.in_(chunk),
                    inputs.c.Status == UNASSIGNED,
                )
                .values(DelayedUntil=until, UpdatedAt=now)
            )
            moved += result.rowcount
    if moved != expected:
        raise _short("delayed", moved, expected)
    return moved


async def log_packer(
    conn: AsyncConnection, transformation_id: bytes, event_type: str, message: str, data: Any
) -> None:
    await log_transformations(
        conn, [LogEntry(transformation_id, event_type, AUTHOR, message=message, data=data)]
    )
