"""Staging `lfn:` inputs (`stage`): each at a replica in a local directory SE or, when only an
XRootD SE holds it, fetched into the job's folder with the XRootD client (`dxts.core.transfers`,
killed at the transfer timeout) and checked against the catalogue's adler32 before the job sees
them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

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
                _passable(paths[lfn], into)
                continue
            words = f"checksum mismatch: the copy has {found}, the catalogue says {expected}"
        raise JobFailed(
            f"cannot stage lfn:{lfn} from {se}: {words}",
            failure=Failure(FailureClass.STAGE_IN, words, lfn=lfn, storage_element=se),
        )
    return paths


def _passable(path: Path, into: Path) -> None:
    """The folders from `into` down to a fetched file 0711, as the sandbox makes a mount
    point's parents: a job run as another user passes through them to the file it is shown
    there (`sandbox`: the file itself, or a copy it may read, bound at its path) but lists
    none of them."""
    for folder in reversed(path.relative_to(into).parents):  # `.` (into itself) first
        (into / folder).chmod(0o711)


def endpoints_of(settings: Storage) -> dict[str, StorageEndpoint]:
    """The XRootD SEs the settings name (none for settings that know only directories)."""
    return getattr(settings, "storage_endpoints", {})


async def stage(
    value: Any, settings: Storage, catalogue: FileCatalogue | None, into: Path | None = None
) -> Any:
    """The input object with every `lfn:` File at a local replica (else one fetched `into` a
    folder from an XRootD SE, `fetch`)."""
    wanted: set[str] = set()

    def collect(item: Any) -> None:
        if isinstance(item, dict):
            if item.get("class") == "File":
                location = item.get("location") or item.get("path") or ""
                if isinstance(location, str) and location.startswith("lfn:"):
                    wanted.add(location.removeprefix("lfn:"))
            for child in item.values():
                collect(child)
        elif isinstance(item, list):
            for child in item:
                collect(child)

    collect(value)
    if not wanted:
        return value
    if catalogue is None:
        raise JobFailed("lfn: inputs need a file catalogue, and none is configured")
    replicas = await catalogue.replicas(sorted(wanted))
    local: dict[str, Path] = {}
    remote: dict[str, str] = {}  # LFN -> the XRootD SE to fetch it from (into is set)
    endpoints = endpoints_of(settings)
    for lfn in sorted(wanted):
        for se in replicas.get(lfn, ()):
            if se in settings.storage_elements and settings.se_path(se, lfn).is_file():
                local[lfn] = settings.se_path(se, lfn)
                break
        else:
            fetchable = [se for se in replicas.get(lfn, ()) if se in endpoints]
            if fetchable and into is not None:
                remote[lfn] = fetchable[0]
                continue
            where = ", ".join([*settings.storage_elements, *endpoints])
            raise JobFailed(
                f"cannot stage lfn:{lfn}: no replica at {where} "
                f"(catalogue replicas: {', '.join(replicas.get(lfn, ())) or 'none'})",
                failure=Failure(FailureClass.STAGE_IN, lfn=lfn, storage_element=where),
            )
    local |= await fetch(remote, endpoints, catalogue, into, settings) if into else {}

    def rewrite(item: Any) -> Any:
        if isinstance(item, dict):
            out = {key: rewrite(child) for key, child in item.items()}
            location = item.get("location") or item.get("path") or ""
            if item.get("class") == "File" and str(location).startswith("lfn:"):
                out.pop("path", None)
                out["location"] = local[str(location).removeprefix("lfn:")].as_uri()
            return out
        if isinstance(item, list):
            return [rewrite(child) for child in item]
        return item

    return rewrite(value)
