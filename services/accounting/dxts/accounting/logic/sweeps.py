"""The accounting sweeps: fold each counter, refresh the metrics, watch for drift.

* **Fold** (one task per counter). A replica folds only while it holds the counter's named
  lock (`counter-fold:<counter>`), so replicas do not queue connections on the fold's lock
  row; the holder keeps the lock for a lease, folding again at once when a batch was full and
  after `fold_interval_s` otherwise, then offers it; the others retry every `fold_standby_s`.
* **Metrics**: journal depth and oldest-row age per counter, InnoDB history list length.
  Every replica exports them (they describe the database, not the replica).
* **Drift**: every `drift_interval_s`, or soon after a read reported a negative key, scan
  each counter for negative keys (the `dxts_counter_negative` gauge), rebuild the affected
  transformations under the `counter-repair` lock (one replica repairs), and scan again.

A turn that fails (database unavailable, deadlock retries exhausted) is logged and retried
at the next interval: sweeps never die of a transient error. `stop` ends every loop at its next
pause, so a graceful stop never interrupts a transaction that could finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from dxts.accounting import metrics
from dxts.accounting.logic.repair import Correction, DriftWatch
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
        # Set by `stop`: every loop ends at its next pause, never in a transaction.
        self.stopping = asyncio.Event()

    async def _pause(self, seconds: float, *, wake: asyncio.Event | None = None) -> None:
        """Sleep `seconds`, ending early when stopping (or when `wake` is set)."""
        waits = [asyncio.ensure_future(self.stopping.wait())]
        if wake is not None:
            waits.append(asyncio.ensure_future(wake.wait()))
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()

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
                if result.full and not self.stopping.is_set():
                    continue
                if loop.time() >= ends or self.stopping.is_set() or not await held.still_held():
                    return folded
                await self._pause(self.settings.fold_interval_s)

    async def fold_round(self, counter: Counter) -> int:
        """One turn of the fold sweep: the rows folded (0 when another replica holds the lock)."""
        return await self.fold_turn(counter, lease_s=self.settings.fold_lease_s) or 0

    async def fold_forever(self, counter: Counter) -> None:
        while not self.stopping.is_set():
            try:
                folded = await self.fold_turn(counter, lease_s=self.settings.fold_lease_s)
            except Exception:
                log.exception("fold of %s failed; retrying", counter.name)
                folded = None
            if folded is None:
                await self._pause(self.settings.fold_standby_s)

    # -- metrics ------------------------------------------------------------------------------

    async def metrics_round(self) -> int:
        """Refresh the gauges; a refresh, not work done: always 0 (the sweep keeps its pace)."""
        await metrics.collect(self.database, self.watch.counters)
        return 0

    async def metrics_forever(self) -> None:
        while not self.stopping.is_set():
            try:
                await self.metrics_round()
            except Exception:
                log.exception("metrics collection failed; retrying")
            await self._pause(self.settings.metrics_interval_s)

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

    async def drift_round(self) -> int:
        """One drift scan (and repair): the keys corrected."""
        return len(await self.drift_turn())

    async def drift_forever(self) -> None:
        while not self.stopping.is_set():
            try:
                await self.drift_round()
            except Exception:
                log.exception("drift watch failed; retrying")
            # Reads keep reporting a key until it is repaired: do not rescan at their pace.
            await self._pause(self.settings.drift_debounce_s)
            await self._pause(self.settings.drift_interval_s, wake=self.watch.wake)

    # -- running ------------------------------------------------------------------------------

    def start(self) -> list[asyncio.Task[None]]:
        """Every sweep as a task of the running loop."""
        named = [(f"fold-{c.name}", self.fold_forever(c)) for c in self.watch.counters]
        named += [("metrics", self.metrics_forever()), ("drift", self.drift_forever())]
        return [asyncio.create_task(c, name=f"accounting-{name}") for name, c in named]

    async def stop(self, tasks: list[asyncio.Task[None]], *, grace_s: float) -> None:
        """Let the running turns finish (up to `grace_s`), then cancel what is left: a
        cancelled fold rolls back and its rows wait for the next holder."""
        self.stopping.set()
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=grace_s)
        for task in late:
            task.cancel()
        for task in late:
            with contextlib.suppress(asyncio.CancelledError):
                await task
