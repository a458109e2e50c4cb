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

import math
from dataclasses import dataclass

from dxts.backends.runner import requirements
from dxts.backends.runner.requirements import BadRequirements, positive_int
from dxts.backends.slurm.settings import SlurmSettings
from dxts.core.adaptor.model import ComputePayload, Submission


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


def resource_request(
    payload: ComputePayload,
    parcel: Submission,
    settings: SlurmSettings,
) -> Request:
    asked = requirements.asked(parcel)
    cwl = requirements.cwl_requirements(payload)
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
        positive_int(cores, "cores"),
        positive_int(memory, "memory_mb"),
        positive_int(wall, "wall_time_s"),
        partition,
    )
