"""The real single-node Slurm cluster the Slurm tests run on (`scripts/slurm`): started on
first use when CI has not started it already, and never faked."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "slurm"


def slurm_conf() -> str:
    """SLURM_CONF of the running cluster (started now if it is not up); set in os.environ for
    the adaptor's commands and the test's own."""
    if subprocess.run([SCRIPT, "status"], capture_output=True).returncode != 0:
        started = subprocess.run([SCRIPT, "start"], capture_output=True, text=True)
        assert started.returncode == 0, f"scripts/slurm start failed: {started.stderr}"
    line = subprocess.run([SCRIPT, "env"], capture_output=True, text=True, check=True).stdout
    conf = line.strip().removeprefix("export SLURM_CONF=")
    os.environ["SLURM_CONF"] = conf
    return conf
