"""The `dispatch` benchmark runs end to end (tiny scale, SQLite): one dispatch figure per replica
count and the pipeline figure (through execution's recording), each against the raw claim, every
parcel dispatched exactly once and recorded (else it fails)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dxts.bench.__main__ import main
from dxts.bench.dispatch import SCALES


def test_dispatch_tiny_prints_one_figure_per_replica_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'bench.sqlite'}"
    assert main(["dispatch", "--scale", "tiny", "--db-url", url]) == 0
    figures = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    replicas = list(SCALES["tiny"].replicas)
    assert [(f["figure"], f["params"]["replicas"]) for f in figures] == [
        *(("dispatch_parcels_per_s", r) for r in replicas),
        ("pipeline_parcels_per_s", max(replicas)),
    ]
    for figure in figures:
        assert figure["unit"] == "parcels/s"
        assert figure["value"] > 0 and figure["baseline"] > 0
        assert figure["params"]["parcels"] == SCALES["tiny"].parcels
