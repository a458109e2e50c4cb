"""What a parcel asks Slurm for: its requirements first, then its CWL ResourceRequirement and
ToolTimeLimit (requirements over hints), then the adaptor's defaults and partition policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from dxts.backends.slurm.logic.resources import BadRequirements, Request, resource_request
from dxts.backends.slurm.settings import SlurmSettings
from dxts.cli.adaptor_conformance import tool_payload
from dxts.v1 import backend_pb2

SETTINGS = SlurmSettings(
    work_dir=Path("/tmp/unused"),
    partition="batch",
    allowed_partitions=["short"],
    default_memory_mb=700,
)


def request(tool_fields: dict[str, object], requirements: str = "") -> Request:
    tool = {"class": "CommandLineTool", "baseCommand": ["true"], "inputs": {}, "outputs": {}}
    payload = tool_payload({**tool, **tool_fields}).compute
    parcel = backend_pb2.ParcelSubmission(parcel_id="p", requirements_json=requirements)
    return resource_request(payload, parcel, SETTINGS)


def test_defaults_and_the_installations_partition() -> None:
    assert request({}) == Request(cores=1, memory_mb=700, wall_time_s=3600, partition="batch")
    assert request({}).sbatch_options() == [
        "--cpus-per-task=1", "--mem=700M", "--time=60", "--partition=batch",
    ]  # fmt: skip


def test_the_cwl_requirements_over_its_hints() -> None:
    fields = {
        "hints": [{"class": "ResourceRequirement", "coresMin": 4, "ramMin": 100}],
        "requirements": {
            "ResourceRequirement": {"ramMin": 2048},
            "ToolTimeLimit": {"timelimit": 90},
        },
    }
    assert request(fields) == Request(cores=4, memory_mb=2048, wall_time_s=90, partition="batch")
    assert request(fields).sbatch_options()[2] == "--time=2"  # minutes, rounded up


def test_the_parcels_requirements_win() -> None:
    fields = {"requirements": [{"class": "ResourceRequirement", "coresMin": 4}]}
    asked = '{"cores": 2, "memory_mb": 1500.5, "wall_time_s": 600, "partition": "short"}'
    assert request(fields, asked) == Request(2, 1501, 600, "short")


@pytest.mark.parametrize(
    ("requirements", "message"),
    [
        ('{"cores": 0}', "requirements.cores"),
        ('{"memory_mb": "lots"}', "requirements.memory_mb"),
        ('{"partition": 3}', "requirements.partition"),
        ('{"partition": "admin-only"}', "'admin-only' is not allowed here"),
        ("[1]", "not an object"),
        ("{", "not JSON"),
    ],
)
def test_unusable_requirements_are_refused_with_the_field(requirements: str, message: str) -> None:
    with pytest.raises(BadRequirements, match=message):
        request({}, requirements)
