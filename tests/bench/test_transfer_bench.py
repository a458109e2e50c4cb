"""`python -m dxts.bench transfer` against the real XRootD servers: two figures, each with the
same run's xrdcp baseline and the ratio."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xrootd_servers import endpoints

from dxts.bench.__main__ import main


def test_transfer_tiny_prints_files_and_bytes_per_second_against_xrdcp(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoints()  # the servers are up
    assert (
        main(["transfer", "--scale", "tiny", "--db-url", f"sqlite+aiosqlite:///{tmp_path}/b"]) == 0
    )
    figures = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [f["figure"] for f in figures] == ["files_per_s", "mb_per_s"]
    for figure in figures:
        assert figure["value"] > 0 and figure["baseline"] > 0
        assert figure["ratio"] == pytest.approx(figure["value"] / figure["baseline"], rel=1e-3)
