"""The `cli` benchmark: the start-up figures (wall clock, and the read's CPU time), each against
`python -c pass` in the same run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dxts.bench.__main__ import main


def test_tiny_prints_help_and_read_figures_against_the_interpreter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'bench.sqlite'}"
    assert main(["cli", "--scale", "tiny", "--db-url", url]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert [line["figure"] for line in lines] == ["cli_help_ms", "cli_read_ms", "cli_read_cpu_ms"]
    for figure in lines:
        assert figure["unit"] == "ms" and figure["value"] > 0 and figure["baseline"] > 0
        assert figure["params"]["baseline_command"] == "python -c pass"
