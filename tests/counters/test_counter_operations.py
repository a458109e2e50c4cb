"""journal / read / fold / rebuild / delete_scope, on SQLite and MariaDB alike."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import sqlalchemy as sa
from counted_rows import (
    add_data_parcel,
    add_inputs,
    add_parcels,
    fold_all,
    make_transformations,
    recount,
    recount_data,
    statements,
    table_rows,
)

from dxts.core.counters import (
    DATA_PARCELS,
    TRANSFORMATION,
    Drift,
    StorageDelta,
    counter_locks,
    ensure_lock_rows,
    journal_data_parcels,
    journal_input_transition,
    journal_inputs,
    journal_parcels,
    on_drift,
)
from dxts.core.db import Database, Isolation, db_now, utcnow
from dxts.core.errors import FailedPrecondition, InvalidArgument
from dxts.core.ids import new_id
from dxts.core.schema import execution

RC, RR = Isolation.READ_COMMITTED, Isolation.REPEATABLE_READ
COUNTERS = TRANSFORMATION.counters_table
JOURNAL = TRANSFORMATION.journal_table


async def forget(database: Database, tids: list[bytes]) -> None:
    """Drop the counts of a test that journalled deltas with no counted rows behind them, so
    that the whole-counter rebuild below finds only what its own test injects."""
    await TRANSFORMATION.delete_scope(database, {"TransformationID": tids})


async def test_lock_rows_exist_after_create_all_and_ensure_is_idempotent(
    database: Database,
) -> None:
    expected = {
        (name, operation)
        for name in ("Transformation", "DataParcels")
        for operation in ("rebuild", "fold")
    }
    async with database.transaction(RC) as conn:
        assert set(await conn.execute(sa.select(counter_locks))) == expected  # create_all's hook
        await ensure_lock_rows(conn)
        await ensure_lock_rows(conn)
        assert set(await conn.execute(sa.select(counter_locks))) == expected


async def test_journal_sums_per_key_in_one_insert_and_drops_zeros(database: Database) -> None:
    async with database.transaction(RC) as conn:
        (t,) = await make_transformations(conn)
    async with database.transaction(RC) as conn:
        before = await db_now(conn)
    with statements(database) as seen:
        async with database.transaction(RC) as conn:
            written = await TRANSFORMATION.journal(
                conn,
                [
                    ((t, "Input", "Unassigned"), (5,)),
                    ((t, "Input", "Unassigned"), (-2,)),
                    ((t, "Input", "Assigned"), (2,)),
                    ((t, "Input", "Assigned"), (-2,)),  # sums to zero: no row
                    ((t, "Parcel", "Done"), (0,)),  # zero: no row
                ],
            )
    inserts = [s for s in seen if s.lstrip().upper().startswith("INSERT")]
    assert written == 1
    assert len(inserts) == 1
    assert "TransformationCounterJournal" in inserts[0] and "SELECT" not in inserts[0].upper()
    async with database.transaction(RC) as conn:
        rows = (await conn.execute(sa.select(JOURNAL).where(JOURNAL.c.TransformationID == t))).all()
    assert [(r.Entity, r.Status, r.CountDelta) for r in rows] == [("Input", "Unassigned", 3)]
    async with database.transaction(RC) as conn:
        after = await db_now(conn)
    assert before <= rows[0].InsertedAt <= after  # the database's clock, set by the default
    await forget(database, [t])


async def test_bulk_helper_journals_many_transformations_in_one_insert(database: Database) -> None:
    async with database.transaction(RC) as conn:
        tids = await make_transformations(conn, 3)
    moves: dict[tuple[bytes, str | None, str | None], int] = {}
    for t in tids:
        moves[(t, None, "Unassigned")] = 5
        moves[(t, "Unassigned", "Assigned")] = 4
    moves[(tids[0], "Assigned", "Processed")] = 1
    with statements(database) as seen:
        async with database.transaction(RC) as conn:
            assert await journal_inputs(conn, moves) == 7
    assert len([s for s in seen if s.lstrip().upper().startswith("INSERT")]) == 1
    async with database.transaction(RC) as conn:
        reading = await TRANSFORMATION.read(conn, {"TransformationID": tids})
    assert dict(reading) == {
        (tids[0], "Input", "Unassigned"): {"Count": 1},
        (tids[0], "Input", "Assigned"): {"Count": 3},
        (tids[0], "Input", "Processed"): {"Count": 1},
        **{(t, "Input", "Unassigned"): {"Count": 1} for t in tids[1:]},
        **{(t, "Input", "Assigned"): {"Count": 4} for t in tids[1:]},
    }
    await forget(database, tids)


@pytest.mark.parametrize(
    ("deltas", "field"),
    [
        ([((b"short", "Input", "Unassigned"), (1,))], "deltas[0].key.TransformationID"),
        ([((new_id(), "Job", "Unassigned"), (1,))], "deltas[0].key.Entity"),
        ([((new_id(), "Input", "Running"), (1,))], "deltas[0].key.Status"),
        ([((new_id(), "Input"), (1,))], "deltas[0].key"),
        ([((new_id(), "Input", "Done"), (1, 2))], "deltas[0].values"),
        ([((new_id(), "Input", "Done"), (True,))], "deltas[0].values"),
        ([((new_id(), "Input", "Done"), (2**63,))], "deltas[0].values"),
    ],
)
async def test_journal_refuses_bad_deltas(database: Database, deltas: Any, field: str) -> None:
    async with database.transaction(RC) as conn:
        with pytest.raises(InvalidArgument) as refused:
            await TRANSFORMATION.journal(conn, deltas)
    assert [v.field for v in refused.value.violations] == [field]


@pytest.mark.parametrize(
    ("moves", "field"),
    [
        ({(new_id(), "Unassigned", "Reserved"): 1}, "moves[0].to"),  # a parcel-only state
        ({(new_id(), None, None): 1}, "moves[0]"),
        ({(new_id(), "Unassigned", "Assigned"): -1}, "moves[0].count"),
        ({(new_id(), "Unassigned"): 1}, "moves[0]"),
    ],
)
async def test_input_helper_refuses_bad_moves(database: Database, moves: Any, field: str) -> None:
    async with database.transaction(RC) as conn:
        with pytest.raises(InvalidArgument) as refused:
            await journal_inputs(conn, moves)
    assert [v.field for v in refused.value.violations] == [field]


async def test_read_is_one_statement_and_missing_keys_read_zero(database: Database) -> None:
    async with database.transaction(RC) as conn:
        t, other = await make_transformations(conn, 2)
        moving = await add_inputs(conn, t, 4)
        await add_inputs(conn, other, 2)
    await fold_all(database)
    async with database.transaction(RC) as conn:
        moved = await conn.execute(
            sa.update(execution.inputs)
            .where(execution.inputs.c.InputID.in_(moving[:3]))
            .values(Status="Assigned")
        )
        await journal_input_transition(conn, t, "Unassigned", "Assigned", moved.rowcount)
    with statements(database) as seen:
        async with database.transaction(RC) as conn:
            reading = await TRANSFORMATION.read(conn, {"TransformationID": t})
    assert len([s for s in seen if "CounterJournal" in s or "TransformationCounters" in s]) == 1
    assert dict(reading) == {
        (t, "Input", "Unassigned"): {"Count": 1},
        (t, "Input", "Assigned"): {"Count": 3},
    }
    assert reading[(t, "Parcel", "Done")] == {"Count": 0}
    async with database.transaction(RC) as conn:
        narrowed = await TRANSFORMATION.read(
            conn, {"TransformationID": [t, other], "Status": "Unassigned"}
        )
    assert dict(narrowed) == {
        (t, "Input", "Unassigned"): {"Count": 1},
        (other, "Input", "Unassigned"): {"Count": 2},
    }
    async with database.transaction(RC) as conn:
        with pytest.raises(InvalidArgument, match=r"where\.Colour"):
            await TRANSFORMATION.read(conn, {"Colour": "red"})


async def test_fold_moves_journal_into_counters_exactly(database: Database) -> None:
    await fold_all(database)
    async with database.transaction(RC) as conn:
        (t,) = await make_transformations(conn)
        ids = await add_inputs(conn, t, 6)
        await add_parcels(conn, t, 2)
        await add_parcels(conn, None, 3)  # user parcels: not counted
    for input_id in ids[:3]:
        async with database.transaction(RC) as conn:
            await conn.execute(
                sa.update(execution.inputs)
                .where(execution.inputs.c.InputID == input_id)
                .values(Status="Assigned")
            )
            await journal_input_transition(conn, t, "Unassigned", "Assigned", 1)
    # 3 creation rows (inputs, parcels; the user parcels journal nothing) + 3 x 2 move rows.
    first = await TRANSFORMATION.fold(database, batch=4)
    assert (first.folded, first.full) == (4, True)
    assert await fold_all(database, batch=4) == 4
    last = await TRANSFORMATION.fold(database, batch=4)
    assert (last.folded, last.full) == (0, False)
    async with database.transaction(RR) as conn:
        assert await table_rows(conn, JOURNAL, t) == 0
        reading = await TRANSFORMATION.read(conn, {"TransformationID": t})
        assert dict(reading) == await recount(conn, [t])
        stored = (
            await conn.execute(sa.select(COUNTERS).where(COUNTERS.c.TransformationID == t))
        ).all()
    assert {(r.Entity, r.Status): r.Count for r in stored} == {
        ("Input", "Unassigned"): 3,
        ("Input", "Assigned"): 3,
        ("Parcel", "Unassigned"): 2,
    }
    assert all(r.UpdatedAt is not None for r in stored)


async def test_fold_keeps_zero_rows(database: Database) -> None:
    async with database.transaction(RC) as conn:
        (t,) = await make_transformations(conn)
        await journal_inputs(conn, {(t, None, "Failed"): 2})
    await fold_all(database)
    async with database.transaction(RC) as conn:
        await journal_inputs(conn, {(t, "Failed", None): 2})
    await fold_all(database)
    async with database.transaction(RC) as conn:
        assert await table_rows(conn, COUNTERS, t) == 1  # the zero row stays
        assert dict(await TRANSFORMATION.read(conn, {"TransformationID": t})) == {}


async def test_fold_stages_its_ids_once_per_session_without_warnings(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """MariaDB: the claimed ids go through the session's temporary table, created once per
    connection, and the delete is driven from it; SQLite: an IN list. No server warning
    either way (a CREATE ... IF NOT EXISTS would leave a note on every fold, which the driver
    fetches with one more round trip and logs)."""
    await fold_all(database)
    async with database.transaction(RC) as conn:
        tids = await make_transformations(conn, 8)
        for t in tids:
            await journal_inputs(conn, {(t, None, "Unassigned"): 2})
            await journal_inputs(conn, {(t, "Unassigned", "Assigned"): 1})
    creates: dict[int, int] = {}

    def count_creates(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.startswith("CREATE TEMPORARY TABLE"):
            key = id(conn.connection.dbapi_connection)
            creates[key] = creates.get(key, 0) + 1

    sa.event.listen(database.engine.sync_engine, "before_cursor_execute", count_creates)
    try:
        with caplog.at_level(logging.WARNING), statements(database) as seen:
            result = await TRANSFORMATION.fold(database, batch=10)
            assert (result.folded, result.full) == (10, True)
            assert await fold_all(database, batch=10) == 14
    finally:
        sa.event.remove(database.engine.sync_engine, "before_cursor_execute", count_creates)
    assert not [r.getMessage() for r in caplog.records if r.name.startswith("asyncmy")]
    deletes = [s for s in seen if s.startswith("DELETE") and "CounterJournal" in s]
    if database.is_sqlite:
        assert not creates and all("IN (" in s for s in deletes)
    else:
        assert set(creates.values()) <= {1}
        assert deletes and all("STRAIGHT_JOIN" in s for s in deletes)
    async with database.transaction(RC) as conn:
        assert sum([await table_rows(conn, JOURNAL, t) for t in tids]) == 0
        reading = await TRANSFORMATION.read(conn, {"TransformationID": tids})
    assert dict(reading) == {
        **{(t, "Input", "Unassigned"): {"Count": 1} for t in tids},
        **{(t, "Input", "Assigned"): {"Count": 1} for t in tids},
    }
    await forget(database, tids)
    for batch in (0, 30_001):
        with pytest.raises(InvalidArgument, match="batch"):
            await TRANSFORMATION.fold(database, batch=batch)


async def test_rebuild_is_a_no_op_on_a_correct_counter(database: Database) -> None:
    async with database.transaction(RC) as conn:
        (t,) = await make_transformations(conn)
        await add_inputs(conn, t, 5)
        await add_parcels(conn, t, 2, status="Done")
    await TRANSFORMATION.fold(database, batch=1)  # part folded, part still journalled
    assert await TRANSFORMATION.rebuild(database, {"TransformationID": t}) == {}
    assert await TRANSFORMATION.rebuild(database) == {}


async def test_rebuild_repairs_injected_corruption_in_its_scope_only(database: Database) -> None:
    async with database.transaction(RC) as conn:
        t, bystander = await make_transformations(conn, 2)
        await add_inputs(conn, t, 5)
        await add_parcels(conn, t, 2)
        await add_inputs(conn, bystander, 1)
    await fold_all(database)
    async with database.transaction(RC) as conn:
        # A wrong counter row, a row for a key with nothing behind it, a lost journal row.
        await conn.execute(
            sa.update(COUNTERS)
            .where(COUNTERS.c.TransformationID == t, COUNTERS.c.Entity == "Input")
            .values(Count=COUNTERS.c.Count + 7)
        )
        await conn.execute(
            sa.insert(COUNTERS).values(
                TransformationID=t, Entity="Parcel", Status="Failed", Count=4, UpdatedAt=utcnow()
            )
        )
        await journal_parcels(conn, {(t, "Unassigned", "Done"): 1})  # no parcel moved
        await conn.execute(
            sa.update(COUNTERS).where(COUNTERS.c.TransformationID == bystander).values(Count=9)
        )
    corrections = await TRANSFORMATION.rebuild(database, {"TransformationID": t})
    assert corrections == {
        (t, "Input", "Unassigned"): {"Count": -7},
        (t, "Parcel", "Failed"): {"Count": -4},
        (t, "Parcel", "Unassigned"): {"Count": 1},
        (t, "Parcel", "Done"): {"Count": -1},
    }
    async with database.transaction(RR) as conn:
        assert dict(await TRANSFORMATION.read(conn, {"TransformationID": t})) == await recount(
            conn, [t]
        )
        # Outside the scope nothing was touched.
        assert (await TRANSFORMATION.read(conn, {"TransformationID": bystander}))[
            (bystander, "Input", "Unassigned")
        ] == {"Count": 9}
    assert await TRANSFORMATION.rebuild(database, {"TransformationID": t}) == {}
    await TRANSFORMATION.rebuild(database, {"TransformationID": bystander})


async def test_delete_scope_removes_one_transformation_only(database: Database) -> None:
    async with database.transaction(RC) as conn:
        gone, kept = await make_transformations(conn, 2)
        await add_inputs(conn, gone, 3)
        await add_parcels(conn, gone, 1)
        kept_inputs = await add_inputs(conn, kept, 3)
        await add_parcels(conn, kept, 1)
    await fold_all(database)
    async with database.transaction(RC) as conn:
        await journal_input_transition(conn, gone, "Unassigned", "Assigned", 1)
        await conn.execute(
            sa.update(execution.inputs)
            .where(execution.inputs.c.InputID == kept_inputs[0])
            .values(Status="Assigned")
        )
        await journal_input_transition(conn, kept, "Unassigned", "Assigned", 1)
        # The cleaning deletes the counted rows first, journalling nothing.
        for table in (execution.inputs, execution.parcels):
            await conn.execute(sa.delete(table).where(table.c.TransformationID == gone))
    deleted = await TRANSFORMATION.delete_scope(database, {"TransformationID": gone})
    assert deleted == 4  # two counter rows, two journal rows
    async with database.transaction(RR) as conn:
        assert await table_rows(conn, COUNTERS, gone) == 0
        assert await table_rows(conn, JOURNAL, gone) == 0
        assert dict(await TRANSFORMATION.read(conn, {"TransformationID": kept})) == await recount(
            conn, [kept]
        )
        assert await table_rows(conn, JOURNAL, kept) == 2
    with pytest.raises(InvalidArgument):
        await TRANSFORMATION.delete_scope(database, {})


async def test_a_negative_read_raises_the_drift_signal(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    async with database.transaction(RC) as conn:
        healthy, drifted = await make_transformations(conn, 2)
        await add_inputs(conn, healthy, 2)
        await add_inputs(conn, drifted, 1)
        await TRANSFORMATION.journal(conn, {(drifted, "Input", "Unassigned"): (-3,)})
    seen: list[Drift] = []
    unsubscribe = on_drift(seen.append)
    try:
        async with database.transaction(RC) as conn:
            fine = await TRANSFORMATION.read(conn, {"TransformationID": healthy})
            assert seen == [] and fine.negative == []
            with caplog.at_level(logging.ERROR, logger="dxts.core.counters.construct"):
                reading = await TRANSFORMATION.read(conn, {"TransformationID": drifted})
    finally:
        unsubscribe()
    key = (drifted, "Input", "Unassigned")
    assert reading.negative == [key]
    assert reading[key] == {"Count": -2}
    assert seen == [Drift("Transformation", key, {"Count": -2})]
    assert any("drifted" in r.getMessage() for r in caplog.records)
    # The rebuild is the repair the alert leads to.
    assert await TRANSFORMATION.rebuild(database, {"TransformationID": drifted}) == {
        key: {"Count": 3}
    }


async def test_a_failing_drift_listener_does_not_fail_the_read(database: Database) -> None:
    async with database.transaction(RC) as conn:
        (t,) = await make_transformations(conn)
        await journal_inputs(conn, {(t, "Failed", None): 1})

    def broken(drift: Drift) -> None:
        raise RuntimeError("listener bug")

    unsubscribe = on_drift(broken)
    try:
        async with database.transaction(RC) as conn:
            reading = await TRANSFORMATION.read(conn, {"TransformationID": t})
    finally:
        unsubscribe()
    assert reading.negative == [(t, "Input", "Failed")]
    await TRANSFORMATION.rebuild(database, {"TransformationID": t})


async def test_missing_lock_rows_are_refused_not_ignored(database: Database) -> None:
    async with database.transaction(RC) as conn:
        await conn.execute(sa.delete(counter_locks).where(counter_locks.c.Operation == "fold"))
    try:
        with pytest.raises(FailedPrecondition, match="CounterLocks"):
            await TRANSFORMATION.fold(database)
        with pytest.raises(FailedPrecondition, match="CounterLocks"):
            await TRANSFORMATION.delete_scope(database, {"TransformationID": new_id()})
    finally:
        async with database.transaction(RC) as conn:
            await ensure_lock_rows(conn)
    await TRANSFORMATION.fold(database)


async def test_data_parcels_counter_moves_quantities_with_the_parcel(database: Database) -> None:
    async with database.transaction(RC) as conn:
        (t,) = await make_transformations(conn)
        replicate = {
            "CERN-TAPE": StorageDelta(3, 3000, 0, 0),
            "RAL-DISK": StorageDelta(3, 3000, 0, 0),
        }
        removal = {"CERN-DISK": StorageDelta(0, 0, 2, 500)}
        moved = await add_data_parcel(conn, t, replicate)
        await add_data_parcel(conn, t, removal)
    await DATA_PARCELS.fold(database, batch=1)
    async with database.transaction(RC) as conn:
        await conn.execute(
            sa.update(execution.parcels)
            .where(execution.parcels.c.ParcelID == moved)
            .values(Status="Reserved")
        )
        await journal_data_parcels(
            conn, {(t, "Unassigned", "Reserved", se): d for se, d in replicate.items()}
        )
    async with database.transaction(RR) as conn:
        reading = await DATA_PARCELS.read(conn, {"TransformationID": t})
        assert dict(reading) == await recount_data(conn, [t])
        tape = await DATA_PARCELS.read(conn, {"StorageElement": "CERN-TAPE"})
    assert reading[(t, "Reserved", "CERN-TAPE")] == {
        "LFNCountAdded": 3,
        "LFNSizeAdded": 3000,
        "LFNCountFreed": 0,
        "LFNSizeFreed": 0,
    }
    assert reading[(t, "Unassigned", "CERN-DISK")]["LFNSizeFreed"] == 500
    assert list(tape) == [(t, "Reserved", "CERN-TAPE")]
    assert await DATA_PARCELS.rebuild(database, {"TransformationID": t}) == {}
    await fold_all(database, DATA_PARCELS)
    async with database.transaction(RR) as conn:
        assert dict(await DATA_PARCELS.read(conn, {"TransformationID": t})) == await recount_data(
            conn, [t]
        )


async def test_data_helper_refuses_negative_quantities(database: Database) -> None:
    async with database.transaction(RC) as conn:
        with pytest.raises(InvalidArgument, match=r"moves\[0\].delta"):
            await journal_data_parcels(
                conn, {(new_id(), None, "Unassigned", "SE"): StorageDelta(-1, 0, 0, 0)}
            )
