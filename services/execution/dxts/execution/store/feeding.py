"""SQL of the feeder runner: one batch of inputs with its bookmark, the feeder's log rows, its
own row (FeederStates: the bookmark and whether it is exhausted), and the Edge feeder's range
scan over a producer's ParcelOutputs (below its watermark, `watermark`).

A batch is one transaction (`commit_batch`):

1. The guard: a shared lock on the transformation's row, read `WHERE TransformationID = :t AND
   Status = 'Active' AND FeederEnabled` (definition's row and the operator's switch; the lock
   is declared in tests/test_ownership.py). It orders the batch with an operator or hook
   disabling the feeder (definition's UPDATE of the same row, which waits for the lock): either
   the batch commits first and its inputs are counted before any drain check, or it finds the
   feeder off, matches no row, and writes nothing.
2. The inputs: one duplicate-ignoring bulk insert; its row count (the rows actually inserted)
   is journalled as +N Unassigned.
3. The feeder's row: the new bookmark and, on NoMoreInputs, Exhausted, with a TransformationLog
   row. A feeder whose row is Exhausted does not run again until execution is asked to reset it
   (`reset_feeders`, when an operator or a hook enables the feeder again). Likewise a feeder
   held by a quota (`held`: HeldReason, with a `FeederHeld` log row), until it is reset.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.bulk import insert_rows
from dxts.core.counters import journal_input_transition
from dxts.core.ids import new_ids
from dxts.core.logs import LogEntry, log_transformations
from dxts.core.plugins import Input
from dxts.core.schema.definition import transformations
from dxts.core.schema.execution import feeder_states, inputs, parcel_outputs
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
    held: str | None = None,
    now: datetime,
) -> BatchResult:
    """Guard, insert, journal, bookmark, (on NoMoreInputs) exhausted and (at a quota) `held`
    with its reason: one transaction's work."""
    INPUT.check(None, InputStatus.UNASSIGNED, Actor.FEEDER)
    open_ = await conn.scalar(
        sa.select(transformations.c.TransformationID)
        .where(
            transformations.c.TransformationID == transformation_id,
            transformations.c.Status == TransformationStatus.ACTIVE.value,
            transformations.c.FeederEnabled.is_(sa.true()),
        )
        .with_for_update(read=True)
    )
    if open_ is None:
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
    if bookmark is not KEEP or exhausted or held:
        await _save_state(conn, transformation_id, bookmark, exhausted, now, held=held)
    if exhausted:
        await log_feeder(
            conn, transformation_id, "FeederExhausted", "the feeder reported NoMoreInputs"
        )
    if held:
        await log_feeder(conn, transformation_id, "FeederHeld", held)
    return BatchResult(accepted=True, inserted=inserted)


async def _save_state(
    conn: AsyncConnection,
    transformation_id: bytes,
    bookmark: Any,
    exhausted: bool,
    now: datetime,
    *,
    held: str | None = None,
) -> None:
    """Put the feeder's row: the bookmark unless KEEP, Exhausted when it said NoMoreInputs,
    the reason it is held when a quota stopped it."""
    changes: dict[str, Any] = {"UpdatedAt": now}
    if bookmark is not KEEP:
        changes["Bookmark"] = bookmark
    if exhausted:
        changes["Exhausted"] = True
    if held:
        changes["HeldReason"] = held[:512]
    row = {"TransformationID": transformation_id, "Bookmark": None, **changes}
    if conn.dialect.name == "sqlite":
        lite = sqlite.insert(feeder_states).values(row)
        await conn.execute(
            lite.on_conflict_do_update(index_elements=["TransformationID"], set_=changes)
        )
        return
    await conn.execute(mysql.insert(feeder_states).values(row).on_duplicate_key_update(changes))


class FeederState(NamedTuple):
    bookmark: Any
    exhausted: bool
    held: str | None = None  # why a quota holds it


async def feeder_state(conn: AsyncConnection, transformation_id: bytes) -> FeederState:
    """The feeder's bookmark, whether it is exhausted and why it is held (no row: none)."""
    c = feeder_states.c
    row = (
        await conn.execute(
            sa.select(c.Bookmark, c.Exhausted, c.HeldReason).where(
                c.TransformationID == transformation_id
            )
        )
    ).first()
    if row is None:
        return FeederState(None, False)
    return FeederState(row.Bookmark, row.Exhausted, row.HeldReason)


async def idle_among(conn: AsyncConnection, transformation_ids: Sequence[bytes]) -> set[bytes]:
    """Those of the transformations whose feeder is exhausted or held (one statement): the
    feeder round does not run them."""
    if not transformation_ids:
        return set()
    c = feeder_states.c
    found = await conn.scalars(
        sa.select(c.TransformationID).where(
            c.TransformationID.in_(transformation_ids),
            sa.or_(c.Exhausted.is_(sa.true()), c.HeldReason.is_not(None)),
        )
    )
    return {bytes(transformation_id) for transformation_id in found}


async def inputs_created_since(
    conn: AsyncConnection, transformation_ids: Sequence[bytes], since_id: bytes
) -> int:
    """Inputs of these transformations minted at or after `since_id` (a UUIDv7: its first 48
    bits are the time), one range scan per transformation of the primary key."""
    if not transformation_ids:
        return 0
    count = await conn.scalar(
        sa.select(sa.func.count())
        .select_from(inputs)
        .where(inputs.c.TransformationID.in_(transformation_ids), inputs.c.InputID >= since_id)
    )
    return int(count or 0)


async def exhausted_among(conn: AsyncConnection, transformation_ids: Sequence[bytes]) -> set[bytes]:
    """Those of the transformations whose feeder said NoMoreInputs (one statement)."""
    if not transformation_ids:
        return set()
    found = await conn.scalars(
        sa.select(feeder_states.c.TransformationID).where(
            feeder_states.c.TransformationID.in_(transformation_ids),
            feeder_states.c.Exhausted.is_(sa.true()),
        )
    )
    return {bytes(transformation_id) for transformation_id in found}


async def reset_feeders(
    conn: AsyncConnection,
    transformation_ids: Sequence[bytes],
    *,
    clear_bookmarks: bool,
    now: datetime,
) -> int:
    """No longer exhausted nor held (and, asked for, no bookmark: the feeder starts from the
    beginning); the rows changed."""
    if not transformation_ids:
        return 0
    changes: dict[str, Any] = {"Exhausted": False, "HeldReason": None, "UpdatedAt": now}
    if clear_bookmarks:
        changes["Bookmark"] = None
    result = await conn.execute(
        sa.update(feeder_states)
        .where(feeder_states.c.TransformationID.in_(transformation_ids))
        .values(changes)
    )
    return int(result.rowcount)


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
