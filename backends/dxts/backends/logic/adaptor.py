"""What an adaptor is to the rest of dxts: the `Adaptor` protocol every adaptor implements
(`local`, `null`, and any new one), on the adaptor contract's domain types
(`dxts.core.adaptor.model`). The shared gRPC edge (`dxts.backends.edge.servicer`) serves any
`Adaptor`; an adaptor never sees a generated message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from dxts.core.adaptor.model import JobLogs, log_bytes
from dxts.core.adaptor.protocol import BackendAdaptor
from dxts.core.errors import InvalidArgument
from dxts.core.ids import id_from_str


class Adaptor(BackendAdaptor, Protocol):
    """A backend adaptor: the calls of `BackendAdaptor`, whose rules it must keep —

    * `submit(payload, parcels)` is idempotent by ParcelID: one `SubmitResult` per parcel, in
      order; a key accepted once answers the same identifier again and starts nothing new
      (across restarts, when the adaptor keeps state); a key cancelled before it was accepted
      is refused for good; anything else it cannot take now is refused with a reason
      (`key_problem` says whether a ParcelID is one at all);
    * `poll(identifiers)` returns the outcomes of ended work only (SUCCEEDED, FAILED or
      CANCELLED), any number of times, and lists the identifiers it does not know;
    * `cancel(identifiers, parcel_ids)` asks work to stop (its end is still polled); a key
      cancelled by ParcelID answers its identifier if accepted, else "" (and is then refused);
    * `logs(identifier, max_bytes)` gives the end of a job's stdout and stderr and where its
      files are (NotFound for an identifier it does not know);
    * `describe()` gives its kind, PULL or PUSH reporting, capacity (0: none) and counters —

    plus its lifecycle: `start()` begins the background work (workers, timers, pushes: each a
    sweep) and opens what it keeps; `stop()` ends it, and what was accepted survives in the
    adaptor's state. Every call may be repeated after a timeout.
    """

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def key_problem(parcel_id: str) -> str | None:
    """Why `parcel_id` cannot be an idempotency key (None when it can)."""
    try:
        id_from_str(parcel_id, field="parcel_id")
    except InvalidArgument as error:
        return str(error)
    return None


def directory_logs(
    directory: Path, stdout: str, stderr: str, max_bytes: int, *more_stderr: str
) -> JobLogs:
    """The end (at most `max_bytes`, capped at MAX_LOG_BYTES; DEFAULT_LOG_BYTES when 0) of the
    files `stdout` and `stderr` in a job's `directory`; a file not written yet reads as empty;
    only that end of each file is read, however long the file. With `more_stderr` (the tools'
    stderr kept apart from the runner's log), the stderr is `stderr` then each of them, every
    non-empty one after a `==> name <==` heading as `tail` shows several files, so that its end
    is the tools' own."""
    limit = log_bytes(max_bytes)
    out, out_cut = _tail(directory / stdout, limit)
    err, err_cut = _tail(directory / stderr, limit)
    if more_stderr:
        parts = [(name, *_tail(directory / name, limit)) for name in (stderr, *more_stderr)]
        joined = "".join(f"==> {name} <==\n{text}" for name, text, _ in parts if text).encode()
        err = joined[-limit:].decode(errors="ignore")  # a character cut in two: dropped
        err_cut = len(joined) > limit or any(cut for _, _, cut in parts)
    return JobLogs(out, err, str(directory), out_cut or err_cut)


def _tail(path: Path, limit: int) -> tuple[str, bool]:
    try:
        with path.open("rb") as file:
            size = file.seek(0, 2)
            file.seek(max(0, size - limit))
            return file.read(limit).decode(errors="replace"), size > limit
    except FileNotFoundError:
        return "", False
