"""The feeder and packer sweeps: every Active transformation, one invocation each per round.

* **Feeder** (one task): every `feed_interval_s`, the Active transformations are listed afresh
  from the definition side (so each feeder starts from its committed bookmark), and every one
  whose feeder should run (FeederEnabled, the workgraph not halted) is fed under its feeder
  lock, `sweep_concurrency` at a time.
* **Packer** (one task): every `pack_interval_s`, likewise, every Active transformation of a
  workgraph that is not halted is packed under its packer lock (Paused ones are not listed).

Each transformation is its own unit: one that fails (its plugin raised, its batch lost a race)
is logged by its runner and does not stop the round. A round that fails as a whole (the
definition service or the database unavailable) is logged and retried at the next interval.
The loops end at their next pause once `stop` is called.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from dxts.core.db import Database
from dxts.core.locks import LockManager
from dxts.core.plugins import Registry
from dxts.execution.logic.feeding import FeedResult, feed
from dxts.execution.logic.packing import PackResult, pack
from dxts.execution.logic.transformations import ActiveSnapshot, ActiveTransformation
from dxts.execution.settings import ExecutionSettings

log = logging.getLogger(__name__)

R = TypeVar("R")


class Sweeps:
    def __init__(
        self,
        database: Database,
        *,
        registry: Registry,
        locks: LockManager,
        snapshot: ActiveSnapshot,
        settings: ExecutionSettings,
    ) -> None:
        self.database = database
        self.registry = registry
        self.locks = locks
        self.snapshot = snapshot
        self.settings = settings
        self.stopping = asyncio.Event()

    async def _each(
        self,
        records: Sequence[ActiveTransformation],
        work: Callable[[ActiveTransformation], Awaitable[R]],
    ) -> list[R]:
        """`work` on every record, `sweep_concurrency` at a time."""
        gate = asyncio.Semaphore(self.settings.sweep_concurrency)

        async def one(record: ActiveTransformation) -> R:
            async with gate:
                return await work(record)

        return list(await asyncio.gather(*(one(record) for record in records)))

    async def feed_round(self) -> list[FeedResult]:
        """Run every feeder that should run, once."""
        records = [r for r in await self.snapshot.refresh() if r.feeds]
        return await self._each(
            records,
            lambda r: feed(
                self.database, self.registry, self.locks, r, batch=self.settings.feed_batch
            ),
        )

    async def pack_round(self) -> list[PackResult]:
        """Run every packer that may run, once."""
        records = [r for r in await self.snapshot.refresh() if r.packs]
        return await self._each(
            records,
            lambda r: pack(
                self.database,
                self.registry,
                self.locks,
                r,
                claim_chunk=self.settings.claim_chunk,
                batch=self.settings.pack_batch,
            ),
        )

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), timeout=seconds)

    async def _forever(
        self, name: str, turn: Callable[[], Awaitable[object]], every: float
    ) -> None:
        while not self.stopping.is_set():
            try:
                await turn()
            except Exception:
                log.exception("the %s sweep failed; next round in %.0f s", name, every)
            await self._pause(every)

    def start(self) -> list[asyncio.Task[None]]:
        """Both sweeps as tasks of the running loop."""
        return [
            asyncio.create_task(
                self._forever("feeder", self.feed_round, self.settings.feed_interval_s),
                name="execution-feeder",
            ),
            asyncio.create_task(
                self._forever("packer", self.pack_round, self.settings.pack_interval_s),
                name="execution-packer",
            ),
        ]

    async def stop(self, tasks: Sequence[asyncio.Task[None]], *, grace_s: float) -> None:
        """Let the running rounds finish (up to `grace_s`), then cancel what is left: a
        cancelled batch rolls back, and its inputs wait for the next round."""
        self.stopping.set()
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=grace_s)
        for task in late:
            task.cancel()
        for task in late:
            with contextlib.suppress(asyncio.CancelledError):
                await task
