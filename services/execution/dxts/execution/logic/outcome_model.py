"""A backend's outcome as execution's logic sees it, and as it is stored on its parcel.

The outcome arrives from the dispatcher (RecordOutcomes; the edge maps the message to these
types) and is kept in `Parcels.Annotations.outcome` as plain JSON (`outcome_to_json`), read back
by the Completing recorder and by GetParcel (`stored_outcome`) without protobuf's JSON mapping,
which recording would otherwise pay for every parcel. The stored spelling is the contract's: the
result by its enum name, the finish time in RFC 3339 with a Z, the usage by its field names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from dxts.execution.store import outcomes as store

# Keys execution writes in Parcels.Annotations. CANCEL_REQUESTED is the dispatcher's agreed key
# (dxts.dispatcher.db.CANCEL_REQUESTED): a Completing parcel carrying it waits for the backend.
OUTCOME = store.OUTCOME
CANCEL_REQUESTED = "cancel_requested"
CANCEL_REASON = "cancel_reason"
WARNINGS = "warnings"
REASON = "reason"
RECOVERY_PARCEL = "recovery_parcel_id"
RECOVERY_OF = "recovery_of"
RECOVERY_BACKEND = "recovery"
REASON_LENGTH = 1_000  # characters of an unplanned error kept as a failed parcel's reason
MAX_WARNINGS = 20  # kept per parcel; the rest are counted


class OutcomeResult(StrEnum):
    """What the backend says became of the work; the values are the names stored."""

    UNSPECIFIED = "OUTCOME_RESULT_UNSPECIFIED"
    SUCCEEDED = "OUTCOME_RESULT_SUCCEEDED"  # ran to completion: the status report says the rest
    FAILED = "OUTCOME_RESULT_FAILED"
    CANCELLED = "OUTCOME_RESULT_CANCELLED"  # the backend confirms a cancellation


class Disposition(StrEnum):
    """What recording did with one outcome; the values are the outcomes metric's labels."""

    RECORDED = "recorded"
    ALREADY_RECORDED = "already_recorded"  # past that point already: a retry, ignored
    UNKNOWN_PARCEL = "unknown_parcel"  # no parcel it can be: logged, ignored


@dataclass(frozen=True)
class OutputFile:
    """One file of an output manifest."""

    output_name: str = ""  # the process's CWL output id (TransformationOutputs.Name)
    lfn: str = ""
    size: int = 0
    checksum: str = ""  # "adler32:0a1b2c3d"-style, when the backend computed one
    storage_element: str = ""  # where the backend wrote it (its first replica)


@dataclass(frozen=True)
class ResourceUsage:
    """What the backend measured of the work; None for what it did not."""

    cpu_seconds: float | None = None
    wall_seconds: float | None = None
    max_memory_bytes: int | None = None


@dataclass(frozen=True)
class Outcome:
    """A backend's answer for one parcel. `parcel_id` is the text the backend sent (an ack
    names it back, even when it is no id); `usage` is None when nothing was reported."""

    parcel_id: str
    backend: str = ""
    identifier: str = ""
    result: OutcomeResult = OutcomeResult.UNSPECIFIED
    outputs: tuple[OutputFile, ...] = ()
    status_report_json: str = ""
    backend_status: str = ""
    message: str = ""
    finished_at: datetime | None = None
    usage: ResourceUsage | None = None
    exit_code: int | None = None  # the work's exit status, where the backend knows it
    # The CWL output object as the backend sent it (text: its numbers stay exactly as written).
    output_object_json: str = ""


@dataclass(frozen=True)
class OutcomeAck:
    """What became of one forwarded outcome."""

    parcel_id: str
    backend: str
    identifier: str
    disposition: Disposition
    message: str = ""


# -- the outcome as stored ----------------------------------------------------------------------


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
UsageField = Literal["cpu_seconds", "wall_seconds", "max_memory_bytes"]
_USAGE_FIELDS: tuple[UsageField, ...] = ("cpu_seconds", "wall_seconds", "max_memory_bytes")
SECONDS_PER_HOUR = 3600
# The usage annotation's memory is in GB of 10^9 bytes (decimal, not GiB): `memory_gb`, like
# EstimateResourceUsage's `max_memory_gb`, is the peak of the parcel's largest process.
BYTES_PER_GB = 10**9


def usage_to_json(usage: ResourceUsage) -> dict[str, float | int]:
    """The measures the backend reported, by field name: an unreported one is absent, and so is
    one no measurement can give (negative, NaN or infinite, which JSON cannot even store)."""
    measures: dict[str, float | int] = {}
    for name in _USAGE_FIELDS:
        value = getattr(usage, name)
        if value is not None and 0 <= value < math.inf:
            measures[name] = value
    return measures


# Outcome.usage field → (Annotations.usage key, divisor into its unit).
_USAGE_UNITS = {
    "cpu_seconds": ("cpu_hours", SECONDS_PER_HOUR),
    "wall_seconds": ("wall_hours", SECONDS_PER_HOUR),
    "max_memory_bytes": ("memory_gb", BYTES_PER_GB),
}


def usage_annotation(measures: Mapping[str, float | int] | None) -> dict[str, float] | None:
    """`Annotations.usage` of the parcel (`dxts.core.builtins.actions.USAGE`) from the stored
    outcome's measures (`usage_to_json`): cpu_hours, wall_hours, memory_gb (10^9 bytes), each
    only when reported; None when nothing was."""
    if not measures:
        return None
    return {
        _USAGE_UNITS[name][0]: value / _USAGE_UNITS[name][1] for name, value in measures.items()
    }


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
    """The outcome as stored in `Annotations.outcome`: its fields by name but the parcel id
    (the row's own), the result by its name, sizes as numbers."""
    stored: dict[str, Any] = {  # spelled out: this runs for every outcome forwarded
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
    return stored


def _stored_usage(usage: Mapping[str, Any]) -> ResourceUsage:
    measures: dict[str, float | int] = {}
    for name in _USAGE_FIELDS:
        value = usage.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            measures[name] = int(value) if name == "max_memory_bytes" else value
    return ResourceUsage(**measures)  # type: ignore[arg-type]


def stored_outcome(annotations: Mapping[str, Any] | None) -> Outcome | None:
    """The outcome recorded on a parcel (`Annotations.outcome`), or None; its parcel id is
    empty (the row's id is the parcel's)."""
    stored = (annotations or {}).get(OUTCOME)
    if not isinstance(stored, dict):
        return None
    texts = {name: str(stored.get(name) or "") for name in _TEXT_FIELDS}
    usage = stored.get("usage")
    exit_code = stored.get("exit_code")
    return Outcome(
        parcel_id="",
        result=_RESULTS.get(stored.get("result"), OutcomeResult.UNSPECIFIED),  # type: ignore[arg-type]
        outputs=tuple(
            OutputFile(**{k: f[k] for k in _FILE_FIELDS if k in f})
            for f in stored.get("outputs", ())
        ),
        finished_at=(
            datetime.fromisoformat(stored["finished_at"]) if stored.get("finished_at") else None
        ),
        usage=_stored_usage(usage) if isinstance(usage, dict) else None,
        exit_code=exit_code if isinstance(exit_code, int) else None,
        **texts,
    )


def with_changes(annotations: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    return {**annotations, **changes}


def warned(annotations: Mapping[str, Any], warnings: Sequence[str]) -> dict[str, Any]:
    """`annotations` with `warnings` added to its list, `MAX_WARNINGS` kept, the rest counted."""
    if not warnings:
        return dict(annotations)
    kept = [*annotations.get(WARNINGS, []), *warnings]
    if len(kept) > MAX_WARNINGS:
        kept = [*kept[: MAX_WARNINGS - 1], f"... and {len(kept) - MAX_WARNINGS + 1} more"]
    return with_changes(annotations, **{WARNINGS: kept})
