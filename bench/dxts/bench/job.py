"""`job`: what dxts adds to a user job's time, against cwltool running the same tool alone.

A trivial CommandLineTool (`echo` into a stdout File) runs, rounds alternating:

* alone: the command the local backend runs cwltool with (`--no-container`), in a fresh
  process, on the same input object — the baseline, `cwltool_s`;
* as a dxts user job on a `dxts up` started here (scratch data directory, embedded SQLite):
  from SubmitJob until GetUserParcel says Done (polled every 20 ms).

Figures, in seconds (lower is better), each with the median cwltool time as its baseline:
`job_s` (submit → Done) and `job_overhead_s` (job_s minus cwltool_s, the time dxts itself takes:
storing the process, the claim, materialising and staging, collecting the outputs, the poll
and the recording). The database the harness gives every benchmark is not used.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from dxts.backends.local.settings import LocalSettings
from dxts.bench.cli import running_up
from dxts.bench.harness import Bench, Figure, significant
from dxts.core.errors import FailedPrecondition

POLL_S = 0.02
JOB_TIMEOUT_S = 300.0
TOOL = """\
cwlVersion: v1.2
class: CommandLineTool
baseCommand: [echo]
stdout: greeting.txt
inputs:
  message: {type: string, inputBinding: {position: 1}}
outputs:
  greeting: {type: stdout}
"""
INPUTS = {"message": "hello"}


@dataclass(frozen=True)
class JobParams:
    rounds: int


SCALES = {
    "tiny": JobParams(1),
    "small": JobParams(5),
    "full": JobParams(20),
}


def cwltool_alone(folder: Path, tool: Path, job: Path) -> float:
    """Seconds for one cwltool run, as the local backend starts it."""
    settings = LocalSettings(work_dir=folder / "unused")
    outdir = Path(tempfile.mkdtemp(dir=folder, prefix="alone-"))
    command = [
        *settings.runner,
        *settings.runner_args,
        "--outdir",
        str(outdir),
        str(tool),
        str(job),
    ]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise FailedPrecondition(f"cwltool exited {done.returncode}: {done.stderr[-500:]!r}")
    return elapsed


async def job_through_dxts(data_dir: Path, tool: Path) -> float:
    """Seconds from SubmitJob to Done for one user job."""
    from dxts.cli.client import Clients, request_id
    from dxts.cli.connection import Connection
    from dxts.cli.cwl_runner import patiently
    from dxts.cli.documents import bundle
    from dxts.v1 import common_pb2, definition_pb2, execution_pb2

    clients = Clients(Connection.resolve({}, data_dir))
    request = definition_pb2.SubmitJobRequest(bundle=bundle(tool), inputs_json=json.dumps(INPUTS))
    try:
        request.request_id = request_id()
        started = time.perf_counter()
        submitted = await patiently(lambda: clients.definition.SubmitJob(request))
        status = execution_pb2.GetUserParcelRequest(parcel_id=submitted.parcel_id)
        while True:
            reply = await patiently(lambda: clients.execution.GetUserParcel(status))
            if reply.parcel.status == common_pb2.PARCEL_STATUS_DONE:
                return time.perf_counter() - started
            if reply.parcel.status in (
                common_pb2.PARCEL_STATUS_FAILED,
                common_pb2.PARCEL_STATUS_CANCELLED,
            ):
                raise FailedPrecondition(f"the job ended {reply.outcome.message}")
            if time.perf_counter() - started > JOB_TIMEOUT_S:
                raise FailedPrecondition(f"the job is not Done after {JOB_TIMEOUT_S} s")
            await asyncio.sleep(POLL_S)
    finally:
        await clients.close()


def figure(
    bench: Bench, name: str, value: float, baseline: float, params: dict[str, object]
) -> None:
    measured = Figure(
        benchmark=bench.name,
        figure=name,
        value=significant(value),
        unit="s",
        baseline=significant(baseline),
        params={"scale": bench.scale, **params},
    )
    bench.figures.append(measured)
    print(measured.as_json(), file=bench.out, flush=True)


async def run(bench: Bench, params: JobParams) -> None:
    with tempfile.TemporaryDirectory(prefix="dxts-bench-job-") as name:
        folder = Path(name)
        data_dir = folder / "data"
        data_dir.mkdir()
        tool, job = folder / "echo.cwl", folder / "job.json"
        tool.write_text(TOOL)
        job.write_text(json.dumps(INPUTS))
        environment = {
            **os.environ,
            "DXTS_DATA_DIR": str(data_dir),
            "HOME": name,
            "DXTS_DB_URL": "",
        }
        alone: list[float] = []
        through: list[float] = []
        async with running_up(data_dir, environment):
            for round_number in range(params.rounds + 1):
                seconds = await asyncio.to_thread(cwltool_alone, folder, tool, job)
                job_seconds = await job_through_dxts(data_dir, tool)
                if round_number:  # round 0 warms the caches (and the bytecode)
                    alone.append(seconds)
                    through.append(job_seconds)
        baseline = statistics.median(alone)
        described = {
            "rounds": params.rounds,
            "tool": "echo into a stdout File (CommandLineTool)",
            "baseline_command": "cwltool --no-container, a fresh process",
            "dxts": "dxts up (embedded SQLite, local backend), SubmitJob → Done",
        }
        figure(bench, "job_s", statistics.median(through), baseline, described)
        overheads = [dxts - cwl for dxts, cwl in zip(through, alone, strict=True)]
        figure(bench, "job_overhead_s", statistics.median(overheads), baseline, described)
