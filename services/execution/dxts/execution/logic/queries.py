"""Reading inputs and parcels for the RPCs: pages by key, and one entity with what surrounds it.

Lists read at READ COMMITTED (a page is one statement). A detail is several statements, read in
one REPEATABLE READ snapshot so that an input and its parcels, or a parcel and its inputs, agree
with each other even while they move.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from dxts.core.db import Database, Isolation, Transaction
from dxts.core.errors import NotFound
from dxts.core.ids import id_from_str, id_to_str
from dxts.execution.logic.parcel_annotations import RECOVERY_OF
from dxts.execution.records import (
    ComputeFacet,
    DataFacet,
    InputRecord,
    ParcelRecord,
    Submitter,
)
from dxts.execution.store import queries as db
from dxts.execution.store.operations import OutputRow, inputs_of_parcels, outputs_of

R = TypeVar("R", InputRecord, ParcelRecord)


@dataclass(frozen=True)
class Page(Generic[R]):
    items: list[R]
    last: bytes | None  # the key to continue after; None on the last page


def _key(record: InputRecord | ParcelRecord) -> bytes:
    return record.input_id if isinstance(record, InputRecord) else record.parcel_id


def _page(rows: list[R], limit: int) -> Page[R]:
    if len(rows) > limit:
        rows = rows[:limit]
        return Page(rows, _key(rows[-1]))
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
) -> Page[InputRecord]:
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
    return _page(rows, limit)


@dataclass(frozen=True)
class InputDetail:
    input: InputRecord
    parcels: list[ParcelRecord]
    parent: InputRecord | None
    children: list[InputRecord]
    # A split child's history before it existed: its ancestors' parcels, oldest first.
    inherited: list[ParcelRecord]


# How far up a split child's ancestry its history is read (a split of a split of a split...).
MAX_SPLIT_DEPTH = 16


async def get_input(database: Database, transformation_id: bytes, input_id: bytes) -> InputDetail:
    async def work(conn: Transaction) -> InputDetail:
        row = await db.input_row(conn, transformation_id, input_id)
        if row is None:
            raise NotFound("input", id_to_str(input_id))
        parent = (
            await db.input_row(conn, transformation_id, row.parent_input_id)
            if row.parent_input_id
            else None
        )
        inherited: list[ParcelRecord] = []
        ancestor = parent
        for _ in range(MAX_SPLIT_DEPTH):
            if ancestor is None:
                break
            inherited[:0] = await db.parcels_of_input(conn, transformation_id, ancestor.input_id)
            ancestor = (
                await db.input_row(conn, transformation_id, ancestor.parent_input_id)
                if ancestor.parent_input_id
                else None
            )
        return InputDetail(
            row,
            await db.parcels_of_input(conn, transformation_id, input_id),
            parent,
            await db.children_of(conn, transformation_id, input_id),
            inherited,
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
) -> Page[ParcelRecord]:
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
    return _page(rows, limit)


@dataclass(frozen=True)
class ParcelDetail:
    parcel: ParcelRecord
    compute: ComputeFacet | None
    data: DataFacet  # its request is None for a compute parcel
    inputs: list[InputRecord]
    outputs: list[OutputRow]
    identifier: str
    submitter: Submitter | None  # for a user parcel


async def _compute_facet(conn: Transaction, row: ParcelRecord) -> ComputeFacet | None:
    """The parcel's compute facet. A split's born-Done recovery parcel was never dispatched, so
    the sidecar the dispatcher resolved is its recovered parcel's (`recovery_of`), read through
    that parcel: ComputeParcels.ResolvedHintsID has one writer, the dispatcher."""
    facet = await db.compute_facet(conn, row.parcel_id)
    recovers = (row.annotations or {}).get(RECOVERY_OF)
    if facet is None or facet.resolved_hints_id is not None or not isinstance(recovers, str):
        return facet
    recovered = await db.compute_facet(conn, id_from_str(recovers, field=RECOVERY_OF))
    if recovered is None:
        return facet
    return replace(facet, resolved_hints_id=recovered.resolved_hints_id)


async def get_parcel(database: Database, parcel_id: bytes) -> ParcelDetail:
    async def work(conn: Transaction) -> ParcelDetail:
        row = await db.parcel_row(conn, parcel_id)
        if row is None:
            raise NotFound("parcel", id_to_str(parcel_id))
        carried: list[InputRecord] = []
        if row.transformation_id is not None:
            found = await inputs_of_parcels(conn, row.transformation_id, [parcel_id])
            carried = found.get(parcel_id, [])
        return ParcelDetail(
            parcel=row,
            compute=await _compute_facet(conn, row),
            data=await db.data_facet(conn, parcel_id),
            inputs=carried,
            outputs=await outputs_of(conn, [parcel_id]),
            identifier=await db.backend_identifier(conn, parcel_id),
            submitter=await db.submitter(conn, parcel_id),
        )

    return await database.run(work, isolation=Isolation.REPEATABLE_READ)
