"""Bringing outcomes back: polling, the push path, DispatcherStatus, what a misbehaving
adaptor cannot do (unknown identifiers, malformed manifests, timeouts, reports on parcels it
does not hold) and parcels a backend lost — on SQLite and MariaDB."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import pytest
from dispatch_support import (
    FakeExecution,
    Keys,
    assert_counters_exact,
    dispatcher,
    empty,
    identifiers,
    parcels,
    request_cancel,
    serve,
    statuses,
    transformation,
)
from prometheus_client import REGISTRY

from dxts.backends.null.logic.adaptor import NullAdaptor
from dxts.core.adaptor.model import (
    Failure,
    FailureClass,
    Outcome,
    OutcomeAck,
    OutcomeDisposition,
    OutcomeResult,
    OutputFile,
    Payload,
    PollResult,
    ReportMode,
    Submission,
    SubmitResult,
)
from dxts.core.db import Database, Isolation
from dxts.core.errors import PermissionDenied
from dxts.core.grpc import GrpcServer, channel
from dxts.core.ids import id_to_str, new_id
from dxts.core.settings import ServerSettings
from dxts.core.states import Kind
from dxts.dispatcher.logic.backends import read_loads
from dxts.dispatcher.logic.forwarding import POLL_LANES
from dxts.dispatcher.store import claiming
from dxts.v1 import common_pb2, dispatcher_pb2, dispatcher_pb2_grpc

COMPUTE = {"name": "null", "address": "", "kind": "compute"}


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def drain(component: Any) -> int:
    total = 0
    while claimed := await component.dispatcher.dispatch_once(Kind.COMPUTE):
        total += claimed
    return total


async def test_polled_outcomes_reach_execution_once_recorded(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 40, transformation_id=tid, inputs_per_parcel=1)
    # Four parcels lost for certain (by their output prefix, which names the parcel); the other
    # fates are drawn at random, which the checks below follow whatever they are.
    chosen = ids[:4]
    adaptor, address = await null_adaptors(
        failure=0.25,
        split=0.25,
        rules=[{"fate": "lost", "output_prefix": id_to_str(p)} for p in chosen],
        outputs=["output-data"],
        output_size=7,
    )
    sink = FakeExecution(database)
    component = await dispatcher(
        database, [{**COMPUTE, "address": address}], keys, sink=sink, poll_batch=7
    )
    assert await drain(component) == 40
    lost = {p for p in ids if adaptor.jobs[id_to_str(p)].fate == "lost"}
    assert lost == set(chosen)

    assert await component.forwarder.poll_once(component.backends["null"]) == 40 - len(lost)
    seen = sink.by_parcel()
    assert set(seen) == set(ids) - lost
    recorded = await identifiers(database, "null")
    for parcel_id, (outcome,) in seen.items():
        job = adaptor.jobs[id_to_str(parcel_id)]
        assert outcome.backend == "null"
        assert outcome.identifier == id_to_str(recorded[parcel_id])
        if job.fate == "failure":
            assert outcome.result is OutcomeResult.FAILED
            continue
        assert outcome.result is OutcomeResult.SUCCEEDED
        report = json.loads(outcome.status_report_json)
        assert set(report) == set(job.input_ids)
        assert {e["action"] for e in report.values()} == {
            "SPLIT" if job.fate == "split" else "SUCCESS"
        }
        (output,) = outcome.outputs
        assert (output.output_name, output.size) == ("output-data", 7)
        assert output.lfn.startswith(f"/lhcb/dxts/{id_to_str(tid)}/{id_to_str(parcel_id)}/")

    # Recorded parcels have left Assigned: a second poll forwards nothing new.
    states = await statuses(database, ids)
    assert {states[p] for p in lost} == {"Assigned"}
    assert await component.forwarder.poll_once(component.backends["null"]) == 0
    assert len(sink.outcomes) == 40 - len(lost)
    await assert_counters_exact(database)
    await component.stop()


class OverlapWatchingSink(FakeExecution):
    """Records like FakeExecution, each recording held until another one has started (or a
    short while has passed): how many were in flight at once."""

    def __init__(self, database: Database) -> None:
        super().__init__(database)
        self.in_flight = 0
        self.most_in_flight = 0
        self._another = asyncio.Event()

    async def record(self, outcomes: Sequence[Outcome]) -> list[OutcomeAck]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        if self.in_flight > 1:
            self._another.set()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._another.wait(), 0.5)
            return await super().record(outcomes)
        finally:
            self.in_flight -= 1


async def test_a_poll_records_one_page_while_it_polls_the_next(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    """Pages overlap two at a time (POLL_LANES), never more, and every outcome is forwarded
    exactly once."""
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 30, transformation_id=tid)
    _adaptor, address = await null_adaptors()
    sink = OverlapWatchingSink(database)
    component = await dispatcher(
        database, [{**COMPUTE, "address": address}], keys, sink=sink, poll_batch=5
    )
    assert await drain(component) == 30
    assert await component.forwarder.poll_once(component.backends["null"]) == 30
    assert sink.most_in_flight == POLL_LANES == 2
    assert sorted(sink.by_parcel()) == sorted(ids)
    assert all(len(outcomes) == 1 for outcomes in sink.by_parcel().values())
    assert set((await statuses(database, ids)).values()) == {"Completing"}
    await assert_counters_exact(database)
    await component.stop()


async def test_outcomes_wait_for_execution_when_it_is_down(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 5, transformation_id=tid)
    _adaptor, address = await null_adaptors()
    sink = FakeExecution(database)
    component = await dispatcher(database, [{**COMPUTE, "address": address}], keys, sink=sink)
    await drain(component)
    sink.unavailable = True
    assert await component.forwarder.poll_once(component.backends["null"]) == 0
    assert set((await statuses(database, ids)).values()) == {"Assigned"}
    sink.unavailable = False
    assert await component.forwarder.poll_once(component.backends["null"]) == 5
    assert set((await statuses(database, ids)).values()) == {"Completing"}
    await component.stop()


class Misbehaving(NullAdaptor):
    """Reports an identifier it was not asked about, a malformed manifest, no result."""

    async def poll(self, identifiers: Sequence[str]) -> PollResult:
        reply = await super().poll(identifiers)
        first, second, third = reply.outcomes[:3]
        first.outputs.append(OutputFile(output_name="out", lfn="relative/path", size=1))
        second.result = OutcomeResult.UNSPECIFIED
        third.parcel_id = id_to_str(new_id())
        stranger = dataclasses.replace(reply.outcomes[3], identifier=id_to_str(new_id()))
        reply.outcomes.append(stranger)
        return reply


async def test_unusable_outcomes_are_counted_and_corrupt_nothing(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 5, transformation_id=tid)
    _adaptor, address = await null_adaptors(Misbehaving)
    sink = FakeExecution(database)
    component = await dispatcher(database, [{**COMPUTE, "address": address}], keys, sink=sink)
    await drain(component)
    before = {
        reason: metric("dxts_dispatcher_bad_outcomes_total", backend="null", reason=reason)
        for reason in ("malformed", "unknown_identifier", "parcel_mismatch")
    }
    await component.forwarder.poll_once(component.backends["null"])
    after = {
        reason: metric("dxts_dispatcher_bad_outcomes_total", backend="null", reason=reason)
        for reason in before
    }
    assert {r: after[r] - before[r] for r in before} == {
        "malformed": 2,
        "unknown_identifier": 1,
        "parcel_mismatch": 1,
    }
    assert component.backends["null"].state.bad_outcomes == 4
    forwarded = {o.identifier: o for o in sink.outcomes}
    assert len(forwarded) == 4  # all but the parcel-mismatch one; the stranger dropped
    recorded = await identifiers(database, "null")
    assert set(forwarded) <= {id_to_str(i) for i in recorded.values()}
    unusable = [o for o in forwarded.values() if o.result is OutcomeResult.FAILED]
    assert len(unusable) == 2
    assert all(not o.outputs and "unusable outcome" in o.message for o in unusable)
    states = await statuses(database, ids)
    assert sorted(states.values()) == ["Assigned", "Completing", "Completing", "Failed", "Failed"]
    await assert_counters_exact(database)
    await component.stop()


class Slow(NullAdaptor):
    async def poll(self, identifiers: Sequence[str]) -> PollResult:
        await asyncio.sleep(5)
        return await super().poll(identifiers)


async def test_an_adaptor_that_times_out_is_left_for_the_next_round(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 3, transformation_id=tid)
    _adaptor, address = await null_adaptors(Slow)
    sink = FakeExecution(database)
    component = await dispatcher(
        database, [{**COMPUTE, "address": address}], keys, sink=sink, call_timeout_s=0.3
    )
    await drain(component)
    before = metric("dxts_dispatcher_backend_unreachable_total", backend="null", call="Poll")
    assert await component.forwarder.poll_once(component.backends["null"]) == 0
    assert metric("dxts_dispatcher_backend_unreachable_total", backend="null", call="Poll") == (
        before + 1
    )
    assert not component.backends["null"].state.reachable
    assert not sink.outcomes
    assert set((await statuses(database, ids)).values()) == {"Assigned"}
    await component.stop()


class Garbled(NullAdaptor):
    """Accepts, but answers with an identifier that is not one, and forgets a parcel."""

    async def submit(self, payload: Payload, parcels: Sequence[Submission]) -> list[SubmitResult]:
        results = await super().submit(payload, parcels)
        results[0].identifier = "not-an-identifier"
        del results[1]
        return results


async def test_unusable_submit_answers_leave_parcels_reserved(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 4, transformation_id=tid)
    _adaptor, address = await null_adaptors(Garbled)
    component = await dispatcher(database, [{**COMPUTE, "address": address}], keys)
    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 4
    states = await statuses(database, ids)
    assert sorted(states.values()) == ["Assigned", "Assigned", "Reserved", "Reserved"]
    await assert_counters_exact(database)
    await component.stop()


async def test_pushed_outcomes_are_forwarded_and_status_is_served(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 6, transformation_id=tid)
    sink = FakeExecution(database)
    placeholder = await serve(NullAdaptor(), keys)  # to learn a free port for the dispatcher
    dispatcher_address = placeholder.address
    await placeholder.stop(grace=0)
    adaptor, address = await null_adaptors(
        report_mode="push", dispatcher_address=dispatcher_address, push_interval_s=0.05
    )
    component = await dispatcher(database, [{**COMPUTE, "address": address}], keys, sink=sink)
    server = GrpcServer(
        component.services,
        settings=ServerSettings(listen=dispatcher_address),
        verifier=keys.keys.verifier(),
    )
    await server.start()
    try:
        assert component.backends["null"].state.report_mode is ReportMode.PUSH
        assert await drain(component) == 6
        assert await component.forwarder.poll_once(component.backends["null"]) == 0
        for _ in range(1200):  # a bound (a minute), not a timing: pushes come every 0.05 s
            if len(sink.by_parcel()) == 6 and all(j.pushed for j in adaptor.jobs.values()):
                break
            await asyncio.sleep(0.05)
        assert set(sink.by_parcel()) == set(ids)
        assert set((await statuses(database, ids)).values()) == {"Completing"}

        async with channel(server.address, token=keys.adaptor_token("null")) as ch:
            stub = dispatcher_pb2_grpc.DispatcherServiceStub(ch)
            reply = await stub.ReportOutcomes(
                dispatcher_pb2.ReportOutcomesRequest(
                    backend="null",
                    outcomes=[
                        common_pb2.Outcome(
                            identifier=id_to_str(new_id()),
                            result=common_pb2.OUTCOME_RESULT_SUCCEEDED,
                        )
                    ],
                )
            )
            (ack,) = reply.acks
            assert ack.disposition == common_pb2.OUTCOME_DISPOSITION_UNKNOWN_PARCEL
        async with channel(server.address, token=keys.service_token) as ch:
            stub = dispatcher_pb2_grpc.DispatcherServiceStub(ch)
            status = await stub.DispatcherStatus(dispatcher_pb2.DispatcherStatusRequest())
        (backend,) = status.backends
        assert (backend.backend, backend.adaptor, backend.reachable) == ("null", "null", True)
        assert (backend.in_flight, backend.reserved, backend.bad_outcomes) == (0, 0, 1)
        assert len(sink.outcomes) >= 6
    finally:
        await server.stop(grace=0)
        await component.stop()


async def test_an_outcome_pushed_before_its_submit_is_recorded_is_not_a_bad_one(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    """An adaptor may push an outcome before the dispatcher has recorded the identifier its
    Submit answered (the parcel is still Reserved for that backend): the push is answered
    UNKNOWN_PARCEL, to be pushed again, and is not counted a bad outcome; the same push naming
    a parcel not Reserved for that backend is."""
    await empty(database)
    tid = await transformation(database)
    held, other = (
        await parcels(database, 1, transformation_id=tid),
        await parcels(database, 1, transformation_id=tid),
    )
    _adaptor, address = await null_adaptors()
    sink = FakeExecution(database)
    component = await dispatcher(database, [{**COMPUTE, "address": address}], keys, sink=sink)

    async def reserve(conn: Any) -> list[Any]:
        return await claiming.claim(conn, Kind.COMPUTE, 1, ["null"], lambda *_: "null")

    (reserved,) = await database.run(reserve, isolation=Isolation.READ_COMMITTED)
    assert [reserved.parcel_id] == held
    backend = component.backends["null"]

    def pushed(parcel_id: bytes) -> Outcome:
        return Outcome(
            parcel_id=id_to_str(parcel_id),
            identifier=id_to_str(new_id()),
            result=OutcomeResult.SUCCEEDED,
        )

    before = metric(
        "dxts_dispatcher_bad_outcomes_total", backend="null", reason="unknown_identifier"
    )
    (early,) = await component.forwarder.report("null", [pushed(held[0])])
    assert early.disposition is OutcomeDisposition.UNKNOWN_PARCEL
    assert "not recorded yet" in early.message
    assert backend.state.bad_outcomes == 0
    (stranger,) = await component.forwarder.report("null", [pushed(other[0])])
    assert stranger.disposition is OutcomeDisposition.UNKNOWN_PARCEL
    assert backend.state.bad_outcomes == 1
    after = metric(
        "dxts_dispatcher_bad_outcomes_total", backend="null", reason="unknown_identifier"
    )
    assert after - before == 1
    assert not sink.outcomes
    assert await statuses(database, held + other) == {held[0]: "Reserved", other[0]: "Unassigned"}
    await component.stop()


async def test_a_forged_report_is_refused_and_changes_nothing(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    """Only the adaptor holding a parcel reports its outcome: a person, an adaptor naming
    another backend, or an adaptor naming its own backend with another backend's identifier
    (both backends of the same adaptor type) — none reaches execution."""
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 3, transformation_id=tid)
    _adaptor, address = await null_adaptors()
    _other, other_address = await null_adaptors(name="null-data", kind=Kind.DATA)
    sink = FakeExecution(database)
    component = await dispatcher(
        database,
        [
            {**COMPUTE, "address": address},
            {"name": "null-data", "address": other_address, "kind": "data", "adaptor": "null"},
        ],
        keys,
        sink=sink,
    )
    server = GrpcServer(
        component.services,
        settings=ServerSettings(listen="127.0.0.1:0"),
        verifier=keys.keys.verifier(),
    )
    await server.start()
    try:
        assert await drain(component) == 3
        held = await identifiers(database, "null")

        def report(backend: str) -> dispatcher_pb2.ReportOutcomesRequest:
            return dispatcher_pb2.ReportOutcomesRequest(
                backend=backend,
                outcomes=[
                    common_pb2.Outcome(
                        identifier=id_to_str(held[p]), result=common_pb2.OUTCOME_RESULT_FAILED
                    )
                    for p in ids
                ],
            )

        forgers = {
            "a user of another VO": keys.keys.issue("belle", "mallory", ["operator"]),
            "the dispatcher itself": keys.token,
            "the other backend's adaptor": keys.adaptor_token("null-data"),
        }
        for who, token in forgers.items():
            async with channel(server.address, token=token) as ch:
                stub = dispatcher_pb2_grpc.DispatcherServiceStub(ch)
                with pytest.raises(PermissionDenied) as refused:
                    await stub.ReportOutcomes(report("null"))
            assert "may" in str(refused.value), who
        async with channel(server.address, token=keys.adaptor_token("null-data")) as ch:
            reply = await dispatcher_pb2_grpc.DispatcherServiceStub(ch).ReportOutcomes(
                report("null-data")
            )
        assert {a.disposition for a in reply.acks} == {
            common_pb2.OUTCOME_DISPOSITION_UNKNOWN_PARCEL
        }
        assert sink.outcomes == []
        assert set((await statuses(database, ids)).values()) == {"Assigned"}
    finally:
        await server.stop(grace=0)
        await component.stop()


class Forgetful(NullAdaptor):
    """A null adaptor restarted: it no longer knows what it accepted before `forget()`."""

    def forget(self) -> None:
        self.jobs.clear()
        self.by_identifier.clear()


async def test_a_parcel_the_backend_lost_fails_after_the_grace_and_frees_its_place(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 4, transformation_id=tid)
    adaptor, address = await null_adaptors(Forgetful, delay_s=3600)
    sink = FakeExecution(database)
    component = await dispatcher(
        database, [{**COMPUTE, "address": address}], keys, sink=sink, lost_grace_s=0.3
    )
    try:
        assert await drain(component) == 4
        adaptor.forget()
        backend = component.backends["null"]
        assert await component.forwarder.poll_once(backend) == 0  # the grace starts
        assert sink.outcomes == []
        await asyncio.sleep(0.4)
        assert await component.forwarder.poll_once(backend) == 4
        seen = sink.by_parcel()
        assert set(seen) == set(ids)
        for (outcome,) in seen.values():
            assert outcome.result is OutcomeResult.FAILED
            assert outcome.message.startswith("lost by the backend")
            assert outcome.failure == Failure(FailureClass.LOST)
        assert set((await statuses(database, ids)).values()) == {"Failed"}
        assert await component.forwarder.poll_once(backend) == 0
        loads, _ = await read_loads(database, ["null"])
        assert loads["null"].assigned == 0  # its place in the backend's capacity is free
    finally:
        await component.stop()


async def test_a_cancellation_the_backend_cannot_know_of_completes_as_cancelled(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 3, transformation_id=tid)
    adaptor, address = await null_adaptors(Forgetful, delay_s=3600)
    sink = FakeExecution(database)
    component = await dispatcher(
        database, [{**COMPUTE, "address": address}], keys, sink=sink, lost_grace_s=0
    )
    try:
        assert await drain(component) == 3
        adaptor.forget()
        await request_cancel(database, ids)
        assert await component.forwarder.cancel_once(component.backends["null"]) == 3
        seen = sink.by_parcel()
        assert set(seen) == set(ids)
        assert {o.result for (o,) in seen.values()} == {OutcomeResult.CANCELLED}
    finally:
        await component.stop()
