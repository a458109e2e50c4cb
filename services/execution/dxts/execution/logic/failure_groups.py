"""Failures grouped as a shifter asks of them: what is failing, where, and why.

A failed parcel's recorded outcome (`Annotations.outcome`) gives its class, backend, site, exit
code and message; parcels alike share (class, backend, site, normalised message), the message
being the tool's own line when the adaptor reported one, else the backend's (or, for a failure
execution decided itself, its recorded reason). The normalisation
(`dxts.core.adaptor.failures.normalise`) folds numbers, ids and paths, so one tool failing on
12 inputs is one group. The failed parcels come counted by transformation, exit code and
normalised words from the service's memory of them (`failure_folds`: exact, checked against the
counters in the same snapshot, each failure's annotations read and its words normalised once
per process); here those counts are merged into groups.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dxts.core.adaptor.model import FailureClass
from dxts.core.db import Database, Isolation, db_now
from dxts.execution.logic.failure_folds import Alike, FailureFolds, Folded, Reason, micros, moment
from dxts.execution.store import failures as db

MAX_COUNTS = 20_000  # distinct (transformation, exit code, reason...) grouped per call: the largest
_FAILURE_CLASSES = {c.value: c for c in FailureClass}
MAX_TRANSFORMATIONS = 500
DEFAULT_EXAMPLES = 3
MAX_EXAMPLES = 10
MAX_BUCKETS = 96


@dataclass(frozen=True)
class Counted:
    """Failed parcels alike (one `Reason`), those failed since the moment asked: how many,
    when, and the latest ones."""

    key: Reason
    alike: Alike
    start: int  # the first of `alike.times` counted
    latest: list[tuple[int, bytes]]  # (when, ParcelID) of the latest, the latest first

    @property
    def count(self) -> int:
        return len(self.alike.times) - self.start

    @property
    def first_seen(self) -> int:
        return self.alike.times[self.start]

    @property
    def last_seen(self) -> int:
        return self.alike.times[-1]


@dataclass
class FailureGroup:
    failure_class: FailureClass
    backend: str
    site: str
    reason: str  # the normalised message
    message: str  # the latest failure's own words
    count: int = 0
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    examples: list[bytes] = field(default_factory=list)  # parcel ids, the latest failed first
    example_inputs: list[bytes] = field(default_factory=list)
    exit_codes: set[int] = field(default_factory=set)
    transformation_ids: set[bytes] = field(default_factory=set)
    counted: list[Counted] = field(default_factory=list)  # the counts merged into it
    over_time: list[int] = field(default_factory=list)  # failures per span, the earliest first


@dataclass(frozen=True)
class Grouped:
    groups: list[FailureGroup]
    parcels: int  # failed parcels counted
    truncated: bool  # more distinct failures than one call groups (the largest are kept)
    over_time: tuple[datetime, datetime] | None = None  # the span `over_time` counts cover


def counted(folded: Mapping[bytes, Folded], since: datetime | None) -> list[Counted]:
    """The failures alike of every transformation, failed at or after `since`
    (all of them without), the largest count first."""
    floor = micros(since) if since is not None else None
    found = []
    for each in folded.values():
        for key, alike in each.alike.items():
            start = bisect_left(alike.times, floor) if floor is not None else 0
            if start < len(alike.times):
                latest = [x for x in alike.latest if floor is None or x[0] >= floor]
                found.append(Counted(key, alike, start, latest))
    return sorted(found, key=lambda c: (-c.count, _order(c.key)))


def _order(key: Reason) -> tuple[object, ...]:
    """A key in a total order (an exit code may be absent)."""
    return (*key[:5], key.exit_code is None, key.exit_code or 0)


def group(counted: Sequence[Counted], examples: int) -> list[FailureGroup]:
    """Counts of failures alike merged into groups (the largest first); each group's examples
    its latest failed parcels, and its message the latest failure's own words."""
    groups: dict[tuple[str, str, str, str], FailureGroup] = {}
    for alike in sorted(counted, key=lambda c: c.alike.message[:2], reverse=True):
        key = alike.key
        failure_class = _FAILURE_CLASSES.get(key.failure_class, FailureClass.UNSPECIFIED)
        found = groups.setdefault(
            (failure_class.value, key.backend, key.site, key.reason),
            FailureGroup(failure_class, key.backend, key.site, key.reason, alike.alike.message[2]),
        )
        found.count += alike.count
        first, last = moment(alike.first_seen), moment(alike.last_seen)
        found.last_seen = max(found.last_seen or last, last)
        found.first_seen = min(found.first_seen or first, first)
        found.counted.append(alike)
        if key.exit_code is not None:
            found.exit_codes.add(key.exit_code)
        found.transformation_ids.add(key.transformation_id)
    for found in groups.values():
        latest = heapq.nlargest(examples, (x for c in found.counted for x in c.latest))
        found.examples = [parcel_id for _, parcel_id in latest]
    return sorted(groups.values(), key=lambda g: (-g.count, g.reason))


async def group_failures(
    database: Database,
    folds: FailureFolds,
    transformation_ids: Sequence[bytes],
    *,
    since: datetime | None,
    examples: int,
    buckets: int = 0,
) -> Grouped:
    """The failed parcels of the transformations (the caller may see each), grouped, with the
    inputs of the examples; one snapshot (`now` read first: a failure after it, committed by
    the time the snapshot is taken, counts in the last span)."""
    async with database.transaction(Isolation.REPEATABLE_READ) as conn:
        now = _utc(await db_now(conn))
        folded = await folds.read(conn, transformation_ids)
        # Counts, groups and spans taken before the next await: another read may then fold more
        # into what is read here.
        everything = counted(folded, since)
        kept = everything[:MAX_COUNTS]
        total = sum(c.count for c in kept)
        groups = group(kept, examples)
        span = _over_time(groups, since, buckets, now) if buckets else None
        inputs = await db.input_ids_of(conn, [p for g in groups for p in g.examples])
    for found in groups:
        found.example_inputs = [i for p in found.examples for i in inputs.get(p, [])][:examples]
    return Grouped(groups, total, len(everything) > MAX_COUNTS, span)


def _over_time(
    groups: Sequence[FailureGroup], since: datetime | None, buckets: int, end: datetime
) -> tuple[datetime, datetime]:
    """Each group's failures counted in `buckets` equal spans of whole seconds from `since`
    (else its first failure) to `end`, the last span taking any later; the span covered."""
    firsts = [_utc(g.first_seen) for g in groups if g.first_seen is not None]
    start = _utc(since) if since is not None else min(firsts, default=end)
    width = max(1, math.ceil((end - start).total_seconds() / buckets)) * 1_000_000
    bounds = [micros(start) + n * width for n in range(1, buckets)]
    for each in groups:
        each.over_time = [0] * buckets
        for alike in each.counted:
            times, below = alike.alike.times, alike.start
            for n, bound in enumerate(bounds):
                upto = max(below, bisect_left(times, bound, lo=below))
                each.over_time[n] += upto - below
                below = upto
            each.over_time[-1] += len(times) - below
    return start, end


def _utc(moment_: datetime) -> datetime:
    """An aware UTC moment (the database's are naive UTC)."""
    return moment_.replace(tzinfo=UTC) if moment_.tzinfo is None else moment_.astimezone(UTC)
