"""The fault suite on a Galera cluster (`scripts/chaos --galera`), where one runs: the cluster of
`scripts/galera start` is not part of CI, so the run is skipped unless `DXTS_GALERA_URL` names
it; its figures at full size are in BENCHMARKS.md. What needs no cluster is checked always: the
fault suite's command hands `--galera` to this suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from dxts.bench.chaos_galera import FAULTS, run_suite

SEEDS = 200


def test_the_fault_suite_command_runs_the_galera_faults_when_asked() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "dxts.bench.chaos", "--galera", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown.startswith("usage: scripts/chaos --galera")
    assert all(fault in shown for fault in FAULTS)


@pytest.mark.skipif(not os.environ.get("DXTS_GALERA_URL"), reason="set DXTS_GALERA_URL")
async def test_every_node_fault_is_survived(tmp_path: Path) -> None:
    server = sa.make_url(os.environ["DXTS_GALERA_URL"]).set(database="")
    lines: list[dict[str, object]] = []
    reports = await run_suite(
        tmp_path,
        db_url=server.render_as_string(hide_password=False),
        seeds=SEEDS,
        emit=lines.append,
    )
    assert [r.fault for r in reports] == list(FAULTS)
    for report in reports:
        assert report.survived, report
        assert report.stall_s is not None and report.complete_s is not None
    assert lines[-1]["failed"] == []
