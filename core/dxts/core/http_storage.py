"""Storage elements spoken to over HTTP(S)/WebDAV (`davs://` endpoints, e.g. an XRootD server's
XrdHttp), with httpx: a well-kept HTTP client already among dxts's dependencies, synchronous
and thread-safe (one pooled client per process serves the copies' threads), streaming both
ways, and verifying TLS against the grid's CA folder (`X509_CERT_DIR`) when one is set. The
XRootD client cannot take these URLs: its Python wheel carries no HTTP plugin.

A replica's adler32 is the server's, asked with `Want-Digest: adler32` (RFC 3230) on a HEAD;
its size the HEAD's Content-Length; removal a DELETE (one already gone is not an error). A copy
with an HTTP end streams through this process (`stream`): XrdHttp refuses chunked uploads, so
every PUT says its length, and a copy that fails is deleted at an HTTP destination (a server
may keep what it received of an interrupted PUT).
"""

from __future__ import annotations

import contextlib
import os
import ssl
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import httpx

from dxts.core.storage import StorageError

CHUNK = 1 << 20
TIMEOUT = httpx.Timeout(60.0, connect=15.0)


def is_http(location: str) -> bool:
    return location.startswith(("https://", "http://"))


def client() -> httpx.Client:
    """One client per process (and CA folder): its connection pool is shared by the copies'
    threads. TLS is verified against the grid's CA folder when the environment names one
    (`X509_CERT_DIR`), else against the system's CAs."""
    return _client(os.environ.get("X509_CERT_DIR") or None)


@cache
def _client(ca_folder: str | None) -> httpx.Client:
    verify = ssl.create_default_context(capath=ca_folder) if ca_folder else True
    return httpx.Client(timeout=TIMEOUT, verify=verify, follow_redirects=True)


def _failed(response: httpx.Response, end: str = "") -> StorageError:
    """An HTTP error in the server's words (`HTTP 404 Not Found: Unable to open ...`)."""
    try:
        words = " ".join(response.text.split())[:300]
    except httpx.ResponseNotRead:
        words = ""
    where = f" ({end})" if end else ""
    return StorageError(
        f"HTTP {response.status_code} {response.reason_phrase}"
        + (f": {words}" if words else "")
        + where
    )


def _head(url: str, **headers: str) -> httpx.Response | None:
    """The HEAD's answer; None for a file that does not exist; StorageError otherwise."""
    try:
        response = client().head(url, headers=headers)
    except httpx.HTTPError as error:
        raise StorageError(f"{type(error).__name__}: {error}") from None
    if response.status_code == 404:
        return None
    if not response.is_success:
        raise _failed(response)
    return response


def checksum(url: str) -> str | None:
    """The server's adler32 of the replica (`Want-Digest`); None when it does not exist."""
    response = _head(url, **{"Want-Digest": "adler32"})
    if response is None:
        return None
    for digest in response.headers.get("Digest", "").split(","):
        kind, _, value = digest.strip().partition("=")
        if kind.lower() == "adler32" and value:
            return f"adler32:{int(value, 16):08x}"
    raise StorageError(f"the server gives no adler32 digest of {url} (Want-Digest: adler32)")


def size(url: str) -> int | None:
    response = _head(url)
    return None if response is None else int(response.headers.get("Content-Length", 0))


def remove(url: str) -> None:
    try:
        response = client().delete(url)
    except httpx.HTTPError as error:
        raise StorageError(f"{type(error).__name__}: {error}") from None
    if not response.is_success and response.status_code != 404:
        raise _failed(response)


# -- streaming copies (run in the copy child process, `dxts.core.xrootd_copy`) ---------------


@contextlib.contextmanager
def _reader(source: str) -> Iterator[tuple[int | None, Iterator[bytes]]]:
    """The source's size (None when an HTTP source does not say it) and its bytes, from a
    local file, an XRootD or an HTTP server."""
    if is_http(source):
        try:
            with client().stream("GET", source) as response:
                if not response.is_success:
                    response.read()
                    raise _failed(response, "source")
                length = response.headers.get("Content-Length")
                yield int(length) if length else None, _http_chunks(response)
        except httpx.HTTPError as error:
            raise StorageError(f"{type(error).__name__}: {error} (source)") from None
    elif source.startswith(("root://", "xroot://")):
        from XRootD import client as xrootd

        remote = xrootd.File()
        status, _ = remote.open(source, timeout=int(TIMEOUT.read or 60))
        if not status.ok:
            raise StorageError(f"{status.message.strip()} (source)")
        try:
            status, info = remote.stat()
            if not status.ok:
                raise StorageError(f"{status.message.strip()} (source)")
            yield int(info.size), _xrootd_chunks(remote, int(info.size))
        finally:
            remote.close()
    else:
        with Path(source).open("rb") as stream:
            yield os.fstat(stream.fileno()).st_size, iter(lambda: stream.read(CHUNK), b"")


def _http_chunks(response: httpx.Response) -> Iterator[bytes]:
    """The body, a failure to read it the source's (also when read inside an upload's PUT)."""
    try:
        yield from response.iter_bytes(CHUNK)
    except httpx.HTTPError as error:
        raise StorageError(f"{type(error).__name__}: {error} (source)") from None


def _xrootd_chunks(remote: Any, length: int) -> Iterator[bytes]:
    for offset in range(0, length, CHUNK):
        status, chunk = remote.read(offset, CHUNK)
        if not status.ok:
            raise StorageError(f"{status.message.strip()} (source)")
        yield chunk


def _write(target: str, length: int | None, chunks: Iterator[bytes]) -> None:
    """The bytes written at the target (an HTTP PUT of known length, an XRootD file kept only
    once whole, or a local file)."""
    if is_http(target):
        if length is None:
            raise StorageError("the source does not say its length, which an upload needs (source)")
        try:
            response = client().put(target, content=chunks, headers={"Content-Length": str(length)})
        except httpx.HTTPError as error:
            raise StorageError(f"{type(error).__name__}: {error} (destination)") from None
        if not response.is_success:
            raise _failed(response, "destination")
    elif target.startswith(("root://", "xroot://")):
        from XRootD import client as xrootd
        from XRootD.client.flags import OpenFlags

        remote = xrootd.File()
        flags = OpenFlags.DELETE | OpenFlags.MAKEPATH | OpenFlags.POSC
        status, _ = remote.open(target, flags, timeout=int(TIMEOUT.read or 60))
        if not status.ok:
            raise StorageError(f"{status.message.strip()} (destination)")
        offset = 0
        for chunk in chunks:
            status, _ = remote.write(chunk, offset)
            if not status.ok:
                raise StorageError(f"{status.message.strip()} (destination)")
            offset += len(chunk)
        status, _ = remote.close()
        if not status.ok:
            raise StorageError(f"{status.message.strip()} (destination)")
    else:
        path = Path(target)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as stream:
            for chunk in chunks:
                stream.write(chunk)


def stream(source: str, target: str) -> str:
    """Copy `source` to `target` through this process; "" when done, else the words of what
    failed, ending `(source)` or `(destination)` as the XRootD client's do. What a failed copy
    left at an HTTP destination is deleted."""
    try:
        with _reader(source) as (length, chunks):
            _write(target, length, chunks)
        return ""
    except (StorageError, OSError) as error:
        if is_http(target):
            with contextlib.suppress(StorageError):
                remove(target)
        return str(error) or type(error).__name__
