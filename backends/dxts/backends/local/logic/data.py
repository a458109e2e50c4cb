"""Carrying out a data parcel's request between storage elements: local directories
(`<storage_root>/<SE>/<LFN>`) and XRootD servers (`DXTS_STORAGE_ENDPOINTS`, docs/storage.md).

The request is a DIRAC RMS body (the packer writes it on the data parcel, the backend hands it
over):
`{"Operations": [{"Type": ..., "TargetSE": ..., "SourceSE": ..., "Files": [{"LFN": ...,
"Inputs": [input id, ...]}]}]}`, operations in order. The three a data transformation uses:

* `ReplicateAndRegister` — copy each file from a replica (`SourceSE` if given, else the
  catalogue's replicas, local ones first) to every `TargetSE`, verify the copy's adler32 against
  the catalogue's checksum (the source's when the catalogue has none), and register the new
  replicas; a copy that does not match is deleted, never registered;
* `RemoveReplica` — delete each file at every `TargetSE` and forget those replicas;
* `RemoveFile` — delete every replica of each file and forget the file.

An SE configured read-only (`NAME:ro`) is never written to or removed from: each file an
operation would copy to one, remove from one, or (`RemoveFile`) whose replicas include one,
fails as `refused` naming the SE, and nothing of it is touched.

Copies involving an XRootD SE go through `dxts.core.transfers` (third-party when both servers do
it, streamed otherwise; killed at the transfer timeout). Each file ends done or failed on its own,
in the words of whatever failed; a file that failed is left alone by the later operations (a
replica is never removed after its copy failed). Every step is idempotent (a replica already in
place with the right checksum is not copied again, a missing one is not an error to remove), so
a request interrupted by a restart can be run again. Request mistakes (no Operations, an unknown
SE or operation, a bad LFN) fail the whole parcel at once.

Every operation changes the files it names (a copy registers a replica), so each must be a file
of the VO the parcel works for (`ParcelSubmission.vo`, under that VO's namespace,
`DXTS_FILES_NAMESPACE`): a request naming another VO's file, or a parcel that does not say its
VO, fails before anything is touched, in one line naming the file and whose it is. Shared
prefixes are readable by every VO, never changed by another.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from dxts.backends.local.settings import LocalSettings
from dxts.backends.runner.failures import JobFailed
from dxts.core import transfers
from dxts.core.adaptor.model import Failure, FailureClass
from dxts.core.catalogue import CatalogueFile, FileCatalogue
from dxts.core.lfn import FileNamespace, lfn_problem

T = TypeVar("T")
SHOWN = 3  # failures quoted in a parcel's message


@dataclass(frozen=True)
class FileFailure:
    lfn: str
    failure: Failure  # its class, the SE's or the client's words, the file and the SE

    @property
    def message(self) -> str:
        return f"{self.lfn} at {self.failure.storage_element}: {self.failure.tool_message}"


@dataclass
class RequestReport:
    """Each file's fate: the files the request named (with the input ids each stands for) and
    the first failure of each file that failed."""

    inputs: dict[str, list[str]] = field(default_factory=dict)  # LFN -> input ids
    failures: dict[str, FileFailure] = field(default_factory=dict)

    def fail(self, lfn: str, kind: FailureClass, se: str, words: str) -> None:
        words = " ".join(words.split()) or "failed, without a reason"
        self.failures.setdefault(
            lfn, FileFailure(lfn, Failure(kind, words, lfn=lfn, storage_element=se))
        )

    def summary(self) -> str:
        """One line: how many files failed, and the first few in their own words."""
        if not self.failures:
            return ""
        shown = "; ".join(f.message for f in list(self.failures.values())[:SHOWN])
        more = f" (and {len(self.failures) - SHOWN} more)" if len(self.failures) > SHOWN else ""
        return f"{len(self.failures)} of {len(self.inputs)} files failed: {shown}{more}"

    def status_report(self) -> dict[str, dict[str, str]] | None:
        """The parcel's status report (docs/cwl.md) keyed by input id; None when the request
        does not say which inputs its files stand for."""
        if not all(self.inputs.values()):
            return None
        return {
            input_id: {"action": "FAILURE" if lfn in self.failures else "SUCCESS"}
            for lfn, ids in self.inputs.items()
            for input_id in ids
        }


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


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [name.strip() for name in value.split(",") if name.strip()]
    if isinstance(value, list) and all(isinstance(name, str) for name in value):
        return value
    return []


def _files(operation: dict[str, Any], index: int, report: RequestReport) -> list[str]:
    files = operation.get("Files") or []
    if not all(isinstance(f, dict) and "LFN" in f for f in files):
        raise JobFailed(f'Operations[{index}].Files: each file is {{"LFN": ...}}')
    lfns = []
    for position, entry in enumerate(files):
        lfn = entry["LFN"]
        problem = lfn_problem(lfn)
        if problem is not None:
            raise JobFailed(f"Operations[{index}].Files[{position}].LFN {lfn!r}: {problem}")
        inputs = entry.get("Inputs") or []
        if not isinstance(inputs, list) or not all(isinstance(i, str) for i in inputs):
            raise JobFailed(f"Operations[{index}].Files[{position}].Inputs: a list of input ids")
        report.inputs.setdefault(lfn, [])
        report.inputs[lfn] += [i for i in inputs if i not in report.inputs[lfn]]
        lfns.append(lfn)
    return lfns


def known_ses(settings: LocalSettings) -> list[str]:
    return [*settings.storage_elements, *settings.storage_endpoints]


def location(settings: LocalSettings, se: str, lfn: str) -> str:
    """Where the replica of `lfn` at `se` is: its root:// URL, or its local path."""
    endpoint = settings.storage_endpoints.get(se)
    return endpoint.url(lfn) if endpoint else str(settings.se_path(se, lfn))


def _ses(settings: LocalSettings, ses: Iterable[str], index: int, what: str) -> list[str]:
    names, known = list(ses), known_ses(settings)
    unknown = [se for se in names if se not in known]
    if not names or unknown:
        raise JobFailed(
            f"Operations[{index}].{what}: {', '.join(unknown) or 'none given'} is not a storage "
            f"element of this backend ({', '.join(known)})"
        )
    return names


async def run_request(
    request: Any, settings: LocalSettings, catalogue: FileCatalogue | None, files: VOFiles
) -> RequestReport:
    """Carry out the request, on `files.vo`'s files only: each file's fate in the report;
    JobFailed (with what is wrong) when the request itself cannot be carried out."""
    report = RequestReport()
    if request in (None, {}):
        return report
    operations = request.get("Operations") if isinstance(request, dict) else None
    if not isinstance(operations, list):
        raise JobFailed("the request has no Operations list")
    if not operations:
        return report
    if catalogue is None:
        raise JobFailed("data requests need a file catalogue, and none is configured")
    steps = []
    for index, operation in enumerate(operations):  # every mistake found before anything moves
        if not isinstance(operation, dict):
            raise JobFailed(f"Operations[{index}] is not an object")
        kind, lfns = operation.get("Type"), _files(operation, index, report)
        if kind in ("ReplicateAndRegister", "RemoveReplica"):
            targets = _ses(settings, _names(operation.get("TargetSE")), index, "TargetSE")
        elif kind == "RemoveFile":
            targets = []
        else:
            raise JobFailed(f"Operations[{index}]: the local backend cannot do {kind!r}")
        steps.append((kind, lfns, targets, _names(operation.get("SourceSE"))))
    files.check([lfn for step in steps for lfn in step[1]])  # before anything is touched
    for kind, lfns, targets, sources in steps:
        _refuse_read_only(kind, lfns, targets, settings, report)
        still = [lfn for lfn in lfns if lfn not in report.failures]
        if kind == "ReplicateAndRegister":
            await _replicate(still, targets, sources, settings, catalogue, report)
        elif kind == "RemoveReplica":
            await _remove_replicas(still, targets, settings, catalogue, report)
        else:
            await _remove_files(still, settings, catalogue, report)
    return report


def read_only_ses(settings: LocalSettings) -> set[str]:
    """The SEs configured read-only (`NAME:ro`, docs/storage.md)."""
    return {name for name, endpoint in settings.storage_endpoints.items() if endpoint.read_only}


def _refuse_read_only(
    kind: str, lfns: list[str], ses: list[str], settings: LocalSettings, report: RequestReport
) -> None:
    """Each file an operation would write or remove at a read-only SE fails as refused, naming
    the SE, before anything of it is touched (no copy to the other targets either: a file is
    done whole or not at all)."""
    refused = read_only_ses(settings).intersection(ses)
    verb = "written to" if kind == "ReplicateAndRegister" else "removed from"
    for se in sorted(refused):
        words = f"{se} is read-only: no replica is {verb} it"
        for lfn in lfns:
            report.fail(lfn, FailureClass.REFUSED, se, words)


async def _each(
    call: Callable[[str], T], locations: Sequence[str], parallel: int
) -> list[T | transfers.StorageError]:
    """`call` (a blocking storage call) on each location in threads, `parallel` at once; a
    StorageError is returned in its place."""
    gate = asyncio.Semaphore(parallel)
    return await asyncio.gather(*(_asked(call, where, gate) for where in locations))


async def _asked(
    call: Callable[[str], T], where: str, gate: asyncio.Semaphore
) -> T | transfers.StorageError:
    """`call(where)` in a thread once `gate` lets it; a StorageError returned, not raised."""
    async with gate:
        try:
            return await asyncio.to_thread(call, where)
        except transfers.StorageError as error:
            return error


@dataclass
class _Planned:
    lfn: str
    source_se: str
    target_se: str
    expected: str  # the checksum the copy must have
    size: int | None  # the catalogue's, when it knows it


async def _replicate(
    lfns: list[str],
    targets: list[str],
    sources: list[str],
    settings: LocalSettings,
    catalogue: FileCatalogue,
    report: RequestReport,
) -> None:
    files = await catalogue.files(lfns)
    known = known_ses(settings)
    chosen: dict[str, str] = {}
    for lfn in lfns:
        file = files.get(lfn)
        if file is None:
            report.fail(lfn, FailureClass.STAGE_IN, "", "not in the catalogue")
            continue
        candidates = [se for se in (sources or file.replicas) if se in known and se not in targets]
        # A local directory replica that is not there is no source; a server is asked by the copy.
        present = [
            se
            for se in candidates
            if se in settings.storage_endpoints or settings.se_path(se, lfn).is_file()
        ]
        if not present:
            where = ", ".join(candidates or file.replicas) or "none"
            report.fail(lfn, FailureClass.STAGE_IN, where, f"no replica to copy from ({where})")
            continue
        chosen[lfn] = sorted(present, key=lambda se: se in settings.storage_endpoints)[0]
    expected = await _expected_checksums(chosen, files, settings, report)
    plans = [
        _Planned(lfn, chosen[lfn], se, expected[lfn], files[lfn].size)
        for lfn in expected
        for se in targets
    ]
    held = await _each(
        transfers.checksum,
        [location(settings, p.target_se, p.lfn) for p in plans],
        settings.transfer_parallel,
    )
    to_copy = [
        p
        for p, there in zip(plans, held, strict=True)
        if not (isinstance(there, str) and transfers.same_checksum(there, p.expected))
    ]
    await _copy(to_copy, settings, report)
    registrations = [
        files[lfn].model_copy(update={"replicas": tuple(targets)})
        for lfn in expected
        if lfn not in report.failures
    ]
    await catalogue.register(registrations)


async def _expected_checksums(
    chosen: dict[str, str],
    files: dict[str, CatalogueFile],
    settings: LocalSettings,
    report: RequestReport,
) -> dict[str, str]:
    """The checksum each copy must have: the catalogue's, else the source replica's."""
    unknown = [lfn for lfn in chosen if not files[lfn].checksum]
    asked = await _each(
        transfers.checksum,
        [location(settings, chosen[lfn], lfn) for lfn in unknown],
        settings.transfer_parallel,
    )
    found = dict(zip(unknown, asked, strict=True))
    expected = {}
    for lfn, se in chosen.items():
        value = files[lfn].checksum or found.get(lfn)
        if isinstance(value, transfers.StorageError):
            report.fail(lfn, FailureClass.STAGE_IN, se, str(value))
        elif value is None:
            report.fail(lfn, FailureClass.STAGE_IN, se, "no such file at the source")
        else:
            expected[lfn] = value
    return expected


async def _copy(plans: list[_Planned], settings: LocalSettings, report: RequestReport) -> None:
    """Copy, then verify each copy's checksum at its destination; a copy that failed or does
    not match is deleted there (a partial or wrong replica is never left to be registered)."""
    remote, local = [], []
    for plan in plans:
        source = location(settings, plan.source_se, plan.lfn)
        target = location(settings, plan.target_se, plan.lfn)
        if transfers.is_remote(source) or transfers.is_remote(target):
            remote.append((plan, transfers.Copy(source, target, False)))
        else:
            local.append((plan, source, target))
    # Asked in a thread: a server that does not answer holds the question for its timeout.
    third_party = await asyncio.to_thread(
        lambda: [transfers.can_copy_third_party(c.source, c.target) for _, c in remote]
    )
    copies = [
        (plan, transfers.Copy(c.source, c.target, tpc))
        for (plan, c), tpc in zip(remote, third_party, strict=True)
    ]
    # Each copy's checksum is asked as soon as it ends, while the others are still copying.
    gate = asyncio.Semaphore(settings.transfer_parallel)
    asked: dict[str, asyncio.Task[str | transfers.StorageError | None]] = {}

    def ended(index: int, result: transfers.CopyResult) -> None:
        if result.ok:
            target = copies[index][1].target
            asked[target] = asyncio.create_task(_asked(transfers.checksum, target, gate))

    results = await transfers.copy_files(
        [c for _, c in copies],
        timeout_s=settings.transfer_timeout_s,
        parallel=settings.transfer_parallel,
        ended=ended,
    )
    found = {target: await task for target, task in asked.items()}
    copied = [plan for (plan, _), result in zip(copies, results, strict=True) if result.ok]
    failed = [
        (plan, copy, result)
        for (plan, copy), result in zip(copies, results, strict=True)
        if not result.ok
    ]
    for (plan, _, result), source_failed in zip(
        failed, await _source_failed(failed, settings), strict=True
    ):
        if result.timed_out:
            report.fail(plan.lfn, FailureClass.TIME_EXCEEDED, plan.target_se, result.message)
        elif source_failed:
            report.fail(plan.lfn, FailureClass.STAGE_IN, plan.source_se, result.message)
        else:
            report.fail(plan.lfn, FailureClass.STAGE_OUT, plan.target_se, result.message)
    for plan, source, target in local:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(shutil.copyfile, source, target)
        copied.append(plan)
    await _verify(copied, settings, report, found)
    await _each(  # best effort: a server that is down keeps nothing it was not sent whole
        transfers.remove,
        [location(settings, p.target_se, p.lfn) for p in plans if p.lfn in report.failures],
        settings.transfer_parallel,
    )


async def _source_failed(
    failed: list[tuple[_Planned, transfers.Copy, transfers.CopyResult]], settings: LocalSettings
) -> list[bool]:
    """Which end each failed copy failed at: the one the client's words name (`(source)`,
    `(destination)`), else the source when it no longer gives the file whole. A connection
    dropped mid-copy names neither, and a destination that died is not the source's fault."""
    unnamed = [
        copy.source
        for _, copy, result in failed
        if transfers.is_remote(copy.source)
        and not result.timed_out
        and "(source)" not in result.message
        and "(destination)" not in result.message
    ]
    sizes = iter(await _each(transfers.size, unnamed, settings.transfer_parallel))
    blamed = []
    for plan, copy, result in failed:
        if not transfers.is_remote(copy.source) or result.timed_out:
            blamed.append(False)
        elif "(source)" in result.message or "(destination)" in result.message:
            blamed.append("(source)" in result.message)
        else:
            found = next(sizes)
            blamed.append(not isinstance(found, int) or plan.size not in (None, found))
    return blamed


async def _verify(
    plans: list[_Planned],
    settings: LocalSettings,
    report: RequestReport,
    found: dict[str, str | transfers.StorageError | None],
) -> None:
    """Each copy's checksum at its destination (`found`: those asked already) against the
    one it must have."""
    targets = [location(settings, p.target_se, p.lfn) for p in plans]
    unasked = [target for target in targets if target not in found]
    answers = await _each(transfers.checksum, unasked, settings.transfer_parallel)
    found |= dict(zip(unasked, answers, strict=True))
    for plan, value in zip(plans, (found[target] for target in targets), strict=True):
        if isinstance(value, transfers.StorageError):
            report.fail(plan.lfn, FailureClass.STAGE_OUT, plan.target_se, str(value))
        elif value is None:
            report.fail(plan.lfn, FailureClass.STAGE_OUT, plan.target_se, "the copy is not there")
        elif not transfers.same_checksum(value, plan.expected):
            report.fail(
                plan.lfn,
                FailureClass.STAGE_OUT,
                plan.target_se,
                f"checksum mismatch: the copy has {value}, expected {plan.expected}",
            )


async def _remove_at(
    pairs: list[tuple[str, str]], settings: LocalSettings, report: RequestReport
) -> list[tuple[str, str]]:
    """Delete the replicas (LFN, SE); the pairs removed (or already gone)."""
    results = await _each(
        transfers.remove,
        [location(settings, se, lfn) for lfn, se in pairs],
        settings.transfer_parallel,
    )
    removed = []
    for (lfn, se), result in zip(pairs, results, strict=True):
        if isinstance(result, transfers.StorageError):
            report.fail(lfn, FailureClass.STAGE_OUT, se, str(result))
        else:
            removed.append((lfn, se))
    return removed


async def _remove_replicas(
    lfns: list[str],
    targets: list[str],
    settings: LocalSettings,
    catalogue: FileCatalogue,
    report: RequestReport,
) -> None:
    removed = await _remove_at([(lfn, se) for lfn in lfns for se in targets], settings, report)
    await catalogue.remove_replicas(_grouped(removed))


async def _remove_files(
    lfns: list[str], settings: LocalSettings, catalogue: FileCatalogue, report: RequestReport
) -> None:
    held = await catalogue.replicas(lfns)
    for lfn in lfns:  # a file with a replica at a read-only SE keeps every replica
        _refuse_read_only("RemoveFile", [lfn], list(held.get(lfn, ())), settings, report)
    lfns = [lfn for lfn in lfns if lfn not in report.failures]
    known = known_ses(settings)
    pairs = [(lfn, se) for lfn in lfns for se in held.get(lfn, ()) if se in known]
    removed = set(await _remove_at(pairs, settings, report))
    await catalogue.remove_replicas(_grouped(removed))
    await catalogue.remove_files([lfn for lfn in lfns if lfn not in report.failures])


def _grouped(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for lfn, se in pairs:
        grouped.setdefault(lfn, []).append(se)
    return grouped
