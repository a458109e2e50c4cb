"""SQL of outcome recording: locking parcels, reading what they carried, moving rows.

Parcels are locked (`SELECT ... FOR UPDATE`) before they move, so the rows that lock returns
are the truth their journal is written from; inputs move through `common.move_inputs`, whose
conditional UPDATE's row count is. Every move journals in the caller's transaction.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.bulk import insert_rows
from dxts.core.counters import (
    StorageDelta,
    journal_data_parcels,
    journal_input_transition,
    journal_parcels,
)
from dxts.core.schema.execution import (
    BY_PRIMARY_KEY,
    PARCELS_BY_KIND_AND_STATUS,
    data_parcel_deltas,
    inputs,
    parcel_inputs,
    parcel_outputs,
    parcels,
)
from dxts.core.state_machines import INPUT, PARCEL, Actor
from dxts.core.states import InputStatus, Kind, ParcelStatus
from dxts.execution.store.common import case_size, chunked

# The Annotations key of a parcel's recorded outcome (`outcomes.OUTCOME`).
OUTCOME = "outcome"


# -- parcels -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParcelRow:
    parcel_id: bytes
    transformation_id: bytes | None
    kind: str
    status: str
    backend: str | None
    annotations: dict[str, Any]


def _parcel_row(row: Any) -> ParcelRow:
    return ParcelRow(
        parcel_id=bytes(row.ParcelID),
        transformation_id=bytes(row.TransformationID) if row.TransformationID else None,
        kind=row.Kind,
        status=row.Status,
        backend=row.Backend,
        annotations=dict(row.Annotations) if isinstance(row.Annotations, dict) else {},
    )


_PARCEL_COLUMNS = (
    parcels.c.ParcelID,
    parcels.c.TransformationID,
    parcels.c.Kind,
    parcels.c.Status,
    parcels.c.Backend,
    parcels.c.Annotations,
)


async def lock_parcels(
    conn: AsyncConnection, parcel_ids: Iterable[bytes], *, skip_locked: bool = False
) -> dict[bytes, ParcelRow]:
    """The parcels among `parcel_ids`, locked until the transaction ends (SQLite: the whole
    database already is). With `skip_locked`, a parcel another transaction holds is left out
    rather than waited for: it is that transaction's to move."""
    wanted = sorted(set(parcel_ids))
    found: dict[bytes, ParcelRow] = {}
    for chunk in chunked(wanted):
        rows = await conn.execute(
            sa.select(*_PARCEL_COLUMNS)
            .where(parcels.c.ParcelID.in_(chunk))
            .order_by(parcels.c.ParcelID)
            .with_for_update(skip_locked=skip_locked)
        )
        found.update((parcel.parcel_id, parcel) for parcel in map(_parcel_row, rows))
    return found


async def recordable(
    conn: AsyncConnection, *, after: bytes | None, limit: int
) -> list[tuple[bytes, bytes | None]]:
    """(ParcelID, TransformationID) of Completing parcels whose outcome has arrived, in key
    order after `after`; the outcome is looked for in the database, so the page does not carry
    every outcome back.

    One read per kind, each a range of the (Kind, Status) index, whose entries are in ParcelID
    order within a kind and status, so the read stops after `limit` rows: over both kinds at
    once the index is not in key order and MariaDB sorted every Completing parcel (seconds a
    page under a backlog of 500,000), and left free it walked the primary key through every
    parcel already Done."""
    found: list[tuple[bytes, bytes | None]] = []
    for kind in Kind:
        condition = [
            parcels.c.Kind == kind.value,
            parcels.c.Status == ParcelStatus.COMPLETING,
            sa.func.json_extract(parcels.c.Annotations, f"$.{OUTCOME}").is_not(None),
        ]
        if after is not None:
            condition.append(parcels.c.ParcelID > after)
        rows = await conn.execute(
            sa.select(parcels.c.ParcelID, parcels.c.TransformationID)
            .with_hint(parcels, PARCELS_BY_KIND_AND_STATUS, "mysql")
            .where(*condition)
            .order_by(parcels.c.ParcelID)
            .limit(limit)
        )
        found.extend((bytes(p), bytes(t) if t else None) for p, t in rows)
    return sorted(found)[:limit]


async def carried_counts(
    conn: AsyncConnection, page: Sequence[tuple[bytes, bytes | None]]
) -> dict[bytes, int]:
    """How many inputs each parcel of `page` ((ParcelID, TransformationID), as `recordable`
    returns it) carries, counted on the links' primary key; parcels that carry none are
    absent."""
    pi = parcel_inputs.c
    counts: dict[bytes, int] = {}
    for tid, ids in _by_transformation(page).items():
        for chunk in chunked(sorted(ids)):
            rows = await conn.execute(
                sa.select(pi.ParcelID, sa.func.count())
                .with_hint(parcel_inputs, BY_PRIMARY_KEY, "mysql")
                .where(pi.TransformationID == tid, pi.ParcelID.in_(chunk))
                .group_by(pi.ParcelID)
            )
            counts.update((bytes(parcel_id), count) for parcel_id, count in rows)
    return counts


def _by_transformation(
    parcels_of: Iterable[tuple[bytes, bytes | None]],
) -> dict[bytes, list[bytes]]:
    """TransformationID → its ParcelIDs among (ParcelID, TransformationID) pairs; user parcels
    (no transformation) carry no inputs and are left out."""
    grouped: dict[bytes, list[bytes]] = defaultdict(list)
    for parcel_id, transformation_id in parcels_of:
        if transformation_id is not None:
            grouped[transformation_id].append(parcel_id)
    return grouped


ID, JSON = parcels.c.ParcelID.type, parcels.c.Annotations.type


@dataclass(frozen=True)
class ParcelMove:
    """One locked parcel to `target`; `annotations` None leaves them as they are."""

    row: ParcelRow
    target: str
    annotations: dict[str, Any] | None = None
    completed: bool = False


class _HexJson(sa.types.TypeDecorator[Any]):
    """A JSON parameter sent as the hex digits of its text, which the statement unhexes: the
    server driver (asyncmy) escapes a string parameter character by character, at several
    times the cost of hexing a document full of quotes. The text stored is the same."""

    impl = sa.String
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: sa.Dialect) -> str | None:
        if value is None:
            return None
        serialize = getattr(dialect, "_json_serializer", None) or json.dumps
        return str(serialize(value)).encode().hex()


def _annotations_param(n: int, hexed: bool) -> sa.ColumnElement[Any]:
    if not hexed:
        return sa.bindparam(f"annotations_{n}", type_=JSON)
    text = sa.func.unhex(sa.bindparam(f"annotations_{n}", type_=_HexJson()))
    return sa.cast(text, mysql.CHAR(charset="utf8mb4"))


@functools.lru_cache(maxsize=128)
def _annotating_move(size: int, completed: bool, hexed: bool) -> sa.Update:
    """The UPDATE of `move_parcels` for up to `size` annotated parcels, built once per shape so
    that SQLAlchemy's compiled cache serves it without a fresh CASE of bind parameters (nor its
    cache key) per call: the annotations come as `id_<n>`/`annotations_<n>` parameters, unused
    slots NULL (a NULL WHEN matches no row); `hexed` on a server (`_HexJson`)."""
    values: dict[str, Any] = {
        "Status": sa.bindparam("target", type_=parcels.c.Status.type),
        "UpdatedAt": sa.bindparam("now", type_=parcels.c.UpdatedAt.type),
        "Annotations": sa.case(
            {sa.bindparam(f"id_{n}", type_=ID): _annotations_param(n, hexed) for n in range(size)},
            value=parcels.c.ParcelID,
            else_=parcels.c.Annotations,
        ),
    }
    if completed:
        values["CompletedAt"] = sa.bindparam("now", type_=parcels.c.CompletedAt.type)
    return (
        sa.update(parcels)
        .where(
            parcels.c.ParcelID.in_(sa.bindparam("ids", expanding=True)),
            parcels.c.Status == sa.bindparam("source", type_=parcels.c.Status.type),
        )
        .values(values)
    )


async def move_parcels(conn: AsyncConnection, moves: Sequence[ParcelMove], now: datetime) -> None:
    """Apply moves of parcels this transaction has locked, and journal them (the transformation
    counter, and the data counter for data parcels): one UPDATE per (from, to) and chunk, the
    parcels whose annotations change given theirs through a CASE on the ParcelID.

    Each (from, to) that moves is checked against the parcel machine as execution's
    (`Actor.CORE`) before anything is written (a "move" to the same status only annotates): the
    dispatcher's moves (Unassigned → Reserved → Assigned and back) are refused here, so the two
    writers of Parcels.Status split by transition (tests/test_parcel_transitions.py)."""
    groups: dict[tuple[str, str, bool], list[ParcelMove]] = defaultdict(list)
    for move in moves:
        groups[(move.row.status, move.target, move.completed)].append(move)
    for source, target, _ in groups:
        if source != target:
            PARCEL.check(source, target, Actor.CORE)
    for (source, target, completed), group in groups.items():
        for chunk in chunked(group):
            ids = [m.row.parcel_id for m in chunk]
            annotated = [m for m in chunk if m.annotations is not None]
            if not annotated:
                values: dict[str, Any] = {"Status": target, "UpdatedAt": now}
                if completed:
                    values["CompletedAt"] = now
                await conn.execute(
                    sa.update(parcels)
                    .where(parcels.c.ParcelID.in_(ids), parcels.c.Status == source)
                    .values(values)
                )
                continue
            size = case_size(len(annotated))
            params: dict[str, Any] = {"ids": ids, "source": source, "target": target, "now": now}
            for n, move in enumerate(annotated):
                params[f"id_{n}"], params[f"annotations_{n}"] = move.row.parcel_id, move.annotations
            for n in range(len(annotated), size):
                params[f"id_{n}"] = params[f"annotations_{n}"] = None
            hexed = conn.dialect.name != "sqlite"
            await conn.execute(_annotating_move(size, completed, hexed), params)
    await journal_parcel_moves(conn, [(m.row, m.row.status, m.target) for m in moves])


async def journal_parcel_moves(
    conn: AsyncConnection, moves: Sequence[tuple[ParcelRow, str | None, str | None]]
) -> None:
    """Journal parcel moves `(row, from, to)` (None from: created; None to: deleted)."""
    counts: dict[tuple[bytes, str | None, str | None], int] = defaultdict(int)
    data: list[tuple[ParcelRow, str | None, str | None]] = []
    for row, source, target in moves:
        if row.transformation_id is None or source == target:
            continue  # user parcels are not counted
        counts[(row.transformation_id, source, target)] += 1
        if row.kind == Kind.DATA:
            data.append((row, source, target))
    if counts:
        await journal_parcels(conn, counts)
    if data:
        deltas = await _storage_deltas(conn, [row.parcel_id for row, _, _ in data])
        sums: dict[tuple[bytes, str | None, str | None, str], list[int]] = {}
        for row, source, target in data:
            for se, delta in deltas.get(row.parcel_id, ()):
                assert row.transformation_id is not None
                total = sums.setdefault((row.transformation_id, source, target, se), [0] * 4)
                for i, quantity in enumerate(delta):
                    total[i] += quantity
        if sums:
            await journal_data_parcels(conn, {k: StorageDelta(*v) for k, v in sums.items()})


async def _storage_deltas(
    conn: AsyncConnection, parcel_ids: Sequence[bytes]
) -> dict[bytes, list[tuple[str, StorageDelta]]]:
    found: dict[bytes, list[tuple[str, StorageDelta]]] = defaultdict(list)
    d = data_parcel_deltas.c
    for chunk in chunked(parcel_ids):
        rows = await conn.execute(
            sa.select(
                d.ParcelID, d.StorageElement, d.FilesAdded, d.BytesAdded, d.FilesFreed, d.BytesFreed
            ).where(d.ParcelID.in_(chunk))
        )
        for row in rows:
            found[bytes(row.ParcelID)].append(
                (
                    row.StorageElement,
                    StorageDelta(row.FilesAdded, row.BytesAdded, row.FilesFreed, row.BytesFreed),
                )
            )
    return found


# -- inputs --------------------------------------------------------------------------------------

# Values a move of inputs sets besides their status (`common.move_inputs(values=...)`).
BUMP_ERRORS: dict[str, Any] = {"ErrorCount": inputs.c.ErrorCount + 1}
RESET_ERRORS: dict[str, Any] = {"ErrorCount": 0}


class CarriedInput(NamedTuple):
    """An input a parcel carried and still holds (Assigned, LastParcelID the parcel): the inputs
    whose fate its outcome decides. A tuple: recording reads every one of every parcel."""

    parcel_id: bytes
    input_id: bytes
    error_count: int


async def carried_inputs(
    conn: AsyncConnection, parcel_rows: Iterable[ParcelRow]
) -> dict[bytes, list[CarriedInput]]:
    """ParcelID → the inputs still Assigned to it, in (ParcelID, InputID) order; the inputs it
    carried that have moved on since are left in the database.

    Two reads, each of one table by its primary key, rather than one join: MariaDB planned the
    join from statistics that lag a fast-growing table, reading the transformation's every
    ParcelInputs row (a ref on TransformationID alone, even with the key forced) for a batch of
    parcels, a cost per batch that grew with the run."""
    found: dict[bytes, list[CarriedInput]] = defaultdict(list)
    pi, i = parcel_inputs.c, inputs.c
    pairs = ((r.parcel_id, r.transformation_id) for r in parcel_rows)
    for tid, ids in _by_transformation(pairs).items():
        for chunk in chunked(sorted(ids)):
            links = (
                await conn.execute(
                    sa.select(pi.ParcelID, pi.InputID)
                    .with_hint(parcel_inputs, BY_PRIMARY_KEY, "mysql")
                    .where(pi.TransformationID == tid, pi.ParcelID.in_(chunk))
                    .order_by(pi.ParcelID, pi.InputID)
                )
            ).all()
            held: dict[bytes, tuple[bytes, int]] = {}
            for part in chunked([bytes(input_id) for _, input_id in links]):
                rows = await conn.execute(
                    sa.select(i.InputID, i.LastParcelID, i.ErrorCount)
                    .with_hint(inputs, BY_PRIMARY_KEY, "mysql")
                    .where(
                        i.TransformationID == tid,
                        i.InputID.in_(part),
                        i.Status == InputStatus.ASSIGNED,
                    )
                )
                held.update(
                    (bytes(input_id), (bytes(holder), errors))
                    for input_id, holder, errors in rows
                    if holder is not None
                )
            for parcel_id, input_id in links:
                holder = held.get(bytes(input_id))
                if holder is not None and holder[0] == bytes(parcel_id):
                    found[bytes(parcel_id)].append(
                        CarriedInput(bytes(parcel_id), bytes(input_id), holder[1])
                    )
    return found


async def move_held_inputs(
    conn: AsyncConnection,
    transformation_id: bytes,
    carried: Sequence[CarriedInput],
    *,
    target: str,
    now: datetime,
    values: Mapping[str, Any] | None = None,
) -> int:
    """Move these inputs of one transformation to `target` (setting `values` too) where each is
    still Assigned to a parcel among those that carried them, journal the move, and return how
    many moved.

    By the inputs' primary key, not joined to ParcelInputs: MariaDB planned that join from
    statistics lagging the table and read the transformation's every row per batch. Conditional
    like `common.move_inputs`, whose row count is what is journalled."""
    INPUT.check(InputStatus.ASSIGNED, target, Actor.CORE)
    i = inputs.c
    moved = 0
    for chunk in chunked(carried):
        result = await conn.execute(
            sa.update(inputs)
            .with_hint(BY_PRIMARY_KEY, dialect_name="mysql")
            .where(
                i.TransformationID == transformation_id,
                i.InputID.in_([item.input_id for item in chunk]),
                i.Status == InputStatus.ASSIGNED,
                i.LastParcelID.in_(sorted({item.parcel_id for item in chunk})),
            )
            .values(Status=target, UpdatedAt=now, **(values or {}))
        )
        moved += result.rowcount
    await journal_input_transition(conn, transformation_id, InputStatus.ASSIGNED, target, moved)
    return moved


async def insert_parcel_outputs(conn: AsyncConnection, rows: Sequence[Mapping[str, Any]]) -> None:
    await insert_rows(conn, parcel_outputs, rows)
