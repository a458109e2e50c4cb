"""The counters under concurrency: exact reads beside writers, folds and rebuilds; who waits.

The load test runs on both backends (SQLite with its one writer); the locking proofs need
several real connections to MariaDB.
"""

from __future__ import annotations

import asyncio
import functools
import random

import pytest
import sqlalchemy as sa
from counted_rows import (
    add_inputs,
    add_parcels,
    fold_all,
    make_transformations,
    recount,
    table_rows,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.counters import (
    TRANSFORMATION,
    journal_input_transition,
    journal_inputs,
    journal_parcel_transition,
)
from dxts.core.db import Database, Isolation, mysql_error_code, utcnow
from dxts.core.schema import execution

RC, RR = Isolation.READ_COMMITTED, Isolation.REPEATABLE_READ
inputs, parcels = execution.inputs, execution.parcels
JOURNAL = TRANSFORMATION.journal_table
LOCK_WAIT_TIMEOUT = 1205

INPUT_MOVES = [
    ("Unassigned", "Assigned"),
    ("Assigned", "Processed"),
    ("Assigned", "Failed"),
    ("Failed", "Unassigned"),
    ("Assigned", "Unassigned"),
    ("Unassigned", "Problematic"),
    ("Problematic", "Unassigned"),
]
PARCEL_MOVES = [
    ("Unassigned", "Reserved"),
    ("Reserved", "Assigned"),
    ("Reserved", "Unassigned"),
    ("Assigned", "Completing"),
    ("Completing", "Done"),
]


async def move_inputs(
    conn: AsyncConnection, tid: bytes, picked: list[bytes], old: str, new: str
) -> int:
    """A writer's transition: conditional UPDATE, then journal what its row count says."""
    moved = await conn.execute(
        sa.update(inputs)
        .where(inputs.c.TransformationID == tid, inputs.c.InputID.in_(picked))
        .where(inputs.c.Status == old)
        .values(Status=new, UpdatedAt=utcnow())
    )
    await journal_input_transition(conn, tid, old, new, moved.rowcount)
    return int(moved.rowcount)


async def writer_round(
    conn: AsyncConnection,
    *,
    tid: bytes,
    picked: list[bytes],
    move: tuple[str, str],
    parcel_move: tuple[str, str] | None,
) -> None:
    """One writer transaction: move some inputs, then create parcels or move them."""
    await move_inputs(conn, tid, picked, *move)
    if parcel_move is None:
        await add_parcels(conn, tid, 2)
        return
    old, new = parcel_move
    moved = await conn.execute(
        sa.update(parcels)
        .where(parcels.c.TransformationID == tid, parcels.c.Status == old)
        .values(Status=new, UpdatedAt=utcnow())
    )
    await journal_parcel_transition(conn, tid, old, new, moved.rowcount)


async def test_reads_are_exact_beside_writers_folds_and_a_rebuild(database: Database) -> None:
    """Writers move inputs and parcels between statuses with conditional UPDATEs and journal
    what their row counts say, folds run continuously and one scoped rebuild runs halfway.
    Writer 0 stops every fifth round for a checkpoint (the others and the folds carry on):
    read() and COUNT(*) ... GROUP BY in one REPEATABLE READ snapshot must agree on every key."""
    writers, rounds = (1, 30) if database.is_sqlite else (4, 25)
    async with database.transaction(RC) as conn:
        tids = await make_transformations(conn, 3)
        pool = {t: await add_inputs(conn, t, 40) for t in tids}
    stop, folding, halfway = asyncio.Event(), asyncio.Event(), asyncio.Event()
    checkpoints = 0

    async def checkpoint() -> None:
        nonlocal checkpoints
        async with database.transaction(RR) as conn:
            truth = await recount(conn, tids)
            reading = await TRANSFORMATION.read(conn, {"TransformationID": tids})
        assert dict(reading) == truth
        checkpoints += 1

    async def writer(seed: int) -> None:
        rng = random.Random(seed)
        for round_ in range(rounds):
            tid = rng.choice(tids)
            picked = rng.sample(pool[tid], 8)
            # Create parcels in about a third of the rounds, move existing ones otherwise.
            parcel_move = None if rng.random() < 0.3 else rng.choice(PARCEL_MOVES)
            work = functools.partial(
                writer_round,
                tid=tid,
                picked=picked,
                move=rng.choice(INPUT_MOVES),
                parcel_move=parcel_move,
            )
            await database.run(work, isolation=RC)
            if seed == 0 and round_ == rounds // 2:
                await asyncio.wait_for(folding.wait(), 30)  # folds are running beside us
                halfway.set()
            if seed == 0 and round_ % 5 == 4:
                await checkpoint()
            await asyncio.sleep(0)

    async def folder() -> None:
        while not stop.is_set():
            if (await TRANSFORMATION.fold(database, batch=7)).folded:
                folding.set()
            await asyncio.sleep(0)

    async def rebuild() -> dict[object, object]:
        await halfway.wait()
        return await TRANSFORMATION.rebuild(database, {"TransformationID": tids[0]})

    folds = asyncio.create_task(folder())
    rebuilding = asyncio.create_task(rebuild())
    try:
        await asyncio.gather(*(writer(seed) for seed in range(writers)))
        corrections = await rebuilding
    finally:
        stop.set()
        await folds
    assert corrections == {}  # a correct counter, whatever was in flight around the snapshot
    assert checkpoints == rounds // 5
    await fold_all(database)
    async with database.transaction(RR) as conn:
        assert sum([await table_rows(conn, JOURNAL, t) for t in tids]) == 0
        assert dict(await TRANSFORMATION.read(conn, {"TransformationID": tids})) == await recount(
            conn, tids
        )


# -- MariaDB: what waits for what ------------------------------------------------------------


async def journal_ids(conn: AsyncConnection, tid: bytes) -> list[int]:
    rows = await conn.execute(
        sa.select(JOURNAL.c.JournalID)
        .where(JOURNAL.c.TransformationID == tid)
        .order_by(JOURNAL.c.JournalID)
    )
    return list(rows.scalars())


BEFORE, AFTER = ("Unassigned", "Assigned", "Processed"), ("Split", "Problematic", "NotProcessed")


async def test_fold_deletes_exactly_its_ids_beside_an_uncommitted_row(mariadb: Database) -> None:
    """An uncommitted writer's row sits between two committed ones in a small journal: the
    fold claims the two, folds them and deletes exactly them, without waiting for the writer.

    On a journal this small MariaDB plans `DELETE ... WHERE JournalID IN (...)` (and a join it
    may reorder) as a scan, which at READ COMMITTED waits on the uncommitted row: this is what
    the fold's STRAIGHT_JOIN delete from its claim table exists for.
    """
    async with mariadb.transaction(RC) as conn:
        (t,) = await make_transformations(conn)
    await fold_all(mariadb)
    async with mariadb.transaction(RC) as conn:
        await conn.execute(sa.text(f"ANALYZE TABLE `{JOURNAL.name}`"))
        await journal_inputs(conn, {(t, None, status): 1 for status in BEFORE})
    async with mariadb.transaction(RC) as held:
        await journal_inputs(held, {(t, None, "Failed"): 1})
        *before, skipped = await journal_ids(held, t)
        async with mariadb.transaction(RC) as conn:
            await journal_inputs(conn, {(t, None, status): 1 for status in AFTER})
        async with mariadb.transaction(RC) as conn:
            committed = await journal_ids(conn, t)  # the held row is invisible here
        assert committed[:3] == before and max(before) < skipped < min(committed[3:])
        # A delete that scanned (or took the id range) would wait on the held row until the
        # server's lock wait timeout: the bound only turns such a hang into a failure.
        result = await asyncio.wait_for(TRANSFORMATION.fold(mariadb, batch=10), 10)
        assert (result.folded, result.full) == (6, False)
    async with mariadb.transaction(RR) as conn:
        assert await journal_ids(conn, t) == [skipped]
        assert dict(await TRANSFORMATION.read(conn, {"TransformationID": t})) == {
            (t, "Input", status): {"Count": 1} for status in (*BEFORE, "Failed", *AFTER)
        }
    await TRANSFORMATION.delete_scope(mariadb, {"TransformationID": t})


async def row_lock_waits(database: Database) -> int:
    async with database.transaction(RC) as conn:
        row = (await conn.execute(sa.text("SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_waits'"))).one()
    return int(row[1])


@pytest.mark.parametrize(("isolation", "writer_waits"), [(RR, True), (RC, False)])
async def test_the_claims_isolation_decides_whether_a_writer_waits(
    mariadb: Database, mysql_test_url: str, isolation: Isolation, writer_waits: bool
) -> None:
    """The fold's own claim statement, held open: at REPEATABLE READ its next-key locks reach
    the end of the journal's index and a writer's journal insert waits (here: times out after
    the session's one second); at READ COMMITTED the same insert goes straight in."""
    async with mariadb.transaction(RC) as conn:
        (t,) = await make_transformations(conn)
        await journal_inputs(conn, {(t, None, "Unassigned"): 3})
    writer_db = Database(mysql_test_url)  # its own pool: the session setting dies with it
    await writer_db.start()

    async def write() -> None:
        async with writer_db.transaction(RC) as conn:
            await conn.execute(sa.text("SET SESSION innodb_lock_wait_timeout = 1"))
            await journal_inputs(conn, {(t, "Unassigned", "Assigned"): 1})

    try:
        waits_before = await row_lock_waits(mariadb)
        async with mariadb.transaction(isolation) as folder:
            assert await TRANSFORMATION.claim(folder, batch=1_000_000)
            if writer_waits:
                with pytest.raises(sa.exc.OperationalError) as waited:
                    await write()
                assert mysql_error_code(waited.value) == LOCK_WAIT_TIMEOUT
            else:
                await write()
        if writer_waits:  # the status counter the next test relies on does see such waits
            assert await row_lock_waits(mariadb) > waits_before
    finally:
        await writer_db.dispose()
    async with mariadb.transaction(RC) as conn:
        assert len(await journal_ids(conn, t)) == (1 if writer_waits else 3)
    await TRANSFORMATION.delete_scope(mariadb, {"TransformationID": t})


async def test_folds_at_read_committed_make_no_writer_wait(mariadb: Database) -> None:
    """Innodb_row_lock_waits over a window of writers (each on its own transformation, so
    they cannot wait on each other) with folds running continuously: no wait.

    The status counter is server-wide and other sessions on a shared server may add to it, so
    up to three windows are tried; a wait the fold caused would show in every one of them.
    """
    writers, rounds = 4, 15
    async with mariadb.transaction(RC) as conn:
        tids = await make_transformations(conn, writers)
        pool = {t: await add_inputs(conn, t, 20) for t in tids}

    async def writer(tid: bytes) -> None:
        rng = random.Random(tid)
        for _ in range(rounds):
            old, new = rng.choice(INPUT_MOVES)
            picked = rng.sample(pool[tid], 5)
            work = functools.partial(move_inputs, tid=tid, picked=picked, old=old, new=new)
            await mariadb.run(work, isolation=RC)
            await asyncio.sleep(0)

    async def window() -> tuple[int, int]:
        stop = asyncio.Event()
        folded = 0

        async def folder() -> None:
            nonlocal folded
            while not stop.is_set():
                folded += (await TRANSFORMATION.fold(mariadb, batch=5)).folded
                await asyncio.sleep(0)

        before = await row_lock_waits(mariadb)
        folding = asyncio.create_task(folder())
        try:
            await asyncio.gather(*(writer(t) for t in tids))
        finally:
            stop.set()
            await folding
        return await row_lock_waits(mariadb) - before, folded

    for _ in range(3):
        waits, folded = await window()
        assert folded > 0  # the folds really ran beside the writers
        if waits == 0:
            break
    assert waits == 0
    await fold_all(mariadb)
    async with mariadb.transaction(RR) as conn:
        assert dict(await TRANSFORMATION.read(conn, {"TransformationID": tids})) == await recount(
            conn, tids
        )


async def test_a_rebuild_racing_folds_leaves_the_read_exact(mariadb: Database) -> None:
    async with mariadb.transaction(RC) as conn:
        tids = await make_transformations(conn, 2)
        pool = {t: await add_inputs(conn, t, 30) for t in tids}
    await fold_all(mariadb)
    corrupted = (tids[0], "Input", "Unassigned")
    async with mariadb.transaction(RC) as conn:
        await conn.execute(
            sa.update(TRANSFORMATION.counters_table)
            .where(TRANSFORMATION.counters_table.c.TransformationID == tids[0])
            .values(Count=TRANSFORMATION.counters_table.c.Count + 5)
        )
    for t in tids:  # a deep journal for the folds to chew on during the rebuilds
        for input_id in pool[t][:20]:
            async with mariadb.transaction(RC) as conn:
                await move_inputs(conn, t, [input_id], "Unassigned", "Assigned")

    stop = asyncio.Event()
    folded = 0

    async def folder() -> None:
        nonlocal folded
        while not stop.is_set():
            folded += (await TRANSFORMATION.fold(mariadb, batch=3)).folded
            await asyncio.sleep(0)

    folding = asyncio.create_task(folder())
    try:
        results = [
            await TRANSFORMATION.rebuild(mariadb, {"TransformationID": tids}) for _ in range(3)
        ]
    finally:
        stop.set()
        await folding
    assert folded > 0
    assert results == [{corrupted: {"Count": -5}}, {}, {}]
    async with mariadb.transaction(RR) as conn:
        assert dict(await TRANSFORMATION.read(conn, {"TransformationID": tids})) == await recount(
            conn, tids
        )


async def blocked_on_the_rebuild_lock(database: Database) -> bool:
    """A session of this test database is inside its statement taking the `rebuild` row.

    Read from PROCESSLIST: MariaDB takes that primary-key row while optimising the statement
    (state "Statistics"), before the wait shows in INNODB_TRX.
    """
    async with database.transaction(RC) as conn:
        found = await conn.scalar(
            sa.text(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                "WHERE DB = DATABASE() AND COMMAND = 'Query' AND ID <> CONNECTION_ID() "
                "AND INFO LIKE '%FROM `CounterLocks`%''rebuild''%FOR UPDATE%'"
            )
        )
    return bool(found)


async def test_delete_scope_waits_for_a_running_rebuild_of_its_scope(
    mariadb: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rebuild has read its snapshot (where the cleaned rows are already gone) and is about
    to journal its corrections when delete_scope starts: delete_scope must wait for it, or the
    corrections would land after the delete and the scope would read negative forever."""
    async with mariadb.transaction(RC) as conn:
        gone, kept = await make_transformations(conn, 2)
        await add_inputs(conn, gone, 5)
        await add_inputs(conn, kept, 4)
    await fold_all(mariadb)
    async with mariadb.transaction(RC) as conn:
        await conn.execute(sa.delete(inputs).where(inputs.c.TransformationID == gone))

    snapshot_read, resume = asyncio.Event(), asyncio.Event()
    journal = TRANSFORMATION.journal

    async def pause_before_journalling(conn: AsyncConnection, deltas: object) -> int:
        snapshot_read.set()
        await resume.wait()
        return await journal(conn, deltas)  # type: ignore[arg-type]

    monkeypatch.setattr(TRANSFORMATION, "journal", pause_before_journalling)
    rebuilding = asyncio.create_task(TRANSFORMATION.rebuild(mariadb, {"TransformationID": gone}))
    deleting: asyncio.Task[int] | None = None
    try:
        await snapshot_read.wait()
        deleting = asyncio.create_task(
            TRANSFORMATION.delete_scope(mariadb, {"TransformationID": gone})
        )
        for _ in range(400):
            if await blocked_on_the_rebuild_lock(mariadb):
                break
            await asyncio.sleep(0.025)
        else:
            pytest.fail("delete_scope never waited on the rebuild's lock")
        assert not deleting.done()
        resume.set()
        assert await rebuilding == {(gone, "Input", "Unassigned"): {"Count": -5}}
        await deleting
    finally:  # never leave a transaction open behind a failed assertion
        resume.set()
        await asyncio.gather(rebuilding, *([deleting] if deleting else []), return_exceptions=True)
    async with mariadb.transaction(RR) as conn:
        assert await table_rows(conn, TRANSFORMATION.counters_table, gone) == 0
        assert await table_rows(conn, JOURNAL, gone) == 0
        assert dict(await TRANSFORMATION.read(conn, {"TransformationID": kept})) == await recount(
            conn, [kept]
        )
