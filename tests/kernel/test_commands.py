"""The command protocol: a command applies once per request id, also when retries race.

The target is a workgraph row; `apply` counts its applications in the row's Annotations (and
pauses inside the transaction, so racing retries really overlap). On MariaDB two Database
objects (two pools, real connections) race; SQLite shows the same answers with its one writer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import Database, Isolation, db_now
from dxts.core.errors import InvalidArgument, NotFound, PermissionDenied
from dxts.core.identity import Identity
from dxts.core.ids import new_id
from dxts.core.kernel.commands import (
    LogScope,
    Request,
    run_command,
    run_creating_command,
    run_serialised_command,
)
from dxts.core.locks import LockManager
from dxts.core.schema.accounting import workgraph_log
from dxts.core.schema.definition import workgraphs

ALICE = Identity(vo="lhcb", sub="alice")
MALLORY = Identity(vo="belle", sub="mallory")


@pytest.fixture(scope="module")
async def second(db_url: str) -> AsyncIterator[Database]:
    """Another pool on the same database: a second client racing the first."""
    database = Database(db_url)
    await database.start()
    try:
        yield database
    finally:
        await database.dispose()


async def new_workgraph(database: Database) -> bytes:
    workgraph_id = new_id()

    async def insert(conn: AsyncConnection) -> None:
        await conn.execute(
            sa.insert(workgraphs).values(
                WorkgraphID=workgraph_id,
                Type="test",
                Status="New",
                StrippedSpec={},
                Annotations={"applied": 0},
                UpdatedAt=await db_now(conn),
            )
        )

    await database.run(insert, isolation=Isolation.READ_COMMITTED)
    return workgraph_id


async def applications(database: Database, workgraph_id: bytes) -> int:
    async def read(conn: AsyncConnection) -> int:
        row = await conn.scalar(
            sa.select(workgraphs.c.Annotations).where(workgraphs.c.WorkgraphID == workgraph_id)
        )
        return int(row["applied"])

    return await database.run(read, isolation=Isolation.READ_COMMITTED)


async def command_rows(database: Database, workgraph_id: bytes) -> list[Any]:
    async def read(conn: AsyncConnection) -> list[Any]:
        rows = await conn.execute(
            sa.select(workgraph_log.c.EventType, workgraph_log.c.Author, workgraph_log.c.Data)
            .where(workgraph_log.c.WorkgraphID == workgraph_id)
            .order_by(workgraph_log.c.LogID)
        )
        return list(rows)

    return await database.run(read, isolation=Isolation.READ_COMMITTED)


async def increment(conn: AsyncConnection, workgraph_id: bytes) -> int:
    """One more application, counted in the (locked) row; the new count."""
    annotations = await conn.scalar(
        sa.select(workgraphs.c.Annotations)
        .where(workgraphs.c.WorkgraphID == workgraph_id)
        .with_for_update()
    )
    applied = int(annotations["applied"]) + 1
    await conn.execute(
        sa.update(workgraphs)
        .where(workgraphs.c.WorkgraphID == workgraph_id)
        .values(Annotations={"applied": applied})
    )
    return applied


def bump(workgraph_id: bytes, *, hold_s: float = 0.0) -> dict[str, Any]:
    """The command's steps over one workgraph row, counting applications."""

    async def lock(conn: AsyncConnection) -> Any:
        row = (
            await conn.execute(
                sa.select(workgraphs.c.WorkgraphID, workgraphs.c.Annotations)
                .where(workgraphs.c.WorkgraphID == workgraph_id)
                .with_for_update()
            )
        ).first()
        if row is None:
            raise NotFound("workgraph", "test")
        return row

    def authorise(caller: Identity, target: Any) -> None:
        if caller.vo != "lhcb":
            raise NotFound("workgraph", "test")
        if caller.sub != "alice":
            raise PermissionDenied("not yours")

    async def apply(conn: AsyncConnection, target: Any) -> dict[str, Any]:
        await asyncio.sleep(hold_s)
        return {"applied": await increment(conn, workgraph_id)}

    return {
        "lock": lock,
        "authorise": authorise,
        "scope": lambda target: LogScope(workgraph_id=workgraph_id),
        "apply": apply,
    }


async def test_a_command_applies_and_logs_itself(database: Database) -> None:
    workgraph_id = await new_workgraph(database)
    request = Request("DefinitionService.Bump", ALICE, "r-1", reason="testing")
    assert await run_command(database, request, **bump(workgraph_id)) == {"applied": 1}
    [(event, author, data)] = await command_rows(database, workgraph_id)
    assert (event, author) == ("Bump", "alice")
    assert data == {
        "command": "DefinitionService.Bump",
        "request_id": "r-1",
        "result": {"applied": 1},
    }


async def test_a_retry_answers_the_recorded_result_without_applying(database: Database) -> None:
    workgraph_id = await new_workgraph(database)
    request = Request("DefinitionService.Bump", ALICE, "r-2")
    first = await run_command(database, request, **bump(workgraph_id))
    again = await run_command(database, request, **bump(workgraph_id))
    assert first == again == {"applied": 1}
    assert await applications(database, workgraph_id) == 1
    assert len(await command_rows(database, workgraph_id)) == 1


async def test_another_command_with_the_same_request_id_is_no_retry(database: Database) -> None:
    """Definition's FlushTransformation logs its request id on the transformation and forwards
    the same id to execution's Flush, which logs on the same transformation: the second command
    applies (it once answered the first one's result and flushed nothing)."""
    workgraph_id = await new_workgraph(database)
    asked = Request("DefinitionService.FlushTransformation", ALICE, "r-forwarded")
    assert await run_command(database, asked, **bump(workgraph_id)) == {"applied": 1}
    forwarded = Request("ExecutionService.Flush", ALICE, "r-forwarded")
    assert await run_command(database, forwarded, **bump(workgraph_id)) == {"applied": 2}

    async def pack() -> dict[str, Any]:
        applied = await database.run(
            lambda conn: increment(conn, workgraph_id), isolation=Isolation.READ_COMMITTED
        )
        return {"applied": applied}

    locks = LockManager(database)
    try:
        packed = await run_serialised_command(
            database,
            locks,
            Request("ExecutionService.Pack", ALICE, "r-forwarded"),
            scope=LogScope(workgraph_id=workgraph_id),
            apply=pack,
        )
    finally:
        await locks.dispose()
    assert packed == {"applied": 3} and await applications(database, workgraph_id) == 3
    events = [event for event, _, _ in await command_rows(database, workgraph_id)]
    assert events == ["FlushTransformation", "Flush", "Pack"]


async def test_commands_without_a_request_id_apply_every_time(database: Database) -> None:
    workgraph_id = await new_workgraph(database)
    request = Request("DefinitionService.Bump", ALICE)
    await run_command(database, request, **bump(workgraph_id))
    assert await run_command(database, request, **bump(workgraph_id)) == {"applied": 2}


async def test_a_refused_command_changes_nothing(database: Database) -> None:
    workgraph_id = await new_workgraph(database)
    with pytest.raises(NotFound):
        await run_command(database, Request("X.Bump", MALLORY, "r-3"), **bump(workgraph_id))
    bob = Identity(vo="lhcb", sub="bob")
    with pytest.raises(PermissionDenied):
        await run_command(database, Request("X.Bump", bob, "r-3"), **bump(workgraph_id))
    assert await applications(database, workgraph_id) == 0
    assert await command_rows(database, workgraph_id) == []


def test_an_overlong_request_id_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidArgument) as error:
        Request("X.Bump", ALICE, "r" * 129)
    assert error.value.violations[0].field == "request_id"


async def test_racing_retries_apply_exactly_once(database: Database, second: Database) -> None:
    workgraph_id = await new_workgraph(database)
    request = Request("DefinitionService.Bump", ALICE, "r-race")
    results = await asyncio.gather(
        run_command(database, request, **bump(workgraph_id, hold_s=0.3)),
        run_command(second, request, **bump(workgraph_id, hold_s=0.3)),
    )
    assert results == [{"applied": 1}, {"applied": 1}]
    assert await applications(database, workgraph_id) == 1
    assert len(await command_rows(database, workgraph_id)) == 1


async def test_racing_retries_of_a_serialised_command_apply_exactly_once(
    database: Database, second: Database
) -> None:
    workgraph_id = await new_workgraph(database)
    request = Request("ExecutionService.WriteOff", ALICE, "r-batches", reason="halt")

    def batched(on: Database) -> Any:
        async def apply() -> dict[str, Any]:
            # Three bounded transactions, as a large selection is applied.
            for _ in range(3):
                applied = await on.run(
                    lambda conn: increment(conn, workgraph_id), isolation=Isolation.READ_COMMITTED
                )
                await asyncio.sleep(0.1)
            return {"applied": applied}

        return apply

    scope = LogScope(workgraph_id=workgraph_id)
    locks, second_locks = LockManager(database), LockManager(second)
    try:
        results = await asyncio.gather(
            run_serialised_command(database, locks, request, scope=scope, apply=batched(database)),
            run_serialised_command(
                second, second_locks, request, scope=scope, apply=batched(second)
            ),
        )
    finally:
        await locks.dispose()
        await second_locks.dispose()
    assert results == [{"applied": 3}, {"applied": 3}]
    assert await applications(database, workgraph_id) == 3
    [(event, _, data)] = await command_rows(database, workgraph_id)
    assert event == "WriteOff" and data["result"] == {"applied": 3}


async def test_racing_tries_of_a_creating_command_create_once(
    database: Database, second: Database
) -> None:
    """Two tries of one creation race: the second waits for the first's commit, then finds
    what it created (recorded on the created row) instead of creating another."""
    key = f"create-{new_id().hex()}"
    request = Request("DefinitionService.SubmitWorkgraph", ALICE, key)

    def creating(on: Database) -> Any:
        async def create(conn: AsyncConnection) -> bytes:
            rows = await conn.execute(
                sa.select(workgraphs.c.WorkgraphID, workgraphs.c.Annotations).where(
                    workgraphs.c.Type == "creating"
                )
            )
            for workgraph_id, recorded in rows:
                if recorded.get("request_id") == key:
                    return bytes(workgraph_id)
            created = new_id()
            await asyncio.sleep(0.3)  # the window a retry without the lock would slip into
            await conn.execute(
                sa.insert(workgraphs).values(
                    WorkgraphID=created,
                    Type="creating",
                    Status="New",
                    StrippedSpec={},
                    Annotations={"request_id": key},
                    UpdatedAt=await db_now(conn),
                )
            )
            return created

        return create

    locks, second_locks = LockManager(database), LockManager(second)
    try:
        first, again = await asyncio.gather(
            run_creating_command(database, locks, request, creating(database)),
            run_creating_command(second, second_locks, request, creating(second)),
        )
    finally:
        await locks.dispose()
        await second_locks.dispose()
    assert first == again

    async def count(conn: AsyncConnection) -> int:
        return int(
            await conn.scalar(
                sa.select(sa.func.count()).where(
                    workgraphs.c.Type == "creating",
                    workgraphs.c.Annotations["request_id"].as_string() == key,
                )
            )
        )

    assert await database.run(count, isolation=Isolation.READ_COMMITTED) == 1
