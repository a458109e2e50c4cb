"""SQL of the read RPCs: inputs and parcels listed by key (keyset pages) and shown in detail.

Every list is ordered by its primary key within the filters and continues strictly after the
last key of the previous page, so a page never repeats or skips a row that stays put. The
input filters ride the (TransformationID, Status), (TransformationID, LFN) and
(TransformationID, ParentInputID) indexes; the parcel filters the (TransformationID, Status)
and (Kind, Status) ones. A backend filter matches the backend a parcel shows (`SHOWN_BACKEND`:
the one it was reserved for, or the one it is directed to), so it narrows what those read.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.ids import id_to_str
from dxts.core.schema.execution import (
    backend_ids,
    compute_parcels,
    data_parcel_deltas,
    data_parcels,
    directed_parcels,
    inputs,
    parcel_inputs,
    parcels,
    user_parcels,
)
from dxts.execution.records import (
    ComputeFacet,
    DataFacet,
    InputRecord,
    ParcelRecord,
    StorageDelta,
    Submitter,
)

CHILDREN_SHOWN = 1000

# A parcel's backend as shown: the one the dispatcher reserved it for (Parcels.Backend), or
# until then the one execution directs it to (DirectedParcels: a packer's choice, or `recovery`
# for a split's born-Done recovery parcel, which is never dispatched).
SHOWN_BACKEND = sa.func.coalesce(parcels.c.Backend, directed_parcels.c.Backend)
SHOWN_PARCELS = parcels.outerjoin(
    directed_parcels, directed_parcels.c.ParcelID == parcels.c.ParcelID
)
SHOWN_COLUMNS = (
    *(column for column in parcels.c if column.name != "Backend"),
    SHOWN_BACKEND.label("Backend"),
)


async def list_inputs(
    conn: AsyncConnection,
    transformation_id: bytes,
    *,
    statuses: Sequence[str],
    lfn: str,
    parent_id: bytes | None,
    after: bytes | None,
    limit: int,
) -> list[InputRecord]:
    c = inputs.c
    conditions = [c.TransformationID == transformation_id]
    if statuses:
        conditions.append(c.Status.in_(statuses))
    if lfn:
        by_lfn = c.LFN  # (Yoda check: ruff takes an upper-case column for a constant)
        conditions.append(by_lfn == lfn)
    if parent_id is not None:
        conditions.append(c.ParentInputID == parent_id)
    if after is not None:
        conditions.append(c.InputID > after)
    rows = await conn.execute(sa.select(inputs).where(*conditions).order_by(c.InputID).limit(limit))
    return [InputRecord.of(row) for row in rows]


async def input_row(
    conn: AsyncConnection, transformation_id: bytes, input_id: bytes
) -> InputRecord | None:
    row = (
        await conn.execute(
            sa.select(inputs).where(
                inputs.c.TransformationID == transformation_id, inputs.c.InputID == input_id
            )
        )
    ).one_or_none()
    return InputRecord.of(row) if row is not None else None


async def parcels_of_input(
    conn: AsyncConnection, transformation_id: bytes, input_id: bytes
) -> list[ParcelRecord]:
    """Every parcel that carried the input, oldest first (ParcelInputs keeps them all)."""
    rows = await conn.execute(
        sa.select(*SHOWN_COLUMNS)
        .select_from(
            parcel_inputs.join(SHOWN_PARCELS, parcels.c.ParcelID == parcel_inputs.c.ParcelID)
        )
        .where(
            parcel_inputs.c.TransformationID == transformation_id,
            parcel_inputs.c.InputID == input_id,
        )
        .order_by(parcels.c.ParcelID)
    )
    return [ParcelRecord.of(row) for row in rows]


async def children_of(
    conn: AsyncConnection, transformation_id: bytes, parent_id: bytes
) -> list[InputRecord]:
    rows = await conn.execute(
        sa.select(inputs)
        .where(inputs.c.TransformationID == transformation_id, inputs.c.ParentInputID == parent_id)
        .order_by(inputs.c.InputID)
        .limit(CHILDREN_SHOWN)
    )
    return [InputRecord.of(row) for row in rows]


async def list_parcels(
    conn: AsyncConnection,
    *,
    transformation_id: bytes | None,
    statuses: Sequence[str],
    kind: str | None,
    backend: str,
    process_id: bytes | None,
    user_vo: str | None,
    after: bytes | None,
    limit: int,
) -> list[ParcelRecord]:
    """Parcels matching every filter given; `user_vo` narrows to that VO's user parcels."""
    c = parcels.c
    source: sa.FromClause = SHOWN_PARCELS
    conditions: list[sa.ColumnElement[bool]] = []
    if transformation_id is not None:
        conditions.append(c.TransformationID == transformation_id)
    if statuses:
        conditions.append(c.Status.in_(statuses))
    if kind is not None:
        conditions.append(c.Kind == kind)
    if backend:
        conditions.append(sa.literal(backend) == SHOWN_BACKEND)
    if process_id is not None:
        source = source.join(compute_parcels, compute_parcels.c.ParcelID == c.ParcelID)
        conditions.append(compute_parcels.c.ProcessID == process_id)
    if user_vo is not None:
        source = source.join(user_parcels, user_parcels.c.ParcelID == c.ParcelID)
        vo = user_parcels.c.VO
        conditions.append(vo == user_vo)
    if after is not None:
        conditions.append(c.ParcelID > after)
    rows = await conn.execute(
        sa.select(*SHOWN_COLUMNS)
        .select_from(source)
        .where(*conditions)
        .order_by(c.ParcelID)
        .limit(limit)
    )
    return [ParcelRecord.of(row) for row in rows]


async def parcel_row(conn: AsyncConnection, parcel_id: bytes) -> ParcelRecord | None:
    row = (
        await conn.execute(
            sa.select(*SHOWN_COLUMNS)
            .select_from(SHOWN_PARCELS)
            .where(parcels.c.ParcelID == parcel_id)
        )
    ).one_or_none()
    return ParcelRecord.of(row) if row is not None else None


async def compute_facet(conn: AsyncConnection, parcel_id: bytes) -> ComputeFacet | None:
    row = (
        await conn.execute(
            sa.select(compute_parcels).where(compute_parcels.c.ParcelID == parcel_id)
        )
    ).one_or_none()
    return ComputeFacet.of(row) if row is not None else None


async def data_facet(conn: AsyncConnection, parcel_id: bytes) -> DataFacet:
    """The request (None for a compute parcel) and its per-storage-element deltas."""
    request = await conn.scalar(
        sa.select(data_parcels.c.Request).where(data_parcels.c.ParcelID == parcel_id)
    )
    deltas = await conn.execute(
        sa.select(data_parcel_deltas)
        .where(data_parcel_deltas.c.ParcelID == parcel_id)
        .order_by(data_parcel_deltas.c.StorageElement)
    )
    return DataFacet(request, [StorageDelta.of(row) for row in deltas])


async def submitter(conn: AsyncConnection, parcel_id: bytes) -> Submitter | None:
    """Who submitted a user parcel; None for a transformation parcel."""
    row = (
        await conn.execute(sa.select(user_parcels).where(user_parcels.c.ParcelID == parcel_id))
    ).one_or_none()
    return Submitter(row.VO, row.Sub) if row is not None else None


async def backend_identifier(conn: AsyncConnection, parcel_id: bytes) -> str:
    """The identifier the parcel's adaptor gave it (BackendIDs), "" before it was accepted."""
    identifier = await conn.scalar(
        sa.select(backend_ids.c.Identifier).where(backend_ids.c.ParcelID == parcel_id)
    )
    return id_to_str(bytes(identifier)) if identifier is not None else ""
