"""Forward lineage: what was made from a file, through every step (the other direction of
`operations.provenance`).

Level 1 is every input, in any transformation, whose LFN is the file, with each parcel that
carried it and what that parcel produced; level 2 does the same for those products, and so on.
Each level is a handful of bulk statements (`store.lineage`, then the parcels and their outputs
by id), never one per file. The walk is bounded: `max_depth` levels (0: every level) and at most
`LINEAGE_RECORDS` records in all (`truncated` says the bound was met). A page is a slice of the
walk in its order (level, then LFN, transformation, input, parcel): the token names the last
record given, and the next page walks again up to it — the bound keeps that cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dxts.core.db import Database, Isolation, Transaction
from dxts.core.errors import InvalidArgument
from dxts.execution.records import InputRecord, ParcelRecord
from dxts.execution.store import lineage as db
from dxts.execution.store.operations import OutputRow, outputs_of, parcel_rows
from dxts.execution.store.queries import input_row

LINEAGE_RECORDS = 10_000  # a walk stops growing here
Key = tuple[int, str, bytes, bytes, bytes]


@dataclass(frozen=True)
class DescendantRecord:
    """One input that took a descendant file in, at `depth` (1: the file itself), with one
    parcel that carried it (None: not packed yet) and what that parcel produced."""

    depth: int
    input: InputRecord
    parcel: ParcelRecord | None  # with its ProcessID
    outputs: list[OutputRow]

    @property
    def key(self) -> Key:
        parcel = self.parcel.parcel_id if self.parcel is not None else b""
        row = self.input
        return (self.depth, row.lfn or "", row.transformation_id, row.input_id, parcel)


@dataclass(frozen=True)
class Walk:
    records: list[DescendantRecord]
    truncated: bool  # the walk met LINEAGE_RECORDS before its end


async def descendants(
    database: Database,
    lfn: str,
    *,
    max_depth: int = 0,
    start: tuple[bytes, bytes] | None = None,
) -> Walk:
    """Every record of the walk from `lfn`, in order, up to the bounds. With `start`, a
    (TransformationID, InputID), the walk starts from that one input instead (level 1), which
    need not have an LFN: a simulation's seed has none, yet what was made from it has."""
    if not lfn and start is None:
        raise InvalidArgument("required (or transformation_id and input_id)", field="lfn")
    if max_depth < 0:
        raise InvalidArgument("must not be negative", field="max_depth")

    async def work(conn: Transaction) -> Walk:
        records: list[DescendantRecord] = []
        seen: set[str] = {lfn} if lfn else set()
        wanted, depth = [lfn], 1
        first: list[InputRecord] | None = None
        if start is not None:
            found = await input_row(conn, *start)
            if found is None:
                return Walk([], truncated=False)
            first = [found]
            seen |= {found.lfn} if found.lfn else set()
        while wanted:
            level = await _level(conn, wanted, depth, readers=first)
            first = None
            records.extend(level)
            if len(records) >= LINEAGE_RECORDS:
                return Walk(records[:LINEAGE_RECORDS], truncated=True)
            if max_depth and depth >= max_depth:
                break
            made = {o.lfn for r in level for o in r.outputs} - seen
            seen |= made
            wanted, depth = sorted(made), depth + 1
        return Walk(records, truncated=False)

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def _level(
    conn: Transaction, lfns: list[str], depth: int, *, readers: list[InputRecord] | None = None
) -> list[DescendantRecord]:
    """The records of one level: the inputs that are `lfns` (or the `readers` given)."""
    if readers is None:
        readers = await db.readers_of(conn, lfns)
    carried = await db.parcels_carrying(conn, [(r.transformation_id, r.input_id) for r in readers])
    parcel_ids = sorted({p for ids in carried.values() for p in ids})
    rows = await parcel_rows(conn, parcel_ids)
    made: dict[bytes, list[OutputRow]] = {}
    for output in await outputs_of(conn, parcel_ids):
        made.setdefault(output.parcel_id, []).append(output)
    records = []
    for reader in readers:
        ids = carried.get((reader.transformation_id, reader.input_id), [])
        if not ids:
            records.append(DescendantRecord(depth, reader, None, []))
        for parcel_id in ids:
            records.append(
                DescendantRecord(depth, reader, rows[parcel_id], made.get(parcel_id, []))
            )
    return records


def position(key: Key) -> dict[str, Any]:
    """A record's place in the walk, as a page token holds it."""
    depth, lfn, *ids = key
    return {"depth": depth, "lfn": lfn, "ids": [i.hex() for i in ids]}


def resume_key(position: dict[str, Any] | None, *, field: str) -> Key | None:
    """The key a page starts after (None: the first page); INVALID_ARGUMENT on a token that
    does not hold one."""
    if position is None:
        return None
    try:
        t, i, p = (bytes.fromhex(text) for text in position["ids"])
        return (int(position["depth"]), str(position["lfn"]), t, i, p)
    except (KeyError, TypeError, ValueError):
        raise InvalidArgument("not a page token this server issued", field=field) from None
