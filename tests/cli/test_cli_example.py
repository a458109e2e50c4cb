"""The example workgraph (examples/mc-demo.cwl): dxts accepts it, and plain cwltool runs the same
document unchanged, really computing the chain (seeds → events → candidates → one dataset)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from dxts.cli.main import app

EXAMPLES = Path(__file__).parents[2] / "examples"
CWLTOOL = [sys.executable, "-c", "import sys, cwltool.main; sys.exit(cwltool.main.main())"]


def test_the_example_validates() -> None:
    result = CliRunner().invoke(app, ["validate", str(EXAMPLES / "mc-demo.cwl")])
    assert (result.exit_code, result.output) == (0, "mc-demo.cwl: valid, 4 members\n")


def test_plain_cwltool_runs_the_example(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            *CWLTOOL,
            "--no-container",
            "--quiet",
            "--outdir",
            str(tmp_path / "out"),
            str(EXAMPLES / "mc-demo.cwl"),
            str(EXAMPLES / "mc-demo-job.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    dataset = Path(json.loads(run.stdout)["datasets"]["path"])
    summary, *candidates = dataset.read_text().splitlines()
    header = json.loads(summary)
    assert header["files"] == ["seed-1.reco", "seed-2.reco", "seed-3.reco"]
    assert header["candidates"] == len(candidates) > 0
    # The generated peak (5.367) is what reconstruction finds, over a flat background.
    assert abs(header["mass_mean"] - 5.367) < 0.02
    assert sum(header["histogram"]["bins"]) == len(candidates)
    assert {json.loads(line)["source"] for line in candidates} == {"seed-1", "seed-2", "seed-3"}
    # Only the workflow output is kept: intermediates and status reports stay inside the run.
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [dataset.name]


def test_a_tool_reports_every_input_it_was_given(tmp_path: Path) -> None:
    """The status report the local adaptor returns and execution records: keyed by the ids dxts
    passes in `dxts-input-ids`."""
    ids = ["0190f1c2-7a4b-7c3d-8e9f-0123456789ab", "0190f1c2-7a4b-7c3d-8e9f-0123456789ac"]
    job = tmp_path / "job.json"
    job.write_text(
        json.dumps({"seed": ['{"seed":7}', "8"], "events_per_seed": 5, "dxts-input-ids": ids})
    )
    run = subprocess.run(
        [
            *CWLTOOL,
            "--no-container",
            "--quiet",
            "--outdir",
            str(tmp_path / "out"),
            str(EXAMPLES / "tools" / "simulate.cwl"),
            str(job),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    outputs = json.loads(run.stdout)
    assert json.loads(Path(outputs["status-report"]["path"]).read_text()) == {
        i: {"action": "SUCCESS"} for i in ids
    }
    sims = sorted(Path(f["path"]).name for f in outputs["sim-files"])
    assert sims == ["seed-7.sim", "seed-8.sim"]
    assert len((tmp_path / "out" / "seed-7.sim").read_text().splitlines()) == 1 + 5
