"""1,000 small files replicated in one production through the whole service, between two real
XRootD servers (`scripts/xrootd`), on both databases: the files, uploaded to XRD-A and
registered in the catalogue, are fed to a data member by a catalogue query (submission →
feeder → DataManagement packer → dispatcher → the local data adaptor, `dxts up`'s composition),
copied to XRD-C (streamed: XRD-C does no third-party copy) and registered there; the workgraph
reaches Completed with every input Processed once, and XRD-C, asked for each replica's adler32,
answers the one the catalogue registered, which is the bytes' own. With XRD-C configured
read-only (`XRD-C:ro`), the definition service refuses such a production at submission."""

from __future__ import annotations

import asyncio
import os
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from e2e_local import LocalWorld, running_local
from e2e_world import RC, VO, W, check_invariants, workgraph
from xrootd_servers import xrootd_environment

from dxts.core import transfers
from dxts.core.catalogue import CatalogueFile
from dxts.core.db import Database
from dxts.core.errors import InvalidArgument
from dxts.core.schema import definition
from dxts.core.storage import parse_endpoints

FILES = 1000
GROUP = 100  # files a data parcel
SOURCE, DESTINATION = "XRD-A", "XRD-C"
# Generous for a loaded two-core machine: the production takes some tens of seconds.
WITHIN_S = 300.0


def adler32(payload: bytes) -> str:
    return f"adler32:{zlib.adler32(payload):08x}"


def document(tag: str) -> dict[str, Any]:
    raw = {
        "type": {"type": "array", "items": ["File", "string"]},
        "dirac:Feeder": {
            "name": "Query",
            "args": {"conditions": {"production": tag}, "exhaust_after_pass": True},
        },
    }
    return workgraph(
        {"raw": raw},
        {},
        {},
        data_management=[
            {
                "id": "Replicate",
                "operation": "replicate",
                "files": "raw",
                "destination": DESTINATION,
                "initial_state": "Active",
                "packer": {"name": "DataManagement", "args": {"group_size": GROUP}},
            }
        ],
    )


@pytest.fixture
async def world(
    database: Database, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[LocalWorld]:
    """`dxts up`'s composition with the XRootD test servers as its grid SEs."""
    servers = xrootd_environment()["DXTS_STORAGE_ENDPOINTS"]
    monkeypatch.setenv("DXTS_STORAGE_ENDPOINTS", servers)
    async with running_local("up", database, db_url, tmp_path / "up") as running:
        yield running


@pytest.fixture
async def read_only_world(
    database: Database, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[LocalWorld]:
    """The same, XRD-C named read-only."""
    servers = xrootd_environment()["DXTS_STORAGE_ENDPOINTS"]
    monkeypatch.setenv("DXTS_STORAGE_ENDPOINTS", servers.replace("XRD-C=", "XRD-C:ro="))
    async with running_local("up", database, db_url, tmp_path / "up") as running:
        yield running


async def upload(payloads: dict[str, bytes], folder: Path) -> None:
    """Every file written to XRD-A through the XRootD client (one copy process)."""
    endpoint = parse_endpoints(xrootd_environment()["DXTS_STORAGE_ENDPOINTS"])[SOURCE]
    copies = []
    for number, (lfn, payload) in enumerate(payloads.items()):
        local = folder / f"{number}.dat"
        local.write_bytes(payload)
        copies.append(transfers.Copy(str(local), endpoint.url(lfn)))
    results = await transfers.copy_files(copies, timeout_s=120)
    failed = [r.message for r in results if not r.ok]
    assert not failed, failed[:3]


async def test_a_thousand_files_replicated_through_the_service_are_verified_at_the_destination(
    world: LocalWorld, db_url: str, tmp_path: Path
) -> None:
    tag = f"xrd-{db_url.split(':')[0].split('+')[0]}-{time.monotonic_ns()}"
    payloads = {
        f"/{VO}/xrootd-production/{tag}/f{n:04d}.dat": os.urandom(512 + n) for n in range(FILES)
    }
    folder = tmp_path / "sources"
    folder.mkdir()
    await upload(payloads, folder)
    await world.catalogue.register(
        [
            CatalogueFile(
                lfn=lfn,
                size=len(payload),
                checksum=adler32(payload),
                metadata={"production": tag},
                replicas=(SOURCE,),
            )
            for lfn, payload in payloads.items()
        ]
    )

    started = time.monotonic()
    wg = await world.submit(document(tag))
    await world.start(wg)
    await world.reach(wg, W.COMPLETED, timeout_s=WITHIN_S)
    print(f"{FILES} files replicated through the service in {time.monotonic() - started:.1f} s")
    await check_invariants(world, wg)
    seen = await world.census(wg)
    assert seen["Replicate"]["inputs"] == {"Processed": FILES}
    assert seen["Replicate"]["parcels"] == {"Done": FILES // GROUP}

    lfns = list(payloads)
    held = await world.catalogue.replicas(lfns)
    assert {lfn: set(ses) for lfn, ses in held.items()} == {
        lfn: {SOURCE, DESTINATION} for lfn in lfns
    }
    registered = await world.catalogue.files(lfns)
    assert {lfn: registered[lfn].checksum for lfn in lfns} == {
        lfn: adler32(payload) for lfn, payload in payloads.items()
    }
    endpoint = parse_endpoints(xrootd_environment()["DXTS_STORAGE_ENDPOINTS"])[DESTINATION]
    gate = asyncio.Semaphore(16)

    async def asked(lfn: str) -> str | None:
        async with gate:
            return await asyncio.to_thread(transfers.checksum, endpoint.url(lfn))

    answers = dict(zip(lfns, await asyncio.gather(*(asked(lfn) for lfn in lfns)), strict=True))
    wrong = [
        lfn
        for lfn, payload in payloads.items()
        if not transfers.same_checksum(answers[lfn] or "", adler32(payload))
    ]
    assert not wrong, [(lfn, answers[lfn]) for lfn in wrong[:3]]


async def workgraphs(world: LocalWorld) -> int:
    async with world.database.transaction(RC) as conn:
        counted = sa.select(sa.func.count()).select_from(definition.workgraphs)
        return int((await conn.execute(counted)).scalar_one())


async def test_a_production_writing_to_a_read_only_se_is_refused_at_submission(
    read_only_world: LocalWorld,
) -> None:
    """Replicating to XRD-C, removing from it, or a packer's operation doing either: each
    refused with the path of what names it; nothing is created."""
    replicate = document("never")
    remove = document("never")
    remove["hints"]["dirac:Workgraph"]["data_management"][0] |= {
        "operation": "remove",
        "storage": ["XRD-B", DESTINATION],
    }
    overridden = document("never")
    overridden["hints"]["dirac:Workgraph"]["data_management"][0] |= {
        "operation": "remove",
        "storage": "XRD-B",
        "packer": {
            "name": "DataManagement",
            "args": {"operation": {"operation": "replicate", "destination": DESTINATION}},
        },
    }
    declared = "hints.dirac:Workgraph.data_management[0]"
    before = await workgraphs(read_only_world)
    for refused, field, verb in (
        (replicate, "destination", "replicated to"),
        (remove, "storage", "removed from"),
        (overridden, "packer.args.operation.destination", "replicated to"),
    ):
        with pytest.raises(InvalidArgument) as raised:
            await read_only_world.submit(refused)
        said = str(raised.value)
        assert f"{declared}.{field}" in said, said
        assert f"XRD-C is a read-only storage element: nothing is {verb} it" in said, said
    assert await workgraphs(read_only_world) == before
