"""Run a command and write what it used: `python -m dxts.backends.runner.measure FILE -- cmd...`.

The local adaptor starts the CWL runner through this wrapper because asyncio's child watcher
reaps the runner itself, taking its resource usage with it. The wrapper runs the command as its
child, waits for it, and writes to FILE (JSON, written whole or not at all):

* `cpu_seconds` — user + system CPU time of the command and of every descendant it waited for
  (`getrusage(RUSAGE_CHILDREN)`: the runner and the tools it ran);
* `wall_seconds` — from the command's start to its end;
* `max_memory_bytes` — the peak resident set of the largest single process among them
  (ru_maxrss, KiB on Linux, bytes on macOS).

It is transparent otherwise: the command inherits its standard streams, working directory and
process group (the adaptor's cancellation kills the whole group), a SIGTERM, SIGINT or SIGHUP
sent to the wrapper alone is passed on to the command, and the wrapper ends as the command
ended: its exit status, or killed by the same signal. A command that cannot be started exits
127, as a shell's would, with no usage written. Only the standard library is imported, so the
wrapper adds little to a parcel's start.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CANNOT_RUN = 127
USAGE = "usage: python -m dxts.backends.runner.measure USAGE_FILE -- COMMAND [ARG...]"


def children_usage(wall_seconds: float) -> dict[str, float | int]:
    """What the waited-for descendants of this process used, in the file's units."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    per_unit = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes there, KiB on Linux
    return {
        "cpu_seconds": used.ru_utime + used.ru_stime,
        "wall_seconds": wall_seconds,
        "max_memory_bytes": used.ru_maxrss * per_unit,
    }


def write_usage(path: Path, usage: dict[str, float | int]) -> None:
    """Write `usage` to `path` atomically (a reader never sees half of it)."""
    partial = path.with_name(f"{path.name}.partial")
    partial.write_text(json.dumps(usage))
    os.replace(partial, path)


def run(usage_file: Path, command: list[str]) -> int:
    """Run `command`, write its usage; the command's return code (negative: its signal)."""
    child: subprocess.Popen[bytes] | None = None
    pending: list[int] = []  # signals received before the child existed

    def forward(signum: int, _frame: FrameType | None) -> None:
        if child is None:
            pending.append(signum)
            return
        if child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signum)

    for forwarded in FORWARDED:
        signal.signal(forwarded, forward)
    started = time.monotonic()
    try:
        child = subprocess.Popen(command)
    except OSError as error:
        print(f"measure: cannot run {command[0]!r}: {error}", file=sys.stderr)
        return CANNOT_RUN
    for early in pending:
        forward(early, None)
    code = child.wait()
    write_usage(usage_file, children_usage(time.monotonic() - started))
    return code


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or args[1] != "--":
        print(USAGE, file=sys.stderr)
        sys.exit(2)
    code = run(Path(args[0]), args[2:])
    if code < 0:  # killed by a signal: end the same way, so the caller sees what it would have
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
