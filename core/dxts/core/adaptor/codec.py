"""The contract's domain types stored: as bytes for an adaptor that keeps them, as JSON for the
outcome recorded on a parcel.

Bytes (the local, Slurm and DiracX adaptors' state) are the deterministic protobuf encoding of
the types' messages, so that equal values give equal bytes (a payload's key is the hash of its
bytes) and what an earlier release stored still reads.

JSON (`Parcels.Annotations.outcome`, read by recording and by GetParcel) is plain, written and
read without protobuf's JSON mapping, which recording would otherwise pay for every parcel. Its
spelling is the contract's, which every outcome already stored has: the result by its enum name,
the finish time in RFC 3339 with a Z, the usage by its field names, the parcel id left out (the
row's own).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from dxts.core.adaptor import mapping
from dxts.core.adaptor.model import (
    Failure,
    FailureClass,
    Outcome,
    OutcomeResult,
    OutputFile,
    Payload,
    ResourceUsage,
    Submission,
)
from dxts.v1 import backend_pb2, common_pb2


def encode_payload(payload: Payload) -> bytes:
    return mapping.payload_to_proto(payload).SerializeToString(deterministic=True)


def decode_payload(data: bytes) -> Payload:
    return mapping.payload_from_proto(backend_pb2.Payload.FromString(data))


def encode_submission(submission: Submission) -> bytes:
    return mapping.submission_to_proto(submission).SerializeToString(deterministic=True)


def decode_submission(data: bytes) -> Submission:
    return mapping.submission_from_proto(backend_pb2.ParcelSubmission.FromString(data))


def encode_outcome(outcome: Outcome) -> bytes:
    return mapping.outcome_to_proto(outcome).SerializeToString(deterministic=True)


def decode_outcome(data: bytes) -> Outcome:
    return mapping.outcome_from_proto(common_pb2.Outcome.FromString(data))


# -- the outcome as JSON --------------------------------------------------------------------------

_FILE_FIELDS = ("output_name", "lfn", "size", "checksum", "storage_element")
_TEXT_FIELDS = (
    "backend",
    "identifier",
    "backend_status",
    "message",
    "status_report_json",
    "output_object_json",
)
_RESULTS = {result.value: result for result in OutcomeResult}
_FAILURE_CLASSES = {failure_class.value: failure_class for failure_class in FailureClass}
_FAILURE_TEXTS = ("tool_message", "lfn", "storage_element", "site")
UsageField = Literal["cpu_seconds", "wall_seconds", "max_memory_bytes"]
USAGE_FIELDS: tuple[UsageField, ...] = ("cpu_seconds", "wall_seconds", "max_memory_bytes")


def usage_to_json(usage: ResourceUsage) -> dict[str, float | int]:
    """The measures the backend reported, by field name: an unreported one is absent, and so is
    one no measurement can give (negative, NaN or infinite, which JSON cannot even store)."""
    measures: dict[str, float | int] = {}
    for name in USAGE_FIELDS:
        value = getattr(usage, name)
        if value is not None and 0 <= value < math.inf:
            measures[name] = value
    return measures


def timestamp_text(moment: datetime) -> str:
    """RFC 3339 in UTC with a Z, the fraction in 3 or 6 digits only when there is one (the
    spelling protobuf's JSON mapping gives a Timestamp, which stored outcomes always had)."""
    utc = moment.astimezone(UTC) if moment.tzinfo else moment
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond == 0:
        return f"{text}Z"
    if utc.microsecond % 1000 == 0:
        return f"{text}.{utc.microsecond // 1000:03d}Z"
    return f"{text}.{utc.microsecond:06d}Z"


def outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    """The outcome as stored: its fields by name but the parcel id, the result by its name,
    sizes as numbers."""
    stored: dict[str, Any] = {  # spelled out: this runs for every outcome recorded
        "result": outcome.result.value,
        "backend": outcome.backend,
        "identifier": outcome.identifier,
        "backend_status": outcome.backend_status,
        "message": outcome.message,
        "status_report_json": outcome.status_report_json,
        "outputs": [
            {
                "output_name": f.output_name,
                "lfn": f.lfn,
                "size": f.size,
                "checksum": f.checksum,
                "storage_element": f.storage_element,
            }
            for f in outcome.outputs
        ],
    }
    if outcome.finished_at is not None:
        stored["finished_at"] = timestamp_text(outcome.finished_at)
    if outcome.usage is not None:
        stored["usage"] = usage_to_json(outcome.usage)
    if outcome.exit_code is not None:
        stored["exit_code"] = outcome.exit_code
    if outcome.output_object_json:
        stored["output_object_json"] = outcome.output_object_json
    if outcome.failure is not None:
        stored["failure"] = failure_to_json(outcome.failure)
    return stored


def failure_to_json(failure: Failure) -> dict[str, str]:
    """The failure as stored: its class by its name, the texts only when there are any."""
    stored = {"class": failure.failure_class.value}
    for name in _FAILURE_TEXTS:
        if text := getattr(failure, name):
            stored[name] = text
    return stored


def failure_from_json(stored: Mapping[str, Any]) -> Failure:
    texts = {name: str(stored.get(name) or "") for name in _FAILURE_TEXTS}
    failure_class = _FAILURE_CLASSES.get(str(stored.get("class")), FailureClass.UNSPECIFIED)
    return Failure(failure_class=failure_class, **texts)


def _usage_from_json(usage: Mapping[str, Any]) -> ResourceUsage:
    measures: dict[str, float | int] = {}
    for name in USAGE_FIELDS:
        value = usage.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            measures[name] = int(value) if name == "max_memory_bytes" else value
    return ResourceUsage(**measures)  # type: ignore[arg-type]


def _file_from_json(stored: Mapping[str, Any]) -> OutputFile:
    fields = {name: stored[name] for name in _FILE_FIELDS if name in stored}
    return OutputFile(**{"output_name": "", "lfn": "", **fields})


def outcome_from_json(stored: Mapping[str, Any]) -> Outcome:
    """A stored outcome (`outcome_to_json`) read back; its parcel id is empty."""
    texts = {name: str(stored.get(name) or "") for name in _TEXT_FIELDS}
    usage = stored.get("usage")
    exit_code = stored.get("exit_code")
    finished_at = stored.get("finished_at")
    failure = stored.get("failure")
    return Outcome(
        parcel_id="",
        result=_RESULTS.get(stored.get("result"), OutcomeResult.UNSPECIFIED),  # type: ignore[arg-type]
        outputs=[_file_from_json(f) for f in stored.get("outputs", ())],
        finished_at=datetime.fromisoformat(finished_at) if finished_at else None,
        usage=_usage_from_json(usage) if isinstance(usage, dict) else None,
        exit_code=exit_code if isinstance(exit_code, int) else None,
        failure=failure_from_json(failure) if isinstance(failure, dict) else None,
        **texts,
    )
