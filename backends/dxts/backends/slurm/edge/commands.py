"""Slurm through its own command-line tools: sbatch, squeue, sacct, scancel.

The tools are Slurm's stable, documented interface on every site (slurmrestd is optional and
often not deployed), they speak to slurmctld and slurmdbd with the site's own authentication
(munge), and each call here carries a whole batch: one `sbatch --array` per group of parcels,
one `sacct` for every job a Poll asks about, one `scancel` for every job a Cancel names.

A job array's tasks are addressed as `<array job id>_<task index>`; `sacct` reports each task
(its allocation line and its `.batch` step, where jobacct_gather's peak memory is).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Sequence
from pathlib import Path

from dxts.backends.slurm.logic.cluster import WHOLE_ARRAY, SlurmError, TaskRecord
from dxts.backends.slurm.settings import SlurmSettings

SACCT_FIELDS = "JobID,State,ExitCode,TotalCPU,ElapsedRaw,MaxRSS,NodeList"
# sacct's NodeList of a job that was given no node.
NO_NODE = "None assigned"
_TASK = re.compile(r"^(\d+)_(\d+)$")
_STEP = re.compile(r"^(\d+)_(\d+)\.batch$")
_PENDING_RANGE = re.compile(r"^(\d+)_\[(.*)\]$")
_WHOLE = re.compile(r"^(\d+)$")


class Slurm:
    """The `SlurmCluster` the adaptor is given in production: Slurm's own commands."""

    def __init__(self, settings: SlurmSettings) -> None:
        self.settings = settings
        self.calls = 0  # commands run, for the tests and the benchmark

    def _tool(self, name: str) -> str:
        directory = self.settings.commands_dir
        return str(Path(directory) / name) if directory else name

    async def run(self, tool: str, *args: str) -> str:
        """Run one Slurm command; its stdout, or SlurmError with its stderr."""
        self.calls += 1
        try:
            process = await asyncio.create_subprocess_exec(
                self._tool(tool),
                *args,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**os.environ, "SLURM_TIME_FORMAT": "standard"},
                umask=0o077,  # sbatch hands it to the job: what the job writes is its alone
            )
        except OSError as error:
            raise SlurmError(f"cannot run {tool}: {error}") from None
        try:
            out, err = await asyncio.wait_for(
                process.communicate(), timeout=self.settings.command_timeout_s
            )
        except TimeoutError:
            process.kill()
            await process.wait()
            raise SlurmError(
                f"{tool} did not answer in {self.settings.command_timeout_s}s"
            ) from None
        if process.returncode != 0:
            raise SlurmError(f"{tool}: {err.decode(errors='replace').strip()}")
        return out.decode()

    async def submit_array(
        self,
        script: Path,
        *,
        name: str,
        comment: str,
        tasks: Sequence[int],
        options: Sequence[str],
        log: Path,
    ) -> str:
        """One `sbatch --array` of `tasks`; the array's job id."""
        out = await self.run(
            "sbatch",
            "--parsable",
            f"--job-name={name}",
            f"--comment={comment}",
            f"--array={array_ranges(tasks)}",
            f"--output={log}",
            f"--chdir={script.parent}",
            "--export=PATH,LANG,HOME",
            *options,
            str(script),
        )
        return out.strip().split(";")[0]

    async def find_by_name(self, name: str) -> str | None:
        """The job id of the job named `name`, as slurmctld or the accounting knows it (the
        adaptor's own record of a submission may have died with it)."""
        out = await self.run("squeue", "--noheader", f"--name={name}", "--format=%F")
        ids = out.split()
        if not ids:
            out = await self.run(
                "sacct",
                "--noheader",
                "--parsable2",
                "--allocations",
                f"--name={name}",
                "--starttime=now-30days",
                "--format=JobIDRaw,JobID",
            )
            ids = [line.split("|")[1].split("_")[0] for line in out.splitlines() if line]
        return ids[0] if ids else None

    async def records(self, job_ids: Sequence[str]) -> dict[tuple[str, int], TaskRecord]:
        """(array job id, task index) → what the accounting says, for every task of the given
        arrays it knows (`WHOLE_ARRAY` for the array as one), in one sacct call."""
        if not job_ids:
            return {}
        out = await self.run(
            "sacct",
            "--noheader",
            "--parsable2",
            f"--jobs={','.join(sorted(set(job_ids)))}",
            f"--format={SACCT_FIELDS}",
        )
        found: dict[tuple[str, int], TaskRecord] = {}
        steps: dict[tuple[str, int], tuple[str, str]] = {}  # the batch step's (rss, exit code)
        for line in out.splitlines():
            job, state, exit_code, cpu, elapsed, rss, nodes = (line.split("|") + [""] * 7)[:7]
            if (step := _STEP.match(job)) is not None:
                steps[(step.group(1), int(step.group(2)))] = (rss, exit_code)
                continue
            if (whole := _WHOLE.match(job)) is not None:
                found[(whole.group(1), WHOLE_ARRAY)] = TaskRecord(state=state)
                continue
            if (pending := _PENDING_RANGE.match(job)) is not None:
                for index in _expand(pending.group(2)):
                    found[(pending.group(1), index)] = TaskRecord(state=state)
                continue
            if (task := _TASK.match(job)) is None:
                continue
            code, _, signal = exit_code.partition(":")
            found[(task.group(1), int(task.group(2)))] = TaskRecord(
                state=state,
                exit_code=int(code or 0),
                signal=int(signal or 0),
                cpu_seconds=_seconds(cpu),
                wall_seconds=float(elapsed or 0),
                nodes="" if nodes == NO_NODE else nodes,
            )
        for key, (rss, exit_code) in steps.items():
            if key in found:
                record = found[key]
                record.started = True
                record.max_rss_bytes = _bytes(rss)
                code, _, signal = exit_code.partition(":")
                if record.exit_code == 0 and record.signal == 0 and (code, signal) != ("0", "0"):
                    # The allocation's line can still say 0:0 for a task that failed when
                    # sacct is asked as it ends; the batch step's is the script's own status.
                    record.exit_code, record.signal = int(code or 0), int(signal or 0)
        return found

    async def cancel(self, tasks: Sequence[str]) -> None:
        """scancel every task (`<job id>_<index>`) at once; tasks already over are no error."""
        if tasks:
            await self.run("scancel", *tasks)


def array_ranges(tasks: Sequence[int]) -> str:
    """[0, 1, 2, 5, 7, 8] → `0-2,5,7-8`: sbatch's --array, short (slurmctld caps its length)."""
    parts: list[str] = []
    ordered = sorted(set(tasks))
    start = previous = ordered[0]
    for task in [*ordered[1:], None]:
        if task is not None and task == previous + 1:
            previous = task
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        if task is not None:
            start = previous = task
    return ",".join(parts)


def _expand(ranges: str) -> list[int]:
    """`0-3,7,9-10%2` → [0, 1, 2, 3, 7, 9, 10] (a pending array's task list)."""
    indexes: list[int] = []
    for part in ranges.split("%")[0].split(","):
        first, _, last = part.partition("-")
        if first.isdigit():
            indexes.extend(range(int(first), int(last or first) + 1))
    return indexes


def _seconds(text: str) -> float:
    """sacct's [D-][HH:]MM:SS[.mmm] as seconds."""
    if not text:
        return 0.0
    days, _, clock = text.rpartition("-")
    total = 0.0
    for part in clock.split(":"):
        total = total * 60 + float(part)
    return total + int(days or 0) * 86400


def _bytes(text: str) -> int | None:
    """sacct's MaxRSS (`67792K`, `12M`, plain bytes) as bytes."""
    if not text:
        return None
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(float(text))
