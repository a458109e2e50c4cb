"""What the conformance suite's `local-data-xrootd` entries give the checks: the local data
adaptor (`local-data`, kind DATA) with the XRootD servers as its SEs, and check parcels that are
real replications between them, their files registered in a file catalogue (on SQLite or
MariaDB):

* quick: a fresh 256 KiB file at XRD-B replicated to XRD-A (third-party) or XRD-C (streamed:
  XRD-C does no TPC), in turn;
* long: a fresh 1 GiB file at SLOW-A, a server of the entry's own serving 1 MiB a second (the
  XrdThrottle plugin; `private_servers`), replicated to XRD-C: a real copy that would take about
  twenty minutes (24 MiB arrived in its first 30 s), stopped by the checks' Cancel or restart;
* failing: a file the catalogue knows at XRD-B that is not there (stage-in at XRD-B, in the
  server's words) and a corrupted one (stage-out at XRD-C: the copy's checksum, as XRD-C gives
  it, is not the catalogue's).

`verify` holds every outcome to the bytes: a succeeded parcel's replica is at its target, where
the server's adler32 is the file's, and registered there; a failed or cancelled one left nothing
there and registered nothing (`settle`, when the checks are done, looks at the long ones)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import time
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from xrootd_servers import PrivateServers, data_path, endpoints, hollow, place

from dxts.cli.conformance_data import DataFailure, DataParcels
from dxts.core import transfers
from dxts.core.catalogue import CatalogueFile, CatalogueSettings, LocalFileCatalogue
from dxts.core.storage import StorageEndpoint, parse_endpoints
from dxts.v1 import common_pb2

VO = "dxts"  # the LFNs are under /dxts/, this VO's namespace
SOURCE_SE, TARGETS, SLOW_SE, LONG_TARGET = "XRD-B", ("XRD-A", "XRD-C"), "SLOW-A", "XRD-C"
THROTTLE = 1 << 20  # bytes a second SLOW-A serves
LONG_SIZE = 1 << 30  # a file SLOW-A takes about twenty minutes to give whole
QUICK_SIZE = 256 << 10
GONE_WITHIN_S = 30.0  # a killed streamed copy's partial file is dropped by the server (POSC)


def adler32(payload: bytes) -> str:
    return f"adler32:{zlib.adler32(payload):08x}"


def zeros_adler32(size: int) -> str:
    value, chunk = 1, bytes(1 << 20)
    for _ in range(size // len(chunk)):
        value = zlib.adler32(chunk, value)
    return f"adler32:{zlib.adler32(bytes(size % len(chunk)), value):08x}"


def replicate(lfn: str, target: str, input_id: str) -> str:
    files = [{"LFN": lfn, "Inputs": [input_id]}]
    return json.dumps(
        {"Operations": [{"Type": "ReplicateAndRegister", "TargetSE": target, "Files": files}]}
    )


@dataclass
class DataChecks:
    """The entry's catalogue and SEs, and every check parcel's file (what `verify` holds each
    outcome to)."""

    catalogue: LocalFileCatalogue
    slow: PrivateServers
    run: str  # the LFN folder of this entry's files
    endpoints: dict[str, StorageEndpoint] = field(default_factory=dict)
    made: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # input -> LFN, SE, sum
    failing: dict[str, str] = field(default_factory=dict)  # LFN -> its copy's target SE
    long: list[str] = field(default_factory=list)
    verified: list[str] = field(default_factory=list)  # replicas checked at their server
    counter: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def parcels(self) -> DataParcels:
        return DataParcels(VO, self.quick, self.long_copy, self.failing_copies)

    @property
    def settings_endpoints(self) -> dict[str, str]:
        slow = f"root://127.0.0.1:{self.slow.first_port}//slow"
        return {**endpoints(), SLOW_SE: slow}

    def on_disk(self, se: str, lfn: str) -> Any:
        url_path = self.endpoints[se].path(lfn)
        return self.slow.data("A", url_path) if se == SLOW_SE else data_path(se, url_path)

    async def registered(self, lfn: str, payload: bytes | int, se: str, checksum: str) -> None:
        size = payload if isinstance(payload, int) else len(payload)
        await self.catalogue.register(
            [CatalogueFile(lfn=lfn, size=size, checksum=checksum, replicas=(se,))]
        )

    async def quick(self) -> str:
        n = next(self.counter)
        lfn, target, payload = f"{self.run}/quick-{n}.dat", TARGETS[n % 2], os.urandom(QUICK_SIZE)
        place(self.on_disk(SOURCE_SE, lfn), payload)
        await self.registered(lfn, payload, SOURCE_SE, adler32(payload))
        self.made[f"quick-{n}"] = (lfn, target, adler32(payload))
        return replicate(lfn, target, f"quick-{n}")

    async def long_copy(self) -> str:
        n = next(self.counter)
        lfn = f"{self.run}/long-{n}.dat"
        hollow(self.on_disk(SLOW_SE, lfn), LONG_SIZE)
        await self.registered(lfn, LONG_SIZE, SLOW_SE, zeros_adler32(LONG_SIZE))
        self.long.append(lfn)
        return replicate(lfn, LONG_TARGET, f"long-{n}")

    async def failing_copies(self) -> list[DataFailure]:
        n = next(self.counter)
        missing, corrupted = f"{self.run}/missing-{n}.dat", f"{self.run}/corrupted-{n}.dat"
        good, bad = b"the bytes the catalogue knows\n" * 99, b"the bytes XRD-B holds\n" * 99
        await self.registered(missing, good, SOURCE_SE, adler32(good))
        place(self.on_disk(SOURCE_SE, corrupted), bad)
        await self.registered(corrupted, good, SOURCE_SE, adler32(good))
        self.failing |= {missing: "XRD-A", corrupted: "XRD-C"}
        where = self.endpoints[SOURCE_SE].path(missing)
        return [
            DataFailure(
                replicate(missing, "XRD-A", f"missing-{n}"),
                common_pb2.FAILURE_CLASS_STAGE_IN,
                missing,
                SOURCE_SE,
                f"[3011] Unable to open {where}; no such file or directory",
            ),
            DataFailure(
                replicate(corrupted, "XRD-C", f"corrupted-{n}"),
                common_pb2.FAILURE_CLASS_STAGE_OUT,
                corrupted,
                "XRD-C",
                f"checksum mismatch: the copy has {adler32(bad)}, expected {adler32(good)}",
            ),
        ]

    async def held(self, se: str, lfn: str) -> str | None:
        """The checksum of the copy at `se`; None when there is none; the server's words when
        it cannot say (a copy still being written is busy)."""
        try:
            return await asyncio.to_thread(transfers.checksum, self.endpoints[se].url(lfn))
        except transfers.StorageError as error:
            return str(error)

    async def verify(self, outcome: common_pb2.Outcome) -> str | None:
        """What is wrong with a check parcel's outcome, by its files at the servers and in the
        catalogue; None when nothing is."""
        if outcome.result == common_pb2.OUTCOME_RESULT_SUCCEEDED:
            report = json.loads(outcome.status_report_json or "{}")
            if not report or any(report[i] != {"action": "SUCCESS"} for i in report):
                return f"succeeded with the status report {report}"
            for input_id in report:
                if input_id not in self.made:
                    return f"{input_id}: a transfer that cannot end soon succeeded"
                problem = await self.replicated(*self.made[input_id])
                if problem:
                    return problem
            return None
        if outcome.result == common_pb2.OUTCOME_RESULT_FAILED:
            failure = outcome.failure
            if failure.lfn in self.failing:
                return await self.left_nothing(failure.lfn, self.failing[failure.lfn])
            if failure.failure_class != common_pb2.FAILURE_CLASS_KILLED:  # by the restart
                return f"failed as the checks do not make it: {outcome.message}"
        return None

    async def replicated(self, lfn: str, target: str, checksum: str) -> str | None:
        held = await self.held(target, lfn)
        if held is None or not transfers.same_checksum(held, checksum):
            return f"{lfn} at {target}: the server holds {held}, not {checksum}"
        replicas = (await self.catalogue.replicas([lfn])).get(lfn, ())
        if target not in replicas:
            return f"{lfn}: {target} not registered (replicas {replicas})"
        self.verified.append(self.endpoints[target].url(lfn))
        return None

    async def left_nothing(self, lfn: str, target: str) -> str | None:
        """None once `target` holds no copy of `lfn` (a partial one is dropped by the server
        when its writer is gone) and the catalogue no replica there."""
        replicas = (await self.catalogue.replicas([lfn])).get(lfn, ())
        if target in replicas:
            return f"{lfn}: a replica at {target} registered by a copy that did not end"
        deadline = time.monotonic() + GONE_WITHIN_S
        while (held := await self.held(target, lfn)) is not None:
            if time.monotonic() > deadline:
                return f"{lfn}: {target} still holds a copy ({held}) that never ended"
            await asyncio.sleep(0.2)
        return None

    async def settle(self) -> list[str]:
        """What is wrong with the long copies, once every check is done: none may have left a
        replica or a registration at its target."""
        found = [await self.left_nothing(lfn, LONG_TARGET) for lfn in self.long]
        return [problem for problem in found if problem]


@contextlib.asynccontextmanager
async def data_checks(url: str, slow: PrivateServers) -> AsyncIterator[DataChecks]:
    """The checks' files for one entry (its catalogue on `url`, closed afterwards); fails the
    entry when a long copy left something behind or no replica was checked at all."""
    catalogue = LocalFileCatalogue(CatalogueSettings(url=url))
    await catalogue.start()
    checks = DataChecks(catalogue, slow, f"/{VO}/adaptor-check/data/{time.monotonic_ns()}")
    checks.endpoints = dict(parse_endpoints(checks.settings_endpoints))
    try:
        yield checks
        assert checks.long, "no long copy was made"
        problems = await checks.settle()
        assert not problems, "; ".join(problems)
        assert checks.verified, "no check parcel's replica was verified at its server"
    finally:
        await catalogue.close()
