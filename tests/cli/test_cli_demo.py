"""The main job, smaller: `dxts up` as a process of its own in a temporary data directory, the
example workgraph submitted, started and watched to Completed with the `dxts` command, its
outputs in the local storage elements and registered in the file catalogue; and the same with
`dxts up` stopped mid-run and started again, which must lose nothing and process no input
twice."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import EXAMPLES
from typer.testing import CliRunner, Result

from dxts.cli.main import app
from dxts.cli.workgraphs import EXIT_ATTENTION
from dxts.core.catalogue import CatalogueSettings, LocalFileCatalogue

DXTS = [sys.executable, "-c", "import sys; from dxts.cli.main import app; sys.exit(app())"]
START_TIMEOUT_S = 60
RUN_TIMEOUT_S = 240


def small_example(directory: Path, *, approval: bool = False) -> Path:
    """mc-demo with two seeds: two simulations, one reconstruction, one merged dataset, one
    replication. With `approval`, one seed is simulated first as a scout (the later steps held
    back until approval), and a person must sign it off (ManualApproval) before the rest runs."""
    document = yaml.safe_load((EXAMPLES / "mc-demo.cwl").read_text())
    feeder = document["inputs"]["events"]["dirac:Feeder"]["args"]
    feeder.update(target_events=4000, events_per_seed=2000, batch=2, max_in_flight=4000)
    workgraph = document["hints"]["dirac:Workgraph"]
    workgraph["target"]["files"] = 1
    workgraph["hooks"]["Active"]["args"]["target_events"] = 4000
    if approval:
        feeder["scouting_events"] = 2000
        workgraph["approving"] = [{"action": "ManualApproval", "args": {"role": "operator"}}]
        for step in ("Reconstruction", "Merge"):
            document["steps"][step]["hints"]["dirac:Transformation"]["initial_state"] = "Stopped"
    (directory / "tools").mkdir()
    for tool in (EXAMPLES / "tools").iterdir():
        (directory / "tools" / tool.name).write_text(tool.read_text())
    path = directory / "small-demo.cwl"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


class Up:
    """`dxts up` in a data directory, and the `dxts` command pointed at it."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.process: subprocess.Popen[bytes] | None = None
        self.runner = CliRunner()

    def start(self, *options: str, environment: dict[str, str] | None = None) -> None:
        connection = self.data_dir / "connection.json"
        connection.unlink(missing_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("DXTS_")}
        env.update(environment or {})
        self.process = subprocess.Popen(
            [*DXTS, "up", "--data-dir", str(self.data_dir), *options],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(self.data_dir / "up.err").open("ab"),
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not connection.exists():
            assert self.process.poll() is None, (self.data_dir / "up.err").read_text()
            assert time.monotonic() < deadline, "dxts up did not come up"
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM, as Ctrl-C would: a clean stop, which must leave nothing behind."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=60) == 0, (self.data_dir / "up.err").read_text()
        assert not (self.data_dir / "connection.json").exists()
        self.process = None

    def dxts(self, *args: str) -> Result:
        return self.runner.invoke(app, ["--data-dir", str(self.data_dir), *args])

    def json(self, *args: str) -> Any:
        result = self.dxts(*args, "--output", "json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    def submit_and_start(self, document: Path) -> str:
        submitted = self.dxts("submit", str(document))
        assert submitted.exit_code == 0, submitted.output
        workgraph = submitted.stdout.strip()
        started = self.dxts("start", workgraph)
        assert started.exit_code == 0, started.output
        return workgraph


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    running = Up(tmp_path / "data")
    running.data_dir.mkdir()
    try:
        yield running
    finally:
        if running.process is not None:
            running.process.kill()
            running.process.wait()


def merged_datasets(data_dir: Path, storage_element: str) -> list[str]:
    root = data_dir / "storage" / storage_element
    return sorted("/" + p.relative_to(root).as_posix() for p in root.rglob("*.dst"))


def processed_twice(data_dir: Path) -> tuple[list[Any], list[Any]]:
    """(inputs in more than one successful parcel, Processed inputs not in exactly one)."""
    with sqlite3.connect(data_dir / "dxts.sqlite") as db:
        twice = db.execute(
            'SELECT pi.InputID FROM "ParcelInputs" pi JOIN "Parcels" p ON p.ParcelID = pi.ParcelID'
            " WHERE p.Status IN ('Done', 'PartiallyDone') GROUP BY pi.InputID HAVING COUNT(*) > 1"
        ).fetchall()
        not_once = db.execute(
            "SELECT i.InputID FROM \"Inputs\" i WHERE i.Status = 'Processed' AND ("
            ' SELECT COUNT(*) FROM "ParcelInputs" pi JOIN "Parcels" p ON p.ParcelID = pi.ParcelID'
            " WHERE pi.InputID = i.InputID AND p.Status IN ('Done', 'PartiallyDone')) != 1"
        ).fetchall()
    return twice, not_once


async def registered(data_dir: Path, lfns: list[str]) -> dict[str, tuple[str, ...]]:
    catalogue = LocalFileCatalogue(
        CatalogueSettings(url=f"sqlite+aiosqlite:///{data_dir / 'catalogue.sqlite'}")
    )
    await catalogue.start()
    try:
        return {lfn: tuple(sorted(f.replicas)) for lfn, f in (await catalogue.files(lfns)).items()}
    finally:
        await catalogue.close()


def check_completed(up: Up, workgraph: str) -> None:
    shown = up.json("show", workgraph)
    assert shown["status"] in ("Completed", "Archiving", "Archived"), shown["status"]
    for member in shown["members"]:
        inputs = member["input_counts"]
        assert set(k for k, n in inputs.items() if n) <= {"Processed"}, member
    by_step = {m["transformation"]["step"]: m for m in shown["members"]}
    assert by_step["Simulation"]["input_counts"]["Processed"] == 2
    assert by_step["Reconstruction"]["input_counts"]["Processed"] == 2
    assert by_step["Merge"]["input_counts"]["Processed"] == 2
    assert by_step["DatasetReplication"]["input_counts"]["Processed"] == 1


def test_dxts_up_keeps_its_data_directory_to_its_user(up: Up) -> None:
    up.data_dir.chmod(0o755)  # as a data directory made by hand, or by an older dxts up
    up.start()
    try:
        made = [p for p in up.data_dir.rglob("*") if p.name != "up.err"]
        assert {p.name for p in made} >= {"dxts.sqlite", "catalogue.sqlite", "connection.json"}
        assert any(p.name.endswith(".pem") for p in made)
        modes = {p: stat.S_IMODE(p.stat().st_mode) for p in [up.data_dir, *made]}
        opened = {
            str(p): oct(mode)
            for p, mode in modes.items()
            if mode != (0o700 if p.is_dir() else 0o600)
        }
        assert not opened, opened
    finally:
        up.stop()


def test_the_demo_runs_to_completed(up: Up, tmp_path: Path) -> None:
    up.start()
    workgraph = up.submit_and_start(small_example(tmp_path))
    job = up.dxts(
        "job",
        "submit",
        str(EXAMPLES / "simulate-job.cwl"),
        "--inputs",
        str(EXAMPLES / "simulate-job.yaml"),
    )
    assert job.exit_code == 0, job.output
    watched = up.dxts("watch", workgraph, "--interval", "0.5", "--timeout", str(RUN_TIMEOUT_S))
    assert watched.exit_code == 0, watched.output
    assert f"{workgraph} Completed" in watched.stdout
    check_completed(up, workgraph)

    merged = up.json("provenance", merged_datasets(up.data_dir, "LOCAL-DISK")[0])["records"]
    produced = [r["output"]["lfn"].rsplit("/", 1)[1] for r in merged]
    assert produced[0].startswith("merged-") and len(produced) == 1 + 2 + 2
    assert sorted(name.rsplit(".", 1)[1] for name in produced[1:]) == ["reco"] * 2 + ["sim"] * 2

    parcel = job.stdout.strip()
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while (status := up.json("job", "status", parcel))["parcel"]["status"] != "Done":
        assert status["parcel"]["status"] not in ("Failed",), status
        assert time.monotonic() < deadline, status
        time.sleep(0.5)
    outputs = sorted(o["lfn"] for o in status["outputs"])
    assert [lfn.rsplit("/", 1)[1] for lfn in outputs] == ["seed-42.sim", "seed-43.sim"]
    # Its job's logs, from the local backend that ran it (through the dispatcher).
    logs = up.json("parcel", parcel, "--logs")
    assert logs["backend"] == "local" and Path(logs["logs"]["sandbox"]).is_dir()
    assert "seed-42.sim" in logs["logs"]["stdout"] and logs["logs"]["stderr"]
    shown = up.dxts("parcel", parcel, "--logs", "--max-bytes", "10")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith(f"parcel {parcel}: backend local {logs['identifier']}\n")
    assert "(the end of each stream only: --max-bytes for more)" in shown.stdout
    assert all((up.data_dir / "storage" / "LOCAL-DISK" / lfn[1:]).is_file() for lfn in outputs)
    up.stop()

    disk = merged_datasets(up.data_dir, "LOCAL-DISK")
    assert len(disk) == 1 and disk == merged_datasets(up.data_dir, "LOCAL-ARCHIVE")
    assert asyncio.run(registered(up.data_dir, disk)) == {disk[0]: ("LOCAL-ARCHIVE", "LOCAL-DISK")}
    header = json.loads((up.data_dir / "storage" / "LOCAL-DISK" / disk[0][1:]).open().readline())
    assert len(header["files"]) == 2 and all(f.endswith(".reco") for f in header["files"])
    assert header["candidates"] > 0
    assert processed_twice(up.data_dir) == ([], [])


def test_a_restart_mid_run_resumes_and_completes(up: Up, tmp_path: Path) -> None:
    up.start()
    workgraph = up.submit_and_start(small_example(tmp_path))
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:  # stop once the first parcel ran, with the rest of the chain still to go
        shown = up.json("show", workgraph)
        simulation = shown["members"][0]
        if simulation["parcel_counts"].get("Done", 0) >= 1:
            break
        assert time.monotonic() < deadline, shown
        time.sleep(0.3)
    assert shown["status"] == "Active"
    up.stop()
    assert merged_datasets(up.data_dir, "LOCAL-DISK") == []  # stopped mid-run indeed

    up.start()
    watched = up.dxts("watch", workgraph, "--interval", "0.5", "--timeout", str(RUN_TIMEOUT_S))
    if watched.exit_code == EXIT_ATTENTION:
        # A parcel running at the stop was failed by the restart (and its input retried): the
        # shifter is told, for that reason and no other, and the run goes on to Completed.
        said = " ".join(watched.output.split())
        assert "parcels failed: interrupted by a restart of the local backend" in said, said
        while up.json("show", workgraph)["status"] not in ("Completed", "Archiving", "Archived"):
            assert time.monotonic() < deadline + RUN_TIMEOUT_S, up.json("show", workgraph)
            time.sleep(0.5)
    else:
        assert watched.exit_code == 0, watched.output
    check_completed(up, workgraph)
    up.stop()

    disk = merged_datasets(up.data_dir, "LOCAL-DISK")
    assert len(disk) == 1 and disk == merged_datasets(up.data_dir, "LOCAL-ARCHIVE")
    assert asyncio.run(registered(up.data_dir, disk)) == {disk[0]: ("LOCAL-ARCHIVE", "LOCAL-DISK")}
    assert processed_twice(up.data_dir) == ([], [])


def test_an_operator_signs_off_the_scout(up: Up, tmp_path: Path) -> None:
    """`watch` stops at the approval a person must give (exit 3, naming the action), `force`
    gives it, and the workgraph then runs to Completed."""
    up.start()
    workgraph = up.submit_and_start(small_example(tmp_path, approval=True))
    blocked = up.dxts("watch", workgraph, "--interval", "0.5", "--timeout", str(RUN_TIMEOUT_S))
    assert blocked.exit_code == 3, blocked.output
    assert "ApprovingBlocked" in blocked.stdout and "ManualApproval" in blocked.stdout
    (action,) = up.json("show", workgraph)["blocked_by"]
    forced = up.dxts("force", str(action["action_id"]), "passed", "--message", "scout looks fine")
    assert forced.exit_code == 0, forced.output
    assert forced.stdout == f"action #{action['action_id']} ManualApproval: Passed\n"

    watched = up.dxts("watch", workgraph, "--interval", "0.5", "--timeout", str(RUN_TIMEOUT_S))
    assert watched.exit_code == 0, watched.output
    check_completed(up, workgraph)
    late = up.dxts("reset", str(action["action_id"]))  # its list has run: refused, one line
    assert late.exit_code == 1 and len(late.stderr.splitlines()) == 1, late.output
    log = up.json("logs", workgraph)
    assert any(e["message"] == "scout looks fine" for e in log)
    up.stop()


def test_up_runs_on_mariadb_after_migrating_it(up: Up, mysql_test_url: str) -> None:
    """--db-url: the same components on an empty MariaDB database, migrated first."""
    up.start("--db-url", mysql_test_url)
    submitted = up.dxts("submit", str(EXAMPLES / "mc-demo.cwl"))
    assert submitted.exit_code == 0, submitted.output
    shown = up.json("show", submitted.stdout.strip())
    assert shown["status"] == "New" and len(shown["members"]) == 4
    up.stop()
    assert not (up.data_dir / "dxts.sqlite").exists()


def test_up_refuses_a_busy_data_directory_and_a_busy_port(up: Up) -> None:
    up.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DXTS_")}
    second = subprocess.run(
        [*DXTS, "up", "--data-dir", str(up.data_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert second.returncode == 1
    assert "already used by a running `dxts up`" in second.stderr.splitlines()[-1]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        third = subprocess.run(
            [*DXTS, "up", "--data-dir", str(up.data_dir / "other"), "--definition-port", port],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert third.returncode == 1
    assert third.stderr.splitlines()[-1].startswith(
        f"error: cannot serve definition on 127.0.0.1:{port}"
    )
    up.stop()
