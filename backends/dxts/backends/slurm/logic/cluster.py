"""What the Slurm adaptor's logic needs of a Slurm cluster, and what it gets back: the adaptor
is given a `SlurmCluster` (in production `dxts.backends.slurm.edge.commands.Slurm`, Slurm's
command-line tools; in tests a canned one), so that its logic imports no edge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# Slurm's job states after which nothing more happens (sacct's spelling; CANCELLED carries
# "by <uid>" after it).
TERMINAL_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
        "REVOKED",
    }
)
# The task index of a record that is the whole array's: an array cancelled before any task was
# split off from it is one line under the array's own job id.
WHOLE_ARRAY = -1


class SlurmError(Exception):
    """A Slurm command failed (its message is Slurm's)."""


@dataclass
class TaskRecord:
    """What Slurm's accounting says of one array task."""

    state: str  # e.g. COMPLETED, FAILED, "CANCELLED by 0", PENDING, RUNNING
    exit_code: int = 0
    signal: int = 0
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    max_rss_bytes: int | None = None  # from the batch step; None until it is recorded
    started: bool = False  # the batch step exists: the task ran
    nodes: str = ""  # the nodes it ran on (sacct's NodeList); "" before it was given any

    @property
    def terminal(self) -> bool:
        return self.state.split(" ")[0] in TERMINAL_STATES


class SlurmCluster(Protocol):
    """The Slurm calls the adaptor makes, each carrying a whole batch."""

    calls: int  # commands run, for the tests and the benchmark

    async def run(self, tool: str, *args: str) -> str:
        """Run one Slurm command; its stdout, or SlurmError with its stderr."""
        ...

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
        """One job array of `tasks`; the array's job id."""
        ...

    async def find_by_name(self, name: str) -> str | None:
        """The job id of the job named `name`, if Slurm knows one."""
        ...

    async def records(self, job_ids: Sequence[str]) -> dict[tuple[str, int], TaskRecord]:
        """(array job id, task index) → what the accounting says of it."""
        ...

    async def cancel(self, tasks: Sequence[str]) -> None:
        """Cancel the tasks (`<array job id>_<task index>`)."""
        ...
