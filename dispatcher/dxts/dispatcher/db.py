"""All SQL of the dispatcher.

What it writes: the Parcels transitions Unassigned → Reserved → Assigned and Reserved →
Unassigned (with their counter journal rows, through `dxts.core.counters`, in the same
transaction), the backend identifier tables, ComputeParcels.ResolvedHintsID (the sidecar the
dispatcher resolves), and the lease renewal of a Reserved parcel it recovers (UpdatedAt only: no
transition, no journal). What it reads: the parcels' facets (ComputeParcels, DataParcels,
ParcelInputs, UserParcels: written at creation, read once at submission), requirement sets and
sidecars by hash (content-addressed rows never change, so they are read where they are, like the
content store writes them), and its own identifier tables.

Every status change is a conditional UPDATE on rows this transaction locked first (`FOR UPDATE`,
`SKIP LOCKED` when claiming), so the rows it saw are exactly the rows it moved, and the journal
rows are built from them: per transformation, user parcels (no TransformationID) not counted,
and for a data parcel its DataParcelDeltas quantities moved along with it. The one exception is
the usual record of a submitted batch (`record_as_claimed`), whose UPDATE's row count proves it
moved every parcel the claim read, or rolls the transaction back for the locking path.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.counters import StorageDelta, journal_data_parcels, journal_parcels
from dxts.core.db import db_now, utcnow
from dxts.core.schema.definition import requirements, resolved_hints
from dxts.core.schema.execution import (
    compute_parcels,
    data_parcel_deltas,
    data_parcels,
    local_ids,
    null_ids,
    parcel_inputs,
    parcels,
    slurm_ids,
    user_parcels,
)
from dxts.core.states import Kind, ParcelStatus

UNASSIGNED = ParcelStatus.UNASSIGNED.value
RESERVED = ParcelStatus.RESERVED.value
ASSIGNED = ParcelStatus.ASSIGNED.value
COMPLETING = ParcelStatus.COMPLETING.value

# Adaptor type → (identifier table, identifier column). One table per adaptor this project
# ships; an adaptor type not listed here cannot be configured (settings are checked against it).
IDENTIFIER_TABLES: dict[str, tuple[sa.Table, str]] = {
    "local": (local_ids, "LocalID"),
    "null": (null_ids, "NullID"),
    "slurm": (slurm_ids, "SlurmID"),
}

# The Annotations key execution sets when it moves a Reserved or Assigned parcel to Completing
# for a cancellation (DISPATCH.md): the dispatcher then asks the backend to cancel.
CANCEL_REQUESTED = "cancel_requested"


@dataclass
class Parcel:
    """A parcel the dispatcher holds (claimed, or recovered), with what it submits."""

    parcel_id: bytes
    transformation_id: bytes | None
    kind: Kind
    backend: str
    forced: bool  # the packer (or an earlier claim) set the backend, not this claim's policy
    process_id: bytes | None = None
    requirements_id: bytes | None = None
    resolved_hints_id: bytes | None = None
    parameters_json: str | None = None  # as stored: sent on without decoding it
    request: Any = None
    input_ids: tuple[bytes, ...] = ()
    vo: str | None = None  # user parcels


@dataclass(frozen=True)
class Recorded:
    """What recording a batch of accepted parcels did."""

    assigned: list[bytes]
    # Accepted but no longer Reserved when recorded: ParcelID → its status now. A parcel in
    # Completing there was cancelled while being submitted (the backend must be told).
    not_reserved: dict[bytes, str]
    # Accepted, but the identifier clashes with what is recorded (another parcel holds it, or
    # this parcel holds another): left Reserved, the adaptor is misbehaving.
    conflicts: list[bytes]


def _id_column(adaptor: str) -> tuple[sa.Table, sa.Column[Any]]:
    table, column = IDENTIFIER_TABLES[adaptor]
    return table, table.c[column]


# The statements every claimed batch runs, built once with their lists as expanding bind
# parameters: building a statement and its cache key cost SQLAlchemy more than executing it
# (an UPDATE with an IN list of 100 ids: 0.57 ms of CPU built each time, 0.35 ms prebuilt,
# measured), and a batch runs eleven.


def _ids(name: str = "ids") -> sa.BindParameter[Any]:
    return sa.bindparam(name, expanding=True)


_CLAIM = (
    sa.select(parcels.c.ParcelID, parcels.c.TransformationID, parcels.c.Backend)
    .where(
        parcels.c.Kind == sa.bindparam("kind"),
        parcels.c.Status == UNASSIGNED,
        sa.or_(parcels.c.Backend.is_(None), parcels.c.Backend.in_(_ids("backends"))),
    )
    .order_by(parcels.c.ParcelID)
    .limit(sa.bindparam("batch", type_=sa.Integer()))
    .with_for_update(skip_locked=True)
)
_RESERVE = (
    sa.update(parcels)
    .where(parcels.c.ParcelID.in_(_ids()), parcels.c.Status == UNASSIGNED)
    .values(
        Status=RESERVED,
        Backend=sa.bindparam("backend", type_=parcels.c.Backend.type),
        UpdatedAt=utcnow(),
    )
)
_ASSIGN = (
    sa.update(parcels)
    .where(parcels.c.ParcelID.in_(_ids()), parcels.c.Status == RESERVED)
    .values(Status=ASSIGNED, UpdatedAt=utcnow())
)
_COMPUTE_FACETS = sa.select(
    compute_parcels.c.ParcelID,
    compute_parcels.c.ProcessID,
    compute_parcels.c.RequirementsID,
    compute_parcels.c.ResolvedHintsID,
    sa.type_coerce(compute_parcels.c.Parameters, sa.Text()).label("Parameters"),
).where(compute_parcels.c.ParcelID.in_(_ids()))
_LINKS = (
    sa.select(parcel_inputs.c.ParcelID, parcel_inputs.c.InputID)
    # Two IN lists rather than a row-value IN: ranges on the primary key's prefix on every
    # server (ParcelIDs are unique, so no pair outside the batch can match).
    .where(
        parcel_inputs.c.TransformationID.in_(_ids("transformations")),
        parcel_inputs.c.ParcelID.in_(_ids()),
    )
    .order_by(parcel_inputs.c.ParcelID, parcel_inputs.c.InputID)
)
_SET_HINTS = (
    sa.update(compute_parcels)
    .where(compute_parcels.c.ParcelID.in_(_ids()), compute_parcels.c.ResolvedHintsID.is_(None))
    .values(ResolvedHintsID=sa.bindparam("hints", type_=compute_parcels.c.ResolvedHintsID.type))
)


@functools.cache
def _insert_ignoring(adaptor: str, dialect: str) -> sa.Insert:
    """The identifier table's INSERT that skips rows already there, per server dialect."""
    table, _ = _id_column(adaptor)
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    return sa.insert(table).prefix_with("IGNORE")


async def _journal(
    conn: AsyncConnection,
    moved: Sequence[tuple[bytes, bytes | None, str]],
    source: str,
    target: str,
) -> None:
    """Journal rows for parcels moved `source` → `target`: `moved` is (ParcelID,
    TransformationID, Kind); user parcels are not counted."""
    counted = [(pid, tid, kind) for pid, tid, kind in moved if tid is not None]
    if not counted:
        return
    moves: dict[tuple[bytes, str | None, str | None], int] = dict(
        Counter((tid, source, target) for _, tid, _ in counted)
    )
    await journal_parcels(conn, moves)
    data = {pid: tid for pid, tid, kind in counted if kind == Kind.DATA.value}
    if not data:
        return
    rows = await conn.execute(
        sa.select(
            data_parcel_deltas.c.ParcelID,
            data_parcel_deltas.c.StorageElement,
            data_parcel_deltas.c.FilesAdded,
            data_parcel_deltas.c.BytesAdded,
            data_parcel_deltas.c.FilesFreed,
            data_parcel_deltas.c.BytesFreed,
        ).where(data_parcel_deltas.c.ParcelID.in_(list(data)))
    )
    await journal_data_parcels(
        conn,
        [
            (
                (data[bytes(row.ParcelID)], source, target, row.StorageElement),
                StorageDelta(row.FilesAdded, row.BytesAdded, row.FilesFreed, row.BytesFreed),
            )
            for row in rows
        ],
    )


async def claim(
    conn: AsyncConnection,
    kind: Kind,
    batch: int,
    backends: Sequence[str],
    choose: Any,
) -> list[Parcel]:
    """Unassigned → Reserved for up to `batch` parcels of `kind`, in key order.

    Rides the (Kind, Status) index with `FOR UPDATE SKIP LOCKED`, so concurrent claimers take
    disjoint batches; parcels the packer directed to a backend not configured here are left for
    a dispatcher that has it. `choose(parcel_id, kind, forced)` names each parcel's backend;
    the backend is written with the reservation, so that a re-submission after a crash goes to
    the backend that may already have accepted it.
    """
    rows = (
        await conn.execute(_CLAIM, {"kind": kind.value, "backends": list(backends), "batch": batch})
    ).all()
    claimed = []
    for row in rows:
        backend = choose(bytes(row.ParcelID), kind, row.Backend)
        if backend is not None:
            claimed.append(
                Parcel(
                    bytes(row.ParcelID),
                    bytes(row.TransformationID) if row.TransformationID else None,
                    kind,
                    backend,
                    forced=row.Backend is not None,
                )
            )
    if not claimed:
        return []
    by_backend: dict[str, list[bytes]] = {}
    for parcel in claimed:
        by_backend.setdefault(parcel.backend, []).append(parcel.parcel_id)
    for backend, ids in by_backend.items():
        await conn.execute(_RESERVE, {"ids": ids, "backend": backend})
    await _journal(
        conn,
        [(p.parcel_id, p.transformation_id, kind.value) for p in claimed],
        UNASSIGNED,
        RESERVED,
    )
    return claimed


async def claim_stale(
    conn: AsyncConnection, kind: Kind, lease: timedelta, batch: int, backends: Sequence[str]
) -> list[Parcel]:
    """Reserved parcels of `kind` older than `lease`, with their lease renewed (UpdatedAt).

    Renewing takes them out of every other replica's sight for another lease, so one recovery
    at a time re-submits a parcel; the status does not change, so nothing is journalled.
    """
    now = await db_now(conn)
    rows = (
        await conn.execute(
            sa.select(parcels.c.ParcelID, parcels.c.TransformationID, parcels.c.Backend)
            .where(
                parcels.c.Kind == kind.value,
                parcels.c.Status == RESERVED,
                parcels.c.UpdatedAt < now - lease,
                parcels.c.Backend.in_(list(backends)),
            )
            .order_by(parcels.c.ParcelID)
            .limit(batch)
            .with_for_update(skip_locked=True)
        )
    ).all()
    if not rows:
        return []
    await conn.execute(
        sa.update(parcels)
        .where(parcels.c.ParcelID.in_([row.ParcelID for row in rows]))
        .values(UpdatedAt=now)
    )
    return [
        Parcel(
            bytes(row.ParcelID),
            bytes(row.TransformationID) if row.TransformationID else None,
            kind,
            row.Backend,
            forced=True,
        )
        for row in rows
    ]


async def load_payloads(conn: AsyncConnection, held: Sequence[Parcel]) -> None:
    """Fill each parcel's facet: what it runs (compute) or carries out (data), its inputs."""
    by_id = {parcel.parcel_id: parcel for parcel in held}
    compute = [p.parcel_id for p in held if p.kind is Kind.COMPUTE]
    data = [p.parcel_id for p in held if p.kind is Kind.DATA]
    if compute:
        for row in await conn.execute(_COMPUTE_FACETS, {"ids": compute}):
            parcel = by_id[bytes(row.ParcelID)]
            parcel.process_id = bytes(row.ProcessID)
            parcel.requirements_id = bytes(row.RequirementsID) if row.RequirementsID else None
            parcel.resolved_hints_id = bytes(row.ResolvedHintsID) if row.ResolvedHintsID else None
            parcel.parameters_json = row.Parameters
    if data:
        for request in await conn.execute(
            sa.select(data_parcels.c.ParcelID, data_parcels.c.Request).where(
                data_parcels.c.ParcelID.in_(data)
            )
        ):
            by_id[bytes(request.ParcelID)].request = request.Request
    pairs = [(p.transformation_id, p.parcel_id) for p in held if p.transformation_id]
    if pairs:
        inputs: dict[bytes, list[bytes]] = {}
        for link in await conn.execute(
            _LINKS,
            {"transformations": sorted({t for t, _ in pairs}), "ids": [p for _, p in pairs]},
        ):
            inputs.setdefault(bytes(link.ParcelID), []).append(bytes(link.InputID))
        for parcel_id, ids in inputs.items():
            by_id[parcel_id].input_ids = tuple(ids)
    users = [p.parcel_id for p in held if p.transformation_id is None]
    if users:
        for user in await conn.execute(
            sa.select(user_parcels.c.ParcelID, user_parcels.c.VO).where(
                user_parcels.c.ParcelID.in_(users)
            )
        ):
            by_id[bytes(user.ParcelID)].vo = user.VO


async def requirement_sets(conn: AsyncConnection, ids: Iterable[bytes]) -> dict[bytes, Any]:
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = await conn.execute(
        sa.select(requirements.c.RequirementsID, requirements.c.Requirements).where(
            requirements.c.RequirementsID.in_(wanted)
        )
    )
    return {bytes(row[0]): row[1] for row in rows}


async def sidecars(conn: AsyncConnection, ids: Iterable[bytes]) -> dict[bytes, Any]:
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = await conn.execute(
        sa.select(resolved_hints.c.ResolvedHintsID, resolved_hints.c.Hints).where(
            resolved_hints.c.ResolvedHintsID.in_(wanted)
        )
    )
    return {bytes(row[0]): row[1] for row in rows}


async def set_resolved_hints(conn: AsyncConnection, chosen: Mapping[bytes, bytes]) -> None:
    """Record each parcel's sidecar (ParcelID → ResolvedHintsID) where none is recorded yet:
    a parcel re-submitted after a crash keeps the one it was first submitted with."""
    by_hints: dict[bytes, list[bytes]] = {}
    for parcel_id, hints_id in chosen.items():
        by_hints.setdefault(hints_id, []).append(parcel_id)
    for hints_id, ids in by_hints.items():
        await conn.execute(_SET_HINTS, {"ids": sorted(ids), "hints": hints_id})


async def _lock(
    conn: AsyncConnection, parcel_ids: Iterable[bytes]
) -> dict[bytes, tuple[bytes | None, str, str]]:
    """Lock the parcels (in key order, so two recorders never deadlock on each other) and
    return ParcelID → (TransformationID, Kind, Status)."""
    rows = await conn.execute(
        sa.select(parcels.c.ParcelID, parcels.c.TransformationID, parcels.c.Kind, parcels.c.Status)
        .where(parcels.c.ParcelID.in_(sorted(set(parcel_ids))))
        .order_by(parcels.c.ParcelID)
        .with_for_update()
    )
    return {
        bytes(row.ParcelID): (
            bytes(row.TransformationID) if row.TransformationID else None,
            row.Kind,
            row.Status,
        )
        for row in rows
    }


async def insert_identifiers(
    conn: AsyncConnection, adaptor: str, identifiers: Mapping[bytes, bytes]
) -> list[bytes]:
    """Record ParcelID → identifier rows, skipping ones already there; returns the parcels
    whose recorded identifier is not the given one (or that could not be recorded)."""
    if not identifiers:
        return []
    table, column = _id_column(adaptor)
    rows = [{"ParcelID": p, column.name: i} for p, i in sorted(identifiers.items())]
    result = await conn.execute(_insert_ignoring(adaptor, conn.dialect.name), rows)
    if conn.dialect.supports_sane_multi_rowcount and result.rowcount == len(rows):
        return []  # every row is new: nothing can clash (the usual case, one statement less)
    recorded = {
        bytes(row[0]): bytes(row[1])
        for row in await conn.execute(
            sa.select(table.c.ParcelID, column).where(table.c.ParcelID.in_(list(identifiers)))
        )
    }
    return [p for p, i in identifiers.items() if recorded.get(p) != i]


async def record_accepted(
    conn: AsyncConnection, adaptor: str, accepted: Mapping[bytes, bytes]
) -> Recorded:
    """The backend accepted these parcels (ParcelID → identifier): record the identifiers and
    move the still-Reserved ones to Assigned, in one transaction."""
    state = await _lock(conn, accepted)
    conflicts = await insert_identifiers(conn, adaptor, accepted)
    movable = [p for p in accepted if p not in conflicts and p in state and state[p][2] == RESERVED]
    if movable:
        await _assign(conn, movable)
        await _journal(conn, [(p, state[p][0], state[p][1]) for p in movable], RESERVED, ASSIGNED)
    return Recorded(
        assigned=movable,
        not_reserved={p: state[p][2] for p in accepted if p in state and state[p][2] != RESERVED},
        conflicts=conflicts,
    )


class NotAsClaimed(Exception):
    """Raised by `record_as_claimed` to roll its transaction back: a parcel is no longer
    Reserved, or an identifier clashes. The batch is then recorded by `record_accepted`."""


async def record_as_claimed(
    conn: AsyncConnection,
    adaptor: str,
    accepted: Mapping[bytes, bytes],
    claimed: Mapping[bytes, tuple[bytes | None, str]],
) -> Recorded:
    """`record_accepted` for the usual batch, in three statements instead of five: every
    accepted parcel still Reserved and every identifier new. The UPDATE locks the parcels (key
    order, like `_lock`) and its row count proves the first, the identifiers' row count the
    second; the journal is built from what the claim read (`claimed`: ParcelID →
    (TransformationID, Kind), which never change). Anything else raises NotAsClaimed."""
    ids = sorted(accepted)
    if await _assign(conn, ids) != len(ids) or await insert_identifiers(conn, adaptor, accepted):
        raise NotAsClaimed
    await _journal(conn, [(p, *claimed[p]) for p in ids], RESERVED, ASSIGNED)
    return Recorded(assigned=ids, not_reserved={}, conflicts=[])


async def _assign(conn: AsyncConnection, parcel_ids: Sequence[bytes]) -> int:
    """Reserved → Assigned for the parcels among `parcel_ids` still Reserved; how many moved."""
    result = await conn.execute(_ASSIGN, {"ids": sorted(parcel_ids)})
    return int(result.rowcount)


async def record_refused(
    conn: AsyncConnection, refused: Iterable[bytes], clear_backend: Iterable[bytes]
) -> list[bytes]:
    """Reserved → Unassigned for parcels the backend refused (not an attempt). A backend this
    dispatcher's policy chose is cleared, so that the next claim chooses again; one the packer
    directed stays."""
    state = await _lock(conn, refused)
    movable = sorted(p for p, (_, _, status) in state.items() if status == RESERVED)
    if not movable:
        return []
    now = await db_now(conn)
    clear = set(clear_backend)
    for ids, values in (
        ([p for p in movable if p in clear], {"Backend": None}),
        ([p for p in movable if p not in clear], {}),
    ):
        if ids:
            await conn.execute(
                sa.update(parcels)
                .where(parcels.c.ParcelID.in_(ids), parcels.c.Status == RESERVED)
                .values(Status=UNASSIGNED, UpdatedAt=now, **values)
            )
    await _journal(conn, [(p, state[p][0], state[p][1]) for p in movable], RESERVED, UNASSIGNED)
    return movable


async def assigned_page(
    conn: AsyncConnection, backend: str, adaptor: str, after: bytes | None, limit: int
) -> list[tuple[bytes, bytes]]:
    """(ParcelID, identifier) of the backend's Assigned parcels after `after`, in key order:
    the (Backend, Status) index, one page at a time."""
    table, column = _id_column(adaptor)
    query = (
        sa.select(parcels.c.ParcelID, column)
        .join(table, table.c.ParcelID == parcels.c.ParcelID)
        .where(parcels.c.Backend == backend, parcels.c.Status == ASSIGNED)
        .order_by(parcels.c.ParcelID)
        .limit(limit)
    )
    if after is not None:
        query = query.where(parcels.c.ParcelID > after)
    return [(bytes(row[0]), bytes(row[1])) for row in await conn.execute(query)]


@dataclass(frozen=True)
class CancelRequest:
    parcel_id: bytes
    identifier: bytes | None
    updated_at: datetime


async def cancel_requests(
    conn: AsyncConnection, backend: str, adaptor: str, page: int
) -> tuple[list[CancelRequest], datetime]:
    """The backend's Completing parcels that carry a cancel request, with their identifier
    when one is recorded; and the database clock, to age them against.

    Completing parcels are few (a finished one stays only until execution records it), so they
    are read page by page on the (Backend, Status) index and the request is read from
    Annotations here, rather than through a JSON predicate whose boolean semantics differ
    between MariaDB and SQLite.
    """
    table, column = _id_column(adaptor)
    requests: list[CancelRequest] = []
    after: bytes | None = None
    while True:
        query = (
            sa.select(parcels.c.ParcelID, parcels.c.Annotations, parcels.c.UpdatedAt, column)
            .select_from(parcels.outerjoin(table, table.c.ParcelID == parcels.c.ParcelID))
            .where(parcels.c.Backend == backend, parcels.c.Status == COMPLETING)
            .order_by(parcels.c.ParcelID)
            .limit(page)
        )
        if after is not None:
            query = query.where(parcels.c.ParcelID > after)
        rows = (await conn.execute(query)).all()
        requests.extend(
            CancelRequest(bytes(row[0]), bytes(row[3]) if row[3] else None, row[2])
            for row in rows
            if isinstance(row[1], dict) and row[1].get(CANCEL_REQUESTED) is True
        )
        if len(rows) < page:
            return requests, await db_now(conn)
        after = bytes(rows[-1][0])


async def parcels_of_identifiers(
    conn: AsyncConnection, adaptor: str, identifiers: Iterable[bytes]
) -> dict[bytes, bytes]:
    """identifier → ParcelID, through the identifier table's unique index."""
    wanted = sorted(set(identifiers))
    if not wanted:
        return {}
    table, column = _id_column(adaptor)
    rows = await conn.execute(sa.select(column, table.c.ParcelID).where(column.in_(wanted)))
    return {bytes(row[0]): bytes(row[1]) for row in rows}


@dataclass(frozen=True)
class BackendLoad:
    reserved: int
    assigned: int
    oldest_reserved_at: datetime | None


async def backend_loads(
    conn: AsyncConnection, backends: Sequence[str]
) -> tuple[dict[str, BackendLoad], datetime]:
    """Per backend: parcels Reserved and Assigned to it, and its oldest reservation; with the
    database clock to age that against."""
    counts = {
        (row[0], row[1]): int(row[2])
        for row in await conn.execute(
            sa.select(parcels.c.Backend, parcels.c.Status, sa.func.count())
            .where(
                parcels.c.Backend.in_(list(backends)), parcels.c.Status.in_([RESERVED, ASSIGNED])
            )
            .group_by(parcels.c.Backend, parcels.c.Status)
        )
    }
    oldest = {
        row[0]: row[1]
        for row in await conn.execute(
            sa.select(parcels.c.Backend, sa.func.min(parcels.c.UpdatedAt))
            .where(parcels.c.Backend.in_(list(backends)), parcels.c.Status == RESERVED)
            .group_by(parcels.c.Backend)
        )
    }
    loads = {
        name: BackendLoad(
            counts.get((name, RESERVED), 0), counts.get((name, ASSIGNED), 0), oldest.get(name)
        )
        for name in backends
    }
    return loads, await db_now(conn)
