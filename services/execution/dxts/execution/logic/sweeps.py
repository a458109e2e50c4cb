"""Execution's sweeps: the rounds `dxts.core.kernel.sweeps.SweepRunner` paces.

* **feeder** — the Active transformations are listed afresh from the definition side (so each
  feeder starts from its committed bookmark), and every one whose feeder should run
  (FeederEnabled, the workgraph not halted) is fed under its feeder lock, `sweep_concurrency` at
  a time (each is a key of a `KeyedSweep`, as in the packer and failed-inputs rounds). Items:
  inputs inserted.
* **packer** — likewise, every Active transformation of a workgraph that is not halted is packed
  under its packer lock (Paused ones are not listed), after the review of what its `after` wait
  set aside (`after_review`). Items: inputs assigned, set aside, or moved by the review.
* **recorder** — every Completing parcel whose outcome has arrived is recorded
  (`completing.Recorder`); replicas record side by side, each batch locking its parcels with
  SKIP LOCKED, so each parcel is recorded by one transaction and the others pass it by. Items:
  parcels recorded.
* **failed-inputs** — each Active transformation, up to `sweep_concurrency` at a time, under its
  own `failed-inputs` lock: its Failed inputs meet its HandleFailedInput hook, or are written
  off once its workgraph is halted (`failed_inputs`). Items: inputs decided or written off.

Each transformation is its own unit: one that fails (its plugin raised, its batch lost a race)
is logged and does not stop the round (`KeyedSweep`). A round that fails as a whole (the
definition service or the database unavailable, every transformation failing) is logged by the
runner and retried after its error backoff. A round that did work is followed by another at
once, so a backlog drains at the speed of the work; an idle sweep waits up to its
`*_interval_s`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TypeVar

from dxts.core.catalogue import FileCatalogue
from dxts.core.db import Database, Isolation
from dxts.core.ids import new_id
from dxts.core.kernel.sweeps import KeyedSweep, Pacing, Sweep
from dxts.core.lfn import FileNamespace
from dxts.core.locks import LockKind, LockManager
from dxts.core.plugins import Registry
from dxts.execution.logic.completing import Recorder
from dxts.execution.logic.failed_inputs import Handled, handle_failed_inputs
from dxts.execution.logic.feeding import FeedResult, exhausted_feeders, idle_feeders, run_feeder
from dxts.execution.logic.packing import PackResult, run_packer
from dxts.execution.logic.transformations import (
    ActiveSnapshot,
    ActiveTransformation,
)
from dxts.execution.settings import ExecutionSettings
from dxts.execution.store import watermark

R = TypeVar("R")

RECORDER_SWEEP = "recorder"  # woken when outcomes are recorded (ExecutionServicer)


def keyed(kind: LockKind, locks: LockManager, width: int) -> KeyedSweep[ActiveTransformation]:
    """A round over Active transformations, each under its own lock of `kind`."""
    return KeyedSweep(kind, locks, width, key=lambda transformation: transformation.id)


class FeedAndPack:
    """The feeder and packer rounds."""

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
        self.namespace = FileNamespace()  # whose files each transformation may be fed
        self.feeders = keyed(LockKind.FEEDER, locks, settings.sweep_concurrency)
        self.packers = keyed(LockKind.PACKER, locks, settings.sweep_concurrency)
        self._lock_rows: set[bytes] = set()  # outputs whose watermark lock row is there
        self.policy = settings.policy()

    async def feed_round(self) -> list[FeedResult]:
        """Run every feeder that should run and no other replica is running, once (not the
        exhausted ones, nor those a quota holds), each with its VO's quotas."""
        active = await self.snapshot.refresh()
        owned: dict[tuple[str, str], list[bytes]] = {}
        for r in active:
            owned.setdefault((r.vo, r.owner_sub), []).append(r.id)
        records = [r for r in active if r.feeds]
        idle = await idle_feeders(self.database, [r.id for r in records])
        records = [r for r in records if r.id not in idle]
        return await self.feeders.run(
            records,
            lambda r: run_feeder(
                self.database,
                self.registry,
                r,
                batch=self.settings.feed_batch,
                namespace=self.namespace,
                quotas=self.policy.for_vo(r.vo).quotas,
                owner_members=owned.get((r.vo, r.owner_sub), ()),
            ),
        )

    async def pack_round(self) -> list[PackResult]:
        """Run every packer that may run, once."""
        # Taken before the read: an input minted after it waits for the next round (see
        # `dxts.execution.logic.packing`).
        minted_before = new_id()
        records = [r for r in await self.snapshot.refresh() if r.packs]
        await self._create_lock_rows(records)
        exhausted = await exhausted_feeders(
            self.database, [r.id for r in records if r.feeder_active]
        )
        records = [replace(r, feeder_exhausted=True) if r.id in exhausted else r for r in records]
        return await self.packers.run(
            records,
            lambda r: run_packer(
                self.database,
                self.registry,
                r,
                claim_chunk=self.settings.claim_chunk,
                batch=self.settings.pack_batch,
                minted_before=minted_before,
                policy=self.policy.for_vo(r.vo),
            ),
        )

    async def _create_lock_rows(self, records: list[ActiveTransformation]) -> None:
        """The watermark lock rows of the outputs these transformations declare, before any of
        their parcels exists to be recorded under them (once per output and process)."""
        new = {o.output_id for r in records for o in r.outputs} - self._lock_rows
        if new:
            await self.database.run(
                lambda conn: watermark.create_lock_rows(conn, new),
                isolation=Isolation.READ_COMMITTED,
            )
            self._lock_rows |= new

    async def inputs_fed(self) -> int:
        return sum(result.inserted for result in await self.feed_round())

    async def inputs_packed(self) -> int:
        return sum(
            result.assigned + result.problematic + result.followed
            for result in await self.pack_round()
        )

    def sweeps(self) -> list[Sweep]:
        return [
            # Execution learns that a transformation started only by asking definition (the
            # idle round's one call), so the feeder never waits longer than `pending_s`; what
            # it feeds, the packer takes at once.
            Sweep(
                "feeder",
                self.inputs_fed,
                Pacing(self.settings.feed_interval_s),
                pending=lambda: True,
                then=("packer",),
            ),
            Sweep("packer", self.inputs_packed, Pacing(self.settings.pack_interval_s)),
        ]


class Completion:
    """The rounds after dispatch: recording Completing parcels, and HandleFailedInput."""

    def __init__(
        self,
        database: Database,
        *,
        registry: Registry,
        catalogue: FileCatalogue,
        snapshot: ActiveSnapshot,
        locks: LockManager,
        settings: ExecutionSettings,
    ) -> None:
        self.database = database
        self.registry = registry
        self.snapshot = snapshot
        self.locks = locks
        self.settings = settings
        self.recorder = Recorder(database, catalogue, snapshot)
        self.failed_inputs = keyed(LockKind.FAILED_INPUTS, locks, settings.sweep_concurrency)

    async def record_turn(self) -> int:
        """Record what is Completing and no other replica is recording; returns how many."""
        return await self.recorder.record_completing(
            batch=self.settings.record_batch, batch_inputs=self.settings.record_batch_inputs
        )

    async def failed_inputs_turn(self) -> dict[bytes, Handled]:
        """One pass over every Active transformation's Failed inputs."""

        async def one(transformation: ActiveTransformation) -> tuple[bytes, Handled]:
            handled = await handle_failed_inputs(
                self.database,
                self.registry,
                transformation,
                batch=self.settings.failed_inputs_batch,
            )
            return transformation.id, handled

        return dict(await self.failed_inputs.run(await self.snapshot.refresh(), one))

    async def parcels_recorded(self) -> int:
        return await self.record_turn()

    async def failed_inputs_handled(self) -> int:
        handled = await self.failed_inputs_turn()
        return sum(sum(h.decided.values()) + h.written_off for h in handled.values())

    def sweeps(self) -> list[Sweep]:
        return [
            # Recorded outputs are the next member's inputs (an Edge feeder's); inputs put back
            # to be retried are the packer's.
            Sweep(
                RECORDER_SWEEP,
                self.parcels_recorded,
                Pacing(self.settings.record_interval_s),
                then=("feeder",),
            ),
            Sweep(
                "failed-inputs",
                self.failed_inputs_handled,
                Pacing(self.settings.failed_inputs_interval_s),
                then=("packer",),
            ),
        ]
