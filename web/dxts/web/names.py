"""How the contracts' values read on a page: state names, times, sizes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum

from google.protobuf.timestamp_pb2 import Timestamp

from dxts.core import states
from dxts.core.errors import InvalidArgument
from dxts.core.grpc.convert import enum_from_proto

# Statuses a member or workgraph is finished in (nothing more will happen to it by itself).
FINISHED = frozenset({"Completed", "Archived", "Cancelled", "Finalized"})
# Inputs that will not be picked up again.
SETTLED_INPUTS = ("Processed", "NotProcessed", "Split")
IN_FLIGHT_PARCELS = ("Unassigned", "Reserved", "Assigned", "Completing")
ENDED_PARCELS = ("Done", "PartiallyDone", "Failed", "Cancelled")


def named(enum: type[StrEnum], number: int) -> str:
    """The state's name ("FinalizingBlocked"), or "Unknown" for a number no state has."""
    try:
        return str(enum_from_proto(enum, number, field="status"))
    except InvalidArgument:
        return "Unknown"


def workgraph_status(number: int) -> str:
    return named(states.WorkgraphStatus, number)


def transformation_status(number: int) -> str:
    return named(states.TransformationStatus, number)


def named_result(number: int) -> str:
    """An action's last result ("Failed"), "not run" before its first run."""
    return "not run" if not number else named(states.ActionResult, number)


def named_parcel_status(number: int) -> str:
    return named(states.ParcelStatus, number)


def named_input_status(number: int) -> str:
    return named(states.InputStatus, number)


def kind(number: int) -> str:
    return named(states.Kind, number)


def counts(status_counts: object) -> dict[str, int]:
    """StatusCount messages as {status name: count}, in machine order."""
    found: dict[str, int] = {}
    for entry in status_counts:  # type: ignore[attr-defined]
        which = entry.WhichOneof("status")
        enum = {
            "input_status": states.InputStatus,
            "parcel_status": states.ParcelStatus,
            "transformation_status": states.TransformationStatus,
        }.get(which or "")
        if enum is not None:
            found[named(enum, getattr(entry, which))] = entry.count
    return found


def when(stamp: Timestamp) -> datetime | None:
    """A Timestamp as an aware UTC datetime; None when it is unset."""
    if not stamp.seconds and not stamp.nanos:
        return None
    return stamp.ToDatetime(tzinfo=UTC)


def created_at(identifier: str) -> datetime | None:
    """When a parcel or input was made: the millisecond timestamp of its id (a UUIDv7);
    None for an id of another kind."""
    try:
        value = uuid.UUID(identifier)
    except ValueError:
        return None
    if value.version != 7:
        return None
    return datetime.fromtimestamp((value.int >> 80) / 1000, UTC)


def age(moment: datetime | None, now: datetime | None = None) -> str:
    """How long ago, in the largest unit that says it: "3 d", "5 h", "12 min", "40 s"."""
    if moment is None:
        return "-"
    seconds = max(0, int(((now or datetime.now(UTC)) - moment).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def size(number: float) -> str:
    """Bytes in decimal units (10^3), as storage is sold and the usage annotation counts."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(number) < 1000 or unit == "TB":
            return f"{number:.0f} {unit}" if unit == "B" else f"{number:.1f} {unit}"
        number /= 1000
    return f"{number:.1f} TB"


def css_class(status: str) -> str:
    """The status's CSS class: its colour on every page (static/web.css)."""
    return "st-" + status.lower()
