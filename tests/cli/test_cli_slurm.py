"""`dxts up --backend slurm` on the real single-node cluster (`scripts/slurm`): the example
workgraph's compute parcels run as Slurm jobs to Completed, and each of them is in Slurm's
records (sacct), named by the job's comment, under the identifier the dispatcher recorded."""

from __future__ import annotations

import sqlite3
import subprocess
import uuid
from pathlib import Path

from slurm_cluster import slurm_conf
from test_cli_demo import RUN_TIMEOUT_S, Up, check_completed, small_example, up

__all__ = ["up"]  # the fixture, shared with the demo's tests


def test_the_demo_runs_on_slurm_to_completed(up: Up, tmp_path: Path) -> None:
    slurm_conf()  # SLURM_CONF is in the environment `dxts up` inherits
    # Jobs as `dxts up`'s own user: its data directory is closed to any other (0700), and this
    # machine's Python is root's (test_slurm_adaptor runs jobs as dxts-job).
    up.start("--backend", "slurm", environment={"DXTS_SLURM_JOB_USER": ""})
    workgraph = up.submit_and_start(small_example(tmp_path))
    watched = up.dxts("watch", workgraph, "--interval", "0.5", "--timeout", str(RUN_TIMEOUT_S))
    assert watched.exit_code == 0, watched.output
    check_completed(up, workgraph)
    up.stop()

    with sqlite3.connect(up.data_dir / "dxts.sqlite") as db:
        ran = {
            str(uuid.UUID(bytes=row[0]))
            for row in db.execute("SELECT ParcelID FROM \"BackendIDs\" WHERE Adaptor = 'slurm'")
        }
        compute = db.execute("SELECT COUNT(*) FROM \"Parcels\" WHERE Kind = 'Compute'").fetchone()
    assert len(ran) == compute[0] >= 3  # every compute parcel went to Slurm
    names = ",".join(f"dxts-{p.name}" for p in (up.data_dir / "slurm" / "batches").iterdir())
    records = subprocess.run(
        ["sacct", "-n", "-P", "-X", "--starttime=now-1days", f"--name={names}",
         "--format=State,Comment"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    listed = {p for line in records for p in line.split("|")[1].split()[2:]}
    assert ran <= listed
    assert {line.split("|")[0] for line in records} == {"COMPLETED"}
