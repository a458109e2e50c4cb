"""The two counters (docs/counters.md), and the helpers writers call to journal transitions.

* `TRANSFORMATION`: (TransformationID, Entity, Status) → Count, over Inputs and the
  transformation parcels (a user parcel has no TransformationID and is not counted).
* `DATA_PARCELS`: (TransformationID, Status, StorageElement) → the four quantities of a data
  parcel's DataParcelDeltas rows, carried straight across (positive deltas added, freed ones
  freed) and moved from status to status with the parcel.

Writers never build journal rows themselves: they call `journal_inputs`, `journal_parcels` or
`journal_data_parcels` inside the transaction that changed the rows, with what that
transaction found under its own locks (the row count of a conditional UPDATE, the rows of a
SELECT ... FOR UPDATE, the row count of an insert that skipped duplicates). Every helper is
bulk-shaped: one call carries many transformations' moves and writes one INSERT. A move is
`(TransformationID, from_status, to_status)`; `None` as from is a creation, as to a deletion.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.counters.construct import Counter, Key, KeyColumn, Source
from dxts.core.errors import FieldViolation, InvalidArgument
from dxts.core.schema.execution import data_parcel_deltas, inputs, parcels
from dxts.core.schema.types import Enum, Uuid
from dxts.core.states import InputStatus, ParcelStatus, values


class Entity(StrEnum):
    INPUT = "Input"
    PARCEL = "Parcel"


# The union of the input and parcel machines, written out as the schema's ENUM: input states first,
# then the parcel-only ones. A state appended to either machine is appended here too, at the
# end, so that the ENUM only ever grows at its end; a test checks the union stays exact.
COUNTED_STATUSES = (
    "Unassigned",
    "Assigned",
    "Processed",
    "Split",
    "Failed",
    "Problematic",
    "NotProcessed",
    "Reserved",
    "Completing",
    "Done",
    "PartiallyDone",
    "Cancelled",
)

_transformation_parcels = parcels.c.TransformationID.is_not(None)

TRANSFORMATION = Counter(
    "Transformation",
    key=(
        KeyColumn("TransformationID", Uuid()),
        KeyColumn("Entity", Enum("CounterEntity", values(Entity))),
        KeyColumn("Status", Enum("CounterStatus", COUNTED_STATUSES)),
    ),
    measures=("Count",),
    sources=(
        Source(
            inputs,
            key={
                "TransformationID": inputs.c.TransformationID,
                "Entity": Entity.INPUT.value,
                "Status": inputs.c.Status,
            },
            measures={"Count": 1},
        ),
        Source(
            parcels,
            key={
                "TransformationID": parcels.c.TransformationID,
                "Entity": Entity.PARCEL.value,
                "Status": parcels.c.Status,
            },
            measures={"Count": 1},
            where=_transformation_parcels,
        ),
    ),
)

DATA_PARCELS = Counter(
    "DataParcels",
    key=(
        KeyColumn("TransformationID", Uuid()),
        KeyColumn("Status", Enum("DataCounterStatus", values(ParcelStatus))),
        KeyColumn("StorageElement", sa.String(64)),
    ),
    measures=("LFNCountAdded", "LFNSizeAdded", "LFNCountFreed", "LFNSizeFreed"),
    sources=(
        Source(
            parcels.join(data_parcel_deltas, data_parcel_deltas.c.ParcelID == parcels.c.ParcelID),
            key={
                "TransformationID": parcels.c.TransformationID,
                "Status": parcels.c.Status,
                "StorageElement": data_parcel_deltas.c.StorageElement,
            },
            measures={
                "LFNCountAdded": data_parcel_deltas.c.FilesAdded,
                "LFNSizeAdded": data_parcel_deltas.c.BytesAdded,
                "LFNCountFreed": data_parcel_deltas.c.FilesFreed,
                "LFNSizeFreed": data_parcel_deltas.c.BytesFreed,
            },
            where=_transformation_parcels,
        ),
    ),
    # "What is about to be written to / freed on this storage element", across transformations.
    indexes=(("StorageElement",),),
)

Move = tuple[bytes, str | None, str | None]  # (TransformationID, from status, to status)


class StorageDelta(NamedTuple):
    """One DataParcelDeltas row's quantities (never negative), or their sum over parcels."""

    files_added: int
    bytes_added: int
    files_freed: int
    bytes_freed: int


def _pairs(moves: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> Iterable[tuple[Any, Any]]:
    return moves.items() if isinstance(moves, Mapping) else moves


def _moved(
    move: Any, arity: int, states: tuple[str, ...], path: str, problems: list[FieldViolation]
) -> tuple[Any, ...] | None:
    """A move's (from, to) checked against the machine's states; None if it moves nothing."""
    if not isinstance(move, tuple) or len(move) != arity:
        problems.append(FieldViolation(path, f"expected a tuple of {arity} items"))
        return None
    old, new = move[1], move[2]
    for name, status in (("from", old), ("to", new)):
        if status is not None and status not in states:
            problems.append(FieldViolation(f"{path}.{name}", f"{status!r} is not one of {states}"))
    if old is None and new is None:
        problems.append(FieldViolation(path, "a move needs a from or a to status"))
    return move if old != new else None


def _population(
    entity: Entity, states: tuple[str, ...], moves: Mapping[Move, int] | Iterable[tuple[Move, int]]
) -> list[tuple[Key, tuple[int]]]:
    problems: list[FieldViolation] = []
    deltas: list[tuple[Key, tuple[int]]] = []
    for i, (move, count) in enumerate(_pairs(moves)):
        checked = _moved(move, 3, states, f"moves[{i}]", problems)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            problems.append(FieldViolation(f"moves[{i}].count", "expected an integer >= 0"))
        elif checked:
            transformation_id, old, new = checked
            if old is not None:
                deltas.append(((transformation_id, entity.value, old), (-count,)))
            if new is not None:
                deltas.append(((transformation_id, entity.value, new), (count,)))
    if problems:
        raise InvalidArgument(problems)
    return deltas


async def journal_inputs(
    conn: AsyncConnection, moves: Mapping[Move, int] | Iterable[tuple[Move, int]]
) -> int:
    """Journal input transitions: `{(TransformationID, from, to): count}`; returns rows written."""
    return await TRANSFORMATION.journal(conn, _population(Entity.INPUT, values(InputStatus), moves))


async def journal_parcels(
    conn: AsyncConnection, moves: Mapping[Move, int] | Iterable[tuple[Move, int]]
) -> int:
    """Journal transformation-parcel transitions, shaped like `journal_inputs`."""
    return await TRANSFORMATION.journal(
        conn, _population(Entity.PARCEL, values(ParcelStatus), moves)
    )


async def journal_input_transition(
    conn: AsyncConnection,
    transformation_id: bytes,
    from_status: str | None,
    to_status: str | None,
    count: int,
) -> int:
    """One transformation's input move, e.g. the row count of one conditional UPDATE."""
    return await journal_inputs(conn, {(transformation_id, from_status, to_status): count})


async def journal_parcel_transition(
    conn: AsyncConnection,
    transformation_id: bytes,
    from_status: str | None,
    to_status: str | None,
    count: int,
) -> int:
    """One transformation's parcel move."""
    return await journal_parcels(conn, {(transformation_id, from_status, to_status): count})


DataMove = tuple[bytes, str | None, str | None, str]  # (TransformationID, from, to, SE)


async def journal_data_parcels(
    conn: AsyncConnection,
    moves: Mapping[DataMove, StorageDelta] | Iterable[tuple[DataMove, StorageDelta]],
) -> int:
    """Journal data parcels' quantities: `{(TransformationID, from, to, StorageElement): delta}`.

    The packer creating a data parcel passes `(tid, None, "Unassigned", se)` with each of its
    DataParcelDeltas rows; every later transition of the parcel passes the same quantities
    from its old status to its new one. Quantities are the table's, never negative.
    """
    problems: list[FieldViolation] = []
    deltas: list[tuple[Key, tuple[int, ...]]] = []
    for i, (move, quantities) in enumerate(_pairs(moves)):
        checked = _moved(move, 4, values(ParcelStatus), f"moves[{i}]", problems)
        if not (
            isinstance(quantities, tuple)
            and len(quantities) == len(StorageDelta._fields)
            and all(isinstance(q, int) and not isinstance(q, bool) and q >= 0 for q in quantities)
        ):
            problems.append(
                FieldViolation(f"moves[{i}].delta", "expected four integers >= 0 (StorageDelta)")
            )
        elif checked:
            transformation_id, old, new, storage_element = checked
            if old is not None:
                deltas.append(
                    ((transformation_id, old, storage_element), tuple(-q for q in quantities))
                )
            if new is not None:
                deltas.append(((transformation_id, new, storage_element), tuple(quantities)))
    if problems:
        raise InvalidArgument(problems)
    return await DATA_PARCELS.journal(conn, deltas)
