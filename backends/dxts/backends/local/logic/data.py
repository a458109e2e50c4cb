"""Carrying out a data parcel's request between local storage-element directories.

The request is a DIRAC RMS body (the packer writes it on the data parcel, the backend hands it
over):
`{"Operations": [{"Type": ..., "TargetSE": ..., "SourceSE": ..., "Files": [{"LFN": ...}]}]}`,
operations in order. The local backend understands the three a data transformation uses:

* `ReplicateAndRegister` — copy each file from a local replica (`SourceSE` if given, else the
  first catalogue replica present here) to every `TargetSE`, and register the new replicas;
* `RemoveReplica` — delete each file at every `TargetSE` and forget those replicas;
* `RemoveFile` — delete every local replica of each file and forget the file.

`TargetSE`/`SourceSE` may be a comma-separated string (RMS) or a list. Every step is idempotent
(a replica already in place is not copied again, a missing one is not an error to remove), so a
request interrupted by a restart can be run again. An empty request succeeds at once.

Every operation changes the files it names (a copy registers a replica), so each must be a file
of the VO the parcel works for (`ParcelSubmission.vo`, under that VO's namespace,
`DXTS_FILES_NAMESPACE`): a request naming another VO's file, or a parcel that does not say its
VO, fails before anything is touched, in one line naming the file and whose it is. Shared
prefixes are readable by every VO, never changed by another.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dxts.backends.local.settings import LocalSettings
from dxts.backends.runner.cwl import JobFailed
from dxts.core.adaptor.model import Failure, FailureClass
from dxts.core.catalogue import FileCatalogue
from dxts.core.lfn import FileNamespace, lfn_problem


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [name.strip() for name in value.split(",") if name.strip()]
    if isinstance(value, list) and all(isinstance(name, str) for name in value):
        return value
    return []


def _lfns(operation: dict[str, Any], index: int) -> list[str]:
    files = operation.get("Files") or []
    lfns = [f.get("LFN") for f in files if isinstance(f, dict)]
    if len(lfns) != len(files):
        raise JobFailed(f'Operations[{index}].Files: each file is {{"LFN": ...}}')
    for position, lfn in enumerate(lfns):
        problem = lfn_problem(lfn)
        if problem is not None:
            raise JobFailed(f"Operations[{index}].Files[{position}].LFN {lfn!r}: {problem}")
    return lfns  # type: ignore[return-value]


def _local_ses(settings: LocalSettings, ses: Iterable[str], index: int, what: str) -> list[str]:
    names = list(ses)
    unknown = [se for se in names if se not in settings.storage_elements]
    if not names or unknown:
        raise JobFailed(
            f"Operations[{index}].{what}: {', '.join(unknown) or 'none given'} is not a storage "
            f"element of this backend ({', '.join(settings.storage_elements)})"
        )
    return names


@dataclass(frozen=True)
class VOFiles:
    """The VO a data parcel works for, and where each VO's files are."""

    vo: str
    namespace: FileNamespace

    def check(self, lfns: list[str]) -> None:
        """JobFailed unless every one of `lfns` is the VO's to change."""
        if not self.vo:
            raise JobFailed(
                "the parcel does not say which VO it works for, so it may change no file "
                "(a dispatcher older than ParcelSubmission.vo)"
            )
        refused = self.namespace.refusal(self.vo, lfns, write=True)
        if refused is not None:
            raise JobFailed(refused, failure=Failure(FailureClass.REFUSED, tool_message=refused))


async def run_request(
    request: Any, settings: LocalSettings, catalogue: FileCatalogue | None, files: VOFiles
) -> None:
    """Carry out the request, on `files.vo`'s files only; JobFailed (with what went wrong)
    when it cannot be."""
    if request in (None, {}):
        return
    operations = request.get("Operations") if isinstance(request, dict) else None
    if not isinstance(operations, list):
        raise JobFailed("the request has no Operations list")
    if not operations:
        return
    if catalogue is None:
        raise JobFailed("data requests need a file catalogue, and none is configured")
    named: list[list[str]] = []
    for index, operation in enumerate(operations):
        if not isinstance(operation, dict):
            raise JobFailed(f"Operations[{index}] is not an object")
        named.append(_lfns(operation, index))
    files.check([lfn for lfns in named for lfn in lfns])  # before anything is touched
    for index, (operation, lfns) in enumerate(zip(operations, named, strict=True)):
        kind = operation.get("Type")
        if kind == "ReplicateAndRegister":
            targets = _local_ses(settings, _names(operation.get("TargetSE")), index, "TargetSE")
            await _replicate(lfns, targets, _names(operation.get("SourceSE")), settings, catalogue)
        elif kind == "RemoveReplica":
            targets = _local_ses(settings, _names(operation.get("TargetSE")), index, "TargetSE")
            for lfn in lfns:
                for se in targets:
                    settings.se_path(se, lfn).unlink(missing_ok=True)
            await catalogue.remove_replicas({lfn: targets for lfn in lfns})
        elif kind == "RemoveFile":
            held = await catalogue.replicas(lfns)
            for lfn in lfns:
                for se in held.get(lfn, ()):
                    if se in settings.storage_elements:
                        settings.se_path(se, lfn).unlink(missing_ok=True)
            await catalogue.remove_files(lfns)
        else:
            raise JobFailed(f"Operations[{index}]: the local backend cannot do {kind!r}")


async def _replicate(
    lfns: list[str],
    targets: list[str],
    sources: list[str],
    settings: LocalSettings,
    catalogue: FileCatalogue,
) -> None:
    files = await catalogue.files(lfns)
    registrations = []
    for lfn in lfns:
        file = files.get(lfn)
        if file is None:
            raise JobFailed(f"{lfn} is not in the catalogue")
        candidates = sources or list(file.replicas)
        source = next(
            (
                settings.se_path(se, lfn)
                for se in candidates
                if se in settings.storage_elements and settings.se_path(se, lfn).is_file()
            ),
            None,
        )
        for se in targets:
            target = settings.se_path(se, lfn)
            if target.is_file() and target.stat().st_size == file.size:
                continue
            if source is None:
                raise JobFailed(f"{lfn}: no local replica to copy from ({', '.join(candidates)})")
            target.parent.mkdir(parents=True, exist_ok=True)
            await asyncio.to_thread(shutil.copyfile, source, target)
        registrations.append(file.model_copy(update={"replicas": tuple(targets)}))
    await catalogue.register(registrations)
