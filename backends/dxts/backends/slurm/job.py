"""What a Slurm job runs: `python -m dxts.backends.slurm.job BATCH_DIR` (one task of an array).

The adaptor prepared everything on the shared filesystem before `sbatch` (`batch`): the
batch's `tasks.json` maps each array task index to its parcel's directory, output prefix and
storage; the process tree is materialised once for the batch (`process/`), and each parcel's
input object (`job.json`, its `lfn:` inputs already staged) is in its own directory. The task
runs cwltool there (`runner.out`: the output object, `runner.log`: its log, `tool.stderr`: the
tools' stderr), then moves the outputs to the output storage element (uploads them, checked,
when it is an XRootD SE: `dxts.backends.runner.stage_out`) and writes `result.json` —
the manifest and the status report, exactly as the local adaptor collects them
(`dxts.backends.runner.cwl`) — or the reason the result cannot be used, with the failure's
class and the tool's own line (`dxts.backends.runner.failures`). It exits with the exit status
of the tool that failed where the runner's log names one (cwltool itself exits 1 whatever the
tool's status), else as the runner did, so that Slurm's state and exit code are the tool's.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dxts.backends.runner import stage_out
from dxts.backends.runner.cwl import RUNNER_LOG, RUNNER_STDOUT, collect_outputs
from dxts.backends.runner.cwltool_main import TOOL_STDERR_VARIABLE
from dxts.backends.runner.failures import TOOL_STDERR, JobFailed, runner_failed
from dxts.backends.runner.settings import StorageElements
from dxts.core.adaptor.codec import failure_to_json
from dxts.core.adaptor.model import Submission

TASKS_FILE = "tasks.json"
RESULT_FILE = "result.json"
RUNNER = "dxts.backends.runner.cwltool_main"
# Uploading the outputs to an XRootD output SE (`stage_out`): copies still running then fail.
UPLOAD_TIMEOUT_S = 900.0


def _failed(failed: JobFailed) -> dict[str, Any]:
    return {"error": str(failed), "failure": failure_to_json(failed.failure)}


def write_result(job_dir: Path, result: dict[str, Any]) -> None:
    partial = job_dir / f"{RESULT_FILE}.partial"
    partial.write_text(json.dumps(result))
    os.replace(partial, job_dir / RESULT_FILE)


def _name_in_slurms_records(scontrol: str, parcel_id: str) -> None:
    """This task's comment becomes its parcel id (the array's is shared by every task, and
    slurmctld caps its length): Slurm's accounting then lists each parcel under its own id."""
    task = f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ['SLURM_ARRAY_TASK_ID']}"
    subprocess.call([scontrol, "update", f"JobId={task}", f"Comment=dxts parcel {parcel_id}"])


def run_task(batch_dir: Path, index: int) -> int:
    os.umask(0o077)  # what the job writes is the job account's alone
    batch = json.loads((batch_dir / TASKS_FILE).read_text())
    task = batch["tasks"][str(index)]
    _name_in_slurms_records(batch["scontrol"], task["parcel_id"])
    job_dir = Path(task["job_dir"])
    out, tmp = job_dir / "out", job_dir / "tmp"
    out.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(exist_ok=True)
    (job_dir / RESULT_FILE).unlink(missing_ok=True)
    (job_dir / TOOL_STDERR).unlink(missing_ok=True)
    command = [
        sys.executable, "-m", RUNNER, *batch["runner_args"],
        "--outdir", str(out), "--tmpdir-prefix", f"{tmp}/", "--tmp-outdir-prefix", f"{tmp}/",
        str(batch_dir / batch["process"]), str(job_dir / "job.json"),
    ]  # fmt: skip
    with (job_dir / RUNNER_STDOUT).open("wb") as stdout, (job_dir / RUNNER_LOG).open("wb") as log:
        code = subprocess.call(
            command,
            cwd=job_dir,
            stdout=stdout,
            stderr=log,
            env={**os.environ, TOOL_STDERR_VARIABLE: str(job_dir / TOOL_STDERR)},
        )
    if code != 0:
        failed = runner_failed(job_dir, code, RUNNER_LOG, batch.get("error_pattern"))
        write_result(job_dir, _failed(failed))
        return failed.exit_code or code
    storage = StorageElements(**batch["storage"])
    submission = Submission(task["parcel_id"], output_prefix=task["output_prefix"])
    try:
        output_object = json.loads((job_dir / RUNNER_STDOUT).read_text())
        endpoint = storage.storage_endpoints.get(storage.output_se or "")
        spool = job_dir / "stage-out" if endpoint else None
        collected = collect_outputs(output_object, submission, storage, out, spool)
        if endpoint and spool:
            asyncio.run(stage_out.upload(collected.outputs, spool, endpoint, UPLOAD_TIMEOUT_S))
    except JobFailed as error:
        write_result(job_dir, _failed(error))
        return 1
    except ValueError as error:
        write_result(job_dir, {"error": str(error)})
        return 1
    write_result(
        job_dir,
        {
            "outputs": [asdict(file) for file in collected.outputs],
            "status_report_json": collected.report,
            "output_object_json": collected.output_object_json,
        },
    )
    return 0


def main() -> None:
    if len(sys.argv) != 2 or "SLURM_ARRAY_TASK_ID" not in os.environ:
        print("usage (in a Slurm array task): python -m dxts.backends.slurm.job BATCH_DIR")
        sys.exit(2)
    sys.exit(run_task(Path(sys.argv[1]), int(os.environ["SLURM_ARRAY_TASK_ID"])))


if __name__ == "__main__":
    main()
