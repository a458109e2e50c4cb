"""What a parcel asks of the machine it runs on, read the same way by every adaptor: the parcel's
requirements (`requirements_json`, as the installation's requirements template or a scouting
estimate fills them: `cores`, `memory_mb`, `wall_time_s`, `partition`), else the root process's
CWL `ResourceRequirement` / `ToolTimeLimit` (requirement or hint), else the adaptor's default."""

from __future__ import annotations

import json
import math
from typing import Any

from dxts.core.adaptor.model import ComputePayload, Submission


class BadRequirements(ValueError):
    """The parcel's requirements cannot be read (the parcel is refused, or fails)."""


def cwl_requirements(payload: ComputePayload) -> dict[str, Any]:
    """The root process's ResourceRequirement / ToolTimeLimit fields (requirements win)."""
    root = next(p for p in payload.processes if p.process_id == payload.process_id)
    document = json.loads(root.document_json)
    found: dict[str, Any] = {}
    for section in ("hints", "requirements"):  # requirements last: they override hints
        entries = document.get(section) or []
        if isinstance(entries, dict):
            entries = [{"class": name, **(body or {})} for name, body in entries.items()]
        for entry in entries:
            if isinstance(entry, dict) and entry.get("class") in (
                "ResourceRequirement",
                "ToolTimeLimit",
            ):
                found.update(entry)
    return found


def asked(parcel: Submission) -> dict[str, Any]:
    """The parcel's own requirements (`requirements_json`), an object."""
    try:
        value = json.loads(parcel.requirements_json) if parcel.requirements_json else {}
    except ValueError as error:
        raise BadRequirements(f"requirements_json is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise BadRequirements("requirements_json is not an object")
    return value


def positive_int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise BadRequirements(f"requirements.{field} must be a positive number, not {value!r}")
    return math.ceil(value)


def wall_time_s(payload: ComputePayload, parcel: Submission, default: int, cap: int) -> int:
    """The wall time the parcel may run for: what it asks (its requirements, else its CWL
    `ToolTimeLimit`), else `default`; never more than the installation's `cap`."""
    wanted = asked(parcel).get("wall_time_s", cwl_requirements(payload).get("timelimit", default))
    return min(positive_int(wanted, "wall_time_s"), cap)
