"""`cli`: how long the `dxts` command takes to start, against `python -c pass`.

Two figures, in milliseconds per command (lower is better), each with `python -c pass` (the
interpreter's own start-up, the floor of any Python command) as the baseline measured in the
same run, rounds alternating:

* `cli_help_ms`: `dxts --help`;
* `cli_read_ms`: `dxts list` against a running `dxts up` (started here on a scratch data
  directory with the embedded SQLite default, and stopped afterwards).

The database the harness gives every benchmark is not used: what is timed is the command's
start, its one read and its exit, each a fresh process as an operator runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
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
