"""The accounting sweeps: fold each counter, refresh the metrics, watch for drift; each a
round of the kernel's `SweepRunner` (`sweeps()`), which paces them and retries a failed round
(database unavailable, deadlock retries exhausted) after a backoff.

* **Fold** (one sweep per counter, its round the kernel's `KeyedSweep` over that one key). A
  replica folds only while it holds the counter's named lock (`counter-fold:<counter>`), so
  replicas do not queue connections on the fold's lock row; the holder keeps the lock for a
  lease (one round), folding again at once when a batch was full and after `fold_interval_s`
  otherwise, and stops early once its hold is lost (`Held.still_held`), then offers it; the
  others retry every `fold_standby_s`.
* **Metrics**: journal depth and oldest-row age per counter, InnoDB history list length, every
  `metrics_interval_s`. Every replica exports them (they describe the database, not the
  replica).
* **Drift**: every `drift_interval_s`, or soon after a read reported a negative key (the watch
  wakes the sweep), scan each counter for negative keys (the `dxts_counter_negative` gauge),
  rebuild the affected transformations under the `counter-repair` lock (a `KeyedSweep` of one
  key: one replica repairs, the others skip),
  and scan again; never twice within `drift_debounce_s`, since reads keep reporting a key until
  it is repaired.

`stop()` (set before the runner stops) ends a fold lease at its next pause, so a graceful stop
never interrupts a transaction that could finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time

from dxts.accounting import metrics
from dxts.accounting.logic.repair import Correction, DriftWatch
from dxts.accounting.settings import AccountingSettings
from dxts.core.counters import Counter, FoldResult
from dxts.core.db import Database
from dxts.core.kernel.sweeps import KeyedSweep, Pacing, Sweep
from dxts.core.locks import Held, Lock, LockKind, LockManager

log = logging.getLogger(__name__)

# The repair is one key: one replica repairs every counter's drift at a time.
REPAIR_KEY = "all"


def fold_key(counter: Counter) -> str:
    return counter.name.lower()


def fold_lock(counter: Counter) -> Lock:
    """The named lock a counter's fold runs under."""
    return Lock(LockKind.COUNTER_FOLD, fold_key(counter))


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
        # Set by `stop`: a round ends at its next pause, never in a transaction.
        self.stopping = asyncio.Event()
        self._last_drift_scan = -float("inf")  # loop time at the end of the last drift round
        # One key each: a counter's fold (one sweep per counter) and the repair.
        self.folds: KeyedSweep[Counter] = KeyedSweep(
            LockKind.COUNTER_FOLD, locks, width=1, key=fold_key
        )
        self.repairs: KeyedSweep[str] = KeyedSweep(
            LockKind.COUNTER_REPAIR, locks, width=1, key=lambda key: key
        )

    def stop(self) -> None:
        """Let every round end at its next pause (before the runner stops)."""
        self.stopping.set()

    async def _pause(self, seconds: float) -> None:
        """Sleep `seconds`, ending early when stopping."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), timeout=seconds)

    def sweeps(self) -> list[Sweep]:
        """Every accounting sweep, for a `SweepRunner`."""
        settings = self.settings
        folds = [
            Sweep(
                f"accounting-fold-{counter.name}",
                functools.partial(self.fold_round, counter),
                Pacing(settings.fold_standby_s, first_idle_s=settings.fold_standby_s),
            )
            for counter in self.watch.counters
        ]
        return [
            *folds,
            Sweep(
                "accounting-metrics",
                self.metrics_round,
                Pacing(settings.metrics_interval_s, first_idle_s=settings.metrics_interval_s),
            ),
            Sweep(
                "accounting-drift",
                self.drift_round,
                Pacing(settings.drift_interval_s, first_idle_s=settings.drift_interval_s),
            ),
        ]

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

        async def lease(counter: Counter, held: Held) -> int:
            loop = asyncio.get_running_loop()
            ends = loop.time() + lease_s
            folded = 0
            while True:
                result = await self.fold_once(counter)
                folded += result.folded
                if result.full and not self.stopping.is_set():
                    continue
                if loop.time() >= ends or self.stopping.is_set() or not await held.still_held():
                    return folded
                await self._pause(self.settings.fold_interval_s)

        done = await self.folds.run_holding([counter], lease)
        return done[0] if done else None

    async def fold_round(self, counter: Counter) -> int:
        """One lease of the fold sweep: the rows folded (0 when another replica holds the lock:
        try again after `fold_standby_s`)."""
        return await self.fold_turn(counter, lease_s=self.settings.fold_lease_s) or 0

    # -- metrics ------------------------------------------------------------------------------

    async def metrics_round(self) -> int:
        """Refresh the gauges; a refresh, not work done: always 0 (the sweep keeps its pace)."""
        await metrics.collect(self.database, self.watch.counters)
        return 0

    # -- drift --------------------------------------------------------------------------------

    async def drift_turn(self) -> list[Correction]:
        """Scan for drift; if any, repair it (unless another replica is) and scan again."""
        self.watch.wake.clear()
        found = await self.watch.check(self.database)
        if not any(found.values()):
            return []
        repaired = await self.repairs.run([REPAIR_KEY], lambda _: self.watch.repair(self.database))
        if not repaired:
            return []  # another replica is repairing
        await self.watch.check(self.database)
        return repaired[0]

    async def drift_round(self) -> int:
        """One drift scan (and repair), at least `drift_debounce_s` after the last: the keys
        corrected."""
        loop = asyncio.get_running_loop()
        early = self._last_drift_scan + self.settings.drift_debounce_s - loop.time()
        if early > 0:
            await self._pause(early)
        try:
            return len(await self.drift_turn())
        finally:
            self._last_drift_scan = loop.time()
