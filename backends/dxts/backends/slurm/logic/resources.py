"""What a parcel asks Slurm for: cores, memory, wall time and partition.

Each value is the first of: the parcel's requirements (`requirements_json`: `cores`,
`memory_mb`, `wall_time_s`, `partition`, as the installation's requirements template or a
scouting estimate fills them), the root process's CWL `ResourceRequirement` (requirement or
hint: `coresMin`, `ramMin` in MiB, and `ToolTimeLimit.timelimit`), the adaptor's defaults. The
partition is the installation's policy: the adaptor's `partition` unless the parcel names one,
which must be that one or one of `allowed_partitions` (the definition service refuses the
others at submission; the adaptor refuses them again, whatever reached it).
Parcels of one Submit with equal requests share one job array.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from dxts.backends.slurm.settings import SlurmSettings
from dxts.core.adaptor.model import ComputePayload, Submission


class BadRequirements(ValueError):
    """The parcel's requirements cannot become a resource request (the parcel is refused)."""


@dataclass(frozen=True, order=True)
class Request:
    cores: int
    memory_mb: int
    wall_time_s: int
    partition: str

    def sbatch_options(self) -> list[str]:
        options = [
            f"--cpus-per-task={self.cores}",
            f"--mem={self.memory_mb}M",
            f"--time={max(1, math.ceil(self.wall_time_s / 60))}",
        ]
        return [*options, f"--partition={self.partition}"] if self.partition else options


def _cwl_requirements(payload: ComputePayload) -> dict[str, Any]:
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


def _positive_int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise BadRequirements(f"requirements.{field} must be a positive number, not {value!r}")
    return math.ceil(value)


def resource_request(
    payload: ComputePayload,
    parcel: Submission,
    settings: SlurmSettings,
) -> Request:
    try:
        asked = json.loads(parcel.requirements_json) if parcel.requirements_json else {}
    except ValueError as error:
        raise BadRequirements(f"requirements_json is not JSON: {error}") from None
    if not isinstance(asked, dict):
        raise BadRequirements("requirements_json is not an object")
    cwl = _cwl_requirements(payload)
    cores = asked.get("cores", cwl.get("coresMin", settings.default_cores))
    memory = asked.get("memory_mb", cwl.get("ramMin", settings.default_memory_mb))
    wall = asked.get("wall_time_s", cwl.get("timelimit", settings.default_wall_time_s))
    partition = asked.get("partition", settings.partition)
    if not isinstance(partition, str):
        raise BadRequirements(f"requirements.partition must be a string, not {partition!r}")
    allowed = {settings.partition, *settings.allowed_partitions} - {""}
    if partition and partition not in allowed:
        raise BadRequirements(
            f"requirements.partition {partition!r} is not allowed here (allowed: "
            f"{', '.join(sorted(allowed)) or 'the cluster default only'})"
        )
    return Request(
        _positive_int(cores, "cores"),
        _positive_int(memory, "memory_mb"),
        _positive_int(wall, "wall_time_s"),
        partition,
    )
