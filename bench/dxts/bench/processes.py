"""What processes on this machine have used, read from `/proc`: the CPU and memory figures of
the benchmarks that run components as processes of their own.

On a machine whose cores are all busy, a rate is set by the CPU each unit of work costs, so
the benchmarks that compare two rates also say what each unit cost (`CpuSpent`)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dxts.core.db import Database


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (0 when it is gone)."""
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def cpu_of(pids: Iterable[int]) -> float:
    """The CPU seconds of these processes together."""
    return sum(cpu_s(pid) for pid in pids)


def status_kb(pid: int, key: str) -> float:
    """A kB field of `/proc/<pid>/status` (VmRSS, VmHWM…); 0 when the process is gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return float(line.split()[1])
    return 0.0


def local_mariadbd_pid(database: Database) -> int | None:
    """mariadbd's process id when the server is this machine's (None: elsewhere or SQLite)."""
    if database.is_sqlite or database.url.host not in ("127.0.0.1", "localhost"):
        return None
    found = subprocess.run(["pidof", "mariadbd"], capture_output=True, text=True, check=False)
    pids = found.stdout.split()
    return int(pids[0]) if len(pids) == 1 else None


@dataclass(frozen=True)
class CpuSpent:
    """What a span of measured work cost (a benchmark round, a whole run): the CPU seconds of
    every process doing it, its wall time, and the units of work done."""

    cpu_s: float
    wall_s: float
    units: int

    @property
    def cpu_ms_per_unit(self) -> float:
        return 1000 * self.cpu_s / self.units

    @property
    def cores_used(self) -> float:
        return self.cpu_s / self.wall_s
