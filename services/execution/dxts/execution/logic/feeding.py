"""The feeder runner: one feeder invocation for one transformation, under its feeder lock.

The feeder is streamed through the plugin registry (its arguments validated for the phase, its
bookmark, the scouting flag and its injected dependencies passed), and what it yields becomes
rows in batches (`db.feeding.commit_batch`), one transaction each:

* inputs are collected up to `batch`, hashed by the core (the proposal carries its hash), and
  inserted by one duplicate-ignoring statement; the rows actually inserted are journalled;
* a SetFeederState commits with the batch that holds every input yielded before it, so the
  stored bookmark never claims an input that is not there (it may commit with a few yielded
  after it, which only makes it conservative);
* NoMoreInputs commits what is pending and marks the feeder's own row Exhausted, with a log
  row; an exhausted feeder is not run again until execution is asked to reset it.

Quotas (`policy.quotas`, the installation's and the member's VO's: `dxts.core.policy`): an
invocation may create at most `inputs_per_invocation` inputs, a member `inputs_per_member` in
all, the member's owner `inputs_per_user_hour` within the last hour (counted over the owner's
Active members). The allowance is worked out before the feeder runs, in inputs actually
created (a feeder resumed from an older bookmark yields inputs already there again, which the
insert drops and which do not count). The first input beyond it is not written: what is
pending commits with the bookmark, and the feeder's row is marked held with a reason naming
the limit (`FeederHeld` in the member's log); a feeder that yields nothing more is not held,
even at an allowance of 0. A held feeder is not run again until it is reset (an operator
enabling it again), so one runaway feeder stops itself, not the installation: other members
and VOs go on, and the member's packer goes on with the inputs it has. `dxts why` shows the
reason (definition reads the row).

The bookmark and the Exhausted mark are execution's rows (FeederStates), read here under the
feeder lock; the operator's switch (FeederEnabled) is definition's, and the batch's guard reads
it (`dxts.execution.store.feeding`).

A feeder that raises, or yields something the core refuses (a malformed input: an LFN over 512
characters, a negative size, a descriptor JSON cannot carry; a second NoMoreInputs...), ends the
invocation: its pending batch is dropped uncommitted, the failure is logged (TransformationLog
row `FeederFailed` and the `dxts_execution_plugin_failures` metric) and the next sweep runs the
feeder again from the last committed bookmark. A batch that finds the feeder disabled or the
transformation no longer Active writes nothing and ends the invocation quietly.

The feeder and the packer of one transformation run under different locks (`LockKind.FEEDER`,
`LockKind.PACKER`, taken by the sweeps' rounds): each extension point runs once per
transformation at a time, and a slow catalogue query never holds up packing. Inputs a feeder is
still inserting are invisible to, or skipped by, the packer's claim.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast
from uuid import UUID

from dxts.core.counters import TRANSFORMATION, Entity
from dxts.core.db import Database, Isolation, db_now
from dxts.core.errors import DxtsError
from dxts.core.plugins import Input, NoMoreInputs, Point, Registry, SetFeederState
from dxts.core.plugins.protocols.readers import ParcelOutputReader, ProducedFile
from dxts.core.policy import Quotas
from dxts.core.state_machines import LIVE_INPUT_STATES, LIVE_PARCEL_STATES
from dxts.execution import metrics
from dxts.execution.logic.transformations import ActiveSnapshot, ActiveTransformation
from dxts.execution.store import feeding as db
from dxts.execution.store import watermark

log = logging.getLogger(__name__)

FEED_BATCH = 5000
HOUR_S = 3600


def plugin_stream(
    registry: Registry, point: Point, name: str, args: Any, **context: Any
) -> AsyncGenerator[Any, None]:
    """`Registry.stream` as the async generator it is, so the runner can close it at once
    (closing a stream stops the plugin, in its own thread for a sync one)."""
    phase = context.pop("phase")
    return cast(
        AsyncGenerator[Any, None], registry.stream(point, name, args, phase=phase, **context)
    )


@dataclass
class FeedResult:
    """What one invocation did."""

    yielded: int = 0  # inputs the feeder yielded (committed or not)
    inserted: int = 0  # rows inserted (duplicates excluded)
    batches: int = 0  # transactions committed
    bookmark: Any = None  # the last bookmark committed, if any
    exhausted: bool = False  # NoMoreInputs committed
    held: str | None = None  # a quota stopped it: why
    stopped: bool = False  # a batch found the feeder disabled
    error: str | None = None  # why the invocation failed
    failure: BaseException | None = field(default=None, repr=False)


async def exhausted_feeders(database: Database, transformation_ids: list[bytes]) -> set[bytes]:
    """Those of the transformations whose feeder said NoMoreInputs and was not reset since."""
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return await db.exhausted_among(conn, transformation_ids)


async def idle_feeders(database: Database, transformation_ids: list[bytes]) -> set[bytes]:
    """Those of the transformations whose feeder is exhausted or held by a quota."""
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return await db.idle_among(conn, transformation_ids)


async def reset_feeders(
    database: Database, transformation_ids: list[bytes], *, clear_bookmarks: bool
) -> int:
    """Let these feeders run again (an operator or a hook enabled them), from the beginning
    with `clear_bookmarks`; the feeders that had a row."""

    async def work(conn: Any) -> int:
        now = await db_now(conn)
        return await db.reset_feeders(
            conn, transformation_ids, clear_bookmarks=clear_bookmarks, now=now
        )

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


@dataclass(frozen=True)
class Allowance:
    """How many inputs this invocation may create, and what to say when it would exceed it."""

    inputs: int | None  # None: no quota applies
    reason: str = ""


async def allowance(
    database: Database,
    transformation: ActiveTransformation,
    quotas: Quotas,
    owner_members: Sequence[bytes],
) -> Allowance:
    """The smallest of what the quotas leave (see the module): each a count read first."""
    left: list[tuple[int, str]] = []
    if quotas.inputs_per_invocation is not None:
        limit = quotas.inputs_per_invocation
        left.append((limit, f"{limit} inputs per feeder invocation (inputs_per_invocation)"))
    if quotas.inputs_per_member is not None or quotas.inputs_per_user_hour is not None:
        async with database.transaction(Isolation.READ_COMMITTED) as conn:
            if quotas.inputs_per_member is not None:
                limit = quotas.inputs_per_member
                have = await _member_inputs(conn, transformation.id)
                left.append((limit - have, f"{limit} inputs per member (inputs_per_member)"))
            if quotas.inputs_per_user_hour is not None:
                limit = quotas.inputs_per_user_hour
                since = _id_at(time.time() - HOUR_S)
                members = [transformation.id, *(m for m in owner_members if m != transformation.id)]
                made = await db.inputs_created_since(conn, members, since)
                left.append(
                    (
                        limit - made,
                        f"{limit} inputs created per user per hour (inputs_per_user_hour), "
                        f"for {transformation.owner_sub}",
                    )
                )
    if not left:
        return Allowance(None)
    inputs, what = min(left)
    return Allowance(
        max(inputs, 0),
        f"held by a quota: the feeder reached the installation's limit of {what} "
        f"(policy.quotas of VO {transformation.vo}); the inputs before it are kept, and the "
        f"feeder goes on from its bookmark when an operator enables it again "
        f"(dxts feeder enable {_tid(transformation)})",
    )


async def _member_inputs(conn: Any, transformation_id: bytes) -> int:
    """Every input the member has, in any state (the exact counters, one statement)."""
    reading = await TRANSFORMATION.read(conn, {"TransformationID": transformation_id})
    return sum(
        int(values["Count"]) for (_, entity, _), values in reading.items() if entity == Entity.INPUT
    )


def _id_at(when_s: float) -> bytes:
    """The smallest UUIDv7 minted at `when_s` (its first 48 bits are the Unix time in ms)."""
    return max(0, int(when_s * 1000)).to_bytes(6, "big") + bytes(10)


async def run_feeder(
    database: Database,
    registry: Registry,
    transformation: ActiveTransformation,
    *,
    batch: int = FEED_BATCH,
    quotas: Quotas | None = None,
    owner_members: Sequence[bytes] = (),
) -> FeedResult:
    """One invocation (the caller holds the feeder lock: the feeder round's `KeyedSweep`).
    `quotas`: the policy's for the member's VO; `owner_members`: the owner's other Active
    members (the hourly quota counts their inputs too)."""
    assert transformation.feeder is not None
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        state = await db.feeder_state(conn, transformation.id)
    if state.exhausted or state.held:
        return FeedResult()  # exhausted or held since the round listed it: nothing to do
    started = time.perf_counter()
    result = FeedResult()
    pending: list[db.NewInput] = []
    bookmark: Any = db.KEEP

    async def commit(exhausted: bool = False, held: str | None = None) -> bool:
        nonlocal pending, bookmark
        outcome = await _commit(database, transformation.id, pending, bookmark, exhausted, held)
        if not outcome.accepted:
            result.stopped = True
            return False
        result.batches += 1
        result.inserted += outcome.inserted
        if bookmark is not db.KEEP:
            result.bookmark = bookmark
        result.exhausted, result.held = exhausted, held
        pending, bookmark = [], db.KEEP
        return True

    # A feeder with nothing left to feed is not held at an allowance of 0: only its next input.
    allowed = await allowance(database, transformation, quotas or Quotas(), owner_members)

    stream = plugin_stream(
        registry,
        Point.FEEDER,
        transformation.feeder,
        transformation.feeder_args,
        phase=transformation.phase,
        transformation=transformation.view(),
        feeder_state=state.bookmark if isinstance(state.bookmark, dict) else None,
    )
    try:
        async for item in stream:
            if isinstance(item, Input):
                if allowed.inputs is not None and result.inserted + len(pending) >= allowed.inputs:
                    # At the limit: what is pending may hold inputs already there (a feeder
                    # resumed from an older bookmark yields them again), so commit it and count
                    # what was new before holding the feeder.
                    if pending and not await commit():
                        break
                    if result.inserted >= allowed.inputs:
                        await commit(held=allowed.reason)
                        break
                pending.append(db.NewInput.of(item))
                result.yielded += 1
                if len(pending) >= batch and not await commit():
                    break
            elif isinstance(item, SetFeederState):
                bookmark = item.state
            elif isinstance(item, NoMoreInputs):
                await commit(exhausted=True)
                break
        else:
            if pending or bookmark is not db.KEEP:
                await commit()
    except Exception as error:
        result.error, result.failure = str(error), error
        await _record_failure(database, transformation, error)
    finally:
        await stream.aclose()
    metrics.INPUTS_FED.labels(feeder=transformation.feeder).inc(result.inserted)
    if result.held:
        log.warning("feeder %s of %s: %s", transformation.feeder, _tid(transformation), result.held)
    if result.exhausted:
        metrics.FEEDERS_EXHAUSTED.labels(feeder=transformation.feeder).inc()
        log.info("feeder %s of %s is exhausted", transformation.feeder, _tid(transformation))
    metrics.RUN_SECONDS.labels(point="Feeder").observe(time.perf_counter() - started)
    return result


async def _commit(
    database: Database,
    transformation_id: bytes,
    proposals: Sequence[db.NewInput],
    bookmark: Any,
    exhausted: bool,
    held: str | None = None,
) -> db.BatchResult:
    async def work(conn: Any) -> db.BatchResult:
        now = await db_now(conn)
        return await db.commit_batch(
            conn,
            transformation_id,
            proposals,
            bookmark=bookmark,
            exhausted=exhausted,
            held=held,
            now=now,
        )

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def _record_failure(
    database: Database, transformation: ActiveTransformation, error: Exception
) -> None:
    """Log row + metric; the failure is the invocation's, never the transformation's state."""
    feeder = transformation.feeder or "?"
    metrics.PLUGIN_FAILURES.labels(point="Feeder", plugin=feeder).inc()
    log.warning("feeder %s of %s failed: %s", feeder, _tid(transformation), error)
    data = {"feeder": feeder, "error": type(error).__name__}
    try:
        async with database.transaction(Isolation.READ_COMMITTED) as conn:
            await db.log_feeder(conn, transformation.id, "FeederFailed", str(error), data)
    except (DxtsError, OSError) as logging_error:  # the database itself may be what failed
        log.warning("could not log the failure of %s: %s", _tid(transformation), logging_error)
    except Exception:
        log.exception("could not log the failure of %s", _tid(transformation))


def _tid(transformation: ActiveTransformation) -> str:
    return str(UUID(bytes=transformation.id))


# ------------------------------------------------------------------- the Edge feeder's reader


class EdgeReader(ParcelOutputReader):
    """`ParcelOutputReader` over execution's tables and the exact counters; the producer of an
    output is looked up among the Active transformations (a producer that is not Active is
    not drained: Paused, New or held — and a workgraph leaves Active only once every member,
    this consumer included, is drained).

    The watermark is read at most once every `watermark_interval_s` per output: its read takes
    the output's lock exclusively, which waits for the recording transactions writing under it
    and holds back the ones that start meanwhile, and a feeder that did work runs again at once,
    so reading it every round would stall recording for as long as production lasts. An older
    watermark is still safe (nothing below it can appear), only later; once the producer is
    seen drained the next read is always fresh, so the feed that follows goes to the end."""

    def __init__(
        self, database: Database, snapshot: ActiveSnapshot, *, watermark_interval_s: float
    ) -> None:
        self._database = database
        self._snapshot = snapshot
        self._interval_s = watermark_interval_s
        self._read: dict[UUID, tuple[float, UUID | None]] = {}  # output → (when, watermark)
        self._drained: set[UUID] = set()

    async def settled_through(self, transformation_output_id: UUID) -> UUID | None:
        now = time.monotonic()
        previous = self._read.get(transformation_output_id)
        fresh_needed = transformation_output_id in self._drained
        if previous is not None and not fresh_needed and now - previous[0] < self._interval_s:
            return previous[1]
        async with self._database.transaction(Isolation.READ_COMMITTED) as conn:
            through = await watermark.settled_through(conn, transformation_output_id.bytes)
        read = None if through is None else UUID(bytes=bytes(through))
        self._read[transformation_output_id] = (now, read)
        return read

    async def outputs(
        self,
        transformation_output_id: UUID,
        *,
        after: UUID | None,
        through: UUID,
        limit: int,
    ) -> list[ProducedFile]:
        async with self._database.transaction(Isolation.READ_COMMITTED) as conn:
            rows = await db.parcel_outputs_between(
                conn, transformation_output_id.bytes, after=after, through=through, limit=limit
            )
        return [ProducedFile(UUID(bytes=r.output_id), r.lfn, r.lfn_size) for r in rows]

    async def producer_drained(self, transformation_output_id: UUID) -> bool:
        producer = await self._snapshot.producer_of(transformation_output_id.bytes)
        drained = (
            producer is not None
            and not (
                producer.feeder_enabled
                and producer.id not in await exhausted_feeders(self._database, [producer.id])
            )
            and not await live_work(self._database, producer.id)
        )
        if drained:
            self._drained.add(transformation_output_id)
        else:
            self._drained.discard(transformation_output_id)
        return drained


async def live_work(database: Database, transformation_id: bytes) -> bool:
    """Whether any input or parcel of the transformation is in a non-terminal state (the exact
    counters, one statement)."""
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        reading = await TRANSFORMATION.read(conn, {"TransformationID": transformation_id})
    for (_, entity, status), values in reading.items():
        live = LIVE_INPUT_STATES if entity == Entity.INPUT else LIVE_PARCEL_STATES
        if status in live and values["Count"] > 0:
            return True
    return False
