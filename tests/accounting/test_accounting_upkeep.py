"""The counters' upkeep, on SQLite and MariaDB: the fold sweep and its lock, drift detection
and repair, operator rebuilds, the metrics, and the sweeps running as tasks."""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.request
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import pytest
from accounting_world import SETTINGS, Lister, World, add_inputs, journal_depth, recount
from accounting_world import transformations as make_transformations
from prometheus_client import REGISTRY

from dxts.accounting import Accounting, build_accounting, metrics
from dxts.accounting.logic.log_listing import LogOwner, list_log
from dxts.accounting.logic.sweeps import fold_lock
from dxts.core.counters import DATA_PARCELS, TRANSFORMATION, journal_inputs
from dxts.core.db import Database, Isolation
from dxts.core.errors import InvalidArgument, PermissionDenied
from dxts.core.grpc import start_metrics_server
from dxts.core.ids import id_to_str
from dxts.core.locks import LockManager
from dxts.core.states import InputStatus, values
from dxts.v1 import accounting_pb2, common_pb2

if TYPE_CHECKING:
    from dxts.v1.accounting_pb2_grpc import AccountingServiceAsyncStub as Stub

RC = Isolation.READ_COMMITTED
T = TRANSFORMATION.name


def sample(name: str, counter: str | None = None) -> float | None:
    return REGISTRY.get_sample_value(name, {"counter": counter} if counter else {})


async def fresh_transformation(database: Database, inputs: dict[str, int]) -> bytes:
    async with database.transaction(RC) as conn:
        (tid,) = (await make_transformations(conn, {"drifty": "Compute"})).values()
        await add_inputs(conn, tid, inputs)
    return tid


async def corrupt(database: Database, tid: bytes, status: str, delta: int) -> None:
    """A delta with no row behind it: what a buggy writer would leave."""
    move = (tid, None, status) if delta > 0 else (tid, status, None)
    async with database.transaction(RC) as conn:
        await journal_inputs(conn, {move: abs(delta)})


async def input_counts(stub: Stub, tid: bytes) -> dict[str, int]:
    reply = await stub.GetCounts(
        accounting_pb2.GetCountsRequest(
            transformation_ids=[id_to_str(tid)], entity=common_pb2.ENTITY_INPUT
        )
    )
    (counts,) = reply.counts
    return dict(zip(values(InputStatus), (c.count for c in counts.counts), strict=True))


async def exact(stub: Stub, database: Database, tid: bytes) -> bool:
    truth = await recount(database, tid, "Input")
    return await input_counts(stub, tid) == {s: truth.get(s, 0) for s in values(InputStatus)}


# -- fold ---------------------------------------------------------------------------------------


async def test_fold_turn_empties_the_journal_in_full_batches_and_reads_stay_exact(
    accounting: Accounting, world: World, stub: Stub, database: Database
) -> None:
    journal = TRANSFORMATION.journal_table
    depth = await journal_depth(database, journal)
    assert depth > 2 * SETTINGS.fold_batch  # several full batches are needed
    before = sample("dxts_counter_folded_rows_total", T) or 0.0
    folded = await accounting.sweeps.fold_turn(TRANSFORMATION, lease_s=0)
    assert folded == depth  # full batches were folded again at once, in one turn
    assert await journal_depth(database, journal) == 0
    assert sample("dxts_counter_folded_rows_total", T) == before + depth
    assert (sample("dxts_counter_fold_seconds_count", T) or 0) >= 1
    for tid in world.ids.values():
        assert await exact(stub, database, tid)
    assert await accounting.sweeps.fold_turn(DATA_PARCELS, lease_s=0) is not None
    assert await journal_depth(database, DATA_PARCELS.journal_table) == 0


async def test_a_replica_without_the_fold_lock_does_not_fold(
    accounting: Accounting, database: Database
) -> None:
    await fresh_transformation(database, {"Unassigned": 2})
    depth = await journal_depth(database, TRANSFORMATION.journal_table)
    assert depth > 0
    other_replica = LockManager(database)
    try:
        async with other_replica.try_hold(fold_lock(TRANSFORMATION)) as held:
            assert held
            assert await accounting.sweeps.fold_turn(TRANSFORMATION, lease_s=0) is None
            assert await journal_depth(database, TRANSFORMATION.journal_table) == depth
    finally:
        await other_replica.dispose()
    assert await accounting.sweeps.fold_turn(TRANSFORMATION, lease_s=0) == depth


# -- drift and rebuilds -------------------------------------------------------------------------


async def test_drift_raises_the_gauge_and_a_scoped_rebuild_repairs_it(
    accounting: Accounting, stub: Stub, database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    drifted = await fresh_transformation(database, {"Unassigned": 4})
    bystander = await fresh_transformation(database, {"Unassigned": 1})
    await corrupt(database, drifted, "Processed", -3)
    await corrupt(database, bystander, "Failed", +2)  # wrong, but not negative
    watch = accounting.sweeps.watch

    found = await watch.check(database)
    assert found[T] == [(drifted, "Input", "Processed")]
    assert sample("dxts_counter_negative", T) == 1

    # A read anywhere sees it too, and wakes the drift sweep.
    watch.wake.clear()
    assert (await input_counts(stub, drifted))["Processed"] == -3
    assert watch.wake.is_set()

    with caplog.at_level(logging.WARNING, logger="dxts.accounting"):
        corrections = await accounting.sweeps.drift_turn()
    assert [(c.counter.name, c.key, c.deltas) for c in corrections] == [
        (T, (drifted, "Input", "Processed"), {"Count": 3})
    ]
    assert id_to_str(drifted) in caplog.text
    assert sample("dxts_counter_negative", T) == 0
    assert await exact(stub, database, drifted)
    # Scoped to the drifted transformation: the bystander is still wrong.
    assert (await input_counts(stub, bystander))["Failed"] == 2

    log = await stub.ListLog(accounting_pb2.ListLogRequest(transformation_id=id_to_str(drifted)))
    (entry,) = log.entries
    assert (entry.event_type, entry.author) == ("CounterRebuild", "accounting")
    assert json.loads(entry.data_json) == {
        "counter": T,
        "reason": "drift",
        "corrections": [{"Entity": "Input", "Status": "Processed", "CountDelta": 3}],
    }

    # The operator repairs the bystander; a retry finds nothing left to correct.
    request = accounting_pb2.RebuildRequest(
        request_id="r-1",
        counters=[accounting_pb2.COUNTER_TRANSFORMATION],
        transformation_ids=[id_to_str(bystander)],
    )
    reply = await stub.Rebuild(request)
    assert [
        (c.counter, c.transformation_id, json.loads(c.key_and_delta_json))
        for c in reply.corrections
    ] == [
        (
            accounting_pb2.COUNTER_TRANSFORMATION,
            id_to_str(bystander),
            {"Entity": "Input", "Status": "Failed", "CountDelta": -2},
        )
    ]
    assert await exact(stub, database, bystander)
    assert list((await stub.Rebuild(request)).corrections) == []
    log = await stub.ListLog(accounting_pb2.ListLogRequest(transformation_id=id_to_str(bystander)))
    assert [(e.event_type, e.author) for e in log.entries] == [("CounterRebuild", "olivia")]


async def test_rebuild_of_everything_finds_nothing_when_counts_are_exact(
    stub: Stub, world: World
) -> None:
    reply = await stub.Rebuild(accounting_pb2.RebuildRequest(all_transformations=True))
    assert list(reply.corrections) == []


async def test_rebuild_needs_an_operator(user_stub: Stub, world: World) -> None:
    with pytest.raises(PermissionDenied):
        await user_stub.Rebuild(
            accounting_pb2.RebuildRequest(transformation_ids=[id_to_str(world.ids["simulate"])])
        )


async def test_rebuild_bad_requests(stub: Stub, world: World) -> None:
    simulate = id_to_str(world.ids["simulate"])
    for request, expected in (
        (accounting_pb2.RebuildRequest(), ["transformation_ids"]),
        (
            accounting_pb2.RebuildRequest(transformation_ids=[simulate], all_transformations=True),
            ["transformation_ids"],
        ),
        (
            accounting_pb2.RebuildRequest(
                counters=[accounting_pb2.COUNTER_UNSPECIFIED], transformation_ids=["x", simulate]
            ),
            ["counters[0]", "transformation_ids[0]"],
        ),
    ):
        with pytest.raises(InvalidArgument) as caught:
            await stub.Rebuild(request)
        assert sorted(v.field for v in caught.value.violations) == expected


# -- metrics ------------------------------------------------------------------------------------


async def test_metrics_report_the_journal_and_the_server(
    accounting: Accounting, database: Database
) -> None:
    await fresh_transformation(database, {"Unassigned": 3})
    depth = await journal_depth(database, TRANSFORMATION.journal_table)
    await metrics.collect(database, (TRANSFORMATION, DATA_PARCELS))
    assert sample("dxts_counter_journal_rows", T) == depth > 0
    assert (sample("dxts_counter_journal_oldest_age_seconds", T) or 0) >= 0
    if not database.is_sqlite:
        length = sample("dxts_innodb_history_list_length")
        assert length is not None and length >= 0
    await accounting.sweeps.fold_turn(TRANSFORMATION, lease_s=0)
    await metrics.collect(database, (TRANSFORMATION, DATA_PARCELS))
    assert sample("dxts_counter_journal_rows", T) == 0
    assert sample("dxts_counter_journal_oldest_age_seconds", T) == 0

    server = start_metrics_server(0, address="127.0.0.1")
    assert server is not None
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        text = await asyncio.to_thread(lambda: urllib.request.urlopen(url).read().decode())
    finally:
        server.close()
    for name in (
        "dxts_counter_journal_rows",
        "dxts_counter_journal_oldest_age_seconds",
        "dxts_counter_fold_seconds_bucket",
        "dxts_counter_folded_rows_total",
        "dxts_counter_negative",
        "dxts_counter_corrections_total",
        "dxts_innodb_history_list_length",
    ):
        assert f"\n{name}" in text, name


# -- the sweeps as tasks ------------------------------------------------------------------------


async def eventually(check: Callable[[], Awaitable[bool]]) -> bool:
    """Whether `check` comes true while the sweeps run (polled; generous for a busy machine)."""
    for _ in range(2000):
        if await check():
            return True
        await asyncio.sleep(0.005)
    return False


async def test_running_sweeps_fold_repair_drift_and_stop(
    database: Database, lister: Lister
) -> None:
    tid = await fresh_transformation(database, {"Unassigned": 9, "Processed": 5})
    assert await journal_depth(database, TRANSFORMATION.journal_table) > 0
    running = await build_accounting(database, settings=SETTINGS, members=lister)

    async def counted() -> dict[str, int]:
        async with database.transaction(RC) as conn:
            reading = await TRANSFORMATION.read(conn, {"TransformationID": tid})
        return {key[2]: v["Count"] for key, v in reading.items()}

    async def folded() -> bool:
        return await journal_depth(database, TRANSFORMATION.journal_table) == 0

    async def repaired() -> bool:
        exact = await counted() == {"Unassigned": 9, "Processed": 5}
        return exact and sample("dxts_counter_negative", T) == 0

    sweeping = {t for t in asyncio.all_tasks() if t.get_name().startswith("sweep-accounting-")}
    try:
        assert {task.get_name() for task in sweeping} == {
            "sweep-accounting-fold-Transformation",
            "sweep-accounting-fold-DataParcels",
            "sweep-accounting-metrics",
            "sweep-accounting-drift",
        }
        assert await eventually(folded)
        assert await repaired()
        await corrupt(database, tid, "Failed", -2)
        assert await eventually(repaired)
    finally:
        await running.stop()
    # Stopped at their next pause, not cancelled in the middle of a transaction.
    assert all(task.done() and not task.cancelled() for task in sweeping)
    page = await list_log(database, LogOwner.TRANSFORMATION, tid, limit=10)
    assert [(r.event_type, r.author, r.data["reason"]) for r in page.records] == [
        ("CounterRebuild", "accounting", "drift")
    ]
