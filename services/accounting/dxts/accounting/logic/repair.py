"""Counter repair: rebuilds on request (a VO's operators, the installation's admins) and on
drift (a negative count).

A rebuild recounts a scope from the counted tables and journals the differences
(`Counter.rebuild`, docs/counters.md); here it is scoped, permission-checked, counted in the metrics
and written to each corrected transformation's log, so that whoever reads the log sees when
and why its counts moved without a transition.

Drift is noticed two ways: every `Counter.read` anywhere in the process reports a negative key
(`on_drift`), and the drift sweep scans each counter whole for negative keys. Either way the
transformation is queued for a rebuild scoped to it alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dxts.accounting import metrics
from dxts.accounting.logic.members import MemberLister
from dxts.accounting.logic.visibility import rebuild_scope
from dxts.accounting.store.health import negative_keys
from dxts.accounting.store.logs import append_transformation_logs
from dxts.core.counters import DATA_PARCELS, TRANSFORMATION, Counter, Drift
from dxts.core.counters.construct import Key
from dxts.core.db import Database, Isolation
from dxts.core.identity import Identity
from dxts.core.ids import id_to_str
from dxts.core.logs import LogEntry

log = logging.getLogger(__name__)

COUNTERS: tuple[Counter, ...] = (TRANSFORMATION, DATA_PARCELS)
OPERATOR_ROLE = "operator"
REBUILD_EVENT = "CounterRebuild"
AUTHOR_LENGTH = 64
SWEEP_AUTHOR = "accounting"


@dataclass(frozen=True)
class Correction:
    """One key a rebuild found wrong, and the delta journalled to put it right."""

    counter: Counter
    key: Key
    deltas: dict[str, int]

    @property
    def transformation_id(self) -> bytes:
        return bytes(self.key[0])  # TransformationID leads both counters' keys

    def key_and_deltas(self) -> dict[str, Any]:
        """The key's other columns and the deltas, e.g. {"Entity": "Input", "Status":
        "Processed", "CountDelta": -3}."""
        rest = dict(zip(self.counter.key_names[1:], self.key[1:], strict=True))
        return {**rest, **{f"{m}Delta": v for m, v in self.deltas.items()}}


async def rebuild(
    database: Database,
    counters: Sequence[Counter],
    transformation_ids: Sequence[bytes] | None,
    *,
    author: str,
    reason: str,
) -> list[Correction]:
    """Rebuild `counters` over these transformations (None: all of them); log and return what
    was corrected."""
    scope = None if transformation_ids is None else {"TransformationID": list(transformation_ids)}
    corrections: list[Correction] = []
    for counter in counters:
        found = await counter.rebuild(database, scope)
        corrections.extend(Correction(counter, key, deltas) for key, deltas in found.items())
        if found:
            metrics.CORRECTIONS.labels(counter=counter.name).inc(len(found))
    await append_transformation_logs(
        database, _log_entries(corrections, author, reason), isolation=Isolation.READ_COMMITTED
    )
    return corrections


def _log_entries(corrections: list[Correction], author: str, reason: str) -> list[LogEntry]:
    grouped: dict[tuple[str, bytes], list[Correction]] = {}
    for correction in corrections:
        grouped.setdefault((correction.counter.name, correction.transformation_id), []).append(
            correction
        )
    return [
        LogEntry(
            owner_id=tid,
            event_type=REBUILD_EVENT,
            author=author[:AUTHOR_LENGTH],
            message=f"{name} counter rebuilt ({reason}): {len(found)} keys corrected",
            data={
                "counter": name,
                "reason": reason,
                "corrections": [c.key_and_deltas() for c in found],
            },
        )
        for (name, tid), found in grouped.items()
    ]


async def rebuild_on_request(
    database: Database,
    lister: MemberLister,
    identity: Identity,
    counters: Sequence[Counter],
    asked: Sequence[bytes] | None,
    *,
    token: str | None,
    request_id: str = "",
) -> list[Correction]:
    """A VO operator's rebuild over its VO's transformations (`asked`, None: all of them), an
    admin's over any; anyone else is refused (`visibility.rebuild_scope`). Idempotent by
    nature: a retry finds nothing left to correct."""
    transformation_ids = await rebuild_scope(
        lister, identity, token, asked, operator_role=OPERATOR_ROLE
    )
    if transformation_ids is not None and not transformation_ids:
        return []
    scope = (
        "all transformations"
        if transformation_ids is None
        else (f"{len(transformation_ids)} transformations")
    )
    log.info(
        "rebuild of %s over %s requested by %s/%s (request %s)",
        ", ".join(c.name for c in counters),
        scope,
        identity.vo,
        identity.sub,
        request_id or "-",
    )
    return await rebuild(
        database, counters, transformation_ids, author=identity.sub, reason="operator request"
    )


class DriftWatch:
    """What is known to have drifted, and what is waiting for a repair.

    `negative` feeds the `dxts_counter_negative` gauge; `pending` holds the transformations
    to rebuild, per counter; `wake` is set when a read reports drift, so the sweep repairs
    without waiting for its next scan.
    """

    def __init__(self, counters: Sequence[Counter] = COUNTERS) -> None:
        self.counters = tuple(counters)
        self._by_name = {counter.name: counter for counter in self.counters}
        self.negative: dict[str, set[Key]] = {c.name: set() for c in self.counters}
        self.pending: dict[str, set[bytes]] = {c.name: set() for c in self.counters}
        self.wake = asyncio.Event()
        # Called with `wake` set: the drift sweep's runner, to cut its wait short.
        self.on_wake: Callable[[], None] | None = None
        for counter in self.counters:
            metrics.NEGATIVE.labels(counter=counter.name).set(0)

    def on_drift(self, drift: Drift) -> None:
        """The `dxts.core.counters.on_drift` listener: remember the key, queue its repair."""
        if drift.counter not in self._by_name:
            return
        self._note(drift.counter, [drift.key])
        self.wake.set()
        if self.on_wake is not None:
            self.on_wake()

    def _note(self, counter: str, keys: Sequence[Key]) -> None:
        self.negative[counter].update(keys)
        self.pending[counter].update(bytes(key[0]) for key in keys)
        metrics.NEGATIVE.labels(counter=counter).set(len(self.negative[counter]))

    async def check(self, database: Database) -> dict[str, list[Key]]:
        """Scan every counter for negative keys: the gauge then shows exactly these, and
        exactly their transformations wait for a repair."""
        found: dict[str, list[Key]] = {}
        for counter in self.counters:
            keys = await negative_keys(database, counter)
            self.negative[counter.name] = set()
            self.pending[counter.name] = set()
            self._note(counter.name, keys)
            found[counter.name] = keys
            for key in keys:
                log.error("counter %s drifted: %r is negative", counter.name, key)
        return found

    async def repair(self, database: Database) -> list[Correction]:
        """Rebuild each pending transformation's drifted counters (scoped to them alone)."""
        corrections: list[Correction] = []
        for name, pending in self.pending.items():
            if not pending:
                continue
            ids = sorted(pending)
            pending.clear()
            log.warning(
                "drift: rebuilding counter %s for %s",
                name,
                ", ".join(id_to_str(tid) for tid in ids),
            )
            corrections.extend(
                await rebuild(
                    database, [self._by_name[name]], ids, author=SWEEP_AUTHOR, reason="drift"
                )
            )
        return corrections
