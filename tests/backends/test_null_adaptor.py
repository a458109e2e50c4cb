"""The null adaptor's own promises: idempotent Submit with observable per-key tallies, the
configured outcome mix drawn stably per parcel, delays, cancellation, and its settings checks."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from pydantic import ValidationError

from dxts.backends.edge.servicer import AdaptorServicer
from dxts.backends.null.logic.adaptor import (
    FAILURE,
    LOST,
    NO_REPORT,
    SPLIT,
    SUCCESS,
    NullAdaptor,
    fate_of,
)
from dxts.backends.null.settings import NullRule, NullSettings, NullUsage
from dxts.core.adaptor.model import FailureClass
from dxts.core.errors import NotFound
from dxts.core.ids import id_to_str, new_id
from dxts.v1 import backend_pb2, common_pb2


def submission(inputs: int = 1) -> backend_pb2.ParcelSubmission:
    return backend_pb2.ParcelSubmission(
        parcel_id=id_to_str(new_id()),
        output_prefix="/dxts/t/p",
        input_ids=[id_to_str(new_id()) for _ in range(inputs)],
    )


async def submit(adaptor: NullAdaptor, *parcels: backend_pb2.ParcelSubmission) -> Any:
    return (
        await AdaptorServicer(adaptor).Submit(
            backend_pb2.SubmitRequest(parcels=list(parcels)), None
        )
    ).results


async def test_submit_is_idempotent_and_counted() -> None:
    adaptor = NullAdaptor(NullSettings())
    parcel = submission()
    (first,) = await submit(adaptor, parcel)
    (again,) = await submit(adaptor, parcel)
    assert first.identifier == again.identifier
    assert adaptor.submits[parcel.parcel_id] == 2
    assert adaptor.started[parcel.parcel_id] == 1
    (bad,) = await submit(adaptor, backend_pb2.ParcelSubmission(parcel_id="nope"))
    assert bad.disposition == backend_pb2.SUBMIT_DISPOSITION_REFUSED
    counters = (
        await AdaptorServicer(adaptor).Describe(backend_pb2.DescribeRequest(), None)
    ).counters
    assert (counters["submits"], counters["accepted"], counters["repeated_submits"]) == (2, 1, 1)


async def test_logs_of_a_known_job_are_empty_and_an_unknown_one_is_not_found() -> None:
    adaptor = NullAdaptor(NullSettings())
    (accepted,) = await submit(adaptor, submission())
    servicer = AdaptorServicer(adaptor)
    got = await servicer.GetLogs(backend_pb2.GetLogsRequest(identifier=accepted.identifier), None)
    assert got.logs == common_pb2.JobLogs()
    with pytest.raises(NotFound):
        await servicer.GetLogs(backend_pb2.GetLogsRequest(identifier="never-given"), None)


async def test_the_outcome_mix_is_drawn_stably_per_parcel() -> None:
    settings = NullSettings(failure=0.2, split=0.2, no_report=0.2, lost=0.2, outputs=["out"])
    adaptor = NullAdaptor(settings)
    parcels = [submission(inputs=2) for _ in range(300)]
    results = await submit(adaptor, *parcels)
    fates = {p.parcel_id: fate_of(p.parcel_id, settings) for p in parcels}
    assert {p: adaptor.jobs[p].fate for p in fates} == fates
    assert {SUCCESS, FAILURE, SPLIT, NO_REPORT, LOST} == set(fates.values())
    reply = await AdaptorServicer(adaptor).Poll(
        backend_pb2.PollRequest(identifiers=[r.identifier for r in results]), None
    )
    assert len(reply.outcomes) == sum(1 for f in fates.values() if f != LOST)
    for outcome in reply.outcomes:
        fate = fates[outcome.parcel_id]
        if fate == FAILURE:
            assert outcome.result == common_pb2.OUTCOME_RESULT_FAILED
            continue
        assert outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED
        assert [o.output_name for o in outcome.outputs] == ["out"]
        if fate == NO_REPORT:
            assert outcome.status_report_json == ""
            continue
        report = json.loads(outcome.status_report_json)
        assert set(report) == set(adaptor.jobs[outcome.parcel_id].input_ids)
        actions = {entry["action"] for entry in report.values()}
        assert actions == ({"SPLIT"} if fate == SPLIT else {"SUCCESS"})
        if fate == SPLIT:
            entry = next(iter(report.values()))
            assert (len(entry["SUCCESS"]), len(entry["FAILURE"])) == (1, 1)


async def test_outcomes_wait_for_the_delay_and_cancellation_ends_them() -> None:
    adaptor = NullAdaptor(NullSettings(delay_s=3600))
    slow, other = submission(), submission()
    results = await submit(adaptor, slow, other)
    identifiers = [r.identifier for r in results]
    poll = backend_pb2.PollRequest(identifiers=identifiers)
    assert not (await AdaptorServicer(adaptor).Poll(poll, None)).outcomes
    await AdaptorServicer(adaptor).Cancel(
        backend_pb2.CancelRequest(identifiers=identifiers[:1]), None
    )
    (outcome,) = (await AdaptorServicer(adaptor).Poll(poll, None)).outcomes
    assert (outcome.parcel_id, outcome.result) == (
        slow.parcel_id,
        common_pb2.OUTCOME_RESULT_CANCELLED,
    )
    adaptor.jobs[other.parcel_id].finish_at = time.monotonic()
    assert len((await AdaptorServicer(adaptor).Poll(poll, None)).outcomes) == 2


async def in_flight(adaptor: NullAdaptor) -> int:
    described = await AdaptorServicer(adaptor).Describe(backend_pb2.DescribeRequest(), None)
    return int(described.counters["in_flight"])


async def test_in_flight_counts_what_is_neither_finished_nor_cancelled() -> None:
    running = NullAdaptor(NullSettings(delay_s=3600, capacity=2))
    first, second, third = submission(), submission(), submission()
    results = await submit(running, first, second, third)
    assert [r.disposition for r in results] == [
        backend_pb2.SUBMIT_DISPOSITION_ACCEPTED,
        backend_pb2.SUBMIT_DISPOSITION_ACCEPTED,
        backend_pb2.SUBMIT_DISPOSITION_REFUSED,  # at capacity
    ]
    assert await in_flight(running) == 2
    await AdaptorServicer(running).Cancel(
        backend_pb2.CancelRequest(identifiers=[results[0].identifier]), None
    )
    assert await in_flight(running) == 1
    (again,) = await submit(running, third)  # room again
    assert again.disposition == backend_pb2.SUBMIT_DISPOSITION_ACCEPTED
    assert await in_flight(running) == 2

    finished = NullAdaptor(NullSettings(delay_s=0))
    await submit(finished, submission(), submission())
    assert await in_flight(finished) == 0

    lost = NullAdaptor(NullSettings(lost=1.0))  # never finish: in flight until cancelled
    gone, _ = await submit(lost, submission(), submission())
    assert await in_flight(lost) == 2
    await AdaptorServicer(lost).Cancel(
        backend_pb2.CancelRequest(identifiers=[gone.identifier]), None
    )
    assert await in_flight(lost) == 1


async def test_jobs_reported_longer_ago_than_retain_s_are_forgotten_but_still_counted() -> None:
    retain_s = 0.2
    adaptor = NullAdaptor(NullSettings(delay_s=0, retain_s=retain_s))
    old, unheard, recent = submission(), submission(), submission()
    (old_result,) = await submit(adaptor, old)
    await submit(adaptor, old)  # a repeat, counted once forgotten too
    await submit(adaptor, unheard)  # finished too, but nobody polled its outcome
    poll = backend_pb2.PollRequest(identifiers=[old_result.identifier])
    assert len((await AdaptorServicer(adaptor).Poll(poll, None)).outcomes) == 1
    await asyncio.sleep(retain_s + 0.05)
    await submit(adaptor, recent)
    assert await in_flight(adaptor) == 0  # Describe forgets what was reported retain_s ago
    assert set(adaptor.jobs) == {unheard.parcel_id, recent.parcel_id}
    assert set(adaptor.submits) == set(adaptor.started) == set(adaptor.jobs)
    described = await AdaptorServicer(adaptor).Describe(backend_pb2.DescribeRequest(), None)
    counters = described.counters
    assert (counters["submits"], counters["accepted"], counters["started"]) == (4, 3, 3)
    assert counters["repeated_submits"] == 1
    assert list((await AdaptorServicer(adaptor).Poll(poll, None)).unknown_identifiers) == [
        old_result.identifier
    ]
    # Unset, nothing is forgotten.
    keeper = NullAdaptor(NullSettings(delay_s=0))
    (kept,) = await submit(keeper, old)
    polled = backend_pb2.PollRequest(identifiers=[kept.identifier])
    assert len((await AdaptorServicer(keeper).Poll(polled, None)).outcomes) == 1
    await asyncio.sleep(retain_s + 0.05)
    assert await in_flight(keeper) == 0 and set(keeper.jobs) == {old.parcel_id}


async def test_usage_is_reported_only_when_configured_and_by_rule_first() -> None:
    hungry = NullRule(
        fate="failure", output_prefix="/hungry/", usage=NullUsage(max_memory_bytes=8 * 10**9)
    )
    adaptor = NullAdaptor(
        NullSettings(usage=NullUsage(cpu_seconds=7200, wall_seconds=9000), rules=[hungry])
    )
    plain, greedy = submission(), submission()
    greedy.output_prefix = "/hungry/p"
    results = await submit(adaptor, plain, greedy)
    reply = await AdaptorServicer(adaptor).Poll(
        backend_pb2.PollRequest(identifiers=[r.identifier for r in results]), None
    )
    usage = {o.parcel_id: (o.result, o.usage) for o in reply.outcomes}
    assert usage[plain.parcel_id] == (
        common_pb2.OUTCOME_RESULT_SUCCEEDED,
        common_pb2.ResourceUsage(cpu_seconds=7200, wall_seconds=9000),
    )
    result, measured = usage[greedy.parcel_id]
    assert result == common_pb2.OUTCOME_RESULT_FAILED
    assert measured == common_pb2.ResourceUsage(max_memory_bytes=8 * 10**9)
    assert not measured.HasField("cpu_seconds")  # not reported, not 0

    silent = NullAdaptor(NullSettings())
    (result,) = await submit(silent, submission())
    (outcome,) = (
        await AdaptorServicer(silent).Poll(
            backend_pb2.PollRequest(identifiers=[result.identifier]), None
        )
    ).outcomes
    assert not outcome.HasField("usage")  # the default: nothing reported


def test_usage_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DXTS_NULL_USAGE", '{"cpu_seconds": 1.5}')
    assert NullSettings().usage == NullUsage(cpu_seconds=1.5)
    with pytest.raises(ValidationError):
        NullUsage(cpu_seconds=-1)


def test_settings_refuse_an_impossible_mix() -> None:
    with pytest.raises(ValidationError):
        NullSettings(failure=0.6, split=0.6)
    with pytest.raises(ValidationError):
        NullSettings(report_mode="push")
    assert NullSettings(kind="data").kind.value == "Data"


async def test_injected_failures_carry_their_class_and_the_rule_s_tool_line() -> None:
    oom = NullRule(
        fate="failure",
        output_prefix="/oom/",
        exit_code=137,
        failure_class=FailureClass.OUT_OF_MEMORY,
        tool_message="std::bad_alloc",
    )
    adaptor = NullAdaptor(NullSettings(failure=1.0, rules=[oom]))
    drawn, ruled = submission(), submission()
    ruled.output_prefix = "/oom/p"
    results = await submit(adaptor, drawn, ruled)
    reply = await AdaptorServicer(adaptor).Poll(
        backend_pb2.PollRequest(identifiers=[r.identifier for r in results]), None
    )
    failures = {o.parcel_id: o.failure for o in reply.outcomes}
    assert failures[drawn.parcel_id] == common_pb2.Failure(
        failure_class=common_pb2.FAILURE_CLASS_APPLICATION_ERROR
    )
    assert failures[ruled.parcel_id] == common_pb2.Failure(
        failure_class=common_pb2.FAILURE_CLASS_OUT_OF_MEMORY, tool_message="std::bad_alloc"
    )
