"""Failures grouped as a shifter asks of them: what is failing, where, and why.

A failed parcel's recorded outcome (`Annotations.outcome`) gives its class, backend, site, exit
code and message; parcels alike share (class, backend, site, normalised message), the message
being the tool's own line when the adaptor reported one, else the backend's (or, for a failure
execution decided itself, its recorded reason). The normalisation
(`dxts.core.adaptor.failures.normalise`) folds numbers, ids and paths, so one tool failing on
12 inputs is one group. At most `MAX_PARCELS` failed parcels are read per call, the latest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dxts.core.adaptor.failures import normalise
from dxts.core.adaptor.model import FailureClass
from dxts.core.db import Database, Isolation
from dxts.execution.logic.parcel_annotations import REASON, stored_outcome
from dxts.execution.records import ParcelRecord
from dxts.execution.store import failures as db

MAX_PARCELS = 20_000  # failed parcels read per call: the latest
MAX_TRANSFORMATIONS = 500
DEFAULT_EXAMPLES = 3
MAX_EXAMPLES = 10


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


@dataclass(frozen=True)
class Grouped:
    groups: list[FailureGroup]
    parcels: int  # failed parcels read
    truncated: bool  # more failed than were read


def _words(parcel: ParcelRecord) -> tuple[FailureClass, str, str, int | None]:
    """A failed parcel's class, site, own words and exit code, from its recorded outcome (or
    the reason execution recorded when it failed the parcel itself)."""
    annotations: Mapping[str, Any] = parcel.annotations or {}
    outcome = stored_outcome(annotations)
    reason = str(annotations.get(REASON) or "")
    if outcome is None:
        return FailureClass.UNSPECIFIED, "", reason or "(no message)", None
    failure = outcome.failure
    failure_class = failure.failure_class if failure else FailureClass.UNSPECIFIED
    words = (failure.tool_message if failure else "") or outcome.message or reason
    return (
        failure_class,
        failure.site if failure else "",
        words or "(no message)",
        outcome.exit_code,
    )


def group(failed: Sequence[ParcelRecord], examples: int) -> list[FailureGroup]:
    """`failed` (the latest first) grouped, the largest group first."""
    groups: dict[tuple[str, str, str, str], FailureGroup] = {}
    for parcel in failed:
        failure_class, site, words, exit_code = _words(parcel)
        backend = parcel.backend or ""
        reason = normalise(words)
        key = (failure_class.value, backend, site, reason)
        found = groups.get(key)
        if found is None:
            found = groups[key] = FailureGroup(failure_class, backend, site, reason, words)
        moment = parcel.completed_at or parcel.updated_at
        found.count += 1
        found.last_seen = max(found.last_seen or moment, moment)
        found.first_seen = min(found.first_seen or moment, moment)
        if len(found.examples) < examples:
            found.examples.append(parcel.parcel_id)
        if exit_code is not None:
            found.exit_codes.add(exit_code)
        if parcel.transformation_id is not None:
            found.transformation_ids.add(parcel.transformation_id)
    return sorted(groups.values(), key=lambda g: (-g.count, g.reason))


async def group_failures(
    database: Database,
    transformation_ids: Sequence[bytes],
    *,
    since: datetime | None,
    examples: int,
) -> Grouped:
    """The failed parcels of the transformations (the caller may see each), grouped, with the
    inputs of the examples; one snapshot."""
    async with database.transaction(Isolation.REPEATABLE_READ) as conn:
        failed = await db.failed_parcels(conn, transformation_ids, since, MAX_PARCELS + 1)
        truncated = len(failed) > MAX_PARCELS
        groups = group(failed[:MAX_PARCELS], examples)
        shown = [p for g in groups for p in g.examples]
        inputs = await db.input_ids_of(conn, shown)
    for found in groups:
        found.example_inputs = [i for p in found.examples for i in inputs.get(p, [])][:examples]
    return Grouped(groups, min(len(failed), MAX_PARCELS), truncated)
