"""The `web` benchmark: its lines at the tiny scale, the pages it times answering 200."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dxts.bench import web as bench
from dxts.bench.__main__ import main

TINY = bench.SCALES["tiny"]


def test_tiny_on_sqlite_prints_one_latency_per_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'bench.sqlite'}"
    assert main(["web", "--scale", "tiny", "--db-url", url]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert [f["figure"] for f in lines] == [
        "workgraph_page_ms",
        "member_page_ms",
        "list_page_ms",
        "errors_page_ms",
        "parcel_page_ms",
    ]
    for figure in lines:
        assert figure["benchmark"] == "web" and figure["unit"] == "ms"
        assert figure["value"] > 0 and figure["baseline"] > 0
        assert figure["params"]["members"] == TINY.members
        assert figure["params"]["inputs"] == TINY.inputs
        assert figure["params"]["rounds"] == TINY.rounds
