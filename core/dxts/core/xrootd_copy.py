"""The child process `dxts.core.transfers.copy_files` runs the copies in, so that it can be
killed at their deadline: reads `{"parallel", "timeout_s", "copies": [{source, target,
third_party}]}` on stdin, runs them in one XRootD CopyProcess (those with an HTTP end streamed
by `dxts.core.http_storage`, `parallel` threads at once, beside it), and prints one JSON line
per copy as it ends: `{"index", "ok", "message"}` (the message is the server's or the
client's)."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

# The client's settings (`transfers.CLIENT_ENVIRONMENT`) come in the environment the parent
# starts this process with: importing `dxts.core.transfers` here for them would cost every
# batch of copies the start-up of asyncio (a third of this process's start).
from XRootD import client

KILLED_FIRST_S = 30
HTTP = ("https://", "http://")
_printing = threading.Lock()


def _report(index: int, ok: bool, message: str) -> None:
    """One copy's line, whole, whichever thread ends it."""
    with _printing:
        sys.stdout.write(json.dumps({"index": index, "ok": ok, "message": message}) + "\n")
        sys.stdout.flush()


class _Reporter:
    """The CopyProcess progress handler: one line per job as it ends (jobs count from 1)."""

    def begin(self, job: int, total: int, source: Any, target: Any) -> None:
        pass

    def update(self, job: int, processed: int, total: int) -> None:
        pass

    def should_cancel(self, job: int) -> bool:
        return False

    def __init__(self, indexes: list[int]) -> None:
        self.indexes = indexes  # the request's index of each CopyProcess job

    def end(self, job: int, results: dict[str, Any]) -> None:
        status = results.get("status")
        ok = bool(status is not None and status.ok)
        message = "" if ok or status is None else status.message.strip()
        _report(self.indexes[job - 1], ok, message)


def _streamed(index: int, source: str, target: str) -> None:
    from dxts.core.http_storage import stream

    try:
        words = stream(source, target)
    except Exception as error:  # reported, never lost with its thread: the copy failed so
        words = f"{type(error).__name__}: {error}"
    _report(index, not words, words)


def main() -> None:
    request = json.load(sys.stdin)
    # The parent kills this process at `timeout_s`: the client's own timeouts are set past it,
    # so that every copy unfinished at the deadline fails alike, as timed out, and never as an
    # "Operation expired" from whichever clock happened to run first.
    timeout = max(1, int(request["timeout_s"])) + KILLED_FIRST_S
    parallel = max(1, int(request["parallel"]))
    copies = list(enumerate(request["copies"]))
    http = {i for i, c in copies if c["source"].startswith(HTTP) or c["target"].startswith(HTTP)}
    over_http = [(i, c) for i, c in copies if i in http]
    by_xrootd = [(i, c) for i, c in copies if i not in http]
    if not over_http:  # the usual case: no thread pool to import (it costs the start-up)
        _run_xrootd(by_xrootd, parallel, timeout)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(parallel) as threads:
        for index, copy in over_http:
            threads.submit(_streamed, index, copy["source"], copy["target"])
        if by_xrootd:
            _run_xrootd(by_xrootd, parallel, timeout)


def _run_xrootd(copies: list[tuple[int, dict[str, Any]]], parallel: int, timeout: int) -> None:
    process = client.CopyProcess()
    process.parallel(parallel)
    for _, copy in copies:
        process.add_job(
            copy["source"],
            copy["target"],
            force=True,
            posc=True,  # the server keeps the file only once it is whole
            mkdir=True,
            thirdparty="only" if copy["third_party"] else "none",
            tpctimeout=timeout,
            cptimeout=timeout,
            inittimeout=timeout,
        )
    status = process.prepare()
    if not status.ok:
        sys.exit(f"the copies could not be prepared: {status.message.strip()}")
    process.run(_Reporter([index for index, _ in copies]))


if __name__ == "__main__":
    main()
