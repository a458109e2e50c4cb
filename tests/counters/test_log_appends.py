"""TransformationLog / WorkgraphLog appends: validated, one INSERT, in the caller's transaction."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from counted_rows import make_transformations, statements

from dxts.core.db import Database, Isolation, utcnow
from dxts.core.errors import InvalidArgument
from dxts.core.ids import new_id
from dxts.core.logs import LogEntry, log_transformations, log_workgraphs
from dxts.core.schema import accounting, definition
from dxts.core.states import TransformationStatus

RC = Isolation.READ_COMMITTED
LOG = accounting.transformation_log


async def test_a_fan_out_logs_every_member_in_one_insert(database: Database) -> None:
    async with database.transaction(RC) as conn:
        members = await make_transformations(conn, 4)
    entries = [
        LogEntry(t, "StateChange", "definition", "Active", TransformationStatus.FINALIZING)
        for t in members
    ]
    entries.append(LogEntry(members[0], "HookFired", "definition", data={"hook": "x", "n": 2}))
    with statements(database) as seen:
        async with database.transaction(RC) as conn:
            assert await log_transformations(conn, entries) == 5
    assert len([s for s in seen if s.lstrip().upper().startswith("INSERT")]) == 1
    async with database.transaction(RC) as conn:
        rows = (
            await conn.execute(
                sa.select(LOG).where(LOG.c.TransformationID.in_(members)).order_by(LOG.c.LogID)
            )
        ).all()
    assert [(r.TransformationID, r.EventType, r.OldStatus, r.NewStatus) for r in rows] == [
        *((t, "StateChange", "Active", "Finalizing") for t in members),
        (members[0], "HookFired", None, None),
    ]
    assert rows[-1].Data == {"hook": "x", "n": 2}
    assert all(r.Author == "definition" and r.CreatedAt is not None for r in rows)


async def test_the_log_row_rolls_back_with_the_transition(database: Database) -> None:
    async with database.transaction(RC) as conn:
        (t,) = await make_transformations(conn)
    with pytest.raises(RuntimeError):
        async with database.transaction(RC) as conn:
            await log_transformations(conn, [LogEntry(t, "StateChange", "op", "New", "Active")])
            raise RuntimeError("the transition failed")
    async with database.transaction(RC) as conn:
        count = await conn.scalar(
            sa.select(sa.func.count()).select_from(LOG).where(LOG.c.TransformationID == t)
        )
    assert count == 0


async def test_long_messages_are_truncated_with_an_ellipsis(database: Database) -> None:
    async with database.transaction(RC) as conn:
        (t,) = await make_transformations(conn)
        await log_transformations(
            conn,
            [
                LogEntry(t, "Comment", "alice", message="é" * 600),
                LogEntry(t, "Comment", "alice", message="x" * 512),
            ],
        )
        stored = (
            await conn.execute(
                sa.select(LOG.c.Message).where(LOG.c.TransformationID == t).order_by(LOG.c.LogID)
            )
        ).scalars()
        long, exact = list(stored)
    assert long == "é" * 511 + "…" and len(long) == 512
    assert exact == "x" * 512


async def test_workgraph_log_uses_the_workgraph_states(database: Database) -> None:
    workgraph_id = new_id()
    async with database.transaction(RC) as conn:
        await conn.execute(
            sa.insert(definition.workgraphs).values(
                WorkgraphID=workgraph_id, Type="T", StrippedSpec={}, UpdatedAt=utcnow()
            )
        )
        await log_workgraphs(conn, [LogEntry(workgraph_id, "StateChange", "operator", None, "New")])
        with pytest.raises(InvalidArgument, match=r"entries\[0\]\.new_status"):
            # Paused is a transformation state, not a workgraph one.
            await log_workgraphs(
                conn, [LogEntry(workgraph_id, "StateChange", "operator", "New", "Paused")]
            )
        stored = await conn.scalar(
            sa.select(accounting.workgraph_log.c.NewStatus).where(
                accounting.workgraph_log.c.WorkgraphID == workgraph_id
            )
        )
    assert stored == "New"


GOOD = LogEntry(b"\x01" * 16, "StateChange", "someone", "New", "Active")


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        (LogEntry(b"short", "Comment", "a"), "entries[0].owner_id"),
        (LogEntry(b"\x01" * 16, "", "a"), "entries[0].event_type"),
        (LogEntry(b"\x01" * 16, "E" * 33, "a"), "entries[0].event_type"),
        (LogEntry(b"\x01" * 16, "Comment", ""), "entries[0].author"),
        (LogEntry(b"\x01" * 16, "StateChange", "a", "New", "Running"), "entries[0].new_status"),
        (LogEntry(b"\x01" * 16, "StateChange", "a", "Bogus", "Active"), "entries[0].old_status"),
        (LogEntry(b"\x01" * 16, "StateChange", "a", "New", None), "entries[0].new_status"),
        (LogEntry(b"\x01" * 16, "StateChange", "a", "New", "New"), "entries[0].new_status"),
        (LogEntry(b"\x01" * 16, "Comment", "a", new_status="Active"), "entries[0]"),
        (LogEntry(b"\x01" * 16, "Comment", "a", message=5), "entries[0].message"),  # type: ignore[arg-type]
        (LogEntry(b"\x01" * 16, "Comment", "a", data={"x": float("nan")}), "entries[0].data"),
        ("not an entry", "entries[0]"),
    ],
)
async def test_bad_entries_are_refused_and_nothing_is_written(
    database: Database, entry: Any, field: str
) -> None:
    async with database.transaction(RC) as conn:
        before = await conn.scalar(sa.select(sa.func.count()).select_from(LOG))
        with pytest.raises(InvalidArgument) as refused:
            await log_transformations(conn, [entry, GOOD])
        after = await conn.scalar(sa.select(sa.func.count()).select_from(LOG))
    assert [v.field for v in refused.value.violations] == [field]
    assert before == after


async def test_no_entries_writes_nothing(database: Database) -> None:
    with statements(database) as seen:
        async with database.transaction(RC) as conn:
            assert await log_transformations(conn, []) == 0
    assert not [s for s in seen if "INSERT" in s.upper()]
