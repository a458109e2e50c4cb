"""What definition reads of execution's Parcels and Inputs to tell whether a member needs a
person (`logic.attention`): each member's last ended parcels (the failed-parcel rate, lost
parcels, the last progress) and since when its Problematic inputs wait; and of the members'
logs, the packer failures execution logged there and the flushes it did not run
(`packer_failures`).

All are bounded reads, made when a workgraph or member is read: at most `window` parcels per
member and status, and one grouped row per member with Problematic inputs, on execution's
(TransformationID, Status) indexes; the PackerFailed rows of a recent window, on the log's
(TransformationID, CreatedAt) index, grouped, then the newest of each by its LogID. Execution
alone writes the rows; the reads are declared in tests/test_ownership.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.accounting import transformation_log
from dxts.core.schema.execution import inputs, parcels
from dxts.core.states import InputStatus, ParcelStatus

# The parcel statuses that end an attempt with a verdict (Cancelled is an operator's choice).
ENDED = (ParcelStatus.DONE, ParcelStatus.PARTIALLY_DONE, ParcelStatus.FAILED)
# Members per statement: each contributes one sub-select per ended status.
MEMBERS_PER_READ = 40
# Where execution keeps a failed parcel's words in Parcels.Annotations (`parcel_annotations`):
# the recorded reason, and the stored outcome's failure (`dxts.core.adaptor.codec`).
REASON = "reason"
OUTCOME = "outcome"
FAILURE = "failure"
TOOL_MESSAGE = "tool_message"
CLASS = "class"
# What execution logs when a packer invocation fails (`packing._record_failure`): its words
# (Message) and, in Data, its class (`error`) and whether a flush asked for it (`flush`).
PACKER_FAILED = "PackerFailed"
# What the lifecycle logs when a hook's flush was not run by execution (unavailable, or its
# packer busy past the wait): its words, and in Data its class (`error`) and `flush`.
FLUSH_FAILED = "FlushFailed"
# A batch that lost a race with another writer of its inputs (an operator's write-off): the
# next round packs again, nobody need act (execution logs it quietly).
CLAIM_LOST = "ClaimLost"


@dataclass(frozen=True)
class EndedParcel:
    """An ended parcel; a failed one with its reason: the tool's own line when the backend
    reported one (the failure taxonomy), else the recorded reason, and its failure class."""

    parcel_id: bytes
    status: str
    backend: str | None
    completed_at: datetime | None
    reason: str = ""
    failure_class: str = ""


async def last_ended_parcels(
    conn: AsyncConnection, transformation_ids: Sequence[bytes], window: int
) -> dict[bytes, list[EndedParcel]]:
    """Per member, its last `window` ended parcels (newest first, by creation: ParcelIDs are
    UUIDv7), a failed one with its reason. One statement per `MEMBERS_PER_READ` members for the
    parcels, one for the failed ones' reasons."""
    c = parcels.c
    found: dict[bytes, list[EndedParcel]] = {}
    failed: list[bytes] = []
    rows: list[sa.Row[Any]] = []
    for start in range(0, len(transformation_ids), MEMBERS_PER_READ):
        chunk = transformation_ids[start : start + MEMBERS_PER_READ]
        parts = [
            sa.select(c.TransformationID, c.ParcelID, c.Status, c.Backend, c.CompletedAt)
            .where(c.TransformationID == tid, c.Status == status.value)
            .order_by(c.ParcelID.desc())
            .limit(window)
            .subquery()
            for tid in chunk
            for status in ENDED
        ]
        rows.extend(await conn.execute(sa.union_all(*(sa.select(part) for part in parts))))
    for row in rows:
        parcel_id = bytes(row.ParcelID)
        if row.Status == ParcelStatus.FAILED:
            failed.append(parcel_id)
        found.setdefault(bytes(row.TransformationID), []).append(
            EndedParcel(parcel_id, row.Status, row.Backend, row.CompletedAt)
        )
    reasons = await _reasons(conn, failed)
    return {
        tid: sorted(
            (
                replace(p, reason=reasons[p.parcel_id][0], failure_class=reasons[p.parcel_id][1])
                if p.parcel_id in reasons
                else p
                for p in ended
            ),
            key=lambda p: p.parcel_id,
            reverse=True,
        )[:window]
        for tid, ended in found.items()
    }


async def _reasons(conn: AsyncConnection, parcel_ids: list[bytes]) -> dict[bytes, tuple[str, str]]:
    """Per failed parcel, (its reason, its failure class) from its annotations."""
    if not parcel_ids:
        return {}
    c = parcels.c
    rows = await conn.execute(
        sa.select(c.ParcelID, c.Annotations).where(c.ParcelID.in_(parcel_ids))
    )
    return {bytes(r.ParcelID): _reason(r.Annotations) for r in rows}


def _reason(annotations: Any) -> tuple[str, str]:
    """The tool's own line (`outcome.failure.tool_message`) when there is one, else the
    recorded reason; and the failure class ("" when none was reported)."""
    if not isinstance(annotations, dict):
        return "", ""
    outcome = annotations.get(OUTCOME)
    failure = outcome.get(FAILURE) if isinstance(outcome, dict) else None
    failure = failure if isinstance(failure, dict) else {}
    said = str(failure.get(TOOL_MESSAGE) or annotations.get(REASON) or "")
    return said, str(failure.get(CLASS) or "")


async def problematic_since(
    conn: AsyncConnection, transformation_ids: Sequence[bytes]
) -> dict[bytes, datetime]:
    """Per member with Problematic inputs, when the oldest of them became so (one statement)."""
    if not transformation_ids:
        return {}
    c = inputs.c
    rows = await conn.execute(
        sa.select(c.TransformationID, sa.func.min(c.UpdatedAt).label("since"))
        .where(
            c.TransformationID.in_(transformation_ids),
            c.Status == InputStatus.PROBLEMATIC.value,
        )
        .group_by(c.TransformationID)
    )
    return {bytes(r.TransformationID): r.since for r in rows}


@dataclass(frozen=True)
class PackerFailures:
    """A member's packer failures since a moment: how many, the first, and the newest's words,
    class, whether it was a flush's, and its event (PackerFailed, or FlushFailed: not run)."""

    count: int
    first: datetime
    message: str
    error_class: str
    flush: bool
    event: str = PACKER_FAILED


async def packer_failures(
    conn: AsyncConnection, transformation_ids: Sequence[bytes], since: datetime
) -> dict[bytes, PackerFailures]:
    """Per member that has some, its PackerFailed and FlushFailed rows since `since`, lost races
    aside (two statements)."""
    if not transformation_ids:
        return {}
    c = transformation_log.c
    grouped = (
        await conn.execute(
            sa.select(
                c.TransformationID,
                sa.func.count().label("failures"),
                sa.func.min(c.CreatedAt).label("first"),
                sa.func.max(c.LogID).label("newest"),
            )
            .where(
                c.TransformationID.in_(transformation_ids),
                c.CreatedAt >= since,
                c.EventType.in_([PACKER_FAILED, FLUSH_FAILED]),
                sa.func.coalesce(c.Data["error"].as_string(), "") != CLAIM_LOST,
            )
            .group_by(c.TransformationID)
        )
    ).all()
    if not grouped:
        return {}
    newest = {
        r.LogID: r
        for r in await conn.execute(
            sa.select(c.LogID, c.EventType, c.Message, c.Data).where(
                c.LogID.in_([g.newest for g in grouped])
            )
        )
    }
    found = {}
    for g in grouped:
        row = newest[g.newest]
        data = row.Data if isinstance(row.Data, dict) else {}
        found[bytes(g.TransformationID)] = PackerFailures(
            g.failures,
            g.first,
            row.Message or "",
            str(data.get("error") or ""),
            bool(data.get("flush")),
            row.EventType,
        )
    return found
