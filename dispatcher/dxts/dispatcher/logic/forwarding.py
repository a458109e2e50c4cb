"""Bringing the backends' answers back: polling, the push path, and cancellations.

* Poll (`poll_once`, per backend, one replica at a time through a named lock): the backend's
  Assigned parcels, page by page on the (Backend, Status) index, are polled for terminal
  outcomes, which are checked (`outcomes`) and forwarded to execution in batches, two pages in
  flight at a time (execution records one while the next is read and polled). Nothing is
  written here: execution takes a parcel past Assigned when it records the outcome, which is
  what ends its polling; until then a re-poll forwards the same outcome again, which execution
  acknowledges and ignores.
* Push (`report`): an adaptor that reports on its own sends the same outcomes to
  `DispatcherService.ReportOutcomes`; the dispatcher resolves each identifier to its parcel
  through the identifier table and forwards them the same way.
* Cancel (`cancel_once`, per backend, under its own lock): execution marks a cancellation by
  moving a Reserved or Assigned parcel to Completing with `Annotations.cancel_requested = true`
  (`store.forwarding.CANCEL_REQUESTED`). For each such parcel of the backend the dispatcher asks
  the adaptor to cancel (again every `cancel_resend_s` until confirmed) and polls it, so the
  confirmation (a CANCELLED outcome, or whatever the work ended as) is forwarded like any
  outcome. A cancelled
  parcel with no identifier recorded, once older than the lease (no dispatcher is still
  submitting it), is cancelled by its idempotency key: if the adaptor had accepted it, its
  identifier is recorded and it is polled like the others; if it never had, the adaptor now
  refuses the key for good and the dispatcher forwards the CANCELLED outcome itself.
* Lost parcels (`_lost`): an identifier the backend answers it does not know (a restarted
  adaptor that kept its work in memory) is given `lost_grace_s` to reappear (an adaptor
  restoring its state); after that the dispatcher forwards the outcome itself: FAILED "lost by
  the backend" (execution's failed-input hook decides what becomes of the inputs), or CANCELLED
  when its cancellation was asked. Either takes the parcel past Assigned, which frees its
  place in the backend's capacity. The grace is timed by the replica that polls: another
  replica taking the poll over starts it again, which only waits longer.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from dxts.core.adaptor.model import (
    CancelledKey,
    Failure,
    FailureClass,
    Outcome,
    OutcomeAck,
    OutcomeDisposition,
    OutcomeResult,
    ReportMode,
)
from dxts.core.db import Database, Isolation, Transaction
from dxts.core.errors import InvalidArgument, NotFound, Unavailable
from dxts.core.ids import id_from_str, id_to_str
from dxts.core.kernel.lanes import in_flight
from dxts.core.kernel.sweeps import KeyedSweep
from dxts.core.locks import LockKind, LockManager
from dxts.dispatcher.logic.backends import Backend, BackendUnreachable
from dxts.dispatcher.logic.dispatch import chunks
from dxts.dispatcher.logic.outcomes import OutcomeSink, as_failure, manifest_problem
from dxts.dispatcher.metrics import BAD_OUTCOMES, CANCELS, OUTCOMES, UNREACHABLE
from dxts.dispatcher.settings import DispatcherSettings
from dxts.dispatcher.store.forwarding import assigned_page, cancel_requests
from dxts.dispatcher.store.identifiers import (
    insert_identifiers,
    parcels_of_identifiers,
    reserved_for,
)

log = logging.getLogger(__name__)

RC = Isolation.READ_COMMITTED
# The `disposition` label of OUTCOMES: the contract's enum names, as before the domain types.
_DISPOSITION_LABELS = {d: f"OUTCOME_DISPOSITION_{d.name}" for d in OutcomeDisposition}
# Pages of a poll in flight at a time: one recorded by execution while the next is polled.
POLL_LANES = 2


class Forwarder:
    def __init__(
        self,
        database: Database,
        settings: DispatcherSettings,
        backends: Mapping[str, Backend],
        sink: OutcomeSink,
        locks: LockManager,
    ) -> None:
        self.database = database
        self.settings = settings
        self.backends = dict(backends)
        self.sink = sink
        self.locks = locks
        # Each backend's poll and its cancellations, by one replica at a time (skipped, never
        # waited for, when another holds them).
        self.polls: KeyedSweep[Backend] = KeyedSweep(
            LockKind.DISPATCH_POLL, locks, 1, key=lambda backend: backend.name
        )
        self.cancels: KeyedSweep[Backend] = KeyedSweep(
            LockKind.DISPATCH_CANCEL, locks, 1, key=lambda backend: backend.name
        )
        self._cancel_sent: dict[bytes, float] = {}
        self._unknown_since: dict[bytes, float] = {}  # ParcelID → first answered unknown

    # -- checking and forwarding --------------------------------------------------------------

    def _bad(self, backend: Backend, reason: str, detail: str) -> None:
        backend.state.bad_outcomes += 1
        BAD_OUTCOMES.labels(backend.name, reason).inc()
        log.warning("%s reported an unusable outcome (%s): %s", backend.name, reason, detail)

    def _checked(
        self, backend: Backend, outcome: Outcome, expected: Mapping[str, bytes]
    ) -> Outcome | None:
        """The outcome to forward, naming its parcel and backend; None to drop it."""
        parcel_id = expected.get(outcome.identifier)
        if parcel_id is None:
            self._bad(backend, "unknown_identifier", repr(outcome.identifier[:80]))
            return None
        if outcome.parcel_id and outcome.parcel_id != id_to_str(parcel_id):
            self._bad(
                backend,
                "parcel_mismatch",
                f"{outcome.identifier} is parcel {id_to_str(parcel_id)}, "
                f"reported as {outcome.parcel_id[:40]!r}",
            )
            return None
        checked = dataclasses.replace(outcome, parcel_id=id_to_str(parcel_id), backend=backend.name)
        problem = manifest_problem(checked)
        if problem is not None:
            self._bad(backend, "malformed", f"{outcome.identifier}: {problem}")
            checked = as_failure(checked, problem)
        return checked

    async def _forward(self, backend: Backend, outcomes: Sequence[Outcome]) -> list[OutcomeAck]:
        """Forward in batches; raises Unavailable when execution cannot take them (the outcomes
        are still the adaptor's to report again)."""
        acks: list[OutcomeAck] = []
        for chunk in chunks(outcomes, self.settings.outcome_batch):
            answered = await self.sink.record(chunk)
            for ack in answered:
                OUTCOMES.labels(backend.name, _DISPOSITION_LABELS[ack.disposition]).inc()
                if ack.disposition is OutcomeDisposition.UNKNOWN_PARCEL:
                    log.warning("execution knows no parcel %s (%s)", ack.parcel_id, ack.message)
            acks.extend(answered)
        return acks

    def _lost(
        self,
        backend: Backend,
        unknown: Sequence[str],
        expected: Mapping[str, bytes],
        result: OutcomeResult,
    ) -> list[Outcome]:
        """The outcomes of the parcels whose identifiers the backend has not known for the
        grace period; starts the clock of those it has just stopped knowing."""
        missing = {expected[i]: i for i in unknown if i in expected}
        for parcel_id in expected.values():
            if parcel_id not in missing:
                self._unknown_since.pop(parcel_id, None)
        newly = [i for p, i in missing.items() if p not in self._unknown_since]
        if newly:
            log.warning(
                "%s no longer knows %d identifiers the dispatcher recorded (first: %s): lost "
                "unless it knows them again within %g s",
                backend.name,
                len(newly),
                newly[0],
                self.settings.lost_grace_s,
            )
        clock = time.monotonic()
        return [
            Outcome(
                parcel_id=id_to_str(parcel_id),
                backend=backend.name,
                identifier=identifier,
                result=result,
                backend_status="lost",
                message=f"lost by the backend: {backend.name} no longer knows {identifier}",
                failure=Failure(FailureClass.LOST) if result is OutcomeResult.FAILED else None,
            )
            for parcel_id, identifier in missing.items()
            if clock - self._unknown_since.setdefault(parcel_id, clock)
            >= self.settings.lost_grace_s
        ]

    async def _poll_and_forward(
        self,
        backend: Backend,
        expected: Mapping[str, bytes],
        lost_as: OutcomeResult = OutcomeResult.FAILED,
    ) -> int:
        """Poll `expected` (identifier → ParcelID) and forward what ended, the lost included
        (as `lost_as`); returns the outcomes forwarded."""
        try:
            reply = await backend.poll(list(expected))
        except BackendUnreachable as error:
            UNREACHABLE.labels(backend.name, error.rpc).inc()
            log.warning("%s", error)
            return 0
        outcomes = [
            checked
            for outcome in reply.outcomes
            if (checked := self._checked(backend, outcome, expected)) is not None
        ]
        lost = self._lost(backend, reply.unknown_identifiers, expected, lost_as)
        outcomes += lost
        if not outcomes:
            return 0
        try:
            await self._forward(backend, outcomes)
        except Unavailable as error:
            log.warning("%d outcomes of %s not forwarded: %s", len(outcomes), backend.name, error)
            return 0
        for outcome in lost:
            self._unknown_since.pop(expected[outcome.identifier], None)
        if lost:
            log.warning("%d parcels of %s lost by the backend", len(lost), backend.name)
        return len(outcomes)

    # -- the sweeps ---------------------------------------------------------------------------

    async def poll_once(self, backend: Backend) -> int:
        """Poll every Assigned parcel of a pull backend; returns the outcomes forwarded.

        Pages are polled and forwarded `POLL_LANES` at a time: while execution records one
        page's outcomes, the next page is read and polled. A failure of one lane (other than
        the backend or execution being away, which `_poll_and_forward` absorbs) cancels the
        others and is raised: what they had not forwarded is polled again next round."""
        if backend.state.report_mode is ReportMode.PUSH:
            return 0
        return sum(await self.polls.run([backend], self._poll))

    async def _poll(self, backend: Backend) -> int:
        """`poll_once` under the backend's poll lock."""
        after: bytes | None = None
        async with in_flight(POLL_LANES) as running:
            while True:
                page = await self.database.run(
                    functools.partial(
                        assigned_page,
                        backend=backend.name,
                        adaptor=backend.adaptor,
                        after=after,
                        limit=self.settings.poll_batch,
                    ),
                    isolation=RC,
                )
                if not page:
                    break
                after = page[-1][0]
                expected = {id_to_str(identifier): pid for pid, identifier in page}
                await running.start(
                    functools.partial(self._poll_and_forward, backend, expected)
                )
                if len(page) < self.settings.poll_batch:
                    break
        backend.state.last_poll_at = datetime.now(UTC)
        return running.total

    async def cancel_once(self, backend: Backend) -> int:
        """Pass the backend's cancel requests on, and forward what they ended as; returns the
        parcels asked to cancel."""
        return sum(await self.cancels.run([backend], self._cancel))

    async def _cancel(self, backend: Backend) -> int:
        """`cancel_once` under the backend's cancel lock."""
        requests, now = await self.database.run(
            lambda conn: cancel_requests(
                conn, backend.name, backend.adaptor, self.settings.poll_batch
            ),
            isolation=RC,
        )
        requested = {r.parcel_id for r in requests}
        self._cancel_sent = {p: t for p, t in self._cancel_sent.items() if p in requested}
        known = {r.parcel_id: r.identifier for r in requests if r.identifier is not None}
        lease = timedelta(seconds=self.settings.lease_s)
        keys = [
            r.parcel_id
            for r in requests
            if r.identifier is None and now - r.updated_at >= lease
        ]
        clock = time.monotonic()
        due = [
            p
            for p in known
            if clock - self._cancel_sent.get(p, -1e18) >= self.settings.cancel_resend_s
        ]
        if due or keys:
            try:
                reply = await backend.cancel(
                    identifiers=[id_to_str(known[p]) for p in due],
                    parcel_ids=[id_to_str(p) for p in keys],
                )
            except BackendUnreachable as error:
                UNREACHABLE.labels(backend.name, error.rpc).inc()
                log.warning("%s", error)
                return 0
            CANCELS.labels(backend.name).inc(len(due) + len(keys))
            self._cancel_sent.update(dict.fromkeys(due, clock))
            known.update(await self._settle_keys(backend, reply.keys, set(keys)))
        if known:
            for page in chunks(sorted(known.items()), self.settings.poll_batch):
                await self._poll_and_forward(
                    backend,
                    {id_to_str(identifier): pid for pid, identifier in page},
                    lost_as=OutcomeResult.CANCELLED,
                )
        return len(due) + len(keys)

    async def _settle_keys(
        self,
        backend: Backend,
        answers: Sequence[CancelledKey],
        asked: set[bytes],
    ) -> dict[bytes, bytes]:
        """Record the identifiers of keys the adaptor had accepted; forward CANCELLED for keys it
        never had. Returns the newly known ParcelID → identifier."""
        found: dict[bytes, bytes] = {}
        never: list[bytes] = []
        for answer in answers:
            try:
                parcel_id = id_from_str(answer.parcel_id, field="parcel_id")
                if parcel_id not in asked:
                    raise InvalidArgument("a key that was not asked about", field="parcel_id")
                if answer.identifier:
                    found[parcel_id] = id_from_str(answer.identifier, field="identifier")
                else:
                    never.append(parcel_id)
            except InvalidArgument as error:
                self._bad(backend, "cancel_answer", f"{answer.parcel_id[:40]!r}: {error}")
        if found:
            clashes = await self.database.run(
                lambda conn: insert_identifiers(conn, backend.adaptor, found),
                isolation=RC,
            )
            for parcel_id in clashes:
                self._bad(backend, "identifier_clash", id_to_str(parcel_id))
                found.pop(parcel_id)
        if never:
            outcomes = [
                Outcome(
                    parcel_id=id_to_str(parcel_id),
                    backend=backend.name,
                    result=OutcomeResult.CANCELLED,
                    backend_status="never accepted",
                    message="cancelled before the backend accepted it: nothing ran",
                )
                for parcel_id in never
            ]
            try:
                await self._forward(backend, outcomes)
            except Unavailable as error:
                log.warning("cancellations of %s not forwarded yet: %s", backend.name, error)
        return found

    # -- the push path ------------------------------------------------------------------------

    async def report(self, backend_name: str, outcomes: Sequence[Outcome]) -> list[OutcomeAck]:
        """Outcomes an adaptor pushed: one ack per outcome, in order. Raises Unavailable when
        execution cannot take them now (the adaptor pushes again).

        An adaptor may push an outcome before its Submit's answer is recorded (the identifier
        is not in BackendIDs yet): an outcome naming a parcel Reserved for this backend is
        answered UNKNOWN_PARCEL, to be pushed again, and is not a bad outcome. The Reserved
        parcels are read before the identifiers, so a recording committed in between is seen
        by the second read."""
        backend = self.backends.get(backend_name)
        if backend is None:
            raise NotFound("backend", backend_name)
        identifiers = {
            o.identifier: raw for o in outcomes if (raw := _parsed(o.identifier)) is not None
        }
        named = {raw for o in outcomes if (raw := _parsed(o.parcel_id)) is not None}

        async def work(conn: Transaction) -> tuple[set[bytes], dict[bytes, bytes]]:
            early = await reserved_for(conn, backend.name, named)
            found = await parcels_of_identifiers(
                conn, backend.name, backend.adaptor, identifiers.values()
            )
            return early, found

        early, found = await self.database.run(work, isolation=RC)
        expected = {text: found[raw] for text, raw in identifiers.items() if raw in found}
        forward: list[tuple[int, Outcome]] = []
        acks: list[OutcomeAck | None] = []
        for outcome in outcomes:
            if outcome.identifier not in expected and _parsed(outcome.parcel_id) in early:
                acks.append(_unknown(backend.name, outcome, NOT_RECORDED_YET))
                continue
            checked = self._checked(backend, outcome, expected)
            if checked is None:
                acks.append(_unknown(backend.name, outcome))
            else:
                forward.append((len(acks), checked))
                acks.append(None)
        answered = await self._forward(backend, [o for _, o in forward])
        for (index, _), ack in zip(forward, answered, strict=True):
            acks[index] = ack
        return [ack for ack in acks if ack is not None]


NOT_RECORDED_YET = "the parcel's identifier is not recorded yet: report it again"


def _parsed(text: str) -> bytes | None:
    """The id `text` spells, or None."""
    try:
        return id_from_str(text) if text else None
    except InvalidArgument:
        return None


def _unknown(
    backend: str,
    outcome: Outcome,
    message: str = "no parcel of this backend has that identifier",
) -> OutcomeAck:
    return OutcomeAck(
        parcel_id=outcome.parcel_id,
        backend=backend,
        identifier=outcome.identifier,
        disposition=OutcomeDisposition.UNKNOWN_PARCEL,
        message=message,
    )
