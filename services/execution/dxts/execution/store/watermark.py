"""SQL of the Edge feeder's commit-safe watermark over ParcelOutputs.

An OutputID is minted before its row commits, so a reader that took the largest OutputID it
saw as its bookmark could later miss a row minted earlier and committed after. The protocol
that rules it out uses execution's OutputWatermarks row of the declared output as a
reader-writer lock:

* a recording transaction takes it shared (`hold_outputs`) for every output it writes under,
  before minting, and keeps it until it commits or rolls back; it then reads the largest
  OutputID committed under those outputs and mints after it (`dxts.core.ids.mint_after`). The
  rows are created put-if-absent before the first recording (`create_lock_rows`), or by the
  recording that finds one missing;
* the feeder takes it exclusively (`settled_through`), which waits for every recording
  transaction holding it to end, and reads the largest committed OutputID M under the output
  with a locking read (the latest committed version, at READ COMMITTED or REPEATABLE READ).
  A row being created is an uncommitted index record, which the feeder's locking read waits
  for too; a row not there at all means no recording holds the output, and one that creates
  it after the feeder's read mints after what it then finds committed, as below.

Every row with OutputID <= M is then committed: its transaction minted it before the feeder's
exclusive lock was granted, so ended first (a rolled-back one left nothing). Every row committed
later was minted by a transaction whose shared lock came after the feeder's release, which read
M among the committed rows and minted after it. So feeding (bookmark, M] and moving the bookmark
to M never skips a row, at any clock skew between replicas. Shared holders never wait for each
other. On SQLite every transaction begins IMMEDIATE, a single writer, which gives the same
order without the row locks (SQLAlchemy renders no locking clause there).
"""

from __future__ import annotations

from collections.abc import Collection

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.schema.execution import output_watermarks, parcel_outputs

_lock_row = output_watermarks.c.TransformationOutputID
_produced = parcel_outputs.c


async def _share(conn: AsyncConnection, output_ids: list[bytes]) -> set[bytes]:
    """Lock the lock rows of `output_ids` shared; the ones that exist."""
    held = await conn.scalars(
        sa.select(_lock_row)
        .where(_lock_row.in_(output_ids))
        .order_by(_lock_row)
        .with_for_update(read=True)
    )
    return {bytes(output_id) for output_id in held}


async def create_lock_rows(conn: AsyncConnection, output_ids: Collection[bytes]) -> None:
    """Put the lock rows of `output_ids` if absent, holding them exclusively until commit. Run
    it in a short transaction of its own before anything is recorded under the outputs (the
    packer's round does, for every transformation it packs): created by recording
    transactions racing each other, the row is contended and they can deadlock (and run again).
    A no-op update rather than INSERT IGNORE on MariaDB, which would swallow real errors."""
    rows = [{"TransformationOutputID": output_id} for output_id in sorted(output_ids)]
    if conn.dialect.name == "sqlite":
        await conn.execute(sqlite.insert(output_watermarks).on_conflict_do_nothing(), rows)
        return
    statement = mysql.insert(output_watermarks)
    key = statement.inserted.TransformationOutputID
    await conn.execute(statement.on_duplicate_key_update(TransformationOutputID=key), rows)


async def hold_outputs(conn: AsyncConnection, output_ids: Collection[bytes]) -> bytes | None:
    """Lock the declared outputs shared until the transaction ends and return the largest
    OutputID committed under any of them (None: none yet). Call it before minting OutputIDs
    under them, and mint after what it returns. The caller's transaction is READ COMMITTED,
    so the read sees every row committed before the lock was granted."""
    if not output_ids:
        return None
    wanted = sorted(output_ids)  # one order for every holder
    missing = [o for o in wanted if o not in await _share(conn, wanted)]
    if missing:  # the first recordings under these outputs
        await create_lock_rows(conn, missing)
    # Grouped, the largest of each output is one index probe (a loose index scan); a MAX over
    # the IN list would scan every row of every output.
    largest = await conn.execute(
        sa.select(sa.func.max(_produced.OutputID))
        .where(_produced.TransformationOutputID.in_(wanted))
        .group_by(_produced.TransformationOutputID)
    )
    return max((bytes(row[0]) for row in largest), default=None)


async def settled_through(conn: AsyncConnection, output_id: bytes) -> bytes | None:
    """The largest OutputID under the output below which every row is committed and none will
    ever be added (None: no row yet). Waits for the recording transactions writing under it;
    run it in a transaction of its own, which holds the output no longer than this read."""
    await conn.execute(sa.select(_lock_row).where(_lock_row == output_id).with_for_update())
    # The last entry of the output's key range, one row read: a locking MAX() reads (and
    # share-locks) every row of the output, a cost per read that grows with the run.
    return await conn.scalar(
        sa.select(_produced.OutputID)
        .where(_produced.TransformationOutputID == output_id)
        .order_by(_produced.OutputID.desc())
        .limit(1)
        .with_for_update(read=True)
    )
