"""The packer runner: one packer invocation for one transformation, under its packer lock.

The packer is streamed the claimable inputs (Unassigned, DelayedUntil passed) with `flush`,
`feeder_active` and the exact `input_overview` (one counter read), and what it proposes becomes
rows in batches of `batch` decided inputs, one transaction each (`db.packing.write_batch`).
Before, under the same lock, what the core holds for the packer is revisited: inputs its
`after` wait set aside (`after_review`), and sets withheld for a partner that has since been made
(`partner_release`).

Claim, hand over, re-check. Each chunk is claimed with `FOR UPDATE SKIP LOCKED` in a READ
COMMITTED transaction that commits as soon as the rows are read; the rows are then handed to
the packer with no lock held, and every decision is written by conditional UPDATEs that must
find each named input still Unassigned (a short row count rolls the batch back). The row locks
are deliberately not kept open while the packer decides:

* a grouping packer holds undersized groups across chunks, so a proposal names inputs claimed
  many chunks earlier; keeping their locks means one transaction spanning the whole invocation
  (a million-input pool would hold a million row locks, and undo, for as long as the plugin
  takes, including any external lookup it makes, or any time it hangs);
* every other writer of Unassigned inputs (an operator's write-off, a halt, a cancellation,
  HandleFailedInput returning inputs) would wait on those locks for that long;
* the per-transformation packer lock already excludes a second packer, so the only races left
  are those occasional writers, and against them the conditional UPDATE is exact: it re-reads
  the row under its own lock, so an input is never assigned twice nor moved from a state it
  left. SKIP LOCKED at the claim keeps the packer from waiting on a row such a writer holds at
  that moment: the row is not offered now and is claimed by a later sweep.

A proposal must name inputs offered in this invocation and not yet decided: anything else (an
input never offered, one proposed twice, a parcel of the wrong Kind) is refused with an error
naming the input and why, the invocation ends with its current batch unwritten, and the failure
is logged (TransformationLog `PackerFailed` + metric), like a packer that raises; the next sweep
runs it again. Only the offered-but-undecided inputs are kept (`_Offer.pending`), so the
runner's memory follows what the packer itself holds back, not the size of the pool.

A sweep's invocation is offered only the inputs minted before its round read the
transformations (`minted_before`, an id taken just before that read): an input fed after it may
have been fed because of something that read did not yet show (a sign-off moving the workgraph
out of its scout, with the requirements estimated before it), and the round that packs it must
carry at least what the round that fed it saw. Such an input waits for the next round, which the
feeder sets off and which reads the transformations again. The read may in turn be newer than
the bound (the feeder, having fed those inputs, reported that nothing more comes): while inputs
past the bound wait, the packer is told that its feeder is active, so that it does not release
a partial group that the waiting inputs would have filled.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any
from uuid import UUID

from dxts.core.builtins.after import after_of
from dxts.core.counters import TRANSFORMATION, Entity
from dxts.core.db import Database, Isolation, db_now
from dxts.core.errors import DxtsError, FailedPrecondition, FieldViolation, InvalidArgument
from dxts.core.locks import Lock, LockKind, LockManager
from dxts.core.plugins import (
    BadInput,
    ComputeParcel,
    DataParcel,
    DelayInput,
    InputOverview,
    InputRecord,
    Point,
    Registry,
)
from dxts.core.plugins.protocols.readers import (
    ConsumerLookup,
    InputOverviewReader,
    Partner,
    PartnerLookup,
)
from dxts.core.policy import Policy
from dxts.core.states import InputStatus, Kind
from dxts.execution import metrics
from dxts.execution.logic import partner_release
from dxts.execution.logic.after_review import review
from dxts.execution.logic.failed_inputs import merge_directives
from dxts.execution.logic.feeding import plugin_stream
from dxts.execution.logic.requirement_policy import held_to_policy
from dxts.execution.logic.transformations import ActiveSnapshot, ActiveTransformation
from dxts.execution.store import failed_inputs as failed_db
from dxts.execution.store import packing as db
from dxts.execution.store import partners
from dxts.execution.store.consumers import consumed

log = logging.getLogger(__name__)

CLAIM_CHUNK = 1000
PACK_BATCH = 2000


def packer_lock(transformation_id: bytes) -> Lock:
    """The mutex of one transformation's packer."""
    return Lock(LockKind.PACKER, transformation_id)


@dataclass
class PackResult:
    """What one invocation did."""

    ran: bool = True  # False: another holder had the lock, or the packer may not run
    followed: int = 0  # set-aside inputs moved after their `after` consumer (`after_review`)
    released: int = 0  # withheld sets offered again, their partner made (`partner_release`)
    offered: int = 0  # inputs streamed to the packer
    parcels: int = 0
    assigned: int = 0
    problematic: int = 0
    delayed: int = 0
    batches: int = 0
    error: str | None = None  # the failure's words
    error_class: str | None = None  # its class: the exception's type (PluginFailed, ...)
    failure: BaseException | None = field(default=None, repr=False)


async def pack(
    database: Database,
    registry: Registry,
    locks: LockManager,
    transformation: ActiveTransformation,
    *,
    flush: bool = False,
    claim_chunk: int = CLAIM_CHUNK,
    batch: int = PACK_BATCH,
    minted_before: bytes | None = None,
    policy: Policy | None = None,
) -> PackResult:
    """Run the transformation's packer once if it may run and nobody else is running it."""
    if not transformation.packs:
        return PackResult(ran=False)
    async with locks.try_hold(packer_lock(transformation.id)) as held:
        if not held:
            return PackResult(ran=False)
        return await run_packer(
            database,
            registry,
            transformation,
            flush=flush,
            claim_chunk=claim_chunk,
            batch=batch,
            minted_before=minted_before,
            policy=policy,
        )


async def input_overview(database: Database, transformation_id: bytes) -> InputOverview:
    """Every input status with its exact count (zeros included), in one counter read."""
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        reading = await TRANSFORMATION.read(
            conn, {"TransformationID": transformation_id, "Entity": Entity.INPUT.value}
        )
    overview = dict.fromkeys(InputStatus, 0)
    for (_, _, status), values in reading.items():
        overview[InputStatus(status)] = values["Count"]
    return overview


class _Offer:
    """The claimed inputs, streamed to the packer chunk by chunk, and those still undecided."""

    def __init__(
        self,
        database: Database,
        transformation_id: bytes,
        chunk: int,
        minted_before: bytes | None = None,
    ) -> None:
        self.database = database
        self.transformation_id = transformation_id
        self.chunk = chunk
        self.minted_before = minted_before
        self.pending: dict[UUID, bytes] = {}  # offered, undecided: the id as stored
        self.retried: set[bytes] = set()  # offered inputs that failed before (ErrorCount > 0)
        self.decided: set[UUID] = set()  # this batch's (earlier ones: see `explain`)
        self.offered = 0

    async def records(self) -> AsyncIterator[InputRecord]:
        after: bytes | None = None
        while True:
            async with self.database.transaction(Isolation.READ_COMMITTED) as conn:
                chunk = await db.claim_chunk(
                    conn,
                    self.transformation_id,
                    after=after,
                    before=self.minted_before,
                    limit=self.chunk,
                )
            # Committed: the row locks are gone (see the module docstring).
            self.offered += len(chunk)
            for record in chunk:
                self.pending[record.id] = record.id.bytes
                if record.error_count:
                    self.retried.add(record.id.bytes)
                yield record
            if len(chunk) < self.chunk:
                return
            after = chunk[-1].id.bytes

    async def take(self, ids: Sequence[UUID], where: str) -> list[bytes]:
        """Mark `ids` decided and return them as stored; InvalidArgument naming the first that
        may not be (the invocation then ends, so the ids before it need not be put back)."""
        taken = []
        for index, input_id in enumerate(ids):
            stored = self.pending.pop(input_id, None)
            if stored is None:
                raise InvalidArgument(await self.explain(input_id), field=f"{where}[{index}]")
            self.decided.add(input_id)
            taken.append(stored)
        return taken

    async def explain(self, input_id: UUID) -> str:
        """Why a proposal may not name `input_id` (looked up only when one is refused)."""
        if input_id in self.decided:
            return f"input {input_id} was already proposed in this invocation"
        async with self.database.transaction(Isolation.READ_COMMITTED) as conn:
            found = await db.input_states(conn, self.transformation_id, [input_id.bytes])
        if input_id.bytes not in found:
            return f"input {input_id} is not an input of this transformation"
        status, delayed = found[input_id.bytes]
        if status != InputStatus.UNASSIGNED:
            return f"input {input_id} was already decided (it is {status}): proposed twice?"
        if delayed is not None:
            return f"input {input_id} is withheld until {delayed}: it was not offered"
        if self.minted_before is not None and input_id.bytes >= self.minted_before:
            return f"input {input_id} was fed after this round began: the next round offers it"
        return f"input {input_id} was not offered to this invocation"

    def batch_written(self) -> None:
        self.decided.clear()


async def run_packer(
    database: Database,
    registry: Registry,
    transformation: ActiveTransformation,
    *,
    flush: bool = False,
    claim_chunk: int = CLAIM_CHUNK,
    batch: int = PACK_BATCH,
    minted_before: bytes | None = None,
    policy: Policy | None = None,
) -> PackResult:
    """One invocation (the caller holds the packer lock), offered the claimable inputs minted
    before `minted_before` (all of them without it); the parcels' requirements held to
    `policy`, the member's VO's (`requirement_policy`; None: not held)."""
    started = time.perf_counter()
    result = PackResult()
    target = db.Target(
        transformation.id,
        transformation.kind,
        transformation.process_id,
        transformation.requirements_template,
    )
    offer = _Offer(database, transformation.id, claim_chunk, minted_before)
    pending = db.Batch()
    try:
        if transformation.kind is Kind.COMPUTE and transformation.process_id is None:
            raise FailedPrecondition(
                f"compute transformation {_tid(transformation)} has no ProcessID to run"
            )
        waits_on = after_of(transformation.view())
        result.followed = (await review(database, transformation.id, waits_on)).moved
        finder = await _partner_finder(registry)
        if finder is not None:
            result.released = await finder.releases.release(transformation)
        stream = plugin_stream(
            registry,
            Point.PACKER,
            transformation.packer,
            transformation.packer_args,
            phase=transformation.phase,
            transformation=transformation.view(),
            inputs=offer.records(),
            flush=flush,
            feeder_active=await _feeder_active(database, transformation, minted_before),
            input_overview=await input_overview(database, transformation.id),
        )
        try:
            index = 0
            async for proposal in stream:
                await _decide(offer, pending, transformation.kind, proposal, f"yield[{index}]")
                index += 1
                if pending.size >= batch:
                    await _write(database, target, pending, result, policy)
                    offer.batch_written()
                    pending = db.Batch()
            if pending:
                await _write(database, target, pending, result, policy)
        finally:
            await stream.aclose()
    except Exception as error:
        result.error, result.error_class, result.failure = str(error), type(error).__name__, error
        await _record_failure(database, transformation, error, flush=flush)
    result.offered = offer.offered
    _count(transformation, result)
    metrics.RUN_SECONDS.labels(point="Packer").observe(time.perf_counter() - started)
    return result


async def _partner_finder(registry: Registry) -> PartnerFinder | None:
    """Execution's `PartnerLookup`, when the registry's providers have it."""
    wanted: Any = PartnerLookup  # a Protocol: the providers match it as it was registered
    if not registry.providers.can_provide(wanted):
        return None
    found = await registry.providers.get(wanted)
    return found if isinstance(found, PartnerFinder) else None


async def _feeder_active(
    database: Database, transformation: ActiveTransformation, minted_before: bytes | None
) -> bool:
    """What the packer is told: more input may come, from the feeder or, past the round's
    bound, already fed and waiting for the next round."""
    if transformation.feeder_active or minted_before is None:
        return transformation.feeder_active
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return await db.any_unassigned_from(conn, transformation.id, minted_before)


async def _decide(offer: _Offer, pending: db.Batch, kind: Kind, proposal: Any, where: str) -> None:
    """Check one proposal against what was offered and add it to the batch."""
    if isinstance(proposal, ComputeParcel | DataParcel):
        wanted = Kind.COMPUTE if isinstance(proposal, ComputeParcel) else Kind.DATA
        if wanted is not kind:
            raise InvalidArgument(
                FieldViolation(
                    where, f"a {kind.value} transformation's parcels are not {wanted.value}"
                )
            )
        taken = await offer.take(proposal.inputs, f"{where}.inputs")
        pending.parcels.append(db.Decided.of(proposal, taken))
        pending.size += len(taken)
        pending.retried.update(offer.retried.intersection(taken))
    elif isinstance(proposal, BadInput):
        (taken_id,) = await offer.take([proposal.input_id], f"{where}.input_id")
        pending.bad.append((taken_id, proposal.reason))
        pending.size += 1
    elif isinstance(proposal, DelayInput):
        taken = await offer.take(proposal.input_ids, f"{where}.input_ids")
        until = proposal.delay_until.astimezone(UTC).replace(tzinfo=None)
        pending.delays.setdefault(until, []).extend(taken)
        pending.size += len(taken)


async def _write(
    database: Database,
    target: db.Target,
    pending: db.Batch,
    result: PackResult,
    policy: Policy | None,
) -> None:
    async def work(conn: Any) -> db.Written:
        if pending.retried:
            await _follow_retry_directives(conn, target, pending)
        if policy is not None and target.kind is Kind.COMPUTE:
            held_to_policy(target, pending, policy)
        return await db.write_batch(conn, target, pending, now=await db_now(conn))

    written = await database.run(work, isolation=Isolation.READ_COMMITTED)
    result.batches += 1
    result.parcels += written.parcels
    result.assigned += written.assigned
    result.problematic += written.problematic
    result.delayed += written.delayed


async def _follow_retry_directives(conn: Any, target: db.Target, pending: db.Batch) -> None:
    """Give each parcel of the batch what a RetryWith asked for its inputs that failed before
    (`failed_inputs.RETRY_WITH` on the parcel each last failed in): the raised requirements over
    the packer's, the backend it named. Only inputs with an ErrorCount are looked up."""
    found = await failed_db.retry_directives(
        conn, target.transformation_id, sorted(pending.retried)
    )
    if not found:
        return
    for index, decided in enumerate(pending.parcels):
        asked: dict[str, Any] | None = None
        for input_id in decided.input_ids:
            if input_id in found:
                asked = merge_directives(asked, found[input_id])
        if asked is None:
            continue
        changes: dict[str, Any] = {}
        if asked.get("requirements") and target.kind is Kind.COMPUTE:
            changes["requirements"] = {**(decided.requirements or {}), **asked["requirements"]}
        if asked.get("backend"):
            changes["backend"] = asked["backend"]
        pending.parcels[index] = decided._replace(**changes)


async def _record_failure(
    database: Database, transformation: ActiveTransformation, error: Exception, *, flush: bool
) -> None:
    """Count and log the failure: a PackerFailed row (its words, its class in `error`, and
    whether a flush asked for the invocation), which the member's attention quotes."""
    packer = transformation.packer
    metrics.PLUGIN_FAILURES.labels(point="Packer", plugin=packer).inc()
    quiet = isinstance(error, db.ClaimLost)
    (log.info if quiet else log.warning)(
        "packer %s of %s stopped: %s", packer, _tid(transformation), error
    )
    data = {"packer": packer, "error": type(error).__name__, "flush": flush}
    try:
        async with database.transaction(Isolation.READ_COMMITTED) as conn:
            await db.log_packer(conn, transformation.id, "PackerFailed", str(error), data)
    except (DxtsError, OSError) as logging_error:
        log.warning("could not log the failure of %s: %s", _tid(transformation), logging_error)
    except Exception:
        log.exception("could not log the failure of %s", _tid(transformation))


def _tid(transformation: ActiveTransformation) -> str:
    return str(UUID(bytes=transformation.id))


def _count(transformation: ActiveTransformation, result: PackResult) -> None:
    packer = transformation.packer
    for outcome, count in (
        ("assigned", result.assigned),
        ("problematic", result.problematic),
        ("delayed", result.delayed),
    ):
        metrics.INPUTS_PACKED.labels(packer=packer, outcome=outcome).inc(count)
    metrics.PARCELS_CREATED.labels(packer=packer, kind=transformation.kind.value).inc(
        result.parcels
    )


# ----------------------------------------------------------------- the readers plugins use


class CounterReader(InputOverviewReader):
    """`InputOverviewReader` over the exact Transformation counter."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def input_overview(self, transformation_id: UUID) -> InputOverview:
        return await input_overview(self._database, transformation_id.bytes)


class PartnerFinder(PartnerLookup):
    """`PartnerLookup` over execution's tables; the partner output's producer is looked up
    among the Active transformations (none Active: no partner input is found, so every
    driving input waits). It holds the release of the sets withheld for a partner that has
    since been made (`partner_release`), which the runner applies before the joining packers
    look up again."""

    def __init__(self, database: Database, snapshot: ActiveSnapshot) -> None:
        self._database = database
        self._snapshot = snapshot
        self.releases = partner_release.PartnerRelease(database)

    async def partners(
        self, lfns: Sequence[str], *, driving_output: UUID, partner_output: UUID
    ) -> dict[str, Partner]:
        producer = await self._snapshot.producer_of(partner_output.bytes)
        async with self._database.transaction(Isolation.READ_COMMITTED) as conn:
            found = await partners.find_partners(
                conn,
                lfns,
                driving_output=driving_output.bytes,
                partner_output=partner_output.bytes,
                partner_transformation=producer.id if producer else None,
            )
        return found


class ConsumerReader(ConsumerLookup):
    """`ConsumerLookup` over the consumers' Inputs (the `after` wait of any member)."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def consumed(
        self, lfns: Sequence[str], *, consumers: Sequence[UUID]
    ) -> dict[UUID, dict[str, tuple[InputStatus, ...]]]:
        async with self._database.transaction(Isolation.READ_COMMITTED) as conn:
            found = await consumed(conn, lfns, [c.bytes for c in consumers])
        return {
            UUID(bytes=tid): {lfn: tuple(statuses) for lfn, statuses in files.items()}
            for tid, files in found.items()
        }
