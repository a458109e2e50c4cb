"""Failures grouped as a shifter asks of them: what is failing, where, and why.

A failed parcel's recorded outcome (`Annotations.outcome`) gives its class, backend, site, exit
code and message; parcels alike share (class, backend, site, normalised message), the message
being the tool's own line when the adaptor reported one, else the backend's (or, for a failure
execution decided itself, its recorded reason). The normalisation
(`dxts.core.adaptor.failures.normalise`) folds numbers, ids and paths, so one tool failing on
12 inputs is one group. The database counts the failed parcels alike word for word (no
parcel's annotations are read here, whatever their number); the words are normalised here, once
per distinct message, and the counts they fold together merged.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dxts.core.adaptor.failures import normalise
from dxts.core.adaptor.model import FailureClass
from dxts.core.db import Database, Isolation, Transaction, db_now
from dxts.execution.store import failures as db

MAX_COUNTS = 20_000  # distinct (transformation, key, own words) counted per call: the largest
EXAMPLE_SCAN = 2_000  # latest failed parcels read for examples, when the counts lack them
NO_MESSAGE = "(no message)"
_FAILURE_CLASSES = {c.value: c for c in FailureClass}
MAX_TRANSFORMATIONS = 500
DEFAULT_EXAMPLES = 3
MAX_EXAMPLES = 10
MAX_BUCKETS = 96


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
    examples: list[bytes] = field(default_factory=list)  # parcel ids, the latest first
    example_inputs: list[bytes] = field(default_factory=list)
    exit_codes: set[int] = field(default_factory=set)
    transformation_ids: set[bytes] = field(default_factory=set)
    counted: list[db.Counted] = field(default_factory=list)  # the counts merged into it
    over_time: list[int] = field(default_factory=list)  # failures per span, the earliest first


@dataclass(frozen=True)
class Grouped:
    groups: list[FailureGroup]
    parcels: int  # failed parcels counted
    truncated: bool  # more distinct failures than one call counts (the largest are kept)
    over_time: tuple[datetime, datetime] | None = None  # the span `over_time` counts cover


def group(counted: Sequence[db.Counted], examples: int) -> list[FailureGroup]:
    """The database's counts of failures alike word for word merged into groups (the
    largest first); each group's examples the latest parcel of each of its counts, the
    latest first, and its message the latest failure's own words."""
    groups: dict[tuple[str, str, str, str], FailureGroup] = {}
    for alike in sorted(counted, key=lambda c: (c.last_seen, c.latest), reverse=True):
        failure_class = _FAILURE_CLASSES.get(alike.failure_class, FailureClass.UNSPECIFIED)
        words = alike.words or NO_MESSAGE
        reason = _normalised(words)
        key = (failure_class.value, alike.backend, alike.site, reason)
        found = groups.get(key)
        if found is None:
            found = groups[key] = FailureGroup(
                failure_class, alike.backend, alike.site, reason, words
            )
        found.count += alike.count
        found.last_seen = max(found.last_seen or alike.last_seen, alike.last_seen)
        found.first_seen = min(found.first_seen or alike.first_seen, alike.first_seen)
        found.counted.append(alike)
        if len(found.examples) < examples:
            found.examples.append(alike.latest)
        if alike.exit_code is not None:
            found.exit_codes.add(alike.exit_code)
        found.transformation_ids.add(alike.transformation_id)
    return sorted(groups.values(), key=lambda g: (-g.count, g.reason))


@functools.lru_cache(maxsize=4096)
def _normalised(words: str) -> str:
    """`normalise` once per distinct message (the same words recur across refreshes)."""
    return normalise(words)


async def group_failures(
    database: Database,
    transformation_ids: Sequence[bytes],
    *,
    since: datetime | None,
    examples: int,
    buckets: int = 0,
) -> Grouped:
    """The failed parcels of the transformations (the caller may see each), grouped, with the
    inputs of the examples; one snapshot. A group whose counts give fewer examples than its
    parcels allow gets them from the latest failed parcels (`_more_examples`)."""
    async with database.transaction(Isolation.REPEATABLE_READ) as conn:
        counted = await db.counted_failures(conn, transformation_ids, since, MAX_COUNTS + 1)
        truncated = len(counted) > MAX_COUNTS
        groups = group(counted[:MAX_COUNTS], examples)
        if any(len(g.examples) < min(g.count, examples) for g in groups):
            await _more_examples(conn, transformation_ids, since, groups, examples)
        shown = [p for g in groups for p in g.examples]
        inputs = await db.input_ids_of(conn, shown)
        span = await _over_time(conn, transformation_ids, since, groups, buckets)
    for found in groups:
        found.example_inputs = [i for p in found.examples for i in inputs.get(p, [])][:examples]
    return Grouped(groups, sum(c.count for c in counted[:MAX_COUNTS]), truncated, span)


async def _more_examples(
    conn: Transaction,
    transformation_ids: Sequence[bytes],
    since: datetime | None,
    groups: Sequence[FailureGroup],
    examples: int,
) -> None:
    """Examples for the groups whose counts gave fewer than asked (one count of many parcels:
    a message repeated word for word), from the latest EXAMPLE_SCAN failed parcels."""
    by_key = {c.key: g for g in groups for c in g.counted}
    wanting = {id(g) for g in groups if len(g.examples) < min(g.count, examples)}
    taken: dict[int, list[bytes]] = {}
    for key, parcel_id in await db.latest_failed(conn, transformation_ids, since, EXAMPLE_SCAN):
        owner = by_key.get(key)
        if owner is not None and id(owner) in wanting:
            found = taken.setdefault(id(owner), [])
            if len(found) < examples:
                found.append(parcel_id)
    for owner in groups:
        more = taken.get(id(owner), [])
        if id(owner) in wanting and more:
            owner.examples = list(dict.fromkeys([*more, *owner.examples]))[:examples]


async def _over_time(
    conn: Transaction,
    transformation_ids: Sequence[bytes],
    since: datetime | None,
    groups: Sequence[FailureGroup],
    buckets: int,
) -> tuple[datetime, datetime] | None:
    """Each group's failures counted in `buckets` equal spans from `since` (else its first
    failure) to now, in one statement; the span covered (None: no buckets asked)."""
    if not buckets:
        return None
    end = _utc(await db_now(conn))
    firsts = [_utc(g.first_seen) for g in groups if g.first_seen is not None]
    start = _utc(since) if since is not None else min(firsts, default=end)
    width = max(1, math.ceil((end - start).total_seconds() / buckets))
    by_key = {c.key: g for g in groups for c in g.counted}
    for each in groups:
        each.over_time = [0] * buckets
    naive = start.replace(tzinfo=None)
    for key, number, count in await db.counted_over_time(conn, transformation_ids, naive, width):
        owner = by_key.get(key)
        if owner is not None:
            owner.over_time[min(max(number, 0), buckets - 1)] += count
    return start, end


def _utc(moment: datetime) -> datetime:
    """An aware UTC moment (the database's are naive UTC)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
