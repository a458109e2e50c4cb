"""Jobs in a box (docs/security.md): a job of the local adaptor, in the shape `dxts up` runs it
(root, with the installation's secrets in the data directory and its environment), tries to
read or write what it must not; every attempt fails. Its environment holds nothing of the
adaptor's, a job over its wall time ends Failed saying so, and what it hands back is collected
only when it is its own."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_local_adaptor import (
    PYTHON,
    SLEEPER,
    WRITER,
    Harness,
    compute_payload,
    submission,
)

from dxts.backends.runner import sandbox
from dxts.backends.runner.cwltool_main import TOOL_STDERR_VARIABLE
from dxts.core.catalogue import CatalogueFile, CatalogueSettings, LocalFileCatalogue
from dxts.core.ids import id_to_str, new_id
from dxts.v1 import common_pb2

SECRET = "s3cret-never-in-a-job"
# Tries each path: "read" or "write" it, listing a directory; reports what happened to each.
PROBE = """
import json, os, sys
attempts = json.loads(sys.argv[1])
found = {}
environs = {}  # every ancestor's environment, as far as it can be read
pid = os.getppid()
while pid > 0:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environs[pid] = handle.read().decode(errors="replace")
    except OSError as error:
        environs[pid] = type(error).__name__
    with open(f"/proc/{pid}/status") as status:
        pid = int(next(line for line in status if line.startswith("PPid:")).split()[1])
found["environs"] = environs
for how, path in attempts:
    try:
        if how == "write":
            with open(path, "ab") as handle:
                handle.write(b"x")
        elif os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as handle:
                handle.read()
        found[f"{how} {path}"] = "allowed"
    except OSError as error:
        found[f"{how} {path}"] = type(error).__name__
found["environment"] = dict(os.environ)
found["uid"] = os.getuid()
open("probe.json", "w").write(json.dumps(found))
"""
PROBER = {
    "class": "CommandLineTool",
    "baseCommand": [PYTHON, "-c", PROBE],
    "inputs": {"attempts": {"type": "string", "inputBinding": {"position": 1}}},
    "outputs": {"probe": {"type": "File", "outputBinding": {"glob": "probe.json"}}},
}


@pytest.fixture
async def installation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Harness]:
    """The local adaptor over a data directory laid out as `dxts up` lays it out, holding its
    secrets, and with the component's settings in its environment."""
    monkeypatch.setenv("DXTS_TOKEN", SECRET)
    monkeypatch.setenv("DXTS_DB_URL", f"mysql+asyncmy://dxts:{SECRET}@127.0.0.1/dxts")
    monkeypatch.setenv("DXTS_TLS_KEY", str(tmp_path / "tls" / "server.key"))
    sqlite3.connect(tmp_path / "dxts.sqlite").execute("create table t (x)").connection.close()
    (tmp_path / "connection.json").write_text(json.dumps({"token": SECRET}))
    (tmp_path / "tls").mkdir()
    (tmp_path / "tls" / "server.key").write_text(SECRET)
    for secret in ("dxts.sqlite", "connection.json", "tls/server.key"):
        (tmp_path / secret).chmod(0o644)  # even readable by all: the job does not see them
    catalogue = LocalFileCatalogue(
        CatalogueSettings(url=f"sqlite+aiosqlite:///{tmp_path / 'catalogue.sqlite'}")
    )
    await catalogue.start()
    harness = Harness(tmp_path, catalogue)
    harness.settings = harness.settings.model_copy(update={"storage_root": tmp_path / "storage"})
    await harness.start()
    yield harness
    await harness.stop()
    await catalogue.close()


async def run(harness: Harness, process: dict[str, Any], parameters: Any, **fields: Any) -> Any:
    (result,) = await harness.submit(compute_payload(process), submission(parameters, **fields))
    return result, await harness.outcome(result.identifier)


async def test_a_job_cannot_read_the_installation_s_secrets_or_other_jobs(
    installation: Harness,
) -> None:
    data = installation.tmp
    other, done = await run(installation, WRITER, {"message": "private"})
    assert done.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, done.message
    other_job = installation.settings.work_dir / "jobs" / other.identifier
    attempts = [
        ["read", str(data)],
        ["read", str(installation.keys.path)],
        ["read", str(data / "connection.json")],
        ["read", str(data / "tls" / "server.key")],
        ["read", str(data / "dxts.sqlite")],
        ["write", str(data / "dxts.sqlite")],
        ["read", str(installation.settings.work_dir / "state.sqlite")],
        ["read", str(installation.settings.work_dir / "jobs")],
        ["read", str(other_job / "job.json")],
        ["read", str(other_job / "runner.log")],
        ["read", str(data / "storage")],
    ]
    result, outcome = await run(installation, PROBER, {"attempts": json.dumps(attempts)})
    assert outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, outcome.message
    (probe,) = outcome.outputs
    found = json.loads(installation.settings.se_path(probe.storage_element, probe.lfn).read_text())
    environment = found.pop("environment")
    assert found.pop("uid") != 0
    environs = found.pop("environs")
    assert {path: how for path, how in found.items() if how == "allowed"} == {}
    assert len(found) == len(attempts)
    # /proc/$PPID/environ and every ancestor's: none holds the component's settings (the
    # runner is told only where to keep the tools' stderr), and the wrapper started by the
    # adaptor is closed to the job.
    assert not [text for text in environs.values() if SECRET in text]
    settings = {
        line.split("=", 1)[0] for text in environs.values() for line in text.split("\0")
    }
    assert not {name for name in settings if name.startswith("DXTS_")} - {TOOL_STDERR_VARIABLE}
    assert "PermissionError" in environs.values()
    assert not [name for name in environment if name.startswith("DXTS_")]
    assert SECRET not in json.dumps(environment)
    assert set(environment) <= {"PATH", "HOME", "TMPDIR", *sandbox.PASSED_ENVIRONMENT}
    # Nothing was written: the database is as it was.
    assert sqlite3.connect(data / "dxts.sqlite").execute("select * from t").fetchall() == []
    # What the job wrote is the adaptor's now (the job user cannot change it after the fact).
    stored = installation.settings.se_path(probe.storage_element, probe.lfn)
    assert stored.stat().st_uid == os.geteuid()
    # Its own directory is its own: the job user's, closed to every other.
    job_dir = installation.settings.work_dir / "jobs" / result.identifier
    assert (job_dir / "out").stat().st_mode & 0o077 == 0
    assert (job_dir / "out").stat().st_uid == found_uid(job_dir / "out")


def found_uid(path: Path) -> int:
    """The job user's uid (the owner of what a job wrote): not root, not the adaptor's."""
    uid = path.stat().st_uid
    assert uid not in (0, os.geteuid())
    return uid


async def test_a_job_over_its_wall_time_is_killed_and_fails_saying_so(
    installation: Harness,
) -> None:
    requirements = json.dumps({"wall_time_s": 1})
    _, outcome = await run(installation, SLEEPER, {}, requirements_json=requirements)
    assert outcome.result == common_pb2.OUTCOME_RESULT_FAILED
    assert "wall time exceeded" in outcome.message and "1 s" in outcome.message


async def test_the_installation_caps_the_wall_time_a_job_asks_for(installation: Harness) -> None:
    await installation.stop()
    await installation.start(max_wall_time_s=1)
    requirements = json.dumps({"wall_time_s": 86400})
    _, outcome = await run(installation, SLEEPER, {}, requirements_json=requirements)
    assert outcome.result == common_pb2.OUTCOME_RESULT_FAILED
    assert "wall time exceeded" in outcome.message and "1 s" in outcome.message


async def test_a_staged_input_the_job_user_cannot_read_is_shown_as_a_copy(
    installation: Harness,
) -> None:
    lfn = "/vo/data/closed.dst"
    replica = installation.settings.se_path("TAPE", lfn)
    replica.parent.mkdir(parents=True)
    replica.write_bytes(b"closed data")
    replica.chmod(0o600)
    await installation.catalogue.register([CatalogueFile(lfn=lfn, size=11, replicas=("TAPE",))])
    copier = {
        "class": "CommandLineTool",
        "baseCommand": [PYTHON, "-c", "import shutil, sys; shutil.copy(sys.argv[1], 'c.dst')"],
        "inputs": {"input-data": {"type": "File", "inputBinding": {"position": 1}}},
        "outputs": {"copy": {"type": "File", "outputBinding": {"glob": "c.dst"}}},
    }
    parameters = {"input-data": {"class": "File", "location": f"lfn:{lfn}"}}
    _, outcome = await run(installation, copier, parameters)
    assert outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED, outcome.message
    (output,) = outcome.outputs
    assert installation.settings.se_path("LOCAL", output.lfn).read_bytes() == b"closed data"


async def test_a_link_out_of_the_job_does_not_store_the_machine_s_file(
    installation: Harness,
) -> None:
    """A job cannot make the runner store a file of the machine: here a link in its output
    directory to a path that, in the job's sandbox, is a decoy of its own making and, on the
    machine, a secret."""
    secret = Path("/tmp") / f"dxts-test-secret-{id_to_str(new_id())}"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    # The decoy is made only where the secret is not (outside a sandbox it would overwrite it).
    link = (
        f"try: open({str(secret)!r}, 'x').write('decoy')\n"
        f"except FileExistsError: pass\nos.symlink({str(secret)!r}, 'key')"
    )
    linker = {
        "class": "CommandLineTool",
        "baseCommand": [PYTHON, "-c", f"import os\n{link}"],
        "inputs": {},
        "outputs": {"key": {"type": "File", "outputBinding": {"glob": "key"}}},
    }
    try:
        await run(installation, linker, {})
    finally:
        secret.unlink()
    stored = [p for p in (installation.tmp / "storage").rglob("*") if p.is_file()]
    assert not [p for p in stored if SECRET in p.read_text()]


def test_outputs_the_job_names_outside_its_directory_are_refused(tmp_path: Path) -> None:
    """The runner's output object is the job's to write (it runs as the job user): what it
    names must be the job's own before the adaptor touches it."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "result").write_text("mine")
    staged = tmp_path / "se" / "input.dst"
    staged.parent.mkdir()
    staged.write_text("input")
    entered = sandbox.Entered({}, out, {staged})

    def named(*paths: Path) -> dict[str, Any]:
        return {f"o{n}": {"class": "File", "path": str(p)} for n, p in enumerate(paths)}

    assert sandbox.outputs_problem(named(out / "result", staged), out, entered) is None
    refused = sandbox.outputs_problem(named(Path("/etc/hostname")), out, entered)
    assert refused == "the output /etc/hostname is outside the job's directory"
    (out / "escape").symlink_to("/etc")
    refused = sandbox.outputs_problem(named(out / "result"), out, entered)
    assert refused == "the output escape is a link out of the job's directory"


def test_a_missing_job_user_stops_the_adaptor_with_one_clear_line() -> None:
    assert os.geteuid() == 0, "CI runs the adaptor's tests as root, as `dxts up` runs there"
    with pytest.raises(sandbox.SandboxError, match="'no-such-dxts-user' does not exist"):
        sandbox.confinement("bwrap", "no-such-dxts-user", False, [])
    with pytest.raises(sandbox.SandboxError, match="must not run as root"):
        sandbox.confinement("none", "", False, [])


def test_the_box_shows_an_inputs_secondary_files_and_nothing_else_beside_it(
    tmp_path: Path,
) -> None:
    """CWL finds secondary files by pattern beside the primary (`A.bam.bai`, `A.bai`), not in
    the input object: they are shown with it; another file of the same directory is not."""
    for name in ("A.bam", "A.bam.bai", "A.bai", "B.bam", "AB.bam"):
        (tmp_path / name).write_text(name)
    shown = sandbox.with_secondary_files({tmp_path / "A.bam"})
    assert {p.name for p in shown} == {"A.bam", "A.bam.bai", "A.bai"}


def test_the_adaptor_refuses_to_start_when_the_job_user_cannot_start_the_runner() -> None:
    """A checkout or virtualenv made under umask 077 is closed to the job user: every job would
    fail importing the runner, so the adaptor names the problem at start instead. The installed
    runner passes the same check."""
    box = sandbox.confinement("bwrap", "dxts-job", False, [])
    assert sandbox.runner_problem(box, sys.executable, "dxts.backends.runner.cwltool_main") is None
    shared = Path(tempfile.mkdtemp(prefix="dxts-runner-probe-"))
    try:
        shared.chmod(0o755)
        venv = shared / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        subprocess.run(["chmod", "-R", "go+rX", str(venv)], check=True)  # whatever the umask
        closed = shared / "closed"
        (closed / "closedrunner").mkdir(parents=True)
        (closed / "closedrunner" / "__init__.py").write_text("")
        (closed / "closedrunner" / "main.py").write_text("")
        site = next(venv.glob("lib/python*/site-packages"))
        (site / "closed.pth").write_text(f"{closed}\n")
        subprocess.run(["chmod", "-R", "go+rX", str(closed), str(site)], check=True)
        python = str(venv / "bin" / "python")
        assert sandbox.runner_problem(box, python, "closedrunner.main") is None
        os.chmod(closed, 0o700)  # as umask 077 leaves a checkout's folder
        problem = sandbox.runner_problem(box, python, "closedrunner.main")
        assert problem is not None
        assert problem.startswith("the job user 'dxts-job' cannot start the runner")
        assert "No module named 'closedrunner'" in problem
        assert str(venv) in problem
        with pytest.raises(sandbox.SandboxError, match="cannot start the runner"):
            sandbox.confinement("bwrap", "dxts-job", False, [], [python, "-m", "closedrunner.main"])
    finally:
        shutil.rmtree(shared)
