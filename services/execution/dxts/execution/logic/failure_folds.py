"""GroupFailures' memory: each transformation's failed parcels, folded once, then kept up to
date by folding in only the parcels that failed since.

Why: grouping failures in the database reads every failed parcel's JSON outcome, on every
page view (two seconds on MariaDB at 100,000 failures). The schema has no summary table and
gets none. But a failed parcel never changes what it is grouped on nor when it failed (Failed
is terminal; the retry directive a hook adds later to its annotations touches neither), so a
failure counted once stays counted, and only the new ones need reading.

Exact, not nearly so. Each read runs in the caller's snapshot and compares what is folded with
the transformation's counter of Failed parcels (journalled in the very transaction that moved
each parcel to Failed, docs/counters.md), read in that snapshot:

* equal: what is folded is a subset of the snapshot's failed parcels (none is ever un-failed,
  and while the transformation is not in a state its rows may be deleted in, none is deleted)
  of the same size, so it is that set; nothing is read;
* different: the parcels failed at or after the latest failure folded, less `MARGIN`, are read
  (their ids first, from the index and the rows' times, no JSON; then the annotations of the
  ones not folded yet: `recent` remembers the ids folded in that margin). A parcel whose
  transaction committed more than `MARGIN` after it failed could be missed; the count then
  still differs, and the transformation is folded again in full;
* a transformation that may be being cleaned (archiving, cancelling, or after: cleaning deletes
  its rows before its counter) is folded in full on every read and not kept.

One lock: reads take turns, so two never fold the same parcels (and each compares in its own
snapshot, taken under the lock). Memory: eight bytes a failure, plus each distinct reason
(words normalised as they are folded: a message naming its seed is one reason, not one per
seed) with its latest words; what is folded lives as long as the process, and a new process
folds again on first ask.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
from bisect import insort
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from dxts.core.adaptor.failures import normalise
from dxts.core.counters import TRANSFORMATION
from dxts.core.counters.instances import Entity
from dxts.core.db import Transaction
from dxts.core.states import ParcelStatus, TransformationStatus
from dxts.execution.store import failures as db
from dxts.execution.store.failures import FailedRow, FailureKey

MARGIN = timedelta(minutes=5)  # how late a failure's commit may be and still be caught up with
KEPT_EXAMPLES = 10  # the latest failures kept per reason: GroupFailures' most examples
NO_MESSAGE = "(no message)"
_EPOCH = datetime(1970, 1, 1)
T = TransformationStatus
# Where cleaning may delete a transformation's rows (before its counter), or has.
CLEANABLE = frozenset(
    {T.ARCHIVING, T.ARCHIVING_BLOCKED, T.ARCHIVED, T.CANCELLING, T.CANCELLING_BLOCKED, T.CANCELLED}
)


def micros(moment: datetime) -> int:
    """A moment as microseconds since the epoch, UTC (the database's are naive UTC)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return (moment - _EPOCH) // timedelta(microseconds=1)


def moment(micros_: int) -> datetime:
    """The naive UTC moment of `micros`."""
    return _EPOCH + timedelta(microseconds=micros_)


class Reason(NamedTuple):
    """What failed parcels are counted by: alike once their words are normalised, so that a
    tool naming its seed, path or id in every message takes one entry, not one per failure."""

    transformation_id: bytes
    backend: str
    failure_class: str
    site: str
    reason: str  # the normalised words
    exit_code: int | None


@functools.lru_cache(maxsize=4096)
def _normalised(words: str) -> str:
    """`normalise` once per distinct message (the same words recur across folds)."""
    return normalise(words)


def reason_of(key: FailureKey) -> Reason:
    return Reason(
        key.transformation_id,
        key.backend,
        key.failure_class,
        key.site,
        _normalised(key.words or NO_MESSAGE),
        key.exit_code,
    )


@dataclass
class Alike:
    """A transformation's failed parcels alike (one `Reason`)."""

    times: list[int] = field(default_factory=list)  # when each failed, ascending
    latest: list[tuple[int, bytes]] = field(default_factory=list)  # (when, ParcelID), latest first
    message: tuple[int, bytes, str] = (-1, b"", "")  # the latest failure's (when, ParcelID, words)

    def add(self, found: Sequence[tuple[int, bytes, str]]) -> None:
        if len(found) < 64:
            for at, _, _ in found:
                insort(self.times, at)
        else:
            self.times = sorted([*self.times, *(at for at, _, _ in found)])
        self.latest = heapq.nlargest(KEPT_EXAMPLES, [*self.latest, *((a, p) for a, p, _ in found)])
        newest = max(found, key=lambda f: f[:2])
        if newest[:2] > self.message[:2]:
            self.message = newest


@dataclass
class Folded:
    """One transformation's failed parcels as folded so far."""

    alike: dict[Reason, Alike] = field(default_factory=dict)
    count: int = 0
    watermark: int | None = None  # the latest failure folded
    recent: dict[bytes, int] = field(default_factory=dict)  # folded at or after watermark - MARGIN

    def fold(self, rows: Iterable[FailedRow]) -> None:
        by_key: dict[Reason, list[tuple[int, bytes, str]]] = {}
        for row in rows:
            if row.parcel_id in self.recent:
                continue
            at = micros(row.failed_at)
            words = row.key.words or NO_MESSAGE
            by_key.setdefault(reason_of(row.key), []).append((at, row.parcel_id, words))
            self.recent[row.parcel_id] = at
            self.count += 1
            self.watermark = at if self.watermark is None else max(self.watermark, at)
        for key, found in by_key.items():
            self.alike.setdefault(key, Alike()).add(found)
        if self.watermark is not None:
            floor = self.watermark - MARGIN // timedelta(microseconds=1)
            self.recent = {p: at for p, at in self.recent.items() if at >= floor}


class FailureFolds:
    """What every transformation asked about so far has failed with (one per process)."""

    def __init__(self) -> None:
        self._folded: dict[bytes, Folded] = {}
        self._lock = asyncio.Lock()

    async def read(
        self, conn: Transaction, transformation_ids: Sequence[bytes]
    ) -> dict[bytes, Folded]:
        """Each transformation's failed parcels as `conn`'s snapshot has them (see above)."""
        async with self._lock:
            reading = await TRANSFORMATION.read(
                conn,
                {
                    "TransformationID": list(transformation_ids),
                    "Entity": Entity.PARCEL.value,
                    "Status": ParcelStatus.FAILED.value,
                },
            )
            expected = {bytes(k[0]): v["Count"] for k, v in reading.items()}
            statuses = await db.statuses_of(conn, transformation_ids)
            cleanable = {t for t in transformation_ids if statuses.get(t) in CLEANABLE}
            found = {t: self._folded[t] for t in transformation_ids if t in self._folded}

            def differ() -> list[bytes]:
                return [
                    t
                    for t in transformation_ids
                    if t in cleanable or t not in found or found[t].count != expected.get(t, 0)
                ]

            behind = [t for t in differ() if t in found and t not in cleanable]
            if behind:
                await _catch_up(conn, {t: found[t] for t in behind})
            again = differ()
            if again:
                for t in again:
                    found[t] = Folded()
                by_transformation: dict[bytes, list[FailedRow]] = {t: [] for t in again}
                for row in await db.failed_rows(conn, again):
                    by_transformation[row.key.transformation_id].append(row)
                for t, rows in by_transformation.items():
                    found[t].fold(rows)
            for t, folded in found.items():
                if t in cleanable:
                    self._folded.pop(t, None)
                else:
                    self._folded[t] = folded
            return found


async def _catch_up(conn: Transaction, behind: dict[bytes, Folded]) -> None:
    """Fold into each the parcels failed since its latest failure folded, less MARGIN."""
    bounds = {
        t: moment(folded.watermark) - MARGIN
        for t, folded in behind.items()
        if folded.watermark is not None
    }
    new = [
        parcel_id
        for t, parcel_id in await db.failed_since(conn, bounds)
        if parcel_id not in behind[t].recent
    ]
    rows = await db.failed_rows_of(conn, new) if new else []
    for t, folded in behind.items():
        folded.fold(r for r in rows if r.key.transformation_id == t)
