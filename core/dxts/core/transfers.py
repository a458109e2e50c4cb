"""Moving files to, from and between storage elements with the XRootD client library (and, for
HTTP(S)/WebDAV SEs, `dxts.core.http_storage`).

Copies run in a child process (`python -m dxts.core.xrootd_copy`), many at once in one XRootD
`CopyProcess`, third-party (`xrdcp --tpc only`) when both ends are XRootD servers that do it and
streamed through the client otherwise; a copy with an HTTP end streams through the child in a
thread of its own, as many at once. The child is killed at the deadline: a server that stops
answering mid-transfer cannot hold a copy past its timeout (a thread inside this process could
not be stopped, and the client library's own timeouts do not cover a server that is up but
silent). Every copy result carries the words the server or the client library gave.

Checksums are adler32 (`adler32:0a1b2c3d`, the catalogue's form); a server's is asked with
`query checksum`, a local file's computed. The client is told to give up on a dead server at
once (one connection attempt) rather than retry for minutes, and to forget a server's connection
error at once: by default it fails every later call to that server for 30 minutes, long after
the server is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

# Read by the client library when it starts: set before it is imported, here and in the child.
CLIENT_ENVIRONMENT = {
    "XRD_CONNECTIONRETRY": "1",
    # A new process's first lookups can stall for the resolver's timeout (5 s by default): a
    # window shorter than that expired copies; the resolver is capped at 1 s too.
    "XRD_CONNECTIONWINDOW": "15",
    "RES_OPTIONS": "timeout:1 attempts:1",
    "XRD_REQUESTTIMEOUT": "60",
    "XRD_STREAMTIMEOUT": "60",
    # Seconds a connection error is remembered (and every call to that server failed at once):
    # 1800 by default; 0 asks again each time.
    "XRD_STREAMERRORWINDOW": "0",
}
for _name, _value in CLIENT_ENVIRONMENT.items():
    os.environ.setdefault(_name, _value)

from XRootD import client  # noqa: E402 - after its environment
from XRootD.client.flags import QueryCode  # noqa: E402

from dxts.core import http_storage  # noqa: E402
from dxts.core.storage import StorageError  # noqa: E402 - where every caller catches it

ASK_TIMEOUT_S = 30  # one stat, checksum or removal
CHUNK = 1 << 20


@dataclass(frozen=True)
class Copy:
    """One copy: source and target each a root:// URL or a local path."""

    source: str
    target: str
    third_party: bool = False


@dataclass(frozen=True)
class CopyResult:
    ok: bool
    message: str = ""  # the server's or the client's words when it failed
    timed_out: bool = False


def is_xrootd(location: str) -> bool:
    return location.startswith(("root://", "xroot://"))


def is_remote(location: str) -> bool:
    """On a server (XRootD or HTTP), not a local path."""
    return is_xrootd(location) or http_storage.is_http(location)


def server_of(url: str) -> str:
    """`root://host:port` of a `root://host:port//path` URL."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


def path_of(url: str) -> str:
    """The absolute path on the server of a `root://host:port//path` URL."""
    rest = url.partition("://")[2]
    return "/" + rest.split("/", 1)[1].lstrip("/")


def adler32_of(path: Path) -> str:
    """A local file's checksum, in the catalogue's form."""
    value = 1
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            value = zlib.adler32(chunk, value)
    return f"adler32:{value:08x}"


def same_checksum(a: str, b: str) -> bool:
    """Whether two `adler32:hex` checksums agree (the client library drops leading zeros)."""
    kind_a, _, hex_a = a.partition(":")
    kind_b, _, hex_b = b.partition(":")
    try:
        return kind_a.lower() == kind_b.lower() and int(hex_a, 16) == int(hex_b, 16)
    except ValueError:
        return False


def _failed(status: Any) -> StorageError:
    """The client library's status (`XRootDStatus`) as an error in its own words."""
    return StorageError(str(status.message).strip())


@cache
def _filesystem(server: str) -> Any:
    """One client per server for this process (the library shares its connections)."""
    return client.FileSystem(server)


def _ask(location: str, call: Callable[[Any, str], Any]) -> Any:
    """`call(filesystem, path)`, asked again once when the library answers "Operation expired"
    at once: seen on this machine when threads first ask one server together, before its
    connection is up."""
    answer = call(_filesystem(server_of(location)), path_of(location))
    if not answer[0].ok and "Operation expired" in str(answer[0].message):
        answer = call(_filesystem(server_of(location)), path_of(location))
    return answer


def checksum(location: str) -> str | None:
    """The checksum of a replica; None when it does not exist; StorageError otherwise."""
    if not is_remote(location):
        path = Path(location)
        return adler32_of(path) if path.is_file() else None
    if http_storage.is_http(location):
        return http_storage.checksum(location)
    status, answer = _ask(
        location, lambda fs, path: fs.query(QueryCode.CHECKSUM, path, timeout=ASK_TIMEOUT_S)
    )
    if not status.ok:
        if status.errno == 3011:  # kXR_NotFound
            return None
        raise _failed(status)
    kind, _, value = answer.decode().rstrip("\x00").strip().partition(" ")
    return f"{kind}:{int(value, 16):08x}"


def size(location: str) -> int | None:
    """The size of a replica; None when it does not exist; StorageError otherwise."""
    if not is_remote(location):
        path = Path(location)
        return path.stat().st_size if path.is_file() else None
    if http_storage.is_http(location):
        return http_storage.size(location)
    status, info = _ask(location, lambda fs, path: fs.stat(path, timeout=ASK_TIMEOUT_S))
    if not status.ok:
        if status.errno == 3011:
            return None
        raise _failed(status)
    return int(info.size)


def remove(location: str) -> None:
    """Delete a replica; one already gone is not an error; StorageError otherwise."""
    if not is_remote(location):
        Path(location).unlink(missing_ok=True)
        return
    if http_storage.is_http(location):
        http_storage.remove(location)
        return
    status, _ = _ask(location, lambda fs, path: fs.rm(path, timeout=ASK_TIMEOUT_S))
    if not status.ok and status.errno != 3011:
        raise _failed(status)


_THIRD_PARTY: dict[str, bool] = {}  # each server's answer, once it gave one


def third_party_capable(server: str) -> bool:
    """Whether an XRootD server does third-party copies (`query config tpc` answers 1). A
    server's answer is kept for the process; a server that could not be asked (down, or silent
    for the query's timeout: it blocks that long) is not capable now, and is asked again next
    time, so that a moment's silence does not stream its copies for the rest of the process."""
    if server not in _THIRD_PARTY:
        status, answer = client.FileSystem(server).query(QueryCode.CONFIG, "tpc", timeout=10)
        if not status.ok:
            return False
        _THIRD_PARTY[server] = answer.decode().strip().rstrip("\x00") == "1"
    return _THIRD_PARTY[server]


def can_copy_third_party(source: str, target: str) -> bool:
    """Both ends are XRootD servers that do third-party copies (else the client streams)."""
    if not (is_xrootd(source) and is_xrootd(target)):
        return False
    try:
        return third_party_capable(server_of(source)) and third_party_capable(server_of(target))
    except Exception:  # a server that cannot be asked is streamed to, and fails there
        return False


async def copy_files(
    copies: Sequence[Copy],
    *,
    timeout_s: float,
    parallel: int = 16,
    ended: Callable[[int, CopyResult], None] | None = None,
) -> list[CopyResult]:
    """Run the copies (the target overwritten, its folders made, a partial one never kept by
    the server); one result each, in order. Copies still running at `timeout_s` fail as timed
    out: the child process doing them is killed. `ended(index, result)` is called as each copy
    ends, so that what follows a copy (its checksum asked) overlaps the copies still running."""
    if not copies:
        return []
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "dxts.core.xrootd_copy",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, **CLIENT_ENVIRONMENT},
    )
    assert child.stdin is not None and child.stdout is not None
    request = {"parallel": parallel, "timeout_s": timeout_s, "copies": [asdict(c) for c in copies]}
    child.stdin.write(json.dumps(request).encode())
    child.stdin.close()
    results: dict[int, CopyResult] = {}

    async def read() -> None:
        assert child.stdout is not None
        async for line in child.stdout:
            answer = json.loads(line)
            result = results[answer["index"]] = CopyResult(answer["ok"], answer["message"])
            if ended is not None:
                ended(answer["index"], result)

    try:
        await asyncio.wait_for(read(), timeout_s)
        await child.wait()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        await child.wait()
    finally:
        if child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            await child.wait()
    stderr = (await child.stderr.read()).decode(errors="replace").strip() if child.stderr else ""
    missing = CopyResult(False, f"timed out after {timeout_s:g} s", timed_out=True)
    if child.returncode not in (0, -signal.SIGKILL) and not results:
        last = stderr.splitlines()[-1] if stderr else f"exit status {child.returncode}"
        missing = CopyResult(False, f"the copy process failed: {last}")
    return [results.get(index, missing) for index in range(len(copies))]
