"""GroupFailures over a served execution component, on SQLite and MariaDB: a tool failing on 12
inputs is one group with its count, exit code, examples and their inputs; a lost parcel is a
group of its own; the caller's VO bounds what it may group (another VO's user gets NOT_FOUND);
bad arguments get one clear answer; the failed-parcel counter counts by class and backend; the
groups the service keeps in memory equal a recount from the rows after new failures, a late
one and a cleaning; parcels over time (CountParcelsOverTime) equal a recount from the rows."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import runner_support as s
import sqlalchemy as sa
from google.protobuf.timestamp_pb2 import Timestamp
from prometheus_client import REGISTRY
from recording_world import World, definitions, feed, outcome, pack, report
from test_execution_grpc import CALLERS, ByVO

from dxts.core.adaptor.failures import normalise
from dxts.core.catalogue import FileCatalogue
from dxts.core.db import Database, Isolation
from dxts.core.errors import InvalidArgument, NotFound
from dxts.core.grpc import DevKeys, GrpcServer, channel
from dxts.core.ids import id_to_str
from dxts.core.schema import definition, execution
from dxts.core.settings import ServerSettings
from dxts.execution.component import build_execution
from dxts.execution.edge.servicer_operations import record_outcome_messages
from dxts.execution.logic import parcel_times
from dxts.execution.logic.completing import Recorder
from dxts.execution.logic.failure_folds import FailureFolds
from dxts.execution.logic.transformations import ActiveSnapshot
from dxts.execution.settings import ExecutionSettings
from dxts.execution.store import failures as failures_store
from dxts.execution.store.cleaning import delete_parcels
from dxts.v1 import common_pb2, execution_pb2, execution_pb2_grpc

FAILED = common_pb2.OUTCOME_RESULT_FAILED
APPLICATION_ERROR = common_pb2.FAILURE_CLASS_APPLICATION_ERROR


@pytest.fixture
async def stubs(
    database: Database,
    world: World,
    catalogue: FileCatalogue,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[dict[str, Any]]:
    """ExecutionService stubs as each caller of `CALLERS`, the world's transformation in lhcb."""
    component = await build_execution(
        database,
        settings=ExecutionSettings(),
        registry=s.registry({}),
        catalogue=catalogue,
        definition_client=ByVO([world.record()]),
        start_sweeps=False,
    )
    keys = DevKeys.load_or_create(tmp_path_factory.mktemp("keys"))
    server = GrpcServer(
        component.services, settings=ServerSettings(listen="127.0.0.1:0"), verifier=keys.verifier()
    )
    try:
        async with server:
            opened = {
                name: channel(server.address, token=keys.issue(vo, sub, roles))
                for name, (vo, sub, roles) in CALLERS.items()
            }
            try:
                yield {
                    name: execution_pb2_grpc.ExecutionServiceStub(ch)  # type: ignore[misc]
                    for name, ch in opened.items()
                }
            finally:
                for ch in opened.values():
                    await ch.close()
    finally:
        await component.stop()


def failed(parcel_id: bytes, failure: common_pb2.Failure, message: str, **fields: Any) -> Any:
    sent = outcome(parcel_id, result=FAILED, message=message)
    sent.failure.CopyFrom(failure)
    for name, value in fields.items():
        setattr(sent, name, value)
    return sent


def failed_count(failure_class: str, backend: str) -> float:
    labels = {"failure_class": failure_class, "backend": backend}
    return REGISTRY.get_sample_value("dxts_execution_parcels_failed_total", labels) or 0.0


async def test_mixed_failures_group_by_class_backend_and_normalised_message(
    database: Database, world: World, stubs: dict[str, Any]
) -> None:
    inputs = await feed(database, world, 14)
    parcel_ids = await pack(database, world, [[i] for i in inputs])
    tool_failures = [
        failed(
            p,
            common_pb2.Failure(
                failure_class=APPLICATION_ERROR, tool_message=f"ERROR: seed {n} is out of range"
            ),
            f"the tool exited with 3: ERROR: seed {n} is out of range",
            exit_code=3,
        )
        for n, p in enumerate(parcel_ids[:12])
    ]
    lost = failed(
        parcel_ids[12],
        common_pb2.Failure(failure_class=common_pb2.FAILURE_CLASS_LOST),
        "lost by the backend: null no longer knows 0192f0a4-3c1e-7b3a-9d2e-1f0e2d3c4b5a",
    )
    before = failed_count("application-error", "null")
    await record_outcome_messages(
        database, [*tool_failures, lost, outcome(parcel_ids[13], report={})]
    )
    assert failed_count("application-error", "null") == before + 12
    # Recorded with the parcel: its class, exit code and the tool's line, as GetParcel gives it.
    shown = await stubs["alice"].GetParcel(
        execution_pb2.GetParcelRequest(parcel_id=id_to_str(parcel_ids[7]))
    )
    assert shown.outcome.failure == tool_failures[7].failure
    assert shown.outcome.exit_code == 3
    assert json.loads(shown.parcel.annotations_json)["outcome"]["failure"] == {
        "class": "application-error",
        "tool_message": "ERROR: seed 7 is out of range",
    }

    tid = id_to_str(world.transformation_id)
    reply = await stubs["alice"].GroupFailures(
        execution_pb2.GroupFailuresRequest(transformation_ids=[tid, tid])
    )
    assert (reply.parcels, reply.truncated) == (13, False)
    tool, gone = reply.groups
    assert (tool.failure_class, tool.backend, tool.count) == (APPLICATION_ERROR, "null", 12)
    assert tool.reason == "ERROR: seed # is out of range"
    assert tool.message.startswith("ERROR: seed ") and list(tool.exit_codes) == [3]
    assert list(tool.transformation_ids) == [tid]
    shown = {id_to_str(p) for p in parcel_ids[:12]}
    assert len(tool.example_parcel_ids) == 3 and set(tool.example_parcel_ids) <= shown
    by_parcel = {id_to_str(p): id_to_str(i) for p, i in zip(parcel_ids, inputs, strict=True)}
    assert sorted(tool.example_input_ids) == sorted(by_parcel[p] for p in tool.example_parcel_ids)
    assert tool.first_seen.ToDatetime() <= tool.last_seen.ToDatetime()
    assert (gone.failure_class, gone.count) == (common_pb2.FAILURE_CLASS_LOST, 1)
    assert gone.reason == "lost by the backend: null no longer knows <id>"

    # Only the failures since a moment, and as many examples as asked.
    later = Timestamp()
    later.FromDatetime(datetime.now(UTC) + timedelta(hours=1))
    reply = await stubs["bob"].GroupFailures(
        execution_pb2.GroupFailuresRequest(transformation_ids=[tid], since=later)
    )
    assert (list(reply.groups), reply.parcels) == ([], 0)
    reply = await stubs["alice"].GroupFailures(
        execution_pb2.GroupFailuresRequest(transformation_ids=[tid], examples=10)
    )
    assert len(reply.groups[0].example_parcel_ids) == 10


async def test_a_message_repeated_word_for_word_is_one_group_with_its_latest_examples(
    database: Database, world: World, stubs: dict[str, Any]
) -> None:
    """The database counts failures alike word for word: one count of 6, whose examples are
    read from its parcels (the latest first), beside one whose words differ by a number."""
    inputs = await feed(database, world, 8)
    parcel_ids = await pack(database, world, [[i] for i in inputs])
    oom = common_pb2.Failure(failure_class=common_pb2.FAILURE_CLASS_OUT_OF_MEMORY)
    for p in parcel_ids[:6]:  # one at a time: each fails later than the one before
        await record_outcome_messages(database, [failed(p, oom, "killed: out of memory")])
    await record_outcome_messages(
        database,
        [
            failed(p, oom, f"killed: out of memory after {n} s")
            for n, p in enumerate(parcel_ids[6:])
        ],
    )
    reply = await stubs["alice"].GroupFailures(
        execution_pb2.GroupFailuresRequest(transformation_ids=[id_to_str(world.transformation_id)])
    )
    assert (reply.parcels, [g.count for g in reply.groups]) == (8, [6, 2])
    same, numbered = reply.groups
    assert same.reason == "killed: out of memory" and len(set(same.example_parcel_ids)) == 3
    assert set(same.example_parcel_ids) <= {id_to_str(p) for p in parcel_ids[:6]}
    assert numbered.reason == "killed: out of memory after # s"
    assert sorted(numbered.example_parcel_ids) == sorted(id_to_str(p) for p in parcel_ids[6:])
    assert list(same.over_time) == [] and not reply.HasField("over_time_from")

    # Over time: every failure in one of the spans, from the first failure to now.
    reply = await stubs["alice"].GroupFailures(
        execution_pb2.GroupFailuresRequest(
            transformation_ids=[id_to_str(world.transformation_id)], buckets=4
        )
    )
    assert [(len(g.over_time), sum(g.over_time)) for g in reply.groups] == [(4, 6), (4, 2)]
    first = min(g.first_seen.ToDatetime() for g in reply.groups)
    assert reply.over_time_from.ToDatetime() <= first <= reply.over_time_to.ToDatetime()


async def test_reads_beside_failures_being_recorded_never_count_one_twice(
    database: Database, world: World, stubs: dict[str, Any]
) -> None:
    """GroupFailures called over and over while failures are recorded one transaction at a
    time: no answer counts more than were begun, nor fewer than the answer before, and the
    last equals a recount from the rows."""
    tid = world.transformation_id
    parcel_ids = await pack(database, world, [[i] for i in await feed(database, world, 30)])
    tool = common_pb2.Failure(failure_class=APPLICATION_ERROR)
    words = ("disk full on {}", "ERROR: bad seed {}", "stage-out of /data/{}.root timed out")
    started = 0  # recordings begun: none can be counted before

    async def record() -> None:
        nonlocal started
        for n, p in enumerate(parcel_ids):
            started += 1
            await record_outcome_messages(database, [failed(p, tool, words[n % 3].format(n))])
            await asyncio.sleep(0)

    request = execution_pb2.GroupFailuresRequest(transformation_ids=[id_to_str(tid)], buckets=4)
    writer = asyncio.create_task(record())
    seen = 0
    while not writer.done():
        reply = await stubs["alice"].GroupFailures(request)
        assert seen <= reply.parcels <= started
        assert reply.parcels == sum(g.count for g in reply.groups)
        seen = reply.parcels
    await writer
    reply = await stubs["alice"].GroupFailures(request)
    assert reply.parcels == 30
    assert as_answered(
        await stubs["alice"].GroupFailures(
            execution_pb2.GroupFailuresRequest(transformation_ids=[id_to_str(tid)], examples=10)
        )
    ) == await recount(database, tid, None, 10)


async def test_a_second_read_folds_only_what_failed_since(
    database: Database, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first read folds every failed parcel; one with nothing new reads no annotation;
    one after two more failures reads those two alone. Messages differing by a number are one
    reason in memory, holding the latest one's words."""
    read: list[int] = []
    for name in ("failed_rows", "failed_rows_of"):
        original = getattr(failures_store, name)

        async def counting(*args: Any, _original: Any = original) -> Any:
            rows = await _original(*args)
            read.append(len(rows))
            return rows

        monkeypatch.setattr(failures_store, name, counting)
    tid = world.transformation_id
    parcel_ids = await pack(database, world, [[i] for i in await feed(database, world, 7)])
    tool = common_pb2.Failure(failure_class=APPLICATION_ERROR)
    for n, p in enumerate(parcel_ids[:5]):  # one at a time: each fails later
        await record_outcome_messages(database, [failed(p, tool, f"no space left, {n} MB")])
    folds = FailureFolds()

    async def counts() -> int:
        async with database.transaction(Isolation.REPEATABLE_READ) as conn:
            folded = (await folds.read(conn, [tid]))[tid]
        (alike,) = folded.alike.values()
        assert alike.message[1:] == (
            parcel_ids[folded.count - 1],
            f"no space left, {folded.count - 1} MB",
        )
        return folded.count

    assert (await counts(), read) == (5, [5])
    assert (await counts(), read) == (5, [5])
    for n, p in enumerate(parcel_ids[5:], start=5):
        await record_outcome_messages(database, [failed(p, tool, f"no space left, {n} MB")])
    assert (await counts(), read) == (7, [5, 2])


async def test_another_vo_and_bad_arguments_are_refused(
    database: Database, world: World, stubs: dict[str, Any]
) -> None:
    (p,) = await pack(database, world, [await feed(database, world, 1)])
    await record_outcome_messages(
        database, [failed(p, common_pb2.Failure(failure_class=APPLICATION_ERROR), "secret")]
    )
    tid = id_to_str(world.transformation_id)
    with pytest.raises(NotFound):
        await stubs["carol"].GroupFailures(
            execution_pb2.GroupFailuresRequest(transformation_ids=[tid])
        )
    for bad in (
        execution_pb2.GroupFailuresRequest(),
        execution_pb2.GroupFailuresRequest(transformation_ids=["nonsense"]),
        execution_pb2.GroupFailuresRequest(transformation_ids=[tid] * 501),
        execution_pb2.GroupFailuresRequest(transformation_ids=[tid], examples=11),
        execution_pb2.GroupFailuresRequest(transformation_ids=[tid], buckets=97),
    ):
        with pytest.raises(InvalidArgument):
            await stubs["alice"].GroupFailures(bad)


async def recount(
    database: Database, tid: bytes, since: datetime | None, examples: int
) -> dict[str, tuple[int, datetime, datetime, list[str]]]:
    """The failure groups counted afresh from the rows, in Python, as the service documents
    them: reason → (count, first seen, last seen, the latest failed parcels)."""
    p = execution.parcels.c
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        rows = (
            await conn.execute(
                sa.select(p.ParcelID, p.Annotations, p.CompletedAt, p.UpdatedAt).where(
                    p.TransformationID == tid, p.Status == "Failed"
                )
            )
        ).all()
    found: dict[str, list[tuple[datetime, bytes]]] = {}
    for parcel_id, recorded, completed_at, updated_at in rows:
        at = completed_at or updated_at
        if since is not None and at < since.replace(tzinfo=None):
            continue
        outcome_ = (recorded or {}).get("outcome", {})
        words = (
            outcome_.get("failure", {}).get("tool_message")
            or outcome_.get("message")
            or (recorded or {}).get("reason")
            or "(no message)"
        )
        found.setdefault(normalise(words), []).append((at, bytes(parcel_id)))
    return {
        reason: (
            len(failures),
            min(failures)[0],
            max(failures)[0],
            [id_to_str(pid) for _, pid in sorted(failures, reverse=True)[:examples]],
        )
        for reason, failures in found.items()
    }


def as_answered(reply: Any) -> dict[str, tuple[int, datetime, datetime, list[str]]]:
    return {
        g.reason: (
            g.count,
            g.first_seen.ToDatetime(),
            g.last_seen.ToDatetime(),
            list(g.example_parcel_ids),
        )
        for g in reply.groups
    }


async def test_the_groups_stay_exact_as_failures_arrive_late_or_are_cleaned(
    database: Database, world: World, stubs: dict[str, Any]
) -> None:
    """GroupFailures folds each failure once and then only the new ones: after more failures,
    one of them visible only long after it failed (behind the margin caught up with), and after
    cleaning deleted some, every answer equals a recount from the rows; another VO still gets
    NOT_FOUND."""
    tid = world.transformation_id
    inputs = await feed(database, world, 30)
    parcel_ids = await pack(database, world, [[i] for i in inputs])
    tool = common_pb2.Failure(failure_class=APPLICATION_ERROR)

    def failing(parcels: Sequence[bytes], words: str) -> list[Any]:
        return [failed(p, tool, f"{words} {n}") for n, p in enumerate(parcels)]

    async def answered(since: datetime | None = None) -> Any:
        request = execution_pb2.GroupFailuresRequest(
            transformation_ids=[id_to_str(tid)], examples=10, buckets=6
        )
        if since is not None:
            request.since.FromDatetime(since)
        return await stubs["alice"].GroupFailures(request)

    async def check(since: datetime | None = None) -> None:
        reply = await answered(since)
        assert as_answered(reply) == await recount(database, tid, since, 10)
        assert reply.parcels == sum(g.count for g in reply.groups)
        assert [sum(g.over_time) for g in reply.groups] == [g.count for g in reply.groups]

    await record_outcome_messages(database, failing(parcel_ids[:8], "ERROR: seed out of range"))
    await check()
    middle = datetime.now(UTC)
    await record_outcome_messages(database, failing(parcel_ids[8:14], "ERROR: seed out of range"))
    await record_outcome_messages(database, failing(parcel_ids[14:20], "stage-out timed out after"))
    await check()
    await check(since=middle)

    # A failure whose transaction became visible an hour after it failed.
    await record_outcome_messages(
        database, failing(parcel_ids[20:21], "killed by the batch system")
    )
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        await conn.execute(
            sa.update(execution.parcels)
            .where(execution.parcels.c.ParcelID == parcel_ids[20])
            .values(CompletedAt=datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=1))
        )
    await check()
    await check(since=middle)
    assert (await answered()).parcels == 21

    # Cleaning a cancelled transformation deletes its parcels before its counter.
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        await conn.execute(
            sa.update(definition.transformations)
            .where(definition.transformations.c.TransformationID == tid)
            .values(Status="Cancelling")
        )
        await delete_parcels(conn, tid, limit=5)
    await check()
    assert (await answered()).parcels == 16
    with pytest.raises(NotFound):
        await stubs["carol"].GroupFailures(
            execution_pb2.GroupFailuresRequest(transformation_ids=[id_to_str(tid)])
        )


async def test_parcels_over_time_count_what_the_rows_record(
    database: Database, world: World, stubs: dict[str, Any], catalogue: FileCatalogue
) -> None:
    """CountParcelsOverTime: parcels created (their ids' time) and ended (CompletedAt) counted
    by span equal a recount from the rows; what is still in flight at the end is what has not
    ended; another VO gets NOT_FOUND, a bad span count one clear answer."""
    tid = world.transformation_id
    inputs = await feed(database, world, 9)
    parcel_ids = await pack(database, world, [[i] for i in inputs])
    tool = common_pb2.Failure(failure_class=APPLICATION_ERROR)
    await record_outcome_messages(database, [failed(p, tool, "no space") for p in parcel_ids[:3]])
    await record_outcome_messages(
        database,
        [
            outcome(p, report=report(**{id_to_str(i): "SUCCESS"}))
            for p, i in zip(parcel_ids[3:5], inputs[3:5], strict=True)
        ],
    )
    await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()
    reply = await stubs["alice"].CountParcelsOverTime(
        execution_pb2.CountParcelsOverTimeRequest(transformation_id=id_to_str(tid), buckets=5)
    )
    p = execution.parcels.c
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        rows = (
            await conn.execute(
                sa.select(p.ParcelID, p.Status, p.CompletedAt).where(p.TransformationID == tid)
            )
        ).all()
    start, end = reply.span_from.ToDatetime(), reply.span_to.ToDatetime()
    width = (end - start) / 5

    def span(moment: datetime) -> int:
        return min(4, max(0, int((moment - start) / width)))

    created = [span(parcel_times.created_at(bytes(r.ParcelID))) for r in rows]
    ended = [span(r.CompletedAt) if r.CompletedAt else None for r in rows]
    assert start == min(parcel_times.created_at(bytes(r.ParcelID)) for r in rows)
    assert list(reply.failed) == [
        sum(e == n and r.Status == "Failed" for r, e in zip(rows, ended, strict=True))
        for n in range(5)
    ]
    assert list(reply.done) == [
        sum(e == n and r.Status == "Done" for r, e in zip(rows, ended, strict=True))
        for n in range(5)
    ]
    assert list(reply.in_flight) == [
        sum(c <= n and (e is None or e > n) for c, e in zip(created, ended, strict=True))
        for n in range(5)
    ]
    assert (sum(reply.failed), sum(reply.done)) == (3, 2)
    assert reply.in_flight[-1] == sum(r.CompletedAt is None for r in rows) == 4
    with pytest.raises(NotFound):
        await stubs["carol"].CountParcelsOverTime(
            execution_pb2.CountParcelsOverTimeRequest(transformation_id=id_to_str(tid), buckets=5)
        )
    with pytest.raises(InvalidArgument):
        await stubs["alice"].CountParcelsOverTime(
            execution_pb2.CountParcelsOverTimeRequest(transformation_id=id_to_str(tid), buckets=97)
        )
