"""Appending TransformationLog / WorkgraphLog rows, inside the caller's own transaction.

Every state transition of a workgraph or transformation writes its log row in the transaction
that changes the status (docs/architecture.md), and other events (comments, hook firings, action
results) reuse the tables with their own EventType. Components never build log rows
themselves: they call `log_transformations` or `log_workgraphs`, which validate every entry
first (nothing is written if one is wrong) and write all of them in one INSERT ... VALUES, so a
fan-out transition logs every member in one statement.

Entries:

* `event_type`: 1 to 32 characters; `StateChange` is the one the core interprets.
* `old_status` / `new_status`: states of the owner's machine, on `StateChange` events only;
  a state change needs `new_status`, and `old_status` is None only for a creation.
* `author`: the user or component responsible, 1 to 64 characters.
* `message`: at most 512 characters are stored. A longer message is truncated to 511 and
  ends with "…", rather than refused: messages carry hook and action output, and a verbose
  plugin must not make a transition fail. Whatever must survive in full belongs in `data`.
* `data`: any JSON value (checked by the one canonicaliser, so what is stored is JSON).

`CreatedAt` is the database clock, the same for every row of one call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import db_now, utcnow
from dxts.core.errors import FieldViolation, InvalidArgument
from dxts.core.ids import UUID_BYTES, canonical_json
from dxts.core.schema.accounting import transformation_log, workgraph_log
from dxts.core.states import TransformationStatus, WorkgraphStatus, values

STATE_CHANGE = "StateChange"
MESSAGE_LENGTH = 512
ELLIPSIS = "…"


@dataclass(frozen=True)
class LogEntry:
    """One event of one workgraph or transformation (`owner_id`)."""

    owner_id: bytes
    event_type: str
    author: str
    old_status: str | None = None
    new_status: str | None = None
    message: str | None = None
    data: Any = None


def _text(value: Any, limit: int, path: str, problems: list[FieldViolation]) -> None:
    if not isinstance(value, str) or not value or len(value) > limit:
        problems.append(FieldViolation(path, f"expected 1 to {limit} characters"))


def _row(
    entry: Any, owner: str, states: tuple[str, ...], path: str, problems: list[FieldViolation]
) -> dict[str, Any]:
    if not isinstance(entry, LogEntry):
        problems.append(FieldViolation(path, "expected a LogEntry"))
        return {}
    if not isinstance(entry.owner_id, bytes) or len(entry.owner_id) != UUID_BYTES:
        problems.append(FieldViolation(f"{path}.owner_id", f"expected {UUID_BYTES} bytes"))
    _text(entry.event_type, 32, f"{path}.event_type", problems)
    _text(entry.author, 64, f"{path}.author", problems)
    for name, status in (("old_status", entry.old_status), ("new_status", entry.new_status)):
        if status is not None and status not in states:
            problems.append(FieldViolation(f"{path}.{name}", f"{status!r} is not one of {states}"))
    if entry.event_type == STATE_CHANGE:
        if entry.new_status is None or entry.new_status == entry.old_status:
            problems.append(
                FieldViolation(f"{path}.new_status", "a state change needs a different new status")
            )
    elif entry.old_status is not None or entry.new_status is not None:
        problems.append(FieldViolation(path, f"statuses belong to {STATE_CHANGE} events only"))
    message = entry.message
    if message is not None and not isinstance(message, str):
        problems.append(FieldViolation(f"{path}.message", "expected a string"))
    elif message is not None and len(message) > MESSAGE_LENGTH:
        message = message[: MESSAGE_LENGTH - len(ELLIPSIS)] + ELLIPSIS
    if entry.data is not None:
        try:
            canonical_json(entry.data, field=f"{path}.data")
        except InvalidArgument as error:
            problems.extend(error.violations)
    return {
        owner: entry.owner_id,
        "EventType": entry.event_type,
        "OldStatus": None if entry.old_status is None else str(entry.old_status),
        "NewStatus": None if entry.new_status is None else str(entry.new_status),
        "Author": entry.author,
        "Message": message,
        "Data": entry.data,
        "CreatedAt": utcnow(),
    }


async def _append(
    conn: AsyncConnection,
    table: sa.Table,
    owner: str,
    states: tuple[str, ...],
    entries: Iterable[LogEntry],
) -> int:
    problems: list[FieldViolation] = []
    rows = [
        _row(entry, owner, states, f"entries[{i}]", problems) for i, entry in enumerate(entries)
    ]
    if problems:
        raise InvalidArgument(problems)
    if len(rows) == 1:
        await conn.execute(sa.insert(table).values(rows[0]))
    elif rows:
        # A fan-out: read the clock once and send plain values in executemany form, which the
        # driver turns into one multi-row INSERT (an SQL expression in the rows would make it
        # one statement per row, and `.values(list)` compiles a parameter per cell).
        now = await db_now(conn)
        await conn.execute(sa.insert(table), [{**row, "CreatedAt": now} for row in rows])
    return len(rows)


async def log_transformations(conn: AsyncConnection, entries: Iterable[LogEntry]) -> int:
    """Append TransformationLog rows (owner_id = TransformationID); returns how many."""
    return await _append(
        conn, transformation_log, "TransformationID", values(TransformationStatus), entries
    )


async def log_workgraphs(conn: AsyncConnection, entries: Iterable[LogEntry]) -> int:
    """Append WorkgraphLog rows (owner_id = WorkgraphID); returns how many."""
    return await _append(conn, workgraph_log, "WorkgraphID", values(WorkgraphStatus), entries)
