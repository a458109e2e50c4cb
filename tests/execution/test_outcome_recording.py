"""Outcome recording (docs/dispatching.md): RecordOutcomes, the Completing sweep, the status report,
splits and recovery parcels, user parcels, cancellations; idempotent and re-entrant — on SQLite
and MariaDB."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
import sqlalchemy as sa
from recording_world import (
    World,
    assert_counters_exact,
    definitions,
    empty,
    feed,
    inputs_of,
    outcome,
    pack,
    parcel,
    parcels_of,
    report,
    rows_of,
    snapshot,
    statuses,
    stored_message,
    transformation,
    user_parcel,
)

from dxts.core import content_store
from dxts.core.catalogue import FileCatalogue
from dxts.core.db import Database, Isolation
from dxts.core.ids import id_to_str
from dxts.core.schema import execution
from dxts.execution.edge.servicer_operations import record_outcome_messages as record_outcomes
from dxts.execution.logic import completing as completion
from dxts.execution.logic import recording
from dxts.execution.logic.completing import Recorder
from dxts.execution.logic.queries import get_parcel
from dxts.execution.logic.transformations import ActiveSnapshot
from dxts.execution.store import outcomes as db
from dxts.execution.store import splits as split_store
from dxts.execution.store.common import case_size
from dxts.v1 import common_pb2

SUCCEEDED = common_pb2.OUTCOME_RESULT_SUCCEEDED
FAILED = common_pb2.OUTCOME_RESULT_FAILED
CANCELLED = common_pb2.OUTCOME_RESULT_CANCELLED
RECORDED = common_pb2.OUTCOME_DISPOSITION_RECORDED
ALREADY = common_pb2.OUTCOME_DISPOSITION_ALREADY_RECORDED
UNKNOWN = common_pb2.OUTCOME_DISPOSITION_UNKNOWN_PARCEL


def ids(*values: bytes) -> list[str]:
    return [id_to_str(v) for v in values]


async def test_a_successful_parcel_is_recorded_done_with_its_outputs(
    database: Database, world: World, catalogue: FileCatalogue
) -> None:
    inputs = await feed(database, world, 3)
    (p,) = await pack(database, world, [inputs])
    lfn = f"/lhcb/out/{p.hex()}/a.root"
    fates = report(**dict.fromkeys(ids(*inputs), "SUCCESS"))

    acks = await record_outcomes(database, [outcome(p, report=fates, files=[("out", lfn)])])

    assert [a.disposition for a in acks] == [RECORDED]
    row = await parcel(database, p)
    assert row.Status == "Completing"
    assert stored_message(row.Annotations).outputs[0].lfn == lfn  # type: ignore[union-attr]
    assert await statuses(database, world.transformation_id) == {"Assigned": 3}
    await assert_counters_exact(database)

    assert (
        await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()
        == 1
    )

    row = await parcel(database, p)
    assert (row.Status, row.CompletedAt is not None) == ("Done", True)
    assert await statuses(database, world.transformation_id) == {"Processed": 3}
    (output,) = await rows_of(database, execution.parcel_outputs, ParcelID=p)
    assert (output.TransformationOutputID, output.LFN, output.LFNSize) == (
        world.outputs["out"],
        lfn,
        10,
    )
    registered = await catalogue.files([lfn])
    assert registered[lfn].replicas == ("SE-A",)
    await assert_counters_exact(database)
    # Nothing left to record.
    assert (
        await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()
        == 0
    )


async def test_a_failed_parcel_fails_its_inputs_at_once(database: Database, world: World) -> None:
    inputs = await feed(database, world, 2)
    (p,) = await pack(database, world, [inputs])

    acks = await record_outcomes(database, [outcome(p, result=FAILED, message="segfault")])

    assert [a.disposition for a in acks] == [RECORDED]
    row = await parcel(database, p)
    assert (row.Status, row.Annotations["reason"]) == ("Failed", "segfault")
    rows = await inputs_of(database, world.transformation_id)
    assert {(r.Status, r.ErrorCount) for r in rows.values()} == {("Failed", 1)}
    await assert_counters_exact(database)


async def test_an_unasked_cancellation_is_a_failure(database: Database, world: World) -> None:
    inputs = await feed(database, world, 1)
    (p,) = await pack(database, world, [inputs])

    await record_outcomes(database, [outcome(p, result=CANCELLED, message="killed by admin")])

    row = await parcel(database, p)
    assert row.Status == "Failed"
    assert "unasked" in row.Annotations["reason"]
    assert await statuses(database, world.transformation_id) == {"Failed": 1}


async def test_a_large_batch_is_recorded_by_two_transactions_side_by_side(
    database: Database, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = 2 * recording.LANE_PARCELS
    inputs = await feed(database, world, count)
    parcel_ids = await pack(database, world, [[i] for i in inputs])
    batch = [
        outcome(p, result=FAILED if n % 3 == 0 else SUCCEEDED) for n, p in enumerate(parcel_ids)
    ]
    batch.append(outcome(parcel_ids[-1]))  # a repeat of the last outcome
    locks: list[int] = []
    real_lock = db.lock_parcels

    async def counted(*args: Any, **kwargs: Any) -> Any:
        locks.append(1)
        return await real_lock(*args, **kwargs)

    monkeypatch.setattr(db, "lock_parcels", counted)

    acks = await record_outcomes(database, batch)

    assert len(locks) == (1 if database.is_sqlite else 2)
    assert [a.parcel_id for a in acks] == [o.parcel_id for o in batch]
    assert [a.disposition for a in acks] == [RECORDED] * count + [ALREADY]
    rows = await parcels_of(database, world.transformation_id)
    assert [r.Status for r in rows] == [
        "Failed" if n % 3 == 0 else "Completing" for n in range(count)
    ]
    assert await statuses(database, world.transformation_id) == {
        "Failed": len(range(0, count, 3)),
        "Assigned": count - len(range(0, count, 3)),
    }
    await assert_counters_exact(database)


async def test_stored_outcomes_keep_every_character_whatever_the_batch_size(
    database: Database, world: World
) -> None:
    # 21 parcels: written through a CASE of 22 (one slot padded), text that needs escaping.
    texts = ["plain", "quote ' and \" double", "back\\slash", "caf\u00e9 \U0001f600", "nul \x00"]
    parcel_ids = await pack(database, world, [[i] for i in await feed(database, world, 21)])
    batch = [
        outcome(p, result=FAILED if n % 2 else SUCCEEDED, message=texts[n % len(texts)])
        for n, p in enumerate(parcel_ids)
    ]

    acks = await record_outcomes(database, batch)

    assert [a.disposition for a in acks] == [RECORDED] * len(batch)
    rows = await parcels_of(database, world.transformation_id)
    stored = [stored_message(r.Annotations) for r in rows]
    for sent, kept in zip(batch, stored, strict=True):
        assert kept is not None
        kept.parcel_id = sent.parcel_id  # the one field not stored: it is the row's
        assert kept == sent
    assert [r.Annotations.get("reason") for r in rows] == [
        texts[n % len(texts)] if n % 2 else None for n in range(len(batch))
    ]
    sizes = [case_size(n) for n in (1, 15, 16, 17, 21, 250, 500, 2000)]
    assert sizes == [1, 15, 16, 18, 22, 256, 512, 2048]


async def test_a_batch_whose_half_failed_is_forwarded_again(
    database: Database, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = 2 * recording.LANE_PARCELS
    parcel_ids = await pack(database, world, [[i] for i in await feed(database, world, count)])
    batch = [outcome(p) for p in parcel_ids]
    real_move = db.move_parcels

    async def second_half_fails(conn: Any, moves: Any, now: Any) -> None:
        if any(m.row.parcel_id == parcel_ids[count // 2] for m in moves):
            raise RuntimeError("the server went away")
        await real_move(conn, moves, now)

    monkeypatch.setattr(db, "move_parcels", second_half_fails)
    with pytest.raises(RuntimeError):
        await record_outcomes(database, batch)
    monkeypatch.setattr(db, "move_parcels", real_move)
    moved = {
        bytes(r.ParcelID)
        for r in await parcels_of(database, world.transformation_id)
        if r.Status == "Completing"
    }
    assert not moved & set(parcel_ids[count // 2 :])  # the failed half rolled back whole

    acks = await record_outcomes(database, batch)

    assert [a.disposition for a in acks] == [
        ALREADY if p in moved else RECORDED for p in parcel_ids
    ]
    rows = await parcels_of(database, world.transformation_id)
    assert {r.Status for r in rows} == {"Completing"}
    await assert_counters_exact(database)


async def test_recording_the_same_outcome_twice_changes_nothing(
    database: Database, world: World, catalogue: FileCatalogue
) -> None:
    inputs = await feed(database, world, 4)
    done, failed = await pack(database, world, [inputs[:2], inputs[2:]])
    first = [
        outcome(done, report=report(**dict.fromkeys(ids(*inputs[:2]), "SUCCESS"))),
        outcome(failed, result=FAILED),
    ]
    assert [a.disposition for a in await record_outcomes(database, first)] == [RECORDED] * 2
    before = await snapshot(database)

    again = await record_outcomes(database, first)

    assert [a.disposition for a in again] == [ALREADY] * 2
    assert await snapshot(database) == before
    # Also once the parcel has been recorded to the end.
    await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()
    recorded = await snapshot(database)
    assert [a.disposition for a in await record_outcomes(database, first)] == [ALREADY] * 2
    assert await snapshot(database) == recorded
    # A repeat inside one batch is acknowledged once as recorded.
    (third,) = await pack(database, world, [await feed(database, world, 1)])
    twice = await record_outcomes(database, [outcome(third), outcome(third)])
    assert [a.disposition for a in twice] == [RECORDED, ALREADY]


async def test_every_report_action_and_the_recovery_split(
    database: Database, world: World, catalogue: FileCatalogue
) -> None:
    ok, bad, untried, split, unnamed = await feed(database, world, 5)
    await _set_error_count(database, world, split, 2)
    (p,) = await pack(database, world, [[ok, bad, untried, split, unnamed]])
    sidecar = await _resolve_hints(database, p)
    child = {"lfn": "/lhcb/in/split.dst", "lfn_size": 5000}
    fates = report(
        **{
            id_to_str(ok): "SUCCESS",
            id_to_str(bad): "FAILURE",
            id_to_str(untried): "NOT_TRIED",
            id_to_str(split): {
                "action": "SPLIT",
                "SUCCESS": [{**child, "descriptor": {"Mask": "1-10"}}],
                # the upstream spelling of the descriptor
                "FAILURE": [{**child, "data": {"Mask": "11-20"}}],
            },
        }
    )
    await record_outcomes(
        database, [outcome(p, report=fates, files=[("out", f"/lhcb/o/{p.hex()}")])]
    )
    await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()

    row = await parcel(database, p)
    assert row.Status == "PartiallyDone"
    rows = await inputs_of(database, world.transformation_id)
    assert {k: (r.Status, r.ErrorCount) for k, r in rows.items() if r.ParentInputID is None} == {
        ok: ("Processed", 0),
        bad: ("Failed", 1),
        untried: ("Unassigned", 0),
        split: ("Split", 2),
        unnamed: ("Unassigned", 0),
    }
    children = {r.Descriptor["Mask"]: r for r in rows.values() if r.ParentInputID == split}
    assert set(children) == {"1-10", "11-20"}
    done_child, failed_child = children["1-10"], children["11-20"]
    assert (done_child.Status, done_child.LFN, done_child.LFNSize) == (
        "Processed",
        "/lhcb/in/split.dst",
        5000,
    )
    assert (failed_child.Status, failed_child.ErrorCount, failed_child.LastParcelID) == (
        "Unassigned",
        3,
        None,
    )
    # The born-Done recovery parcel claims the processed child, and nothing else.
    recovery = await parcel(database, bytes(done_child.LastParcelID))
    # Never dispatched: no backend of the dispatcher's, directed (execution's row) to `recovery`.
    assert (recovery.Status, recovery.Backend, recovery.TransformationID) == (
        "Done",
        None,
        world.transformation_id,
    )
    (directed,) = await rows_of(database, execution.directed_parcels, ParcelID=recovery.ParcelID)
    assert directed.Backend == "recovery"
    assert recovery.Annotations == {"recovery_of": id_to_str(p)}
    assert row.Annotations["recovery_parcel_id"] == id_to_str(recovery.ParcelID)
    links = await rows_of(database, execution.parcel_inputs, ParcelID=recovery.ParcelID)
    assert [bytes(link.InputID) for link in links] == [bytes(done_child.InputID)]
    (facet,) = await rows_of(database, execution.compute_parcels, ParcelID=recovery.ParcelID)
    (original,) = await rows_of(database, execution.compute_parcels, ParcelID=p)
    assert (facet.ProcessID, facet.RequirementsID) == (original.ProcessID, original.RequirementsID)
    # The sidecar is the dispatcher's column, not copied: shown through the recovered parcel.
    assert facet.ResolvedHintsID is None and bytes(original.ResolvedHintsID) == sidecar
    shown = await get_parcel(database, bytes(recovery.ParcelID))
    assert shown.parcel.backend == "recovery"
    assert shown.compute is not None and shown.compute.resolved_hints_id == sidecar
    await assert_counters_exact(database)


async def _resolve_hints(database: Database, parcel_id: bytes) -> bytes:
    """Record a sidecar on the parcel, as the dispatcher does when it claims it."""

    async def work(conn: Any) -> bytes:
        hints_id = await content_store.put_resolved_hints(conn, {"cpu": {"cores": 2}})
        await conn.execute(
            sa.update(execution.compute_parcels)
            .where(execution.compute_parcels.c.ParcelID == parcel_id)
            .values(ResolvedHintsID=hints_id)
        )
        return hints_id

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def test_a_report_of_splits_only_succeeding_in_part(
    database: Database, world: World, catalogue: FileCatalogue
) -> None:
    inputs = await feed(database, world, 2)
    (p,) = await pack(database, world, [inputs])
    split = {"action": "SPLIT", "FAILURE": [{"descriptor": {"part": 1}}]}
    fates = report(**{key: split for key in ids(*inputs)})
    await record_outcomes(database, [outcome(p, report=fates)])
    await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()

    # No input succeeded, even in part: Failed. The two reports name the same child: the second
    # is not inserted again.
    row = await parcel(database, p)
    assert row.Status == "Failed"
    assert any("already exist" in w for w in row.Annotations["warnings"])
    assert await statuses(database, world.transformation_id) == {"Split": 2, "Unassigned": 1}
    await assert_counters_exact(database)


async def test_batches_recorded_side_by_side_insert_a_shared_split_child_once(
    database: Database, world: World, catalogue: FileCatalogue, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = await feed(database, world, 2)
    parcel_ids = await pack(database, world, [[i] for i in inputs])
    split = {"action": "SPLIT", "FAILURE": [{"descriptor": {"part": 1}}]}
    for p, i in zip(parcel_ids, inputs, strict=True):
        await record_outcomes(database, [outcome(p, report=report(**{id_to_str(i): split}))])
    # The two batches (one parcel each) both look for the child before either inserts it.
    calls, both = 0, asyncio.Event()
    real = split_store.existing_hashes

    async def side_by_side(*args: Any, **kwargs: Any) -> set[bytes]:
        nonlocal calls
        found = await real(*args, **kwargs)
        calls += 1
        if calls == 2:
            both.set()
        if calls <= 2 and not database.is_sqlite:  # SQLite records one batch at a time
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(both.wait(), 5)
        return found

    monkeypatch.setattr(split_store, "existing_hashes", side_by_side)

    recorder = Recorder(database, catalogue, ActiveSnapshot(definitions(world)))
    assert await recorder.record_completing(batch=1, lanes=2) == 2

    # The batch that lost the race ran again and saw the child as recorded in key order would.
    assert calls == (2 if database.is_sqlite else 3)
    rows = await parcels_of(database, world.transformation_id)
    assert [r.Status for r in rows] == ["Failed", "Failed"]
    warnings = [r.Annotations.get("warnings", []) for r in rows]
    assert sorted(any("already exist" in w for w in ws) for ws in warnings) == [False, True]
    assert await statuses(database, world.transformation_id) == {"Split": 2, "Unassigned": 1}
    await assert_counters_exact(database)


async def test_a_process_without_a_status_report_succeeds_wholly(
    database: Database, catalogue: FileCatalogue
) -> None:
    await empty(database)
    world = await transformation(database, outputs=("out",))
    inputs = await feed(database, world, 2)
    (p,) = await pack(database, world, [inputs])
    await record_outcomes(
        database, [outcome(p, report=report(**{id_to_str(inputs[0]): "FAILURE"}))]
    )
    await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()

    row = await parcel(database, p)
    assert row.Status == "Done"
    assert row.Annotations["warnings"] == [
        "a status report arrived but the process declares none: ignored"
    ]
    assert await statuses(database, world.transformation_id) == {"Processed": 2}


async def test_a_data_parcel_moves_its_storage_counters(
    database: Database, catalogue: FileCatalogue
) -> None:
    from dxts.core.counters import StorageDelta

    await empty(database)
    world = await transformation(database, outputs=(), kind="Data")
    inputs = await feed(database, world, 4)
    deltas = {"CERN-TAPE": StorageDelta(2, 2000, 0, 0), "CERN-DISK": StorageDelta(0, 0, 2, 2000)}
    done, failed = await pack(database, world, [inputs[:2], inputs[2:]], deltas=deltas)
    await record_outcomes(database, [outcome(done), outcome(failed, result=FAILED)])
    await assert_counters_exact(database)
    await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()

    assert [r.Status for r in await parcels_of(database, world.transformation_id)] == [
        "Done",
        "Failed",
    ]
    await assert_counters_exact(database)


async def test_a_user_parcel_simply_becomes_done_or_failed(
    database: Database, catalogue: FileCatalogue
) -> None:
    await empty(database)
    done, failed = await user_parcel(database), await user_parcel(database)
    lfn = f"/lhcb/user/b/bob/{done.hex()}.out"
    acks = await record_outcomes(
        database, [outcome(done, files=[("result", lfn)]), outcome(failed, result=FAILED)]
    )
    assert [a.disposition for a in acks] == [RECORDED, RECORDED]
    await Recorder(database, catalogue, ActiveSnapshot(definitions())).record_completing()

    assert (await parcel(database, done)).Status == "Done"
    assert (await parcel(database, failed)).Status == "Failed"
    assert lfn in await catalogue.files([lfn])
    assert await rows_of(database, execution.parcel_outputs) == []


async def test_a_cancelled_parcel_writes_its_inputs_off(database: Database, world: World) -> None:
    inputs = await feed(database, world, 2)
    (p,) = await pack(database, world, [inputs])
    await _request_cancel(database, p)

    # The confirmation; a repeat of it is ignored.
    confirmation = outcome(p, result=CANCELLED, message="cancelled on request")
    assert [a.disposition for a in await record_outcomes(database, [confirmation])] == [RECORDED]
    assert [a.disposition for a in await record_outcomes(database, [confirmation])] == [ALREADY]

    row = await parcel(database, p)
    assert (row.Status, row.Annotations["cancel_requested"]) == ("Cancelled", True)
    assert await statuses(database, world.transformation_id) == {"NotProcessed": 2}
    await assert_counters_exact(database)


async def test_a_parcel_that_finished_before_its_cancellation_is_recorded(
    database: Database, world: World, catalogue: FileCatalogue
) -> None:
    inputs = await feed(database, world, 1)
    (p,) = await pack(database, world, [inputs])
    await _request_cancel(database, p)
    recorder = Recorder(database, catalogue, ActiveSnapshot(definitions(world)))
    assert await recorder.record_completing() == 0  # waiting for the backend

    fates = report(**{id_to_str(inputs[0]): "SUCCESS"})
    await record_outcomes(database, [outcome(p, report=fates)])
    assert await recorder.record_completing() == 1

    assert (await parcel(database, p)).Status == "Done"
    assert await statuses(database, world.transformation_id) == {"Processed": 1}
    await assert_counters_exact(database)


async def test_an_interrupted_recording_runs_again_to_the_same_rows(
    database: Database, world: World, catalogue: FileCatalogue, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = await feed(database, world, 6)
    parcel_ids = await pack(database, world, [inputs[:3], inputs[3:]])
    for p, group in zip(parcel_ids, [inputs[:3], inputs[3:]], strict=True):
        fates = report(
            **{
                id_to_str(group[0]): "SUCCESS",
                id_to_str(group[1]): "FAILURE",
                id_to_str(group[2]): {
                    "action": "SPLIT",
                    "SUCCESS": [{"descriptor": {"of": id_to_str(group[2]), "n": 1}}],
                    "FAILURE": [{"descriptor": {"of": id_to_str(group[2]), "n": 2}}],
                },
            }
        )
        await record_outcomes(
            database, [outcome(p, report=fates, files=[("out", f"/lhcb/o/{p.hex()}.root")])]
        )
    completing = await snapshot(database)
    real_move = db.move_parcels

    async def crash(*args: Any, **kwargs: Any) -> None:
        await real_move(*args, **kwargs)  # everything written, then the connection dies
        raise ConnectionResetError("lost before commit")

    monkeypatch.setattr(db, "move_parcels", crash)
    with pytest.raises(ConnectionResetError):
        await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()
    assert await snapshot(database) == completing  # rolled back whole

    monkeypatch.setattr(db, "move_parcels", real_move)
    assert (
        await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()
        == 2
    )

    assert [r.Status for r in await parcels_of(database, world.transformation_id)] == [
        "PartiallyDone",
        "PartiallyDone",
        "Done",
        "Done",
    ]
    assert await statuses(database, world.transformation_id) == {
        "Processed": 4,
        "Failed": 2,
        "Split": 2,
        "Unassigned": 2,
    }
    assert len(await rows_of(database, execution.parcel_outputs)) == 2
    await assert_counters_exact(database)


async def _request_cancel(database: Database, parcel_id: bytes) -> None:
    """What CancelParcels does to an Assigned parcel (tested on its own elsewhere)."""
    from dxts.execution.logic import operations

    requested = await operations.cancel_parcels(database, parcel_ids=[parcel_id], reason="test")
    assert requested.cancel_requested == 1


async def _set_error_count(database: Database, world: World, input_id: bytes, count: int) -> None:
    async with database.transaction(recording.RC) as conn:
        await conn.execute(
            sa.update(execution.inputs)
            .where(execution.inputs.c.InputID == input_id)
            .values(ErrorCount=count)
        )


async def test_a_parcel_whose_recording_fails_unplanned_is_failed_alone(
    database: Database, world: World, catalogue: FileCatalogue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parcel whose recording trips an error nobody planned for is found by halving its
    batch and failed with the error as its reason; the parcels around it are recorded."""
    inputs = await feed(database, world, 9)
    groups = [inputs[:3], inputs[3:6], inputs[6:]]
    parcel_ids = await pack(database, world, groups)
    for p, group in zip(parcel_ids, groups, strict=True):
        fates = report(**dict.fromkeys(ids(*group), "SUCCESS"))
        await record_outcomes(database, [outcome(p, report=fates)])
    poisoned = parcel_ids[1]
    real_plan = completion.plan_recording

    def plan(row: Any, *args: Any) -> Any:
        if row.parcel_id == poisoned:
            raise KeyError("an outcome field nobody expected")
        return real_plan(row, *args)

    monkeypatch.setattr(completion, "plan_recording", plan)
    assert (
        await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()
        == 3
    )

    by_id = {r.ParcelID: r for r in await parcels_of(database, world.transformation_id)}
    assert [by_id[p].Status for p in parcel_ids] == ["Done", "Failed", "Done"]
    assert by_id[poisoned].Annotations["reason"].startswith("recording failed: KeyError")
    assert await statuses(database, world.transformation_id) == {"Processed": 6, "Failed": 3}
    failed = [
        r
        for r in (await inputs_of(database, world.transformation_id)).values()
        if r.Status == "Failed"
    ]
    assert sorted(bytes(r.InputID) for r in failed) == sorted(groups[1])
    assert {r.ErrorCount for r in failed} == {1}
    await assert_counters_exact(database)


async def test_a_transient_error_fails_no_parcel(
    database: Database, world: World, catalogue: FileCatalogue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database or a service away says "later": raised for the next sweep, nothing failed."""
    from dxts.core.errors import Unavailable

    inputs = await feed(database, world, 2)
    parcel_ids = await pack(database, world, [inputs[:1], inputs[1:]])
    for p, group in zip(parcel_ids, [inputs[:1], inputs[1:]], strict=True):
        await record_outcomes(
            database, [outcome(p, report=report(**dict.fromkeys(ids(*group), "SUCCESS")))]
        )
    completing = await snapshot(database)

    def away(*args: Any) -> Any:
        raise Unavailable("catalogue unreachable")

    monkeypatch.setattr(completion, "plan_recording", away)
    with pytest.raises(Unavailable):
        await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()
    assert await snapshot(database) == completing


def test_batches_are_bounded_by_parcels_and_by_the_inputs_they_carry() -> None:
    sizes = [(bytes([n]), size) for n, size in enumerate([3, 3, 3, 9, 1, 1, 1, 1, 0])]

    chunks = list(completion.batches(sizes, parcels=3, inputs=6))

    assert [[p[0] for p in chunk] for chunk in chunks] == [[0, 1], [2], [3], [4, 5, 6], [7, 8]]
    # Every parcel in exactly one batch, in order.
    assert [p for chunk in chunks for p in chunk] == [p for p, _ in sizes]


async def test_parcels_carrying_many_inputs_are_recorded_in_batches_bounded_by_them(
    database: Database, world: World, catalogue: FileCatalogue, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = await feed(database, world, 10)
    groups = [inputs[0:4], inputs[4:8], inputs[8:9], inputs[9:10]]
    parcel_ids = await pack(database, world, groups)
    for p, group in zip(parcel_ids, groups, strict=True):
        fates = report(**dict.fromkeys(ids(*group), "SUCCESS"))
        await record_outcomes(database, [outcome(p, report=fates)])
    carries = {p: len(group) for p, group in zip(parcel_ids, groups, strict=True)}
    recorder = Recorder(database, catalogue, ActiveSnapshot(definitions(world)))
    carried_by_batch: list[int] = []
    real = recorder.record

    async def counting(batch: Any) -> int:
        carried_by_batch.append(sum(carries[p] for p in batch))
        return await real(batch)

    monkeypatch.setattr(recorder, "record", counting)

    assert await recorder.record_completing(batch=500, batch_inputs=5) == 4

    # Ten inputs in all, no batch carrying more than five (none of the parcels does alone).
    assert sum(carried_by_batch) == 10 and max(carried_by_batch) <= 5
    assert await statuses(database, world.transformation_id) == {"Processed": 10}
    await assert_counters_exact(database)


async def test_a_data_parcel_reports_each_files_inputs(
    database: Database, catalogue: FileCatalogue
) -> None:
    """A data adaptor's status report (one copy failed) fails that file's input alone: the
    parcel is PartiallyDone, the others Processed; without a report the parcel is whole."""
    await empty(database)
    world = await transformation(database, outputs=(), kind="Data")
    copied, refused, whole = await feed(database, world, 3)
    partly, wholly = await pack(database, world, [[copied, refused], [whole]])
    fates = report(**{id_to_str(copied): "SUCCESS", id_to_str(refused): "FAILURE"})
    await record_outcomes(database, [outcome(partly, report=fates), outcome(wholly)])
    await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()

    assert [r.Status for r in await parcels_of(database, world.transformation_id)] == [
        "PartiallyDone",
        "Done",
    ]
    rows = await inputs_of(database, world.transformation_id)
    assert {k: r.Status for k, r in rows.items()} == {
        copied: "Processed",
        refused: "Failed",
        whole: "Processed",
    }
    await assert_counters_exact(database)
