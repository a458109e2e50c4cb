"""Staging a job's outputs out to an XRootD output SE: the files `collect_outputs` laid out in
the job's spool folder (`<spool>/<LFN>`, their size and adler32 already in the manifest) are
uploaded all at once with the XRootD client (`dxts.core.transfers`, killed at the transfer
timeout; the server keeps a file only once it is whole), then each upload's adler32, as the
server computes it, is compared with the one the manifest records, so that the catalogue never
registers a replica whose bytes differ from what the job wrote."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from pathlib import Path

from dxts.backends.runner.failures import JobFailed
from dxts.core import transfers
from dxts.core.adaptor.model import Failure, FailureClass, OutputFile
from dxts.core.storage import StorageEndpoint


def spooled(spool: Path, lfn: str) -> Path:
    """Where an output waits for its upload."""
    return spool / lfn.lstrip("/")


def _verified(url: str, expected: str) -> str:
    """Empty when the server's adler32 of `url` is `expected`, else the words saying why not
    (the copy that does not match is deleted: nothing partial or wrong stays at the SE)."""
    try:
        found = transfers.checksum(url)
    except transfers.StorageError as error:
        return str(error)
    if found is None:
        return "the server does not hold the file after the upload"
    if transfers.same_checksum(found, expected):
        return ""
    with contextlib.suppress(transfers.StorageError):  # the mismatch is the failure reported
        transfers.remove(url)
    return f"checksum mismatch: the copy has {found}, expected {expected}"


async def upload(
    outputs: list[OutputFile], spool: Path, endpoint: StorageEndpoint, timeout_s: float
) -> None:
    """Upload every output from `spool` to `endpoint` and check its checksum there; JobFailed
    (stage-out, naming the file and the SE, in the server's words) for the first that fails.
    The spool is emptied once every file is at the SE."""
    copies = [transfers.Copy(str(spooled(spool, f.lfn)), endpoint.url(f.lfn)) for f in outputs]
    results = await transfers.copy_files(copies, timeout_s=timeout_s)
    for output, copy, result in zip(outputs, copies, results, strict=True):
        words = result.message
        if result.ok:
            words = await asyncio.to_thread(_verified, copy.target, output.checksum)
            if not words:
                continue
        raise JobFailed(
            f"cannot stage out lfn:{output.lfn} to {endpoint.name}: {words}",
            failure=Failure(
                FailureClass.STAGE_OUT,
                words,
                lfn=output.lfn,
                storage_element=endpoint.name,
            ),
        )
    shutil.rmtree(spool, ignore_errors=True)
