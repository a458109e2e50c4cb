"""The adaptor contract's messages to and from its domain types (`model`), for the gRPC edges
of the dispatcher and of every adaptor.

Decoding is total: a number the contract does not know becomes UNSPECIFIED and is the reading
logic's to judge, since what an adaptor answers is checked there, not trusted here.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any, TypeVar

from dxts.core.adaptor.model import (
    CancelledKey,
    CancelResult,
    ComputePayload,
    DataPayload,
    Description,
    Failure,
    FailureClass,
    JobLogs,
    Limitation,
    Outcome,
    OutcomeAck,
    OutcomeDisposition,
    OutcomeResult,
    OutputFile,
    Payload,
    PollResult,
    ProcessDocument,
    ReportMode,
    ResourceUsage,
    Submission,
    SubmitDisposition,
    SubmitResult,
)
from dxts.core.errors import InvalidArgument
from dxts.core.grpc.convert import enum_from_proto, enum_to_proto, from_timestamp, to_timestamp
from dxts.core.states import Kind
from dxts.v1 import backend_pb2, common_pb2

E = TypeVar("E", bound=StrEnum)


def _numbered(enum: type[E], wrapper: Any, prefix: str) -> tuple[dict[E, int], dict[int, E]]:
    to_number = {member: wrapper.Value(prefix + member.name) for member in enum}
    return to_number, {number: member for member, number in to_number.items()}


REPORT_MODES = _numbered(ReportMode, backend_pb2.ReportMode, "REPORT_MODE_")
SUBMIT_DISPOSITIONS = _numbered(
    SubmitDisposition, backend_pb2.SubmitDisposition, "SUBMIT_DISPOSITION_"
)
LIMITATIONS = _numbered(Limitation, backend_pb2.Limitation, "LIMITATION_")
OUTCOME_RESULTS = _numbered(OutcomeResult, common_pb2.OutcomeResult, "OUTCOME_RESULT_")
FAILURE_CLASSES = _numbered(FailureClass, common_pb2.FailureClass, "FAILURE_CLASS_")
OUTCOME_DISPOSITIONS = _numbered(
    OutcomeDisposition, common_pb2.OutcomeDisposition, "OUTCOME_DISPOSITION_"
)


def _decode(numbered: tuple[dict[E, int], dict[int, E]], number: int, unspecified: E) -> E:
    return numbered[1].get(number, unspecified)


# -- payloads and submissions ------------------------------------------------------------------


def payload_to_proto(payload: Payload) -> backend_pb2.Payload:
    if isinstance(payload, ComputePayload):
        return backend_pb2.Payload(
            compute=backend_pb2.ComputePayload(
                process_id=payload.process_id,
                processes=[
                    backend_pb2.ProcessDocument(
                        process_id=p.process_id, document_json=p.document_json
                    )
                    for p in payload.processes
                ],
                resolved_hints_id=payload.resolved_hints_id,
                resolved_hints_json=payload.resolved_hints_json,
            )
        )
    if isinstance(payload, DataPayload):
        return backend_pb2.Payload(data=backend_pb2.DataPayload())
    return backend_pb2.Payload()


def payload_from_proto(message: backend_pb2.Payload) -> Payload:
    if message.HasField("compute"):
        compute = message.compute
        return ComputePayload(
            process_id=compute.process_id,
            processes=tuple(
                ProcessDocument(p.process_id, p.document_json) for p in compute.processes
            ),
            resolved_hints_id=compute.resolved_hints_id,
            resolved_hints_json=compute.resolved_hints_json,
        )
    if message.HasField("data"):
        return DataPayload()
    return None


def submission_to_proto(submission: Submission) -> backend_pb2.ParcelSubmission:
    return backend_pb2.ParcelSubmission(
        parcel_id=submission.parcel_id,
        parameters_json=submission.parameters_json,
        request_json=submission.request_json,
        requirements_json=submission.requirements_json,
        output_prefix=submission.output_prefix,
        input_ids=submission.input_ids,
        vo=submission.vo,
    )


def submission_from_proto(message: backend_pb2.ParcelSubmission) -> Submission:
    return Submission(
        parcel_id=message.parcel_id,
        parameters_json=message.parameters_json,
        request_json=message.request_json,
        requirements_json=message.requirements_json,
        output_prefix=message.output_prefix,
        input_ids=tuple(message.input_ids),
        vo=message.vo,
    )


def submit_request(payload: Payload, parcels: Iterable[Submission]) -> backend_pb2.SubmitRequest:
    return backend_pb2.SubmitRequest(
        payload=payload_to_proto(payload), parcels=[submission_to_proto(p) for p in parcels]
    )


def submit_result_to_proto(result: SubmitResult) -> backend_pb2.SubmitResult:
    return backend_pb2.SubmitResult(
        parcel_id=result.parcel_id,
        disposition=SUBMIT_DISPOSITIONS[0][result.disposition],  # type: ignore[arg-type]
        identifier=result.identifier,
        reason=result.reason,
    )


def submit_result_from_proto(message: backend_pb2.SubmitResult) -> SubmitResult:
    return SubmitResult(
        parcel_id=message.parcel_id,
        disposition=_decode(
            SUBMIT_DISPOSITIONS, message.disposition, SubmitDisposition.UNSPECIFIED
        ),
        identifier=message.identifier,
        reason=message.reason,
    )


# -- outcomes ------------------------------------------------------------------------------------


def outcome_to_proto(outcome: Outcome) -> common_pb2.Outcome:
    message = common_pb2.Outcome(
        parcel_id=outcome.parcel_id,
        backend=outcome.backend,
        identifier=outcome.identifier,
        result=OUTCOME_RESULTS[0][outcome.result],  # type: ignore[arg-type]
        outputs=[
            common_pb2.OutputFile(
                output_name=o.output_name,
                lfn=o.lfn,
                size=o.size,
                checksum=o.checksum,
                storage_element=o.storage_element,
            )
            for o in outcome.outputs
        ],
        status_report_json=outcome.status_report_json,
        backend_status=outcome.backend_status,
        message=outcome.message,
        finished_at=to_timestamp(outcome.finished_at),
        exit_code=outcome.exit_code,
        output_object_json=outcome.output_object_json,
    )
    if outcome.failure is not None:
        message.failure.CopyFrom(failure_to_proto(outcome.failure))
    if outcome.usage is not None:
        usage = outcome.usage
        message.usage.SetInParent()
        if usage.cpu_seconds is not None:
            message.usage.cpu_seconds = usage.cpu_seconds
        if usage.wall_seconds is not None:
            message.usage.wall_seconds = usage.wall_seconds
        if usage.max_memory_bytes is not None:
            message.usage.max_memory_bytes = usage.max_memory_bytes
    return message


def outcome_from_proto(message: common_pb2.Outcome) -> Outcome:
    usage = None
    if message.HasField("usage"):
        measured = message.usage
        usage = ResourceUsage(
            cpu_seconds=measured.cpu_seconds if measured.HasField("cpu_seconds") else None,
            wall_seconds=measured.wall_seconds if measured.HasField("wall_seconds") else None,
            max_memory_bytes=measured.max_memory_bytes
            if measured.HasField("max_memory_bytes")
            else None,
        )
    return Outcome(
        parcel_id=message.parcel_id,
        backend=message.backend,
        identifier=message.identifier,
        result=_decode(OUTCOME_RESULTS, message.result, OutcomeResult.UNSPECIFIED),
        outputs=[
            OutputFile(o.output_name, o.lfn, o.size, o.checksum, o.storage_element)
            for o in message.outputs
        ],
        status_report_json=message.status_report_json,
        backend_status=message.backend_status,
        message=message.message,
        finished_at=from_timestamp(message.finished_at)
        if message.HasField("finished_at")
        else None,
        usage=usage,
        exit_code=message.exit_code if message.HasField("exit_code") else None,
        output_object_json=message.output_object_json,
        failure=failure_from_proto(message.failure) if message.HasField("failure") else None,
    )


def failure_class_from_proto(number: int) -> FailureClass:
    """A contract number as the class people read (`application-error`); unknown: unclassified."""
    return _decode(FAILURE_CLASSES, number, FailureClass.UNSPECIFIED)


def failure_to_proto(failure: Failure) -> common_pb2.Failure:
    return common_pb2.Failure(
        failure_class=FAILURE_CLASSES[0][failure.failure_class],  # type: ignore[arg-type]
        tool_message=failure.tool_message,
        lfn=failure.lfn,
        storage_element=failure.storage_element,
        site=failure.site,
    )


def failure_from_proto(message: common_pb2.Failure) -> Failure:
    return Failure(
        failure_class=failure_class_from_proto(message.failure_class),
        tool_message=message.tool_message,
        lfn=message.lfn,
        storage_element=message.storage_element,
        site=message.site,
    )


def ack_to_proto(ack: OutcomeAck) -> common_pb2.OutcomeAck:
    return common_pb2.OutcomeAck(
        parcel_id=ack.parcel_id,
        backend=ack.backend,
        identifier=ack.identifier,
        disposition=OUTCOME_DISPOSITIONS[0][ack.disposition],  # type: ignore[arg-type]
        message=ack.message,
    )


def ack_from_proto(message: common_pb2.OutcomeAck) -> OutcomeAck:
    return OutcomeAck(
        parcel_id=message.parcel_id,
        backend=message.backend,
        identifier=message.identifier,
        disposition=_decode(
            OUTCOME_DISPOSITIONS, message.disposition, OutcomeDisposition.UNSPECIFIED
        ),
        message=message.message,
    )


# -- poll, cancel, describe ------------------------------------------------------------------


def poll_to_proto(result: PollResult) -> backend_pb2.PollResponse:
    return backend_pb2.PollResponse(
        outcomes=[outcome_to_proto(o) for o in result.outcomes],
        unknown_identifiers=result.unknown_identifiers,
    )


def poll_from_proto(message: backend_pb2.PollResponse) -> PollResult:
    return PollResult(
        [outcome_from_proto(o) for o in message.outcomes], list(message.unknown_identifiers)
    )


def cancel_to_proto(result: CancelResult) -> backend_pb2.CancelResponse:
    return backend_pb2.CancelResponse(
        unknown_identifiers=result.unknown_identifiers,
        keys=[
            backend_pb2.CancelledKey(parcel_id=k.parcel_id, identifier=k.identifier)
            for k in result.keys
        ],
    )


def cancel_from_proto(message: backend_pb2.CancelResponse) -> CancelResult:
    return CancelResult(
        list(message.unknown_identifiers),
        [CancelledKey(k.parcel_id, k.identifier) for k in message.keys],
    )


def description_to_proto(description: Description) -> backend_pb2.DescribeResponse:
    return backend_pb2.DescribeResponse(
        name=description.name,
        kind=enum_to_proto(description.kind) if description.kind else 0,  # type: ignore[arg-type]
        report_mode=REPORT_MODES[0][description.report_mode],  # type: ignore[arg-type]
        capacity=description.capacity,
        version=description.version,
        counters=description.counters,
        limitations=sorted(LIMITATIONS[0][limit] for limit in description.limitations),  # type: ignore[misc]
    )


def description_from_proto(message: backend_pb2.DescribeResponse) -> Description:
    try:
        kind: Kind | None = enum_from_proto(Kind, message.kind, field="kind")
    except InvalidArgument:
        kind = None
    return Description(
        name=message.name,
        kind=kind,
        report_mode=_decode(REPORT_MODES, message.report_mode, ReportMode.UNSPECIFIED),
        capacity=message.capacity,
        version=message.version,
        counters=dict(message.counters),
        limitations=frozenset(
            LIMITATIONS[1][number] for number in message.limitations if number in LIMITATIONS[1]
        ),
    )


def logs_to_proto(logs: JobLogs) -> common_pb2.JobLogs:
    return common_pb2.JobLogs(
        stdout=logs.stdout, stderr=logs.stderr, sandbox=logs.sandbox, truncated=logs.truncated
    )


def logs_from_proto(message: common_pb2.JobLogs) -> JobLogs:
    return JobLogs(message.stdout, message.stderr, message.sandbox, message.truncated)
