"""The sweeps after dispatch: recording Completing parcels, and HandleFailedInput.

* **Recording** (one task): every `record_interval_s`, the replica holding the
  `record-outcomes` lock records every Completing parcel whose outcome has arrived
  (`completing.Recorder`). Recording is re-entrant, so the lock only keeps replicas from doing the
  same work twice, never correctness.
* **Failed inputs** (one task): every `failed_inputs_interval_s`, each Active transformation
  (from the definition side), up to `sweep_concurrency` at a time, under its own
  `failed-inputs` lock: its Failed inputs meet its HandleFailedInput hook, or are written off
  once its workgraph is halted (`failed_inputs`).

A turn that fails (database or definition unavailable, a deadlock that persisted) is logged and
retried at the next interval. The loops end at their next pause once `stopping` is set (or when
their task is cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from dxts.core.catalogue import FileCatalogue
from dxts.core.db import Database
from dxts.core.errors import DxtsError
from dxts.core.locks import Lock, LockManager
from dxts.core.plugins import Registry
from dxts.execution.logic.completing import Recorder
from dxts.execution.logic.failed_inputs import Handled, handle_failed_inputs
from dxts.execution.logic.transformations import ActiveTransformation, ActiveTransformations
from dxts.execution.settings import ExecutionSettings

log = logging.getLogger(__name__)

RECORD_LOCK = Lock("record-outcomes", "all")


def failed_inputs_lock(transformation_id: bytes) -> Lock:
    return Lock("failed-inputs", transformation_id)


class CompletionSweeps:
    def __init__(
        self,
        database: Database,
        *,
        registry: Registry,
        catalogue: FileCatalogue,
        transformations: ActiveTransformations,
        locks: LockManager,
        settings: ExecutionSettings,
        stopping: asyncio.Event | None = None,
    ) -> None:
        self.database = database
        self.registry = registry
        self.transformations = transformations
        self.locks = locks
        self.settings = settings
        self.recorder = Recorder(database, catalogue, transformations)
        self.stopping = stopping or asyncio.Event()

    async def record_turn(self) -> int | None:
        """Record what is Completing; None when another replica is at it."""
        async with self.locks.try_hold(RECORD_LOCK) as held:
            if not held:
                return None
            return await self.recorder.record_completing(batch=self.settings.record_batch)

    async def failed_inputs_turn(self) -> dict[bytes, Handled]:
        """One pass over every Active transformation's Failed inputs."""
        gate = asyncio.Semaphore(self.settings.sweep_concurrency)
        done: dict[bytes, Handled] = {}

        async def one(transformation: ActiveTransformation) -> None:
            async with gate, self.locks.try_hold(failed_inputs_lock(transformation.id)) as held:
                if held:
                    done[transformation.id] = await handle_failed_inputs(
                        self.database,
                        self.registry,
                        transformation,
                        batch=self.settings.failed_inputs_batch,
                    )

        await asyncio.gather(*(one(t) for t in await self.transformations.active()))
        return done

    async def _loop(
        self, name: str, interval_s: float, turn: Callable[[], Awaitable[object]]
    ) -> None:
        while not self.stopping.is_set():
            try:
                await turn()
            except (DxtsError, OSError) as error:
                log.warning("%s turn failed, retried in %.0f s: %s", name, interval_s, error)
            except Exception:
                log.exception("%s turn failed, retried in %.0f s", name, interval_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), timeout=interval_s)

    def start(self) -> list[asyncio.Task[None]]:
        return [
            asyncio.create_task(
                self._loop("record", self.settings.record_interval_s, self.record_turn),
                name="execution-record-outcomes",
            ),
            asyncio.create_task(
                self._loop(
                    "failed-inputs",
                    self.settings.failed_inputs_interval_s,
                    self.failed_inputs_turn,
                ),
                name="execution-failed-inputs",
            ),
        ]


def start_completion_sweeps(
    database: Database,
    *,
    registry: Registry,
    catalogue: FileCatalogue,
    transformations: ActiveTransformations,
    locks: LockManager,
    settings: ExecutionSettings,
    stopping: asyncio.Event | None = None,
) -> list[asyncio.Task[None]]:
    """Start the recording and HandleFailedInput sweeps; returns their tasks (cancel them, or
    set `stopping`, to stop them)."""
    return CompletionSweeps(
        database,
        registry=registry,
        catalogue=catalogue,
        transformations=transformations,
        locks=locks,
        settings=settings,
        stopping=stopping,
    ).start()
