"""The child process `dxts.core.transfers.copy_files` runs the copies in, so that it can be
killed at their deadline: reads `{"parallel", "timeout_s", "copies": [{source, target,
third_party}]}` on stdin, runs them in one XRootD CopyProcess, and prints one JSON line per
copy as it ends: `{"index", "ok", "message"}` (the message is the server's or the client's)."""

from __future__ import annotations

import json
import sys
from typing import Any

# The client's settings (`transfers.CLIENT_ENVIRONMENT`) come in the environment the parent
# starts this process with: importing `dxts.core.transfers` here for them would cost every
# batch of copies the start-up of asyncio (a third of this process's start).
from XRootD import client

KILLED_FIRST_S = 30


class _Reporter:
    """The CopyProcess progress handler: one line per job as it ends (jobs count from 1)."""

    def begin(self, job: int, total: int, source: Any, target: Any) -> None:
        pass

    def update(self, job: int, processed: int, total: int) -> None:
        pass

    def should_cancel(self, job: int) -> bool:
        return False

    def end(self, job: int, results: dict[str, Any]) -> None:
        status = results.get("status")
        ok = bool(status is not None and status.ok)
        message = "" if ok or status is None else status.message.strip()
        line = {"index": job - 1, "ok": ok, "message": message}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def main() -> None:
    request = json.load(sys.stdin)
    # The parent kills this process at `timeout_s`: the client's own timeouts are set past it,
    # so that every copy unfinished at the deadline fails alike, as timed out, and never as an
    # "Operation expired" from whichever clock happened to run first.
    timeout = max(1, int(request["timeout_s"])) + KILLED_FIRST_S
    process = client.CopyProcess()
    process.parallel(max(1, int(request["parallel"])))
    for copy in request["copies"]:
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
    process.run(_Reporter())


if __name__ == "__main__":
    main()
