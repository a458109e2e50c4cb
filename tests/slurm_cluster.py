"""The real single-node Slurm cluster the Slurm tests run on (`scripts/slurm`): started on
first use when CI has not started it already, and never faked."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import dxts.backends
import dxts.core

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


def job_python(directory: Path, account: str) -> str:
    """An interpreter the job account can run with this dxts and cwltool: this one when it can
    (an installation in a shared place), else a launcher in `directory` of the system's Python
    over this virtualenv's packages (this machine's own Python lives in root's home, closed to
    every other user; the system's is the same version)."""
    # As the job script runs it (a shell's exec refuses what the account may not reach).
    probe = ["sh", "-c", f"exec {sys.executable} -c 'import cwltool, dxts.backends.slurm.job'"]
    as_account = ["setpriv", f"--reuid={account}", f"--regid={account}", "--clear-groups"]
    if subprocess.run([*as_account, *probe], capture_output=True, cwd="/").returncode == 0:
        return sys.executable
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    assert system.exists(), f"the job account cannot run {sys.executable}, and there is no {system}"
    packages = sysconfig.get_paths()["purelib"]
    # The runner the job starts (`python -m dxts.backends.runner.cwltool_main`) finds dxts and
    # cwltool by PYTHONPATH: the packages, and the source folders of an editable install.
    sources = {str(Path(module.__file__ or "").parents[2]) for module in (dxts.core, dxts.backends)}
    path = os.pathsep.join([packages, *sorted(sources)])
    launcher = directory / "job-python"
    launcher.write_text(
        f"#!{system}\n"
        "import os, runpy, site, sys\n"
        f"os.environ['PYTHONPATH'] = {path!r}\n"
        f"site.addsitedir({packages!r})\n"
        "assert sys.argv[1] == '-m', sys.argv\n"
        "sys.argv = sys.argv[2:]\n"
        "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
    )
    launcher.chmod(0o755)
    return str(launcher)


def shared_directory() -> Path:
    """A folder the job account can pass through (the nodes' shared filesystem): pytest's own
    are root's alone (0700)."""
    directory = Path(tempfile.mkdtemp(prefix="dxts-slurm-test-", dir="/tmp"))
    directory.chmod(0o711)
    return directory
