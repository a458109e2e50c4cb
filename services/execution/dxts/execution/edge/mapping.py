"""Execution's contract mapped: requests' fields to domain values, rows and domain results to
the contract's messages, outcomes both ways (the stored form is `logic.parcel_annotations`'s).

An outcome's result number the contract does not (yet) define is taken as unspecified, which
recording treats as a failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import ValidationError

from dxts.core.adaptor.mapping import FAILURE_CLASSES
from dxts.core.errors import FieldViolation, InvalidArgument
from dxts.core.grpc.convert import enum_to_proto, from_json_text, json_text, to_timestamp
from dxts.core.grpc.requests import Problems
from dxts.core.ids import hash_to_str, id_to_str
from dxts.core.plugins import Decision, Input, RetryWith, SplitInto, ToUnassigned, WriteOff
from dxts.core.plugins.args import violations
from dxts.core.states import InputStatus, Kind, ParcelStatus
from dxts.execution.logic.failure_groups import FailureGroup
from dxts.execution.logic.queries import OutputRow
from dxts.execution.logic.status_reports import child_input
from dxts.execution.records import ComputeFacet, InputRecord, ParcelRecord
from dxts.v1 import execution_pb2

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


def parcel_pb(record: ParcelRecord, handle: str = "") -> execution_pb2.Parcel:
    """A parcel as the contract's Parcel, with its handle when the caller read it."""
    return execution_pb2.Parcel(
        parcel_id=id_text(record.parcel_id),
        transformation_id=id_text(record.transformation_id),
        kind=_number(Kind(record.kind)),
        status=_number(ParcelStatus(record.status)),
        backend=record.backend or "",
        annotations_json=json_text(record.annotations),
        updated_at=to_timestamp(record.updated_at),
        completed_at=to_timestamp(record.completed_at),
        handle=handle,
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


SPLIT = "split.children_json"


def decision_of(request: execution_pb2.DecideFailedInputRequest, reason: str) -> Decision:
    """The operator's decision as the hook's would be, `reason` its note (its reason for a
    write-off); a bad one is INVALID_ARGUMENT naming the field."""
    chosen = request.WhichOneof("decision")
    if chosen is None:
        raise InvalidArgument("give a decision: retry, write_off or split", field="decision")
    if chosen == "write_off":
        return WriteOff(reason=reason)
    if chosen == "split":
        children = _children(request.split.children_json)
        try:
            return SplitInto(children=children, note=reason)
        except ValidationError as error:  # two children alike
            raise InvalidArgument(
                [FieldViolation(SPLIT, v.description) for v in violations(error)]
            ) from None
    asked = from_json_text(request.retry.requirements_json, field="retry.requirements_json")
    if asked is not None and not isinstance(asked, dict):
        raise InvalidArgument("must be a JSON object", field="retry.requirements_json")
    backend = request.retry.backend or None
    if not asked and backend is None:
        return ToUnassigned(note=reason)
    try:
        return RetryWith(requirements=asked or {}, backend=backend, note=reason)
    except ValidationError as error:
        raise InvalidArgument(violations(error, "retry")) from None


def _children(text: str) -> list[Input]:
    """split.children_json: a JSON list of children in the feeder's shape, at least one."""
    raw = from_json_text(text, field=SPLIT)
    if not isinstance(raw, list) or not raw:
        raise InvalidArgument("a JSON list of at least one child", field=SPLIT)
    problems: list[str] = []
    children = [child_input(item, f"[{index}]", problems) for index, item in enumerate(raw)]
    if problems:
        raise InvalidArgument([FieldViolation(SPLIT, problem) for problem in problems])
    return [child for child in children if child is not None]


def failure_group_pb(
    found: FailureGroup, handles: Mapping[bytes, str] | None = None
) -> execution_pb2.FailureGroup:
    """A group as the contract's, its example parcels with their handles when read."""
    return execution_pb2.FailureGroup(
        failure_class=FAILURE_CLASSES[0][found.failure_class],  # type: ignore[arg-type]
        backend=found.backend,
        site=found.site,
        reason=found.reason,
        message=found.message,
        count=found.count,
        first_seen=to_timestamp(found.first_seen),
        last_seen=to_timestamp(found.last_seen),
        example_parcel_ids=[id_to_str(p) for p in found.examples],
        example_parcel_handles=[(handles or {}).get(p, "") for p in found.examples],
        example_input_ids=[id_to_str(i) for i in found.example_inputs],
        exit_codes=sorted(found.exit_codes),
        transformation_ids=sorted(id_to_str(t) for t in found.transformation_ids),
        over_time=found.over_time,
    )
