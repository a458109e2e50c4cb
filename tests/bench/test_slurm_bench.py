"""The `slurm` benchmark at the tiny scale on the real cluster: one figure, the adaptor's batched
Submit against one Slurm job per parcel, measured in the same run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from slurm_cluster import slurm_conf

from dxts.bench.__main__ import main


def test_tiny_prints_batched_against_one_job_per_parcel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slurm_conf()
    path = tmp_path / "bench.sqlite"
    assert main(["slurm", "--scale", "tiny", "--db-url", f"sqlite+aiosqlite:///{path}"]) == 0
    (figure,) = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    assert (figure["benchmark"], figure["figure"]) == ("slurm", "submit_parcels_per_s")
    assert figure["unit"] == "parcels/s"
    assert figure["value"] > 0 and figure["baseline"] > 0
    assert figure["params"]["parcels_per_submit"] == 5
    assert figure["params"]["baseline"] == "one sbatch per parcel"
