"""The adaptor contract's domain types and their messages: every field survives the round trip,
a measure not reported stays unreported, and a number the contract does not know decodes as
UNSPECIFIED for the reading logic to judge."""

from __future__ import annotations

from datetime import UTC, datetime

from dxts.core.adaptor import codec, mapping
from dxts.core.adaptor.model import (
    CancelledKey,
    CancelResult,
    ComputePayload,
    DataPayload,
    Description,
    Limitation,
    Outcome,
    OutcomeAck,
    OutcomeDisposition,
    OutcomeResult,
    OutputFile,
    PollResult,
    ProcessDocument,
    ReportMode,
    ResourceUsage,
    Submission,
    SubmitDisposition,
    SubmitResult,
)
from dxts.core.states import Kind
from dxts.v1 import backend_pb2, common_pb2

OUTCOME = Outcome(
    parcel_id="p",
    backend="null",
    identifier="i",
    result=OutcomeResult.SUCCEEDED,
    outputs=[OutputFile("out", "/dxts/t/p/out", 7, "ad:1", "SE")],
    status_report_json='{"a": 1}',
    backend_status="done",
    message="fine",
    finished_at=datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
    usage=ResourceUsage(cpu_seconds=1.5, max_memory_bytes=10),
    output_object_json='{"out": {"class": "File", "location": "lfn:/dxts/t/p/out"}, "n": 1}',
)


def test_every_type_survives_the_round_trip() -> None:
    assert mapping.outcome_from_proto(mapping.outcome_to_proto(OUTCOME)) == OUTCOME
    assert codec.decode_outcome(codec.encode_outcome(OUTCOME)) == OUTCOME
    compute = ComputePayload("root", (ProcessDocument("root", "{}"),), "h", "{}")
    for payload in (compute, DataPayload(), None):
        assert mapping.payload_from_proto(mapping.payload_to_proto(payload)) == payload
        assert codec.decode_payload(codec.encode_payload(payload)) == payload
    submission = Submission("p", '{"n": 1}', "", "{}", "/dxts/t/p", ("a", "b"))
    assert codec.decode_submission(codec.encode_submission(submission)) == submission
    for result in (SubmitResult.accepted("p", "i"), SubmitResult.refused("q", "full")):
        assert mapping.submit_result_from_proto(mapping.submit_result_to_proto(result)) == result
    ack = OutcomeAck("p", "null", "i", OutcomeDisposition.ALREADY_RECORDED, "seen")
    assert mapping.ack_from_proto(mapping.ack_to_proto(ack)) == ack
    polled = PollResult([OUTCOME], ["x"])
    assert mapping.poll_from_proto(mapping.poll_to_proto(polled)) == polled
    cancelled = CancelResult(["x"], [CancelledKey("p", "i"), CancelledKey("q")])
    assert mapping.cancel_from_proto(mapping.cancel_to_proto(cancelled)) == cancelled
    described = Description("null", Kind.DATA, ReportMode.PUSH, 3, "null-1", {"submits": 2})
    assert mapping.description_from_proto(mapping.description_to_proto(described)) == described
    limited = Description(
        "null", Kind.COMPUTE, ReportMode.PULL, 0, "null-1", {}, frozenset(Limitation)
    )
    assert mapping.description_from_proto(mapping.description_to_proto(limited)) == limited


def test_unreported_measures_and_unknown_numbers() -> None:
    message = mapping.outcome_to_proto(Outcome(usage=ResourceUsage(wall_seconds=0.0)))
    assert message.usage.HasField("wall_seconds")
    assert not message.usage.HasField("cpu_seconds")
    assert not mapping.outcome_to_proto(Outcome()).HasField("usage")
    strange = common_pb2.Outcome(result=99)  # type: ignore[arg-type]
    assert mapping.outcome_from_proto(strange).result is OutcomeResult.UNSPECIFIED
    answer = backend_pb2.SubmitResult(parcel_id="p", disposition=7)  # type: ignore[arg-type]
    assert mapping.submit_result_from_proto(answer).disposition is SubmitDisposition.UNSPECIFIED
    described = mapping.description_from_proto(
        backend_pb2.DescribeResponse(kind=0, limitations=[0, 99])  # type: ignore[list-item]
    )
    assert (described.kind, described.report_mode) == (None, ReportMode.UNSPECIFIED)
    assert described.limitations == frozenset()  # a limitation it does not know is not one
