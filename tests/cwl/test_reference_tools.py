"""The stand-in tools of examples/reference/ run under plain cwltool and do what their
documents say: generate events and histograms per seed, keep events above a cut, compare two
reconstructions pair by pair, strip a file with its raw ancestors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

TOOLS = Path(__file__).resolve().parents[2] / "examples" / "reference" / "tools"
CWLTOOL = Path(sys.executable).parent / "cwltool"


def run(tool: str, job: dict[str, Any], where: Path) -> dict[str, Any]:
    (where / f"{tool}.yaml").write_text(yaml.safe_dump(job))
    done = subprocess.run(
        [
            str(CWLTOOL),
            "--quiet",
            "--outdir",
            str(where),
            str(TOOLS / f"{tool}.cwl"),
            f"{tool}.yaml",
        ],
        cwd=where,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def files(*paths: str) -> list[dict[str, str]]:
    return [{"class": "File", "path": path} for path in paths]


def test_the_stand_in_tools_chain(tmp_path: Path) -> None:
    generated = run(
        "generate", {"seed": ["1", json.dumps({"seed": 2})], "events_per_seed": 40}, tmp_path
    )
    assert [f["basename"] for f in generated["sim-files"]] == ["seed-1.sim", "seed-2.sim"]
    histogram = json.loads((tmp_path / "hist-1.json").read_text())
    assert sum(histogram["bins"].values()) == 40

    kept = run(
        "process", {"input-data": files("seed-1.sim", "seed-2.sim"), "tag": "recoa"}, tmp_path
    )
    assert [f["basename"] for f in kept["reco-files"]] == ["seed-1.recoa", "seed-2.recoa"]
    compared = run(
        "compare",
        {
            "reco-a": files("seed-1.recoa", "seed-2.recoa"),
            "reco-b": files("seed-1.sim", "seed-2.sim"),
        },
        tmp_path,
    )
    rows = [
        json.loads(line)
        for line in Path(compared["comparison"][0]["path"]).read_text().splitlines()
    ]
    assert [(r["a"], r["b"], r["kept_b"]) for r in rows] == [
        ("seed-1.recoa", "seed-1.sim", 40),
        ("seed-2.recoa", "seed-2.sim", 40),
    ]
    assert all(r["kept_a"] <= 40 for r in rows)
    stripped = run("strip", {"rdst": files("seed-1.recoa"), "raw": files("seed-1.sim")}, tmp_path)
    (strip,) = stripped["stripped"]
    assert json.loads(Path(strip["path"]).read_text()) == {
        "reconstructed": "seed-1.recoa",
        "raw": ["seed-1.sim"],
    }
