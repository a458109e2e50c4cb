"""A Slurm task's end as a parcel outcome.

The raw status (`backend_status`) is Slurm's own: the job state and `sacct`'s exit code
(`<exit status>:<signal>`), e.g. `COMPLETED 0:0`, `FAILED 3:0`, `TIMEOUT 0:15`; the exit status
of a task that started is also the outcome's `exit_code`. A task killed
by slurmstepd for exceeding its memory says so: where the cluster has no cgroups to report
OUT_OF_MEMORY itself, the state is FAILED with signal 9 and slurmstepd writes its verdict in the
task's log, which is then added (`FAILED 0:9 OUT_OF_MEMORY`). A COMPLETED task succeeded when the
job wrote its `result.json` manifest; the usage is the accounting's (TotalCPU, elapsed time, the
batch step's MaxRSS). Slurm's MaxRSS is the peak of the task's processes' resident sets summed
(jobacct_gather/linux samples the whole process tree), so it bounds from above the contract's
"largest single process": cwltool's own (~70 MB here) is part of it.

A failure's class (`FailureClass`) is Slurm's where Slurm knows better than the payload
(OUT_OF_MEMORY, TIMEOUT, NODE_FAIL, PREEMPTED, a signal), else the one the job wrote in its
`result.json` with the tool's own stderr line (`dxts.backends.runner.failures`). Its site is
where Slurm ran it: the task's nodes (sacct's NodeList), when it was given any.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from dxts.backends.logic.adaptor import parcel_failure
from dxts.backends.slurm.job import RESULT_FILE
from dxts.backends.slurm.logic import batch
from dxts.backends.slurm.logic.account import read_no_link
from dxts.backends.slurm.logic.cluster import TaskRecord
from dxts.backends.slurm.settings import SlurmSettings
from dxts.backends.slurm.store.state import Job
from dxts.core.adaptor.codec import failure_from_json
from dxts.core.adaptor.model import (
    Failure,
    FailureClass,
    Outcome,
    OutcomeResult,
    OutputFile,
    ResourceUsage,
)

LOG_TAIL = 2000
MEMORY_KILL = "exceeded memory limit"  # slurmstepd's words (jobacct_gather OverMemoryKill)
# Slurm's job states that say why, whatever the payload wrote.
STATE_CLASSES = {
    "OUT_OF_MEMORY": FailureClass.OUT_OF_MEMORY,
    "TIMEOUT": FailureClass.TIME_EXCEEDED,
    "DEADLINE": FailureClass.TIME_EXCEEDED,
    "NODE_FAIL": FailureClass.LOST,
    "PREEMPTED": FailureClass.KILLED,
    "BOOT_FAIL": FailureClass.SETUP_ERROR,
}


def _outcome(
    backend: str,
    parcel_id: str,
    identifier: str,
    result: OutcomeResult,
    status: str,
    message: str,
    failure: Failure | None = None,
) -> Outcome:
    return Outcome(
        parcel_id=parcel_id,
        backend=backend,
        identifier=identifier,
        result=result,
        backend_status=status,
        message=message,
        finished_at=datetime.now(UTC),
        failure=failure,
    )


def not_started(
    backend: str, parcel_id: str, identifier: str, reason: str, failure: Failure
) -> Outcome:
    """A parcel that could not be prepared (an input that cannot be staged)."""
    return _outcome(
        backend, parcel_id, identifier, OutcomeResult.FAILED, "NOT_SUBMITTED",
        reason, failure,
    )  # fmt: skip


def not_submitted(backend: str, job: Job, error: str) -> Outcome:
    """A batch Slurm refused (sbatch failed, and Slurm has no job of its name)."""
    return _outcome(
        backend, job.parcel_id, job.identifier, OutcomeResult.FAILED,
        "NOT_SUBMITTED", f"sbatch refused the job: {error}", Failure(FailureClass.REFUSED),
    )  # fmt: skip


def cancelled_unsubmitted(backend: str, job: Job) -> Outcome:
    return _outcome(
        backend, job.parcel_id, job.identifier, OutcomeResult.CANCELLED,
        "NOT_SUBMITTED", "cancelled before it was handed to Slurm",
    )  # fmt: skip


def unreadable(backend: str, job: Job, record: TaskRecord, error: Exception) -> Outcome:
    """A task that ended, whose outcome could not be read (what it left breaks the reader):
    FAILED in the error's own words, Slurm's state kept as the raw status."""
    state = record.state.split(" ")[0]
    return _outcome(
        backend, job.parcel_id, job.identifier, OutcomeResult.FAILED,
        f"{state} {record.exit_code}:{record.signal}",
        f"Slurm job {job.task} ended {state}; its outcome cannot be read: "
        f"{parcel_failure(error)}",
        Failure(FailureClass.UNSPECIFIED, tool_message=parcel_failure(error)),
    )  # fmt: skip


def lost(backend: str, job: Job) -> Outcome:
    return _outcome(
        backend, job.parcel_id, job.identifier, OutcomeResult.FAILED, "LOST",
        f"Slurm has no record of job {job.task} (neither slurmctld nor the accounting)",
        Failure(FailureClass.LOST),
    )  # fmt: skip


def _tail(path: Path) -> str:
    try:
        return read_no_link(path)[-LOG_TAIL:]
    except OSError:
        return ""


def from_record(settings: SlurmSettings, job: Job, record: TaskRecord) -> Outcome:
    state = record.state.split(" ")[0]
    status = f"{state} {record.exit_code}:{record.signal}"
    slurm_log = _tail(batch.slurm_log(settings, job.batch_id, job.task_index))
    if state != "OUT_OF_MEMORY" and MEMORY_KILL in slurm_log.lower():
        status += " OUT_OF_MEMORY"
    directory = batch.job_dir(settings, job.identifier)
    outcome = _outcome(
        settings.name, job.parcel_id, job.identifier, OutcomeResult.FAILED, status, ""
    )
    if record.started:
        outcome.exit_code = record.exit_code
        outcome.usage = ResourceUsage(
            cpu_seconds=record.cpu_seconds,
            wall_seconds=record.wall_seconds,
            max_memory_bytes=record.max_rss_bytes,
        )
    if state == "CANCELLED":
        outcome.result = OutcomeResult.CANCELLED
        outcome.message = f"Slurm job {job.task}: {record.state}"
        return outcome
    try:
        result = json.loads(read_no_link(directory / RESULT_FILE))
    except (OSError, ValueError) as error:
        result = {"error": f"the job left no usable {RESULT_FILE}: {error}"}
    if state == "COMPLETED" and "error" not in result:
        outcome.result = OutcomeResult.SUCCEEDED
        outcome.status_report_json = result.get("status_report_json", "")
        outcome.output_object_json = result.get("output_object_json", "")
        outcome.outputs = [OutputFile(**file) for file in result.get("outputs", [])]
        return outcome
    if state == "COMPLETED" or (directory / RESULT_FILE).exists():
        detail = str(result["error"])
    else:
        detail = _tail(directory / "runner.log") or slurm_log
    outcome.message = f"Slurm job {job.task} ended {status}: {detail}"
    outcome.failure = _failure(status, record, result)
    return outcome


def _failure(status: str, record: TaskRecord, result: dict[str, object]) -> Failure:
    """Slurm's reason where its state gives one, the job's (`result.json`) otherwise; the
    tool's line is the job's in either case, the site the nodes Slurm ran it on."""
    written = result.get("failure")
    failure = failure_from_json(written) if isinstance(written, dict) else Failure()
    words = status.split(" ")
    by_slurm = next((STATE_CLASSES[w] for w in (words[-1], words[0]) if w in STATE_CLASSES), None)
    if by_slurm is None and failure.failure_class is FailureClass.UNSPECIFIED:
        by_slurm = FailureClass.KILLED if record.signal else FailureClass.SETUP_ERROR
    return Failure(
        by_slurm or failure.failure_class,
        failure.tool_message,
        failure.lfn,
        failure.storage_element,
        record.nodes or failure.site,
    )
