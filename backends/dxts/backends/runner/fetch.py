"""Staging `lfn:` inputs that only an XRootD SE holds: fetched into the job's folder with the
XRootD client (`dxts.core.transfers`, killed at the transfer timeout) and checked against the
catalogue's adler32 before the job sees them."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dxts.backends.runner.failures import JobFailed
from dxts.backends.runner.settings import Storage
from dxts.core import transfers
from dxts.core.adaptor.model import Failure, FailureClass
from dxts.core.catalogue import FileCatalogue
from dxts.core.storage import StorageEndpoint


async def fetch(
    remote: dict[str, str],
    endpoints: dict[str, StorageEndpoint],
    catalogue: FileCatalogue,
    into: Path,
    settings: Storage,
) -> dict[str, Path]:
    """Copy each LFN from its XRootD SE into `into/<LFN>`, all at once; JobFailed (stage-in,
    naming the file and the SE, in the server's words) for the first that fails or whose
    adler32 is not the catalogue's."""
    known = await catalogue.files(list(remote))
    paths = {lfn: into / lfn.lstrip("/") for lfn in remote}
    copies = [transfers.Copy(endpoints[se].url(lfn), str(paths[lfn])) for lfn, se in remote.items()]
    results = await transfers.copy_files(
        copies, timeout_s=getattr(settings, "transfer_timeout_s", 900.0)
    )
    for (lfn, se), result in zip(remote.items(), results, strict=True):
        words = result.message
        if result.ok:
            expected = known[lfn].checksum if lfn in known else None
            found = await asyncio.to_thread(transfers.adler32_of, paths[lfn])
            if not expected or transfers.same_checksum(found, expected):
                continue
            words = f"checksum mismatch: the copy has {found}, the catalogue says {expected}"
        raise JobFailed(
            f"cannot stage lfn:{lfn} from {se}: {words}",
            failure=Failure(FailureClass.STAGE_IN, words, lfn=lfn, storage_element=se),
        )
    return paths
