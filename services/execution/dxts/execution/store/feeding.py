"""SQL of the feeder runner: one batch of inputs with its bookmark, the feeder's log rows, and the
Edge feeder's range scan over a producer's ParcelOutputs (below its watermark, `watermark`).

A batch is one transaction (`commit_batch`):

1. The guard: `UPDATE Transformations SET FeederState = ... WHERE TransformationID = :t AND
   Status = 'Active' AND FeederEnabled` (FeederState is execution's column). It writes the new
   bookmark, or the old one back, and row-locks the transformation, so an operator or hook
   disabling the feeder (definition's UPDATE of the same row) is ordered with the batch: either
   the batch commits first and its inputs are counted before any drain check, or it finds the
   feeder off, matches no row, and writes nothing.
2. The inputs: one duplicate-ignoring bulk insert; its row count (the rows actually inserted)
   is journalled as +N Unassigned.
3. NoMoreInputs: the same guard clears FeederEnabled, with a TransformationLog row.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.bulk import insert_rows
from dxts.core.counters import journal_input_transition
from dxts.core.ids import new_ids
from dxts.core.logs import LogEntry, log_transformations
from dxts.core.plugins import Input
from dxts.core.schema.definition import transformations
from dxts.core.schema.execution import inputs, parcel_outputs
from dxts.core.state_machines import INPUT, Actor
from dxts.core.states import InputStatus, TransformationStatus

AUTHOR = "execution"
KEEP = object()  # commit_batch: leave the bookmark as it is


class _DuplicateEntries(logging.Filter):
    """asyncmy logs one warning per row INSERT IGNORE skipped; a skipped duplicate is the
    designed outcome of a re-fed input (the hash key refuses it), not something to report."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Duplicate entry")


logging.getLogger("asyncmy").addFilter(_DuplicateEntries())


class NewInput(NamedTuple):
    """What a batch keeps of a proposal until it is written: the row's own values. A batch of
    thousands then holds plain tuples, which the garbage collector stops tracking, rather than
    the proposal objects, which it would traverse again and again."""

    input_hash: bytes
    lfn: str | None
    lfn_size: int | None
    descriptor: dict[str, Any] | None

    @classmethod
    def of(cls, proposal: Input) -> NewInput:
        return cls(
            proposal.input_hash,
            getattr(proposal, "lfn", None),
            getattr(proposal, "lfn_size", None),
            proposal.descriptor,
        )


@dataclass(frozen=True)
class BatchResult:
    accepted: bool  # False: the feeder was found disabled (or the transformation not Active)
    inserted: int = 0


async def commit_batch(
    conn: AsyncConnection,
    transformation_id: bytes,
    proposals: Sequence[NewInput],
    *,
    bookmark: Any = KEEP,
    exhausted: bool = False,
    now: datetime,
) -> BatchResult:
    """Guard, insert, journal, bookmark and (on NoMoreInputs) disable: one transaction's work."""
    INPUT.check(None, InputStatus.UNASSIGNED, Actor.FEEDER)
    guard = sa.update(transformations).where(
        transformations.c.TransformationID == transformation_id,
        transformations.c.Status == TransformationStatus.ACTIVE.value,
        transformations.c.FeederEnabled.is_(sa.true()),
    )
    state = transformations.c.FeederState if bookmark is KEEP else bookmark
    changes: dict[str, Any] = {"FeederState": state}
    if exhausted:
        changes["FeederEnabled"] = False
    if (await conn.execute(guard.values(changes))).rowcount != 1:
        return BatchResult(accepted=False)
    rows = [
        {
            "TransformationID": transformation_id,
            "InputID": input_id,
            "InputHash": proposal.input_hash,
            "LFN": proposal.lfn,
            "LFNSize": proposal.lfn_size,
            "Descriptor": proposal.descriptor,
            "Status": InputStatus.UNASSIGNED.value,
            "UpdatedAt": now,
        }
        for input_id, proposal in zip(new_ids(len(proposals)), proposals, strict=True)
    ]
    # Validated against the columns already (IGNORE would downgrade their errors to warnings).
    inserted = await insert_rows(conn, inputs, rows, ignore_duplicates=True)
    await journal_input_transition(conn, transformation_id, None, InputStatus.UNASSIGNED, inserted)
    if exhausted:
        await log_feeder(
            conn, transformation_id, "FeederExhausted", "the feeder reported NoMoreInputs"
        )
    return BatchResult(accepted=True, inserted=inserted)


async def log_feeder(
    conn: AsyncConnection,
    transformation_id: bytes,
    event_type: str,
    message: str,
    data: Any = None,
) -> None:
    await log_transformations(
        conn, [LogEntry(transformation_id, event_type, AUTHOR, message=message, data=data)]
    )


class OutputRow(NamedTuple):
    output_id: bytes
    lfn: str
    lfn_size: int | None


async def parcel_outputs_between(
    conn: AsyncConnection,
    transformation_output_id: bytes,
    *,
    after: UUID | None,
    through: UUID,
    limit: int,
) -> list[OutputRow]:
    """ParcelOutputs under the output with `after` < OutputID <= `through` (a primary-key
    range), in OutputID order."""
    columns = parcel_outputs.c
    conditions = [
        columns.TransformationOutputID == transformation_output_id,
        columns.OutputID <= through.bytes,
    ]
    if after is not None:
        conditions.append(columns.OutputID > after.bytes)
    rows = await conn.execute(
        sa.select(columns.OutputID, columns.LFN, columns.LFNSize)
        .where(*conditions)
        .order_by(columns.OutputID)
        .limit(limit)
    )
    return [OutputRow(bytes(r.OutputID), r.LFN, r.LFNSize) for r in rows]
