"""Why a run failed, in the failure taxonomy (`dxts.core.adaptor.model.FailureClass`), with the
payload's own words.

The tool's stderr is kept apart from the runner's log: the default runner
(`dxts.backends.runner.cwltool_main`) writes it to `tool.stderr` in the parcel's directory. A
runner configured otherwise writes it into its log; its lines that are not the log's own
records (`INFO …`, `WARNING …`) are then read as the tool's.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

from dxts.core.adaptor.failures import tool_message
from dxts.core.adaptor.model import Failure, FailureClass

TOOL_STDERR = "tool.stderr"
LOG_TAIL = 2000
# How cwltool logs a tool that ended with an exit status it counts as a failure (a tool killed
# by a signal is logged otherwise, and has no exit status).
TOOL_EXITED = re.compile(r"\[job [^\]\n]*\] exited with status: (\d+)")
TOOL_SIGNALLED = re.compile(r"\[job [^\]\n]*\] was terminated by signal: (\w+)")
# A record of the runner's own log (cwltool's `LEVEL message`), not a line of the tool's.
RUNNER_RECORD = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL) ")
# A process killed by a signal exits with 128 + the signal's number in a shell's words.
SIGNALLED = 128


class JobFailed(Exception):
    """The parcel cannot run or its result cannot be used: a FAILED outcome with this message,
    `exit_code` the payload's exit status when it ended with one, and `failure` its class and
    the payload's own line (by default a setup error: the run could not be made)."""

    def __init__(
        self,
        message: str,
        exit_code: int | None = None,
        failure: Failure | None = None,
    ) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.failure = failure or Failure(FailureClass.SETUP_ERROR)


def payload_exit_code(runner_log: str) -> int | None:
    """The exit status of the last tool the runner's log says failed; None when none did (the
    runner failed on its own, or a tool was killed by a signal)."""
    statuses = TOOL_EXITED.findall(runner_log)
    return int(statuses[-1]) if statuses else None


def payload_stderr(job_dir: Path, runner_log_name: str) -> str:
    """What the payload's tools wrote to stderr: `tool.stderr` when the runner kept it apart,
    else the lines of the runner's log that are not its own records."""
    kept = job_dir / TOOL_STDERR
    if kept.exists():
        return kept.read_text(errors="replace")
    runner_log = (job_dir / runner_log_name).read_text(errors="replace")
    return "\n".join(line for line in runner_log.splitlines() if not RUNNER_RECORD.match(line))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def runner_failed(
    job_dir: Path, code: int, runner_log_name: str, error_pattern: str | None
) -> JobFailed:
    """The failure of a run whose runner exited with `code` (non-zero; negative: killed by
    that signal): an application error with the tool's exit status when the runner's log
    names one; killed when the tool or the run was; else a setup error in the runner's own words."""
    runner_log = (job_dir / runner_log_name).read_text(errors="replace")
    line = tool_message(payload_stderr(job_dir, runner_log_name), error_pattern)
    status = payload_exit_code(runner_log)
    if status is not None:
        said = f": {line}" if line else " (it wrote nothing to stderr)"
        return JobFailed(
            f"the tool exited with {status}{said}",
            status,
            Failure(FailureClass.APPLICATION_ERROR, tool_message=line),
        )
    signalled = TOOL_SIGNALLED.findall(runner_log)
    if signalled:
        said = f": {line}" if line else ""
        return JobFailed(
            f"the tool was killed by {signalled[-1]}{said}",
            failure=Failure(FailureClass.KILLED, tool_message=line),
        )
    if code < 0 or code > SIGNALLED:
        number = -code if code < 0 else code - SIGNALLED
        return JobFailed(
            f"the CWL runner was killed by {_signal_name(number)}",
            failure=Failure(FailureClass.KILLED, tool_message=line),
        )
    own = runner_log[runner_log.find("\nERROR ") + 1 :] if "\nERROR " in runner_log else ""
    return JobFailed(
        f"the CWL runner exited with {code}: {(own or runner_log)[-LOG_TAIL:]}",
        failure=Failure(FailureClass.SETUP_ERROR, tool_message=line),
    )
