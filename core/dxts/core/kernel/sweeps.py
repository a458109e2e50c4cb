"""One runner for every periodic sweep of every component.

A sweep is a named `round()` that does a bounded amount of work and says how many items it did.
The runner paces each sweep on its own task:

* after a round that did work, the next round starts at once — a backlog drains at the speed
  of the work, not of a timer;
* after an idle round it waits `first_idle_s`, doubling each idle round up to `interval_s`, so
  a sweep that just went quiet notices new work within a fraction of a second while a long
  idle one costs almost nothing; `wake()` cuts any idle wait short when a caller knows there is
  work;
* while its `pending()` says work is on its way that another component has to hand over first
  (a member waiting on its producer, a workgraph whose members are running), the idle wait
  stops doubling at `pending_s` (1 s) instead: what the other component does becomes visible
  here within about a second, at the cost of a cheap idle round a second while it lasts, and
  the full `interval_s` still applies when nothing is under way;
* a round that did work wakes the sweeps named in its `then` (the ones that take its work
  further in the same process: a feeder's packer), so a hand-over inside a component waits
  for nothing;
* after a failed round it logs the error and waits `error_s`, doubling up to
  `max(interval_s, MAX_ERROR_WAIT_S)`, so a database outage is not hammered;
* `stop(grace_s)` lets the running round finish (up to `grace_s`), then cancels what is left: a
  cancelled round rolls back its open transaction and its work waits for the next start.

Every sweep reports `dxts_sweep_rounds_total{sweep,outcome}`, `dxts_sweep_round_seconds{sweep}`
and `dxts_sweep_items_total{sweep}`.

Most rounds work key by key (each transformation's feeder, each workgraph's lifecycle, each
backend's poll, each counter's fold, the one counter repair): a `KeyedSweep` owns that shape
once. It takes each key's
named lock and skips the key when another replica holds it (never waiting behind it), runs `width`
keys at a time, and isolates failures: a key that raises is logged and the others go on; only a
round whose every key failed raises (the database or a peer is down), so the runner backs off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from prometheus_client import Counter, Histogram

from dxts.core.kernel.lanes import each
from dxts.core.locks import Held, Lock, LockKind, LockManager

log = logging.getLogger(__name__)

MAX_ERROR_WAIT_S = 30.0

K = TypeVar("K")
R = TypeVar("R")

SWEEP_ROUNDS = Counter(
    "dxts_sweep_rounds",
    "Rounds run by each sweep, by outcome (busy: did work, idle: found none, error: raised).",
    ["sweep", "outcome"],
)
SWEEP_SECONDS = Histogram(
    "dxts_sweep_round_seconds", "How long each round of a sweep took.", ["sweep"]
)
SWEEP_ITEMS = Counter("dxts_sweep_items", "Items of work done by each sweep's rounds.", ["sweep"])


@dataclass(frozen=True)
class Pacing:
    """How long a sweep waits between rounds (see the module docstring)."""

    interval_s: float
    first_idle_s: float = 0.05
    error_s: float = 1.0
    pending_s: float = 1.0

    def __post_init__(self) -> None:
        waits = (self.interval_s, self.first_idle_s, self.error_s, self.pending_s)
        if min(waits) <= 0:
            raise ValueError(f"every wait of a sweep's pacing must be positive: {self}")

    def after_idle(self, previous: float | None, *, pending: bool = False) -> float:
        """The wait after an idle round, given the wait after the one before (None: it did
        work or failed); capped at `pending_s` while work is on its way (`pending`)."""
        longest = min(self.interval_s, self.pending_s) if pending else self.interval_s
        if previous is None:
            return min(self.first_idle_s, longest)
        return min(previous * 2, longest)

    def after_error(self, previous: float | None) -> float:
        if previous is None:
            return self.error_s
        return min(previous * 2, max(self.interval_s, MAX_ERROR_WAIT_S))


@dataclass
class Sweep:
    """A named round and its pacing; `round()` returns how many items it did (0 = idle);
    `pending()`, asked after an idle round, whether work is on its way from elsewhere; `then`,
    the sweeps of the same runner a busy round wakes."""

    name: str
    round: Callable[[], Awaitable[int]]
    pacing: Pacing
    pending: Callable[[], bool] | None = None
    then: tuple[str, ...] = ()
    _wake: asyncio.Event = field(default_factory=asyncio.Event, repr=False)


class SweepRunner:
    """Runs sweeps, each on its own task, until `stop`."""

    def __init__(self, sweeps: Iterable[Sweep]) -> None:
        self.sweeps = {sweep.name: sweep for sweep in sweeps}
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def running(self) -> bool:
        """Whether `start` was called and `stop` has not been since."""
        return bool(self._tasks)

    def start(self) -> None:
        """One task per sweep on the running loop."""
        if self._tasks:
            raise RuntimeError("the sweep runner is already started")
        self._stopping.clear()
        self._tasks = [
            asyncio.create_task(self._run(sweep), name=f"sweep-{sweep.name}")
            for sweep in self.sweeps.values()
        ]

    def wake(self, name: str | None = None) -> None:
        """Start the named sweep's next round now if it is waiting (every sweep: None)."""
        for sweep in self.sweeps.values() if name is None else [self.sweeps[name]]:
            sweep._wake.set()

    async def stop(self, *, grace_s: float) -> None:
        """Let running rounds finish (up to `grace_s`), then cancel what is left."""
        self._stopping.set()
        tasks, self._tasks = self._tasks, []
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=grace_s)
        for task in late:
            log.warning("sweep %s did not finish its round within %.1f s", task.get_name(), grace_s)
            task.cancel()
        for task in late:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run_round(self, sweep: Sweep) -> int:
        """One round of `sweep`, measured; raises what the round raised."""
        started = time.perf_counter()
        try:
            items = int(await sweep.round())
        except Exception:
            SWEEP_ROUNDS.labels(sweep.name, "error").inc()
            raise
        finally:
            SWEEP_SECONDS.labels(sweep.name).observe(time.perf_counter() - started)
        SWEEP_ROUNDS.labels(sweep.name, "busy" if items else "idle").inc()
        if items:
            SWEEP_ITEMS.labels(sweep.name).inc(items)
        return items

    async def _run(self, sweep: Sweep) -> None:
        idle_wait: float | None = None
        error_wait: float | None = None
        while not self._stopping.is_set():
            sweep._wake.clear()
            try:
                items = await self.run_round(sweep)
            except Exception:
                error_wait = sweep.pacing.after_error(error_wait)
                idle_wait = None
                log.exception("sweep %s failed; next round in %.2f s", sweep.name, error_wait)
                await self._pause(sweep, error_wait)
                continue
            error_wait = None
            if items:
                idle_wait = None
                for name in sweep.then:
                    if name in self.sweeps:
                        self.sweeps[name]._wake.set()
                await asyncio.sleep(0)  # let requests and other sweeps in between busy rounds
                continue
            pending = sweep.pending is not None and sweep.pending()
            idle_wait = sweep.pacing.after_idle(idle_wait, pending=pending)
            await self._pause(sweep, idle_wait)

    async def _pause(self, sweep: Sweep, seconds: float) -> None:
        """Wait `seconds`, or less when the sweep is woken or the runner stops."""
        stop = asyncio.ensure_future(self._stopping.wait())
        wake = asyncio.ensure_future(sweep._wake.wait())
        try:
            await asyncio.wait({stop, wake}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (stop, wake):
                waiter.cancel()


class _Skipped:
    """The place of a key another holder had, or whose work failed."""


SKIPPED = _Skipped()


@dataclass(frozen=True)
class KeyedSweep(Generic[K]):
    """The round shape of a sweep that works key by key (see the module docstring): `kind` names
    the lock each key's work runs under, `key` gives the lock's key of an item."""

    kind: LockKind
    locks: LockManager
    width: int
    key: Callable[[K], bytes | str]

    async def run(self, items: Sequence[K], work: Callable[[K], Awaitable[R]]) -> list[R]:
        """`work` on every item whose lock this replica takes, `width` at a time; the results
        of those that ran, in the items' order."""
        return await self.run_holding(items, lambda item, _: work(item))

    async def run_holding(
        self, items: Sequence[K], work: Callable[[K, Held], Awaitable[R]]
    ) -> list[R]:
        """`run`, with each key's work handed its hold: work that keeps a key for a lease (a
        counter's fold) asks `Held.still_held()` between its transactions and stops once a
        killed connection has lost the lock to another replica."""
        failures: list[Exception] = []

        async def one(item: K) -> R | _Skipped:
            lock = Lock(self.kind, self.key(item))
            try:
                async with self.locks.try_hold(lock) as held:
                    if not held:
                        return SKIPPED
                    return await work(item, held)
            except Exception as error:
                log.exception("%s failed; the next round retries it", lock.name)
                failures.append(error)
                return SKIPPED

        results = await each(items, one, width=self.width)
        if failures and len(failures) == len(items):
            raise failures[0]
        return [result for result in results if not isinstance(result, _Skipped)]
