"""The `execution` benchmark at tiny scale on SQLite: its figures, and that what it measured was
really done (the runners fail the benchmark otherwise)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dxts.bench.__main__ import main

FEEDER_AND_PACKER = {
    "feeder_ingest_inputs_per_s",
    "bulk_insert_rows_per_s",
    "packer_inputs_per_s",
    "packer_peak_rss_mb",
}


def test_execution_tiny_on_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'bench.sqlite'}"
    assert main(["execution", "--scale", "tiny", "--db-url", url]) == 0
    figures = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    mine = [f for f in figures if f["figure"] in FEEDER_AND_PACKER]
    assert {f["figure"] for f in mine} == FEEDER_AND_PACKER
    for figure in mine:
        assert figure["value"] > 0 and figure["baseline"] > 0
        assert figure["ratio"] == figure["value"] / figure["baseline"]
        assert figure["params"]["database"] == "sqlite"
    packers = [f["params"]["packer"] for f in mine if f["figure"] == "packer_inputs_per_s"]
    assert packers == ["PerInput", "BySize"]
    pools = [f["params"]["pool"] for f in mine if f["figure"] == "packer_peak_rss_mb"]
    assert pools == [200, 400]
    assert all(f["unit"] == "MB" for f in mine if f["figure"] == "packer_peak_rss_mb")
