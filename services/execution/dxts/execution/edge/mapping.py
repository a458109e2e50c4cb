"""Execution's contract mapped: requests' fields to domain values, rows and domain results to
the contract's messages, outcomes both ways (the stored form is `logic.outcome_model`'s).

An outcome's result number the contract does not (yet) define is taken as unspecified, which
recording treats as a failure.
"""

from __future__ import annotations

from datetime import UTC
from enum import StrEnum
from typing import Any, TypeVar

from dxts.core.errors import InvalidArgument
from dxts.core.grpc.convert import enum_to_proto, json_text, to_timestamp
from dxts.core.grpc.requests import Problems
from dxts.core.ids import hash_to_str, id_to_str
from dxts.core.states import InputStatus, Kind, ParcelStatus
from dxts.execution.logic.outcome_model import (
    Disposition,
    Outcome,
    OutcomeAck,
    OutcomeResult,
    OutputFile,
    ResourceUsage,
)
from dxts.execution.logic.queries import OutputRow
from dxts.execution.records import ComputeFacet, InputRecord, ParcelRecord
from dxts.v1 import common_pb2, execution_pb2

E = TypeVar("E", bound=StrEnum)

# -- replies from rows ----------------------------------------------------------------------------


def _number(member: Any) -> Any:
    """`enum_to_proto`, typed for the generated fields (a NewType of int)."""
    return enum_to_proto(member)


def id_text(value: Any) -> str:
    return id_to_str(bytes(value)) if value else ""


def hash_text(value: Any) -> str:
    return hash_to_str(bytes(value)) if value else ""


def input_pb(record: InputRecord) -> execution_pb2.Input:
    """An input as the contract's Input."""
    return execution_pb2.Input(
        transformation_id=id_text(record.transformation_id),
        input_id=id_text(record.input_id),
        parent_input_id=id_text(record.parent_input_id),
        lfn=record.lfn or "",
        lfn_size=record.lfn_size,
        descriptor_json=json_text(record.descriptor),
        status=_number(InputStatus(record.status)),
        error_count=record.error_count,
        delayed_until=to_timestamp(record.delayed_until),
        last_parcel_id=id_text(record.last_parcel_id),
        updated_at=to_timestamp(record.updated_at),
    )


def parcel_pb(record: ParcelRecord) -> execution_pb2.Parcel:
    """A parcel as the contract's Parcel."""
    return execution_pb2.Parcel(
        parcel_id=id_text(record.parcel_id),
        transformation_id=id_text(record.transformation_id),
        kind=_number(Kind(record.kind)),
        status=_number(ParcelStatus(record.status)),
        backend=record.backend or "",
        annotations_json=json_text(record.annotations),
        updated_at=to_timestamp(record.updated_at),
        completed_at=to_timestamp(record.completed_at),
    )


def compute_facet_pb(facet: ComputeFacet | None) -> execution_pb2.ComputeFacet:
    """A compute facet as the contract's; None (no facet) as an empty one."""
    if facet is None:
        return execution_pb2.ComputeFacet(parameters_json=json_text(None))
    return execution_pb2.ComputeFacet(
        process_id=hash_text(facet.process_id),
        requirements_id=hash_text(facet.requirements_id),
        resolved_hints_id=hash_text(facet.resolved_hints_id),
        parameters_json=json_text(facet.parameters),
    )


def output_pb(output: OutputRow) -> execution_pb2.ParcelOutput:
    message = execution_pb2.ParcelOutput(
        output_id=id_to_str(output.output_id),
        transformation_output_id=id_to_str(output.transformation_output_id),
        output_name=output.name,
        parcel_id=id_to_str(output.parcel_id),
        lfn=output.lfn,
    )
    if output.lfn_size is not None:
        message.lfn_size = output.lfn_size
    return message


# -- outcomes -------------------------------------------------------------------------------------

_RESULTS = {
    common_pb2.OUTCOME_RESULT_SUCCEEDED: OutcomeResult.SUCCEEDED,
    common_pb2.OUTCOME_RESULT_FAILED: OutcomeResult.FAILED,
    common_pb2.OUTCOME_RESULT_CANCELLED: OutcomeResult.CANCELLED,
}
_RESULT_NUMBERS = {result: number for number, result in _RESULTS.items()}
_DISPOSITIONS = {
    Disposition.RECORDED: common_pb2.OUTCOME_DISPOSITION_RECORDED,
    Disposition.ALREADY_RECORDED: common_pb2.OUTCOME_DISPOSITION_ALREADY_RECORDED,
    Disposition.UNKNOWN_PARCEL: common_pb2.OUTCOME_DISPOSITION_UNKNOWN_PARCEL,
}
_USAGE_FIELDS = ("cpu_seconds", "wall_seconds", "max_memory_bytes")


def _usage_from_proto(usage: common_pb2.ResourceUsage) -> ResourceUsage:
    return ResourceUsage(
        cpu_seconds=usage.cpu_seconds if usage.HasField("cpu_seconds") else None,
        wall_seconds=usage.wall_seconds if usage.HasField("wall_seconds") else None,
        max_memory_bytes=usage.max_memory_bytes if usage.HasField("max_memory_bytes") else None,
    )


def outcome_from_proto(message: common_pb2.Outcome) -> Outcome:
    """A forwarded outcome as recording takes it (the parcel id as sent: recording checks it)."""
    return Outcome(
        parcel_id=message.parcel_id,
        backend=message.backend,
        identifier=message.identifier,
        result=_RESULTS.get(message.result, OutcomeResult.UNSPECIFIED),
        outputs=tuple(
            OutputFile(f.output_name, f.lfn, f.size, f.checksum, f.storage_element)
            for f in message.outputs
        ),
        status_report_json=message.status_report_json,
        backend_status=message.backend_status,
        message=message.message,
        finished_at=(
            message.finished_at.ToDatetime(tzinfo=UTC) if message.HasField("finished_at") else None
        ),
        usage=_usage_from_proto(message.usage) if message.HasField("usage") else None,
        exit_code=message.exit_code if message.HasField("exit_code") else None,
        output_object_json=message.output_object_json,
    )


def output_file_pb(file: OutputFile) -> common_pb2.OutputFile:
    return common_pb2.OutputFile(
        output_name=file.output_name,
        lfn=file.lfn,
        size=file.size,
        checksum=file.checksum,
        storage_element=file.storage_element,
    )


def outcome_pb(outcome: Outcome) -> common_pb2.Outcome:
    """A (stored) outcome as the contract's message."""
    message = common_pb2.Outcome(
        parcel_id=outcome.parcel_id,
        backend=outcome.backend,
        identifier=outcome.identifier,
        result=_RESULT_NUMBERS.get(outcome.result, common_pb2.OUTCOME_RESULT_UNSPECIFIED),
        outputs=[output_file_pb(file) for file in outcome.outputs],
        status_report_json=outcome.status_report_json,
        backend_status=outcome.backend_status,
        message=outcome.message,
        exit_code=outcome.exit_code,
        output_object_json=outcome.output_object_json,
    )
    if outcome.finished_at is not None:
        message.finished_at.FromDatetime(outcome.finished_at)
    if outcome.usage is not None:
        message.usage.SetInParent()  # reported, even if with no measure
        for name in _USAGE_FIELDS:
            value = getattr(outcome.usage, name)
            if value is not None:
                setattr(message.usage, name, value)
    return message


def ack_pb(ack: OutcomeAck) -> common_pb2.OutcomeAck:
    return common_pb2.OutcomeAck(
        parcel_id=ack.parcel_id,
        backend=ack.backend,
        identifier=ack.identifier,
        disposition=_DISPOSITIONS[ack.disposition],
        message=ack.message,
    )


# -- request fields -------------------------------------------------------------------------------


def selection_of(
    selection: execution_pb2.InputSelection | execution_pb2.ParcelSelection, enum: type[E]
) -> tuple[list[bytes] | None, list[E] | None]:
    """(ids, None) or (None, statuses): exactly one of the two, not empty."""
    inputs = isinstance(selection, execution_pb2.InputSelection)
    texts = selection.input_ids if inputs else selection.parcel_ids  # type: ignore[union-attr]
    if bool(selection.statuses) == bool(texts):
        raise InvalidArgument("give ids or statuses (exactly one)", field="selection")
    problems = Problems()
    if selection.statuses:
        statuses = problems.enums(enum, selection.statuses, "selection.statuses")
        problems.raise_if_any()
        return None, statuses
    ids = problems.ids(texts, f"selection.{'input_ids' if inputs else 'parcel_ids'}")
    problems.raise_if_any()
    return ids, None
