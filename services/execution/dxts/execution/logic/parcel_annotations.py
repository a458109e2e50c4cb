"""What execution keeps in `Parcels.Annotations`: the keys it writes, the backend's outcome
stored under `outcome`, and the `usage` annotation derived from it.

The outcome is the adaptor contract's one model (`dxts.core.adaptor.model.Outcome`), stored as
the JSON of `dxts.core.adaptor.codec`; it is read back by the Completing recorder and by
GetParcel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dxts.core.adaptor.codec import outcome_from_json
from dxts.core.adaptor.model import Outcome
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

SECONDS_PER_HOUR = 3600
# The usage annotation's memory is in GB of 10^9 bytes (decimal, not GiB): `memory_gb`, like
# EstimateResourceUsage's `max_memory_gb`, is the peak of the parcel's largest process.
BYTES_PER_GB = 10**9

# Outcome.usage field → (Annotations.usage key, divisor into its unit).
_USAGE_UNITS = {
    "cpu_seconds": ("cpu_hours", SECONDS_PER_HOUR),
    "wall_seconds": ("wall_hours", SECONDS_PER_HOUR),
    "max_memory_bytes": ("memory_gb", BYTES_PER_GB),
}


def usage_annotation(measures: Mapping[str, float | int] | None) -> dict[str, float] | None:
    """`Annotations.usage` of the parcel (`dxts.core.builtins.actions.USAGE`) from the stored
    outcome's measures (`codec.usage_to_json`): cpu_hours, wall_hours, memory_gb (10^9 bytes),
    each only when reported; None when nothing was."""
    if not measures:
        return None
    return {
        _USAGE_UNITS[name][0]: value / _USAGE_UNITS[name][1] for name, value in measures.items()
    }


def stored_outcome(annotations: Mapping[str, Any] | None) -> Outcome | None:
    """The outcome recorded on a parcel (`Annotations.outcome`), or None; its parcel id is
    empty (the row's id is the parcel's)."""
    stored = (annotations or {}).get(OUTCOME)
    return outcome_from_json(stored) if isinstance(stored, dict) else None


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
