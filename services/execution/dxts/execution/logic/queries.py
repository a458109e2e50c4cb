"""Reading inputs and parcels for the RPCs: pages by key, and one entity with what surrounds it.

Lists read at READ COMMITTED (a page is one statement). A detail is several statements, read in
one REPEATABLE READ snapshot so that an input and its parcels, or a parcel and its inputs, agree
with each other even while they move.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import Database, Isolation
from dxts.core.errors import NotFound
from dxts.core.ids import id_to_str
from dxts.execution.store import queries as db
from dxts.execution.store.operations import OutputRow, inputs_of_parcels, outputs_of


@dataclass(frozen=True)
class Page:
    items: list[Any]
    last: bytes | None  # the key to continue after; None on the last page


def _page(rows: list[Any], limit: int, key: str) -> Page:
    if len(rows) > limit:
        rows = rows[:limit]
        return Page(rows, bytes(getattr(rows[-1], key)))
    return Page(rows, None)


async def list_inputs(
    database: Database,
    transformation_id: bytes,
    *,
    statuses: Sequence[str] = (),
    lfn: str = "",
    parent_id: bytes | None = None,
    after: bytes | None = None,
    limit: int,
) -> Page:
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        rows = await db.list_inputs(
            conn,
            transformation_id,
            statuses=statuses,
            lfn=lfn,
            parent_id=parent_id,
            after=after,
            limit=limit + 1,
        )
    return _page(rows, limit, "InputID")


@dataclass(frozen=True)
class InputDetail:
    input: Any
    parcels: list[Any]
    parent: Any | None
    children: list[Any]


async def get_input(database: Database, transformation_id: bytes, input_id: bytes) -> InputDetail:
    async def work(conn: AsyncConnection) -> InputDetail:
        row = await db.input_row(conn, transformation_id, input_id)
        if row is None:
            raise NotFound("input", id_to_str(input_id))
        parent = (
            await db.input_row(conn, transformation_id, bytes(row.ParentInputID))
            if row.ParentInputID
            else None
        )
        return InputDetail(
            row,
            await db.parcels_of_input(conn, transformation_id, input_id),
            parent,
            await db.children_of(conn, transformation_id, input_id),
        )

    return await database.run(work, isolation=Isolation.REPEATABLE_READ)


@dataclass(frozen=True)
class ParcelFilters:
    transformation_id: bytes | None = None
    statuses: Sequence[str] = ()
    kind: str | None = None
    backend: str = ""
    process_id: bytes | None = None
    user_vo: str | None = None  # only that VO's user parcels


async def list_parcels(
    database: Database, filters: ParcelFilters, *, after: bytes | None = None, limit: int
) -> Page:
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        rows = await db.list_parcels(
            conn,
            transformation_id=filters.transformation_id,
            statuses=filters.statuses,
            kind=filters.kind,
            backend=filters.backend,
            process_id=filters.process_id,
            user_vo=filters.user_vo,
            after=after,
            limit=limit + 1,
        )
    return _page(rows, limit, "ParcelID")


@dataclass(frozen=True)
class ParcelDetail:
    parcel: Any
    compute: Any | None  # ComputeParcels row
    request: Any  # DataParcels.Request (None for a compute parcel)
    deltas: list[Any]
    inputs: list[Any]
    outputs: list[OutputRow]
    identifier: str
    submitter: Any | None  # UserParcels row


async def get_parcel(database: Database, parcel_id: bytes) -> ParcelDetail:
    async def work(conn: AsyncConnection) -> ParcelDetail:
        row = await db.parcel_row(conn, parcel_id)
        if row is None:
            raise NotFound("parcel", id_to_str(parcel_id))
        carried: list[Any] = []
        if row.TransformationID is not None:
            found = await inputs_of_parcels(conn, bytes(row.TransformationID), [parcel_id])
            carried = found.get(parcel_id, [])
        request, deltas = await db.data_facet(conn, parcel_id)
        return ParcelDetail(
            parcel=row,
            compute=await db.compute_facet(conn, parcel_id),
            request=request,
            deltas=deltas,
            inputs=carried,
            outputs=await outputs_of(conn, [parcel_id]),
            identifier=await db.backend_identifier(conn, parcel_id),
            submitter=await db.submitter(conn, parcel_id),
        )

    return await database.run(work, isolation=Isolation.REPEATABLE_READ)
