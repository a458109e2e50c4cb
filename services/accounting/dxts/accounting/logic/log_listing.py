"""Listing a workgraph's or transformation's log, a page at a time.

Pages follow the (CreatedAt, LogID) order, oldest or newest first; a page ends at a position
the next page starts after (keyset paging), carried in the page token. A log of an id nothing
was ever logged for is empty: accounting owns the logs, not the workgraphs and
transformations, so it cannot say NOT_FOUND without asking the definition service.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from dxts.accounting.store import logs
from dxts.accounting.store.logs import LogPosition
from dxts.core.db import Database
from dxts.core.errors import InvalidArgument


class LogOwner(StrEnum):
    WORKGRAPH = "workgraph"
    TRANSFORMATION = "transformation"


@dataclass(frozen=True)
class LogRecord:
    log_id: int
    owner: LogOwner
    owner_id: bytes
    event_type: str
    old_status: str | None
    new_status: str | None
    author: str
    message: str | None
    data: Any
    created_at: datetime


@dataclass(frozen=True)
class LogPage:
    records: list[LogRecord]
    # Where the next page starts after; None when this is the last page.
    next_position: LogPosition | None


async def list_log(
    database: Database,
    owner: LogOwner,
    owner_id: bytes,
    *,
    limit: int,
    since: datetime | None = None,
    newest_first: bool = False,
    after: LogPosition | None = None,
) -> LogPage:
    """Up to `limit` entries of the log of `owner_id`, starting after `after`.

    `since` is naive UTC (as stored). One row more than asked is read to know whether another
    page follows, so the last page never ends with an empty one.
    """
    rows = await logs.log_rows(
        database,
        owner.value,
        owner_id,
        since=since,
        newest_first=newest_first,
        after=after,
        limit=limit + 1,
    )
    records = [
        LogRecord(
            row.log_id,
            owner,
            row.owner_id,
            row.event_type,
            row.old_status,
            row.new_status,
            row.author,
            row.message,
            row.data,
            row.created_at,
        )
        for row in rows[:limit]
    ]
    more = len(rows) > limit
    last = records[-1] if more else None
    return LogPage(records, LogPosition(last.created_at, last.log_id) if last else None)


def position_to_token(position: LogPosition) -> dict[str, Any]:
    """A page position as the JSON object a page token carries."""
    return {"t": position.created_at.isoformat(), "i": position.log_id}


def position_from_token(value: dict[str, Any], *, field: str) -> LogPosition:
    """The position a page token carried; anything else is INVALID_ARGUMENT at `field`."""
    created, log_id = value.get("t"), value.get("i")
    try:
        if not isinstance(created, str) or not isinstance(log_id, int):
            raise ValueError
        parsed = datetime.fromisoformat(created)
    except ValueError:
        raise InvalidArgument("not a page token this server issued", field=field) from None
    return LogPosition(parsed, log_id)
