"""The active-workgraphs quota holds when submissions race: each takes its owner's lock row
(`WorkgraphQuotaLocks`) before it counts, so the second counts what the first created.

On MariaDB two Database objects (two pools, real connections) race, each pausing inside its
submitting transaction between the count and the insert (the window a count without a lock
lets both through); SQLite shows the same answers with its one writer.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa
from cwl_support import catalogue, example

from dxts.core.config import DefinitionConfig
from dxts.core.db import Database, Isolation
from dxts.core.errors import FailedPrecondition
from dxts.core.kernel.authorisation import rpc, serving
from dxts.core.policy import Policy
from dxts.core.schema.definition import ownership, workgraph_quota_locks
from dxts.definition.logic import submit as submit_module
from dxts.definition.logic.submit import Submitted, submit_workgraph
from dxts.v1.definition_pb2_grpc import DefinitionServiceServicer

SUBMIT = rpc(DefinitionServiceServicer.SubmitWorkgraph)
HOLD_S = 0.5  # how long each submission pauses after its count, before its insert


@pytest.fixture(scope="module")
async def second(db_url: str, database: Database) -> AsyncIterator[Database]:
    """Another pool on the same database: a second replica racing the first."""
    other = Database(db_url)
    await other.start()
    try:
        yield other
    finally:
        await other.dispose()


def limited(limit: int) -> DefinitionConfig:
    return DefinitionConfig(
        policy=Policy.model_validate({"quotas": {"active_workgraphs_per_user": limit}})
    )


async def submit(database: Database, sub: str, config: DefinitionConfig) -> Submitted:
    with serving(SUBMIT):
        return await submit_workgraph(
            database,
            example("simulation"),
            vo="lhcb",
            sub=sub,
            catalogue=catalogue(),
            config=config,
            allow_unknown_plugins=True,
        )


async def owned(database: Database, sub: str) -> int:
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        count = await conn.scalar(
            sa.select(sa.func.count()).select_from(ownership).where(ownership.c.Sub == sub)
        )
    return int(count or 0)


@pytest.fixture
def slow_inserts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every submission pauses after its quota check, inside its transaction."""
    insert = submit_module.insert_plan

    async def paused(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(HOLD_S)
        return await insert(*args, **kwargs)

    monkeypatch.setattr(submit_module, "insert_plan", paused)


async def test_racing_submissions_at_the_limit_create_only_what_it_allows(
    database: Database, second: Database, slow_inserts: None
) -> None:
    sub = f"racer-{uuid.uuid4().hex[:8]}"
    outcomes = await asyncio.gather(
        *(submit(db, sub, limited(1)) for db in (database, second, database, second)),
        return_exceptions=True,
    )
    created = [o for o in outcomes if isinstance(o, Submitted)]
    refused = [o for o in outcomes if isinstance(o, FailedPrecondition)]
    assert (len(created), len(refused)) == (1, 3), outcomes
    assert all("active_workgraphs_per_user" in str(error) for error in refused)
    assert await owned(database, sub) == 1


async def test_the_lock_is_each_owners_and_only_under_a_quota(
    database: Database, second: Database, slow_inserts: None
) -> None:
    """Two owners at the limit at once both create (each counts only their own); without a
    quota no lock row is made."""
    first, other = f"one-{uuid.uuid4().hex[:8]}", f"two-{uuid.uuid4().hex[:8]}"
    created = await asyncio.gather(
        submit(database, first, limited(1)), submit(second, other, limited(1))
    )
    assert len({c.workgraph_id for c in created}) == 2
    free = f"free-{uuid.uuid4().hex[:8]}"
    await submit(database, free, DefinitionConfig())
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        rows = await conn.execute(sa.select(workgraph_quota_locks.c.Sub))
        subs = {row[0] for row in rows}
    assert {first, other} <= subs and free not in subs
