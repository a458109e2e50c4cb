"""Claim, submit, record: Unassigned → Reserved → Assigned, and the recovery of stale Reserved.

One round (`dispatch_once`) claims a batch of one kind (one transaction), records the sidecar of
its compute parcels (one transaction, before anything is submitted, so a re-submission sends
the same payload), submits it to each chosen backend in batches sharing one payload, and
records what each Submit answered (one transaction per Submit): accepted parcels get their
identifier row and go to Assigned together, refused ones go back to Unassigned. A Submit the
adaptor refuses as a whole (INVALID_ARGUMENT: the request is over one of its bounds, and would
be refused again on every retry) fails its parcels: a FAILED outcome of class `refused` in the
adaptor's words per parcel, recorded by execution (Reserved → Failed, the inputs Failed for
their retry rules), which the member's attention shows (`backend-refused`). A parcel whose
submission did not get an answer (adaptor down or too slow, a payload that could not be built)
stays Reserved: the recovery sweep (`recover_once`) re-submits Reserved parcels older than the
lease with the same key, and since every adaptor's Submit is idempotent on the ParcelID it gets
back the identifier of what it accepted the first time and starts nothing new. A crash of the
dispatcher anywhere in the round leaves the same state, closed the same way.

A parcel cancelled while it was being submitted (execution moved it Reserved → Completing with a
cancel request) makes the Reserved → Assigned update match nothing: its identifier is recorded
anyway and the backend is asked to cancel, so the confirmation arrives as the parcel's outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from dxts.core import content_store
from dxts.core.adaptor.model import (
    DataPayload,
    Failure,
    FailureClass,
    Outcome,
    OutcomeResult,
    Payload,
    SubmitDisposition,
    SubmitResult,
)
from dxts.core.db import Database, Isolation
from dxts.core.errors import InvalidArgument, NotFound, Unavailable
from dxts.core.ids import id_from_str, id_to_str
from dxts.core.lfn import FileNamespace
from dxts.core.states import Kind
from dxts.dispatcher.logic.backends import Backend, BackendUnreachable
from dxts.dispatcher.logic.outcomes import OutcomeSink
from dxts.dispatcher.logic.payloads import Materialiser, submissions
from dxts.dispatcher.logic.policy import Policy
from dxts.dispatcher.metrics import CLAIMED, RECOVERED, REFUSED, SUBMITTED, UNREACHABLE
from dxts.dispatcher.settings import DispatcherSettings
from dxts.dispatcher.store import claiming, recording
from dxts.dispatcher.store.claiming import Parcel
from dxts.dispatcher.store.quota import InFlightCaps
from dxts.dispatcher.store.transitions import COMPLETING

log = logging.getLogger(__name__)

RC = Isolation.READ_COMMITTED
T = TypeVar("T")


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Dispatcher:
    def __init__(
        self,
        database: Database,
        settings: DispatcherSettings,
        backends: Mapping[str, Backend],
        materialiser: Materialiser,
        sink: OutcomeSink,
    ) -> None:
        self.database = database
        self.sink = sink  # execution, which records the parcels a whole Submit refusal fails
        self.settings = settings
        self.backends = dict(backends)
        self.materialiser = materialiser
        self.namespace = FileNamespace()  # where each VO's outputs go (DXTS_FILES_NAMESPACE)
        self.policy = Policy(settings)
        self.caps = InFlightCaps(settings.vo_in_flight_cap, settings.vo_in_flight_caps)
        self._requirements: dict[bytes, Any] = {}

    # -- claiming ---------------------------------------------------------------------------

    def _available(self, kind: Kind) -> list[Backend]:
        return [b for b in self.backends.values() if b.config.kind is kind and not b.backing_off()]

    def _claim_size(self, available: Sequence[Backend]) -> int:
        """The batch, or less when every backend declares a capacity it has nearly filled."""
        room = 0
        for backend in available:
            if backend.state.capacity <= 0:
                return self.settings.claim_batch
            room += max(0, backend.state.capacity - backend.state.in_flight)
        return min(self.settings.claim_batch, room)

    async def dispatch_once(self, kind: Kind) -> int:
        """Claim one batch of `kind` and submit it; returns how many parcels were claimed."""
        available = self._available(kind)
        size = self._claim_size(available)
        if size == 0:
            return 0
        names = {b.name for b in available}

        def choose(parcel_id: bytes, parcel_kind: Kind, directed: str | None) -> str | None:
            chosen = self.policy.choose(parcel_id, parcel_kind, directed)
            return chosen if chosen in names else None

        async def work(conn: Any) -> tuple[list[Parcel], list[bytes]]:
            held = await claiming.claim(conn, kind, size, sorted(names), choose, self.caps)
            await claiming.load_payloads(conn, held)
            return held, await self._record_known_sidecars(conn, held)

        held, stored = await self.database.run(work, isolation=RC)
        self.materialiser.stored.update(stored)
        if held:
            CLAIMED.labels(kind.value).inc(len(held))
            await self._submit(held, recovering=False)
        return len(held)

    async def recover_once(self, kind: Kind) -> int:
        """Re-submit one batch of Reserved parcels older than the lease; returns how many."""
        names = sorted(b.name for b in self.backends.values() if b.config.kind is kind)
        if not names:
            return 0
        lease = timedelta(seconds=self.settings.lease_s)

        async def work(conn: Any) -> tuple[list[Parcel], list[bytes]]:
            held = await claiming.claim_stale(conn, kind, lease, self.settings.claim_batch, names)
            await claiming.load_payloads(conn, held)
            return held, await self._record_known_sidecars(conn, held)

        held, stored = await self.database.run(work, isolation=RC)
        self.materialiser.stored.update(stored)
        if held:
            log.warning("recovering %d parcels stranded in Reserved", len(held))
            await self._submit(held, recovering=True)
        return len(held)

    # -- submitting -------------------------------------------------------------------------

    async def _submit(self, held: Sequence[Parcel], *, recovering: bool) -> None:
        by_backend: dict[str, list[Parcel]] = {}
        for parcel in held:
            by_backend.setdefault(parcel.backend, []).append(parcel)
        for name, group in by_backend.items():
            backend = self.backends[name]
            vos: dict[bytes, str] = {}  # ParcelID → the VO it works for
            try:
                batches = await self._prepare(group, vos)
            except (Unavailable, NotFound, InvalidArgument) as error:
                # Left Reserved: the recovery sweep tries again after the lease.
                log.error(
                    "cannot build the payload of %d parcels for %s: %s", len(group), name, error
                )
                continue
            for payload, parcels in batches:
                for chunk in chunks(parcels, self.settings.submit_batch):
                    await self._submit_chunk(backend, payload, chunk, vos, recovering=recovering)

    async def _prepare(
        self, group: Sequence[Parcel], vos: dict[bytes, str]
    ) -> list[tuple[Payload, list[Parcel]]]:
        """Group parcels by what they share, each group with its one materialised payload;
        each parcel's VO put in `vos`."""
        wanted = {p.requirements_id for p in group if p.requirements_id} - self._requirements.keys()
        unknown_sidecars = {
            p.resolved_hints_id
            for p in group
            if p.resolved_hints_id and p.resolved_hints_id not in self.materialiser.sidecars
        }
        if wanted or unknown_sidecars:

            async def read(conn: Any) -> tuple[dict[bytes, Any], dict[bytes, Any]]:
                return (
                    await claiming.requirement_sets(conn, wanted),
                    await claiming.sidecars(conn, unknown_sidecars),
                )

            found, stored = await self.database.run(read, isolation=RC)
            self._requirements.update(found)
            self.materialiser.sidecars.update(stored)
            self.materialiser.stored.update(stored)
        chosen: dict[bytes, bytes] = {}
        for parcel in group:
            vos[parcel.parcel_id] = await self.materialiser.vo(parcel.transformation_id, parcel.vo)
            if parcel.kind is Kind.COMPUTE and parcel.resolved_hints_id is None:
                parcel.resolved_hints_id = await self.materialiser.sidecar(
                    parcel.transformation_id, parcel.vo
                )
                chosen[parcel.parcel_id] = parcel.resolved_hints_id
        if chosen:
            await self._record_sidecars(chosen)
        grouped: dict[tuple[bytes, bytes] | None, list[Parcel]] = {}
        for parcel in group:
            key = (
                (parcel.process_id, parcel.resolved_hints_id)
                if parcel.process_id and parcel.resolved_hints_id
                else None
            )
            grouped.setdefault(key, []).append(parcel)
        batches: list[tuple[Payload, list[Parcel]]] = []
        for key, parcels in grouped.items():
            payload: Payload
            if key is None:
                payload = DataPayload()
            else:
                process_id, hints_id = key
                payload = await self.materialiser.compute_payload(
                    process_id, hints_id, self.materialiser.sidecars[hints_id]
                )
            batches.append((payload, parcels))
        return batches

    async def _record_known_sidecars(self, conn: Any, held: Sequence[Parcel]) -> list[bytes]:
        """Inside the claim: record the sidecar of every compute parcel whose scope is already
        known (the steady state), so that it commits with the reservation; returns the sidecars
        it stored. Parcels of a scope not seen yet are left to `_prepare`, which asks for it
        outside any transaction."""
        chosen: dict[bytes, bytes] = {}
        for parcel in held:
            if parcel.kind is Kind.COMPUTE and parcel.resolved_hints_id is None:
                key = self.materialiser.cached_sidecar(parcel.transformation_id, parcel.vo)
                if key is not None:
                    parcel.resolved_hints_id = chosen[parcel.parcel_id] = key
        return await self._store_sidecars(conn, chosen)

    async def _store_sidecars(self, conn: Any, chosen: Mapping[bytes, bytes]) -> list[bytes]:
        """Store the sidecars this process has not stored yet (a handful per lifetime: one per
        scope) and record each parcel's; returns the ones stored (known once committed)."""
        new = sorted(set(chosen.values()) - self.materialiser.stored)
        for key in new:
            await content_store.put_resolved_hints(conn, self.materialiser.sidecars[key])
        if chosen:
            await claiming.set_resolved_hints(conn, chosen)
        return new

    async def _record_sidecars(self, chosen: Mapping[bytes, bytes]) -> None:
        stored = await self.database.run(
            lambda conn: self._store_sidecars(conn, chosen), isolation=RC
        )
        self.materialiser.stored.update(stored)

    async def _submit_chunk(
        self,
        backend: Backend,
        payload: Payload,
        chunk: Sequence[Parcel],
        vos: Mapping[bytes, str],
        *,
        recovering: bool,
    ) -> None:
        subs = submissions(
            chunk, self._requirements, self.settings.output_lfn_base, vos, self.namespace
        )
        try:
            results = await backend.submit(payload, subs)
        except BackendUnreachable as error:
            UNREACHABLE.labels(backend.name, error.rpc).inc()
            log.warning("%s; %d parcels stay Reserved for recovery", error, len(chunk))
            return
        except InvalidArgument as error:
            await self._fail_refused(backend, chunk, error)
            return
        by_key = {sub.parcel_id: p for sub, p in zip(subs, chunk, strict=True)}
        accepted: dict[bytes, bytes] = {}
        refused: list[Parcel] = []
        for result in results:
            parcel = by_key.get(result.parcel_id)
            if parcel is None:
                log.error(
                    "%s answered for a parcel it was not sent: %r", backend.name, result.parcel_id
                )
                continue
            if result.disposition == SubmitDisposition.REFUSED:
                refused.append(parcel)
                continue
            try:
                if result.disposition != SubmitDisposition.ACCEPTED:
                    raise InvalidArgument(f"disposition {result.disposition}", field="disposition")
                accepted[parcel.parcel_id] = id_from_str(result.identifier, field="identifier")
            except InvalidArgument as error:
                log.error(
                    "%s: unusable answer for parcel %s (%s): it stays Reserved",
                    backend.name,
                    result.parcel_id,
                    error,
                )
        if accepted:
            claimed = {p.parcel_id: (p.transformation_id, p.kind.value) for p in chunk}
            await self._record_accepted(backend, accepted, claimed, recovering=recovering)
        if refused:
            await self._record_refused(backend, refused, results)

    async def _fail_refused(
        self, backend: Backend, chunk: Sequence[Parcel], error: InvalidArgument
    ) -> None:
        """The adaptor refused the request as a whole (over one of its bounds): the same
        request would be refused again, so each parcel fails, class `refused`, in the adaptor's
        words, recorded by execution; said in one line, not as a failed sweep. Execution
        away: the parcels stay Reserved and the recovery sweep submits them again."""
        words = str(error)
        outcomes = [
            Outcome(
                parcel_id=id_to_str(parcel.parcel_id),
                backend=backend.name,
                result=OutcomeResult.FAILED,
                backend_status="refused",
                message=f"{backend.name} refused the submission: {words}",
                failure=Failure(FailureClass.REFUSED, tool_message=words),
            )
            for parcel in chunk
        ]
        REFUSED.labels(backend.name).inc(len(chunk))
        backend.state.refusals += len(chunk)
        try:
            for batch in chunks(outcomes, self.settings.outcome_batch):
                await self.sink.record(batch)
        except Unavailable as failure:
            log.error(
                "%s refused the request of %d parcels: %s; not recorded (%s): they stay "
                "Reserved for recovery",
                backend.name,
                len(chunk),
                words,
                failure,
            )
            return
        log.error(
            "%s refused the request of %d parcels: %s; they failed (class refused)",
            backend.name,
            len(chunk),
            words,
        )

    async def _record_accepted(
        self,
        backend: Backend,
        accepted: dict[bytes, bytes],
        claimed: Mapping[bytes, tuple[bytes | None, str]],
        *,
        recovering: bool,
    ) -> None:
        try:
            recorded = await self.database.run(
                lambda conn: recording.record_as_claimed(conn, backend.adaptor, accepted, claimed),
                isolation=RC,
            )
        except recording.NotAsClaimed:  # rolled back: a parcel moved on, or an identifier clashed
            recorded = await self.database.run(
                lambda conn: recording.record_accepted(conn, backend.adaptor, accepted),
                isolation=RC,
            )
        SUBMITTED.labels(backend.name).inc(len(recorded.assigned))
        backend.state.in_flight += len(recorded.assigned)
        if recovering:
            RECOVERED.labels(backend.name).inc(len(accepted))
        for parcel_id in recorded.conflicts:
            log.error(
                "%s accepted parcel %s as %s, which clashes with a recorded identifier: "
                "the parcel stays Reserved",
                backend.name,
                id_to_str(parcel_id),
                id_to_str(accepted[parcel_id]),
            )
        cancelled = [p for p, status in recorded.not_reserved.items() if status == COMPLETING]
        if cancelled:
            log.info("%d parcels were cancelled while being submitted: cancelling", len(cancelled))
            try:
                await backend.cancel(identifiers=[id_to_str(accepted[p]) for p in cancelled])
            except BackendUnreachable as error:
                UNREACHABLE.labels(backend.name, error.rpc).inc()
                log.warning("%s; the cancel sweep will ask again", error)

    async def _record_refused(
        self,
        backend: Backend,
        refused: Sequence[Parcel],
        results: Sequence[SubmitResult],
    ) -> None:
        moved = await self.database.run(
            lambda conn: recording.record_refused(conn, [p.parcel_id for p in refused]),
            isolation=RC,
        )
        REFUSED.labels(backend.name).inc(len(refused))
        backend.state.refusals += len(refused)
        backend.back_off(self.settings.refusal_backoff_s)
        reasons = sorted({r.reason for r in results if r.disposition == SubmitDisposition.REFUSED})
        log.info(
            "%s refused %d parcels (%d back to Unassigned): %s",
            backend.name,
            len(refused),
            len(moved),
            "; ".join(reasons)[:300],
        )
