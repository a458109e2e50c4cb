"""Claiming (Unassigned → Reserved, SKIP LOCKED, key order), the recovery of stale Reserved
parcels (their lease renewed), and what a held parcel carries to its backend: its facet
(ComputeParcels, DataParcels, ParcelInputs, UserParcels: written at creation, read once at
submission), requirement sets and sidecars by hash (content-addressed rows never change), and
the sidecar recorded on a compute parcel (ComputeParcels.ResolvedHintsID).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import db_now, utcnow
from dxts.core.schema.definition import requirements, resolved_hints
from dxts.core.schema.execution import (
    BY_PRIMARY_KEY,
    PARCELS_BY_KIND_AND_STATUS,
    compute_parcels,
    data_parcels,
    directed_parcels,
    parcel_inputs,
    parcels,
    user_parcels,
)
from dxts.core.states import Kind
from dxts.dispatcher.store import quota
from dxts.dispatcher.store.transitions import RESERVED, UNASSIGNED, id_list, journal


@dataclass
class Parcel:
    """A parcel the dispatcher holds (claimed, or recovered), with what it submits."""

    parcel_id: bytes
    transformation_id: bytes | None
    kind: Kind
    backend: str
    process_id: bytes | None = None
    requirements_id: bytes | None = None
    resolved_hints_id: bytes | None = None
    parameters_json: str | None = None  # as stored: sent on without decoding it
    request: Any = None
    input_ids: tuple[bytes, ...] = ()
    vo: str | None = None  # user parcels


# Where execution directs a parcel is its DirectedParcels row (execution's, read here): a
# directed parcel goes to that backend, or waits for a dispatcher that has it.
_CLAIM = (
    sa.select(
        parcels.c.ParcelID,
        parcels.c.TransformationID,
        directed_parcels.c.Backend.label("Directed"),
    )
    .select_from(
        parcels.outerjoin(directed_parcels, directed_parcels.c.ParcelID == parcels.c.ParcelID)
    )
    .with_hint(parcels, PARCELS_BY_KIND_AND_STATUS, "mysql")
    .where(
        parcels.c.Kind == sa.bindparam("kind"),
        parcels.c.Status == UNASSIGNED,
        sa.or_(
            directed_parcels.c.Backend.is_(None),
            directed_parcels.c.Backend.in_(id_list("backends")),
        ),
    )
    .order_by(parcels.c.ParcelID)
    .limit(sa.bindparam("batch", type_=sa.Integer()))
    .with_for_update(skip_locked=True)
)
_RESERVE = (
    sa.update(parcels)
    .where(parcels.c.ParcelID.in_(id_list()), parcels.c.Status == UNASSIGNED)
    .values(
        Status=RESERVED,
        Backend=sa.bindparam("backend", type_=parcels.c.Backend.type),
        UpdatedAt=utcnow(),
    )
)
_COMPUTE_FACETS = sa.select(
    compute_parcels.c.ParcelID,
    compute_parcels.c.ProcessID,
    compute_parcels.c.RequirementsID,
    compute_parcels.c.ResolvedHintsID,
    sa.type_coerce(compute_parcels.c.Parameters, sa.Text()).label("Parameters"),
).where(compute_parcels.c.ParcelID.in_(id_list()))
_LINKS = (
    sa.select(parcel_inputs.c.ParcelID, parcel_inputs.c.InputID)
    # Two IN lists rather than a row-value IN: ranges on the primary key's prefix on every
    # server (ParcelIDs are unique, so no pair outside the batch can match).
    # Forced: MariaDB was seen reading a transformation's every row (a ref on the
    # (TransformationID, InputID) index) for a batch of parcels.
    .with_hint(parcel_inputs, BY_PRIMARY_KEY, "mysql")
    .where(
        parcel_inputs.c.TransformationID.in_(id_list("transformations")),
        parcel_inputs.c.ParcelID.in_(id_list()),
    )
    .order_by(parcel_inputs.c.ParcelID, parcel_inputs.c.InputID)
)
_SET_HINTS = (
    sa.update(compute_parcels)
    .where(compute_parcels.c.ParcelID.in_(id_list()), compute_parcels.c.ResolvedHintsID.is_(None))
    .values(ResolvedHintsID=sa.bindparam("hints", type_=compute_parcels.c.ResolvedHintsID.type))
)


async def claim(
    conn: AsyncConnection,
    kind: Kind,
    batch: int,
    backends: Sequence[str],
    choose: Any,
    caps: quota.InFlightCaps | None = None,
) -> list[Parcel]:
    """Unassigned → Reserved for up to `batch` parcels of `kind`, in key order.

    Rides the (Kind, Status) index with `FOR UPDATE SKIP LOCKED`, so concurrent claimers take
    disjoint batches; parcels execution directed to a backend not configured here are left for
    a dispatcher that has it. `choose(parcel_id, kind, directed)` names each parcel's backend;
    the backend is written with the reservation, so that a re-submission after a crash goes to
    the backend that may already have accepted it. Under `caps`, a VO takes no more than its
    room for parcels in flight (`quota`), and a VO at its cap is left out of the claim.
    """
    statement = _CLAIM
    if caps:
        statement = _CLAIM.where(*quota.not_of(await quota.full_vos(conn, caps)))
    rows = (
        await conn.execute(
            statement, {"kind": kind.value, "backends": list(backends), "batch": batch}
        )
    ).all()
    if caps and rows:
        pairs = [
            (bytes(r.ParcelID), bytes(r.TransformationID) if r.TransformationID else None)
            for r in rows
        ]
        kept = await quota.within_caps(conn, pairs, caps)
        rows = [row for row in rows if bytes(row.ParcelID) in kept]
    claimed = []
    for row in rows:
        backend = choose(bytes(row.ParcelID), kind, row.Directed)
        if backend is not None:
            claimed.append(
                Parcel(
                    bytes(row.ParcelID),
                    bytes(row.TransformationID) if row.TransformationID else None,
                    kind,
                    backend,
                )
            )
    if not claimed:
        return []
    by_backend: dict[str, list[bytes]] = {}
    for parcel in claimed:
        by_backend.setdefault(parcel.backend, []).append(parcel.parcel_id)
    for backend, ids in by_backend.items():
        await conn.execute(_RESERVE, {"ids": ids, "backend": backend})
    await journal(
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
            .with_hint(parcels, PARCELS_BY_KIND_AND_STATUS, "mysql")
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
        .where(parcels.c.ParcelID.in_([row.ParcelID for row in rows]), parcels.c.Status == RESERVED)
        .values(UpdatedAt=now)
    )
    return [
        Parcel(
            bytes(row.ParcelID),
            bytes(row.TransformationID) if row.TransformationID else None,
            kind,
            row.Backend,
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


async def requirement_sets(
    conn: AsyncConnection, ids: Iterable[bytes]
) -> dict[bytes, dict[str, Any]]:
    """Requirement sets (JSON objects) by hash."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = await conn.execute(
        sa.select(requirements.c.RequirementsID, requirements.c.Requirements).where(
            requirements.c.RequirementsID.in_(wanted)
        )
    )
    return {bytes(row[0]): row[1] for row in rows}


async def sidecars(conn: AsyncConnection, ids: Iterable[bytes]) -> dict[bytes, dict[str, Any]]:
    """Resolved-hints sidecars (JSON objects) by hash."""
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
