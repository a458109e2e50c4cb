"""The files a batch's Slurm job runs from, written on the shared filesystem before `sbatch`.

    batches/<BatchID>/process/<hex>.cwl   the process tree, once for the batch
    batches/<BatchID>/resolved-hints.json the sidecar its parcels run under
    batches/<BatchID>/tasks.json          task index → parcel directory, output prefix; storage
    batches/<BatchID>/job.sh              what sbatch submits: `python -m dxts.backends.slurm.job`
    batches/<BatchID>/slurm-<task>.log    Slurm's log of each task (slurmstepd's messages)
    jobs/<identifier>/job.json            the parcel's input object, `lfn:` inputs staged

Staging is the adaptor's (it has the file catalogue); the job only runs and collects.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from dxts.backends.runner.cwl import input_object, materialise
from dxts.backends.runner.settings import StorageElements
from dxts.backends.slurm.job import TASKS_FILE
from dxts.backends.slurm.settings import SlurmSettings
from dxts.core.adaptor.model import ComputePayload, Submission
from dxts.core.catalogue import FileCatalogue


def batch_dir(settings: SlurmSettings, batch_id: str) -> Path:
    return settings.work_dir / "batches" / batch_id


def job_dir(settings: SlurmSettings, identifier: str) -> Path:
    return settings.work_dir / "jobs" / identifier


def script(settings: SlurmSettings, batch_id: str) -> Path:
    return batch_dir(settings, batch_id) / "job.sh"


def slurm_log(settings: SlurmSettings, batch_id: str, task: int | None = None) -> Path:
    """Where Slurm writes a task's output (`%a`: every task's, for sbatch)."""
    return batch_dir(settings, batch_id) / f"slurm-{'%a' if task is None else task}.log"


async def prepare_parcel(
    settings: SlurmSettings,
    storage: StorageElements,
    catalogue: FileCatalogue | None,
    payload: ComputePayload,
    parcel: Submission,
    identifier: str,
) -> dict[str, Any]:
    """Write the parcel's input object; its entry in `tasks.json` (JobFailed: cannot run)."""
    directory = job_dir(settings, identifier)
    directory.mkdir(parents=True, exist_ok=True)
    parameters = await input_object(payload, parcel, storage, catalogue, directory / "staged")
    (directory / "job.json").write_text(json.dumps(parameters, indent=1))
    return {
        "parcel_id": parcel.parcel_id,
        "job_dir": str(directory),
        "output_prefix": parcel.output_prefix,
    }


def prepare_batch(
    settings: SlurmSettings,
    storage: StorageElements,
    payload: ComputePayload,
    batch_id: str,
    tasks: list[dict[str, Any] | None],
) -> None:
    """Write the batch's process, task table and job script (None: a task that will not run)."""
    directory = batch_dir(settings, batch_id)
    root = materialise(payload, directory / "process")
    (directory / "resolved-hints.json").write_text(payload.resolved_hints_json or "{}")
    table = {
        "process": str(root.relative_to(directory)),
        "runner_args": settings.runner_args,
        "error_pattern": settings.error_pattern,
        "scontrol": str(Path(settings.commands_dir) / "scontrol")
        if settings.commands_dir
        else "scontrol",
        "storage": storage.model_dump(mode="json"),
        "tasks": {str(index): task for index, task in enumerate(tasks) if task is not None},
    }
    (directory / TASKS_FILE).write_text(json.dumps(table, indent=1))
    command = shlex.join([settings.python, "-m", "dxts.backends.slurm.job", str(directory)])
    script(settings, batch_id).write_text(f"#!/bin/sh\nexec {command}\n")
