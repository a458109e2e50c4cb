"""The suite's worker groups hold: under `--dist loadgroup`, the tests of one module run in one
pytest-xdist worker (its module-scoped servers and databases made once, never twice at once).
pytest 9.2 with pytest-xdist 3.8 silently gave no test a group, and a module's tests raced each
other's private XRootD servers from two workers; this runs a real two-worker session to see."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MODULE = '''
import os
import pytest

@pytest.mark.parametrize("n", range(6))
def test_records_its_worker(n):
    with open(os.environ["WORKERS_FILE"], "a") as out:
        out.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
'''


def test_one_module_runs_in_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(MODULE)
    (tmp_path / "conftest.py").write_text(
        (Path(__file__).parent / "conftest.py").read_text().split("\ndef mysql_server_url")[0]
    )
    workers = tmp_path / "workers.txt"
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q",
         "-p", "no:cacheprovider", str(tmp_path / "test_grouped.py")],
        cwd=tmp_path, capture_output=True, text=True,
        env={"WORKERS_FILE": str(workers), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    seen = workers.read_text().split()
    assert len(seen) == 6
    assert len(set(seen)) == 1, f"one module's tests ran in workers {sorted(set(seen))}"
