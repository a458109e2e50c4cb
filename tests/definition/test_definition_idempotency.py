"""SubmitWorkgraph's request id: a retry answers the original, and never creates a second one.

Both databases for the behaviour; MariaDB alone (`mariadb`) for concurrent duplicates on real
connections of two "replicas", which is what the named lock is for.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from cwl_support import EXAMPLES, catalogue, example

from dxts.core.db import Database, Isolation
from dxts.core.errors import Aborted, FailedPrecondition, InvalidArgument
from dxts.core.ids import id_to_str
from dxts.core.kernel.authorisation import rpc, serving
from dxts.core.locks import LockManager
from dxts.core.schema.accounting import transformation_log, workgraph_log
from dxts.core.schema.definition import (
    actions,
    compute_transformations,
    ownership,
    processes,
    transformation_outputs,
    transformations,
    workgraphs,
)
from dxts.cwl.loading import Bundle
from dxts.definition.logic import submit as submit_module
from dxts.definition.logic.submit import Submitted, submission_lock, submit_workgraph
from dxts.v1.definition_pb2_grpc import DefinitionServiceServicer

# What a submission run here answers as: the call it is the logic of.
SUBMIT = rpc(DefinitionServiceServicer.SubmitWorkgraph)
TABLES = (
    workgraphs,
    ownership,
    transformations,
    compute_transformations,
    transformation_outputs,
    actions,
    processes,
    workgraph_log,
    transformation_log,
)


def request() -> str:
    return f"req-{uuid.uuid4()}"


async def submit(
    database: Database, bundle: Bundle, *, sub: str = "alice", **kwargs: Any
) -> Submitted:
    options: dict[str, Any] = {"allow_unknown_plugins": True, **kwargs}
    with serving(SUBMIT):
        return await submit_workgraph(
            database, bundle, vo="lhcb", sub=sub, catalogue=catalogue(), **options
        )


async def counts(database: Database) -> list[int]:
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return [
            int(await conn.scalar(sa.select(sa.func.count()).select_from(t)) or 0) for t in TABLES
        ]


async def workgraph_count(database: Database) -> int:
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return int(await conn.scalar(sa.select(sa.func.count()).select_from(workgraphs)) or 0)


def ids(submitted: Submitted) -> tuple[Any, ...]:
    """Every id of a plan and where it appears: workgraph, members, outputs, edge feeder args."""
    plan = submitted.plan
    return (
        plan.workgraph_id,
        plan.ownership_id,
        [(m.name, m.transformation_id) for m in plan.members],
        [[(o.name, o.output_id) for o in m.outputs] for m in plan.members],
        [m.feeder_args for m in plan.members],
        [m.annotations for m in plan.members],
    )


# -- a retry --------------------------------------------------------------------------------------


async def test_a_retry_answers_the_original_and_writes_nothing(database: Database) -> None:
    key = request()
    first = await submit(database, example("mc-simulation"), labels={"c": "1"}, request_id=key)
    assert not first.repeated
    before = await counts(database)
    again = await submit(database, example("mc-simulation"), labels={"c": "1"}, request_id=key)
    assert again.repeated and not again.dry_run
    assert ids(again) == ids(first)
    assert [m.process_id for m in again.plan.members] == [m.process_id for m in first.plan.members]
    assert await counts(database) == before

    # The record the retry was answered from: the creation row of the original workgraph.
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        (data,) = (
            await conn.execute(
                sa.select(workgraph_log.c.Data).where(
                    workgraph_log.c.WorkgraphID == first.workgraph_id
                )
            )
        ).scalars()
    assert data["request_id"] == key
    assert set(data["members"]) == {m.name for m in first.plan.members}


async def test_the_same_request_id_for_another_submission_is_refused(database: Database) -> None:
    key = request()
    first = await submit(database, example("mc-simulation"), labels={"c": "1"}, request_id=key)
    before = await counts(database)
    for bundle, labels in (
        (example("mc-simulation"), {"c": "2"}),  # other labels
        (example("mc-simulation"), {}),
        (example("sprucing"), {"c": "1"}),  # another document
    ):
        with pytest.raises(FailedPrecondition) as refused:
            await submit(database, bundle, labels=labels, request_id=key)
        assert "request_id" in str(refused.value) and key in str(refused.value)
        assert id_to_str(first.workgraph_id) in str(refused.value)
    assert await counts(database) == before


async def test_a_changed_file_the_document_runs_is_another_submission(
    database: Database,
) -> None:
    files = {
        "wg.cwl": (EXAMPLES / "simulation.cwl").read_text(),
        **{
            f"transformations/{tool.name}": tool.read_text()
            for tool in (EXAMPLES / "transformations").iterdir()
        },
    }
    key = request()
    await submit(database, Bundle.from_mapping("wg.cwl", files), request_id=key)
    changed = {
        path: text + ("\n# edited\n" if path.endswith("gauss.cwl") else "")
        for path, text in files.items()
    }
    with pytest.raises(FailedPrecondition):
        await submit(database, Bundle.from_mapping("wg.cwl", changed), request_id=key)
    # A file of the bundle that nothing runs is not part of the submission.
    extra = {**files, "notes.txt": "not referenced"}
    again = await submit(database, Bundle.from_mapping("wg.cwl", extra), request_id=key)
    assert again.repeated


async def test_request_ids_belong_to_their_caller(database: Database) -> None:
    key = request()
    alice = await submit(database, example("simulation"), request_id=key)
    bob = await submit(database, example("simulation"), request_id=key, sub="bob")
    assert not bob.repeated and bob.workgraph_id != alice.workgraph_id


async def test_without_a_request_id_every_submission_creates(database: Database) -> None:
    before = await workgraph_count(database)
    one = await submit(database, example("simulation"))
    two = await submit(database, example("simulation"), request_id="")
    assert one.workgraph_id != two.workgraph_id and not (one.repeated or two.repeated)
    assert await workgraph_count(database) == before + 2


async def test_a_dry_run_ignores_the_request_id(database: Database) -> None:
    key = request()
    before = await counts(database)
    dry = await submit(database, example("simulation"), request_id=key, dry_run=True)
    assert dry.dry_run and not dry.repeated
    assert await counts(database) == before
    # Nothing was recorded: the real submission with that id creates...
    real = await submit(database, example("simulation"), request_id=key)
    assert not real.repeated and real.workgraph_id != dry.workgraph_id
    # ...and a dry run after it plans afresh rather than answering it.
    after = await submit(database, example("simulation"), request_id=key, dry_run=True)
    assert not after.repeated and after.workgraph_id != real.workgraph_id


async def test_the_window_is_the_callers_newest_workgraphs(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submit_module, "REQUEST_LOOKBACK", 2)
    sub = f"window-{uuid.uuid4().hex[:8]}"
    old, middle = request(), request()
    first = await submit(database, example("simulation"), sub=sub, request_id=old)
    await submit(database, example("simulation"), sub=sub, request_id=middle)
    assert (await submit(database, example("simulation"), sub=sub, request_id=old)).repeated
    await submit(database, example("simulation"), sub=sub)
    # Two newer workgraphs since: `old` is out of the window and creates again.
    late = await submit(database, example("simulation"), sub=sub, request_id=old)
    assert not late.repeated and late.workgraph_id != first.workgraph_id

    monkeypatch.setattr(submit_module, "REQUEST_LOOKBACK", 100)
    monkeypatch.setattr(submit_module, "REQUEST_WINDOW_S", -60)  # everything is too old
    assert not (await submit(database, example("simulation"), sub=sub, request_id=middle)).repeated


async def test_a_request_id_is_at_most_128_characters(database: Database) -> None:
    before = await workgraph_count(database)
    with pytest.raises(InvalidArgument) as refused:
        await submit(database, example("simulation"), request_id="x" * 129)
    assert refused.value.violations[0].field == "request_id"
    assert await workgraph_count(database) == before


async def test_a_duplicate_waits_for_the_holder_of_its_request_id(database: Database) -> None:
    locks = LockManager(database)
    key = request()
    try:
        with serving(SUBMIT):
            held = await locks.acquire(submission_lock("lhcb", "alice", key))
        assert held
        waiting = asyncio.create_task(
            submit(database, example("simulation"), request_id=key, locks=locks)
        )
        await asyncio.sleep(0.5)
        assert not waiting.done()
        await held.release()
        assert not (await asyncio.wait_for(waiting, 30)).repeated
    finally:
        await locks.dispose()


async def test_a_duplicate_that_waits_too_long_is_aborted(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(submit_module, "REQUEST_LOCK_WAIT_S", 0.2)
    locks = LockManager(database)
    key = request()
    before = await workgraph_count(database)
    try:
        with serving(SUBMIT):
            held = await locks.acquire(submission_lock("lhcb", "alice", key))
        with pytest.raises(Aborted, match="retry"):
            await submit(database, example("simulation"), request_id=key, locks=locks)
        await held.release()
    finally:
        await locks.dispose()
    assert await workgraph_count(database) == before


# -- concurrent duplicates on MariaDB -------------------------------------------------------------


async def test_mariadb_concurrent_duplicates_create_one_workgraph(
    mariadb: Database, replica: Database
) -> None:
    managers = [LockManager(mariadb), LockManager(replica)]
    key = request()
    before = await workgraph_count(mariadb)
    try:
        results = await asyncio.gather(
            *(
                submit(db, example("mc-simulation"), request_id=key, locks=managers[i % 2])
                for i, db in enumerate([mariadb, replica, mariadb, replica, mariadb, replica])
            )
        )
    finally:
        for manager in managers:
            await manager.dispose()
    assert len({r.workgraph_id for r in results}) == 1
    assert sorted(r.repeated for r in results) == [False] + [True] * 5
    assert len({tuple(m.transformation_id for m in r.plan.members) for r in results}) == 1
    assert await workgraph_count(mariadb) == before + 1


async def test_mariadb_concurrent_distinct_request_ids_all_create(
    mariadb: Database, replica: Database
) -> None:
    locks = LockManager(mariadb)
    before = await workgraph_count(mariadb)
    try:
        results = await asyncio.gather(
            *(
                submit(db, example("simulation"), request_id=request(), locks=locks)
                for db in (mariadb, replica, mariadb, replica)
            )
        )
    finally:
        await locks.dispose()
    assert len({r.workgraph_id for r in results}) == 4
    assert await workgraph_count(mariadb) == before + 4
