"""`cli`: how long the `dxts` command takes to start, against `python -c pass`.

Two figures, in milliseconds per command (lower is better), each with `python -c pass` (the
interpreter's own start-up, the floor of any Python command) as the baseline measured in the
same run, rounds alternating:

* `cli_help_ms`: `dxts --help`;
* `cli_read_ms`: `dxts list` against a running `dxts up` (started here on a scratch data
  directory with the embedded SQLite default, and stopped afterwards);
* `cli_read_cpu_ms`: the CPU time (user and system) of that `dxts list`, the median of the
  rounds, against `python -c pass`'s: what the command itself costs, which the machine's load
  does not inflate as it does the wall-clock figure (issue 32's goal: at most 300 ms above).

The database the harness gives every benchmark is not used: what is timed is the command's
start, its one read and its exit, each a fresh process as an operator runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from dxts.bench.harness import Bench, Operation
from dxts.core.errors import FailedPrecondition

READY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class CliParams:
    rounds: int


SCALES = {
    "tiny": CliParams(1),
    "small": CliParams(10),
    "full": CliParams(30),
}


def dxts_command() -> list[str]:
    """The `dxts` console script installed beside this interpreter (what an operator runs)."""
    script = Path(sys.executable).parent / "dxts"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from dxts.cli.entry import main; main()"]


def _process(command: list[str], environment: dict[str, str]) -> Operation:
    async def once() -> int:
        done = await asyncio.to_thread(
            subprocess.run, command, env=environment, capture_output=True, check=False
        )
        if done.returncode != 0:
            raise FailedPrecondition(
                f"{' '.join(command)} exited {done.returncode}: {done.stderr.decode()[-500:]}"
            )
        return 1

    return Operation(run=once)


def cpu_ms(command: list[str], environment: dict[str, str]) -> float:
    """The CPU time, user and system, of one run of `command` (a child waited for here)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, env=environment, capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise FailedPrecondition(
            f"{' '.join(command)} exited {done.returncode}: {done.stderr.decode()[-500:]}"
        )
    spent = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return spent * 1000


def median_cpu_ms(
    subject: list[str], baseline: list[str], environment: dict[str, str], rounds: int
) -> tuple[float, float]:
    """The median CPU milliseconds of `subject` and of `baseline`, rounds alternating, each
    run alone (a warm-up round first, not counted)."""
    spent: tuple[list[float], list[float]] = ([], [])
    for round_number in range(rounds + 1):
        for index, command in enumerate((subject, baseline)):
            value = cpu_ms(command, environment)
            if round_number:
                spent[index].append(value)
    return statistics.median(spent[0]), statistics.median(spent[1])


@contextlib.asynccontextmanager
async def running_up(data_dir: Path, environment: dict[str, str]) -> AsyncIterator[None]:
    """`dxts up` on `data_dir`, until its connection file is written; stopped on exit."""
    log = (data_dir / "up.err").open("wb")
    process = await asyncio.to_thread(
        subprocess.Popen,
        [*dxts_command(), "up", "--data-dir", str(data_dir)],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not (data_dir / "connection.json").exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise FailedPrecondition(
                    f"dxts up did not start: {(data_dir / 'up.err').read_text()[-500:]}"
                )
            await asyncio.sleep(0.2)
        yield
    finally:
        process.send_signal(signal.SIGINT)
        try:
            await asyncio.to_thread(process.wait, 60)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


async def run(bench: Bench, params: CliParams) -> None:
    with tempfile.TemporaryDirectory(prefix="dxts-bench-cli-") as folder:
        data_dir = Path(folder)
        # The commands find `dxts up` by its data directory, never the operator's ~/.dxts.
        environment = {
            **os.environ,
            "DXTS_DATA_DIR": str(data_dir),
            "HOME": folder,
            "DXTS_DB_URL": "",
            # Bytecode cached as on an operator's machine (the warm-up round writes it).
            "PYTHONDONTWRITEBYTECODE": "",
        }
        baseline = _process([sys.executable, "-c", "pass"], environment)

        async def measure(figure: str, args: list[str], command: str) -> None:
            await bench.compare(
                figure,
                unit="ms",
                baseline=baseline,
                subject=_process([*dxts_command(), *args], environment),
                rounds=params.rounds,
                params={"command": command, "baseline_command": "python -c pass"},
                latency=True,
            )

        await measure("cli_help_ms", ["--help"], "dxts --help")
        async with running_up(data_dir, environment):
            await measure("cli_read_ms", ["list"], "dxts list (against dxts up, embedded SQLite)")
            command, plain = [*dxts_command(), "list"], [sys.executable, "-c", "pass"]
            listed, bare = await asyncio.to_thread(
                median_cpu_ms, command, plain, environment, params.rounds
            )
            bench.report(
                "cli_read_cpu_ms",
                listed,
                unit="ms",
                baseline=bare,
                params={
                    "rounds": params.rounds,
                    "command": "dxts list (against dxts up, embedded SQLite): its CPU time",
                    "baseline_command": "python -c pass",
                },
            )
