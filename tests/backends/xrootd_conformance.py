"""What the conformance suite's `local-xrootd` entries give the checks so that every check
parcel moves real bytes through the XRootD servers (`scripts/xrootd`): an input registered in a
file catalogue (on SQLite or MariaDB) with its only replica at XRD-B, a tool that copies that
input to its output, the local adaptor staging the input in from XRD-B and its output out to
XRD-A, and a `verify` that holds each succeeded check parcel to the bytes: its one output is at
XRD-A, where the server's adler32 is the input's."""

from __future__ import annotations

import asyncio
import contextlib
import time
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xrootd_servers import endpoints

from dxts.core import transfers
from dxts.core.adaptor.mapping import failure_class_from_proto
from dxts.core.adaptor.model import FailureClass
from dxts.core.catalogue import CatalogueFile, CatalogueSettings, LocalFileCatalogue
from dxts.core.storage import parse_endpoints
from dxts.v1 import common_pb2

SOURCE_SE, OUTPUT_SE = "XRD-B", "XRD-A"
PAYLOAD = bytes(range(256)) * 4096 + b"the conformance check's input\n"  # 1 MiB and a line
# Copies its input to its output, then sleeps as long as the check asks.
STAGE = {
    "class": "CommandLineTool",
    "cwlVersion": "v1.2",
    "baseCommand": ["sh", "-c", 'cp "$0" copied.dat && sleep "$1"'],
    "inputs": {
        "data": {"type": "File", "inputBinding": {"position": 1}},
        "seconds": {"type": "int", "inputBinding": {"position": 2}},
    },
    "outputs": {"copied": {"type": "File", "outputBinding": {"glob": "copied.dat"}}},
}


def adler32(payload: bytes) -> str:
    return f"adler32:{zlib.adler32(payload):08x}"


@dataclass
class Staging:
    """The input the check parcels stage in, and the outcomes `verify` found moved bytes."""

    catalogue: LocalFileCatalogue
    lfn: str
    verified: list[str] = field(default_factory=list)  # the outputs checked at XRD-A

    @property
    def inputs(self) -> dict[str, Any]:
        return {"data": {"class": "File", "location": f"lfn:{self.lfn}"}}

    async def verify(self, outcome: common_pb2.Outcome) -> str | None:
        """A succeeded parcel's output is the input's bytes at XRD-A (the server says so); a
        failed one failed as the checks make parcels fail (the tool-failure check's tool, the
        restart check's kill), never in staging."""
        if outcome.result == common_pb2.OUTCOME_RESULT_FAILED:
            kind = failure_class_from_proto(outcome.failure.failure_class)
            if kind not in (FailureClass.APPLICATION_ERROR, FailureClass.KILLED):
                return f"failed as {kind.value}: {outcome.message}"
            return None
        if outcome.result != common_pb2.OUTCOME_RESULT_SUCCEEDED:
            return None
        if len(outcome.outputs) != 1:
            return f"{len(outcome.outputs)} outputs, not the one copied file"
        (output,) = outcome.outputs
        expected = adler32(PAYLOAD)
        if output.storage_element != OUTPUT_SE or output.checksum != expected:
            return f"output {output.lfn} at {output.storage_element} {output.checksum}"
        url = parse_endpoints(endpoints())[OUTPUT_SE].url(output.lfn)
        held = await asyncio.to_thread(transfers.checksum, url)
        if held is None or not transfers.same_checksum(held, expected):
            return f"{url} holds {held}, not the input's {expected}"
        self.verified.append(url)
        return None


async def staged_input(url: str, scratch: Path) -> Staging:
    """A catalogue on `url` knowing one file, uploaded to XRD-B through the XRootD client."""
    catalogue = LocalFileCatalogue(CatalogueSettings(url=url))
    await catalogue.start()
    lfn = f"/dxts/adaptor-check/inputs/{time.monotonic_ns()}.dat"
    local = scratch / "input.dat"
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(PAYLOAD)
    target = parse_endpoints(endpoints())[SOURCE_SE].url(lfn)
    (copied,) = await transfers.copy_files([transfers.Copy(str(local), target)], timeout_s=60)
    assert copied.ok, copied.message
    await catalogue.register(
        [
            CatalogueFile(
                lfn=lfn, size=len(PAYLOAD), checksum=adler32(PAYLOAD), replicas=(SOURCE_SE,)
            )
        ]
    )
    return Staging(catalogue, lfn)


@contextlib.asynccontextmanager
async def staging(url: str, scratch: Path) -> AsyncIterator[Staging]:
    """The input staged for the whole run of the checks (the catalogue closed afterwards)."""
    staged = await staged_input(url, scratch)
    try:
        yield staged
    finally:
        await staged.catalogue.close()
