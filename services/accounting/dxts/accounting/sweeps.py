"""The accounting sweeps: fold each counter, refresh the metrics, watch for drift.

* **Fold** (one task per counter). A replica folds only while it holds the counter's named
  lock (`counter-fold:<counter>`), so replicas do not queue connections on the fold's lock
  row; the holder keeps the lock for a lease, folding again at once when a batch was full and
  after `fold_interval_s` otherwise, then offers it; the others retry every `fold_standby_s`.
* **Metrics**: journal depth and oldest-row age per counter, InnoDB history list length.
  Every replica exports them (they describe the database, not the replica).
* **Drift**: every `drift_interval_s`, or at once when a read reported a negative key, scan
  each counter for negative keys (the `dxts_counter_negative` gauge), rebuild the affected
  transformations under the `counter-repair` lock (one replica repairs), and scan again.

A turn that fails (database unavailable, deadlock retries exhausted) is logged and retried
at the next interval: sweeps never die of a transient error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from dxts.accounting import metrics
from dxts.accounting.repair import Correction, DriftWatch
from dxts.accounting.settings import AccountingSettings
from dxts.core.counters import Counter, FoldResult
from dxts.core.db import Database
from dxts.core.locks import Lock, LockManager

log = logging.getLogger(__name__)

REPAIR_LOCK = Lock("counter-repair", "all")


def fold_lock(counter: Counter) -> Lock:
    return Lock("counter-fold", counter.name.lower())


class Sweeps:
    def __init__(
        self,
        database: Database,
        locks: LockManager,
        settings: AccountingSettings,
        watch: DriftWatch,
    ) -> None:
        self.database = database
        self.locks = locks
        self.settings = settings
        self.watch = watch

    # -- fold ---------------------------------------------------------------------------------

    async def fold_once(self, counter: Counter) -> FoldResult:
        """One fold transaction, timed and counted."""
        started = time.perf_counter()
        result = await counter.fold(self.database, self.settings.fold_batch)
        metrics.FOLD_SECONDS.labels(counter=counter.name).observe(time.perf_counter() - started)
        metrics.ROWS_FOLDED.labels(counter=counter.name).inc(result.folded)
        return result

    async def fold_turn(self, counter: Counter, *, lease_s: float) -> int | None:
        """Fold `counter` while holding its lock for `lease_s` (at least until a batch is not
        full); returns the rows folded, or None when another replica holds the lock."""
        async with self.locks.try_hold(fold_lock(counter)) as held:
            if not held:
                return None
            loop = asyncio.get_running_loop()
            ends = loop.time() + lease_s
            folded = 0
            while True:
                result = await self.fold_once(counter)
                folded += result.folded
                if result.full:
                    continue
                if loop.time() >= ends or not await held.still_held():
                    return folded
                await asyncio.sleep(self.settings.fold_interval_s)

    async def fold_forever(self, counter: Counter) -> None:
        while True:
            try:
                folded = await self.fold_turn(counter, lease_s=self.settings.fold_lease_s)
            except Exception:
                log.exception("fold of %s failed; retrying", counter.name)
                folded = None
            if folded is None:
                await asyncio.sleep(self.settings.fold_standby_s)

    # -- metrics ------------------------------------------------------------------------------

    async def metrics_forever(self) -> None:
        await _every(
            self.settings.metrics_interval_s,
            lambda: metrics.collect(self.database, self.watch.counters),
            "metrics collection",
        )

    # -- drift --------------------------------------------------------------------------------

    async def drift_turn(self) -> list[Correction]:
        """Scan for drift; if any, repair it (unless another replica is) and scan again."""
        self.watch.wake.clear()
        found = await self.watch.check(self.database)
        if not any(found.values()):
            return []
        async with self.locks.try_hold(REPAIR_LOCK) as held:
            if not held:
                return []
            corrections = await self.watch.repair(self.database)
        await self.watch.check(self.database)
        return corrections

    async def drift_forever(self) -> None:
        while True:
            try:
                await self.drift_turn()
            except Exception:
                log.exception("drift watch failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.watch.wake.wait(), self.settings.drift_interval_s)

    def start(self) -> list[asyncio.Task[None]]:
        """Every sweep as a task of the running loop."""
        named = [(f"fold-{c.name}", self.fold_forever(c)) for c in self.watch.counters]
        named += [("metrics", self.metrics_forever()), ("drift", self.drift_forever())]
        return [asyncio.create_task(c, name=f"accounting-{name}") for name, c in named]


async def _every(interval_s: float, turn: Callable[[], Awaitable[None]], what: str) -> None:
    while True:
        try:
            await turn()
        except Exception:
            log.exception("%s failed; retrying", what)
        await asyncio.sleep(interval_s)
