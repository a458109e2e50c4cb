"""An SE over HTTP/WebDAV (XRD-A's XrdHttp, `scripts/xrootd`; plain http://, the same code as
davs:// without TLS) against the real servers, on both catalogue databases: replication to and
from it (streamed through the adaptor's copy process), each copy's adler32 asked of the server
with `Want-Digest` before it is registered, a corrupted source refused, a missing one failed in
the server's words, removal, and a job's outputs staged out to it and inputs fetched from it."""

from __future__ import annotations

import asyncio
import shutil
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx
import pytest
from xrootd_servers import data_path, endpoints, http_server

from dxts.backends.local.logic import data
from dxts.backends.local.settings import LocalSettings
from dxts.backends.runner import fetch, stage_out
from dxts.core import transfers
from dxts.core.adaptor.model import FailureClass, OutputFile
from dxts.core.catalogue import CatalogueFile, CatalogueSettings, LocalFileCatalogue
from dxts.core.lfn import FileNamespace

LHCB = data.VOFiles("lhcb", FileNamespace())
DAV = "DAV-A"  # XRD-A's files under /dxts/dav, over HTTP


@pytest.fixture(scope="module")
async def catalogue(db_url: str) -> AsyncIterator[LocalFileCatalogue]:
    catalogue = LocalFileCatalogue(CatalogueSettings(url=db_url))
    await catalogue.start()
    try:
        yield catalogue
    finally:
        await catalogue.close()


@pytest.fixture
def settings(tmp_path: Path) -> LocalSettings:
    return LocalSettings(
        work_dir=tmp_path / "work",
        storage_elements=["LOCAL"],
        storage_endpoints={**endpoints(), DAV: f"{http_server()}/dxts/dav"},
        transfer_timeout_s=60,
    )


def adler32(payload: bytes) -> str:
    return f"adler32:{zlib.adler32(payload):08x}"


def on_disk(settings: LocalSettings, se: str, lfn: str) -> Path:
    """The file behind a replica: DAV-A's are XRD-A's."""
    return data_path("XRD-A" if se == DAV else se, settings.storage_endpoints[se].path(lfn))


def put(settings: LocalSettings, se: str, lfn: str, payload: bytes) -> None:
    path = on_disk(settings, se, lfn)
    missing = [p for p in [path.parent, *path.parent.parents] if not p.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    for made in [path, *missing]:
        shutil.chown(made, "xrootd", "xrootd")


def replicate(lfns: list[str], *targets: str) -> dict[str, object]:
    files = [{"LFN": lfn, "Inputs": [f"input-{lfn}"]} for lfn in lfns]
    return {
        "Operations": [{"Type": "ReplicateAndRegister", "TargetSE": list(targets), "Files": files}]
    }


def run_dir(db_url: str, what: str) -> str:
    return f"/lhcb/http/{db_url.split(':')[0]}/{what}-{time.monotonic_ns()}"


async def test_replication_to_and_from_an_http_se_is_verified_and_registered(
    settings: LocalSettings, catalogue: LocalFileCatalogue, db_url: str
) -> None:
    """XRD-B (root://) -> DAV-A (http://) -> XRD-C and LOCAL: every copy streamed, every
    replica's adler32 the catalogue's; the server's digest over HTTP agrees."""
    run = run_dir(db_url, "replicate")
    files = {f"{run}/f{n}": bytes([n]) * 3_000_000 + f"{n}".encode() for n in range(3)}
    for lfn, payload in files.items():
        put(settings, "XRD-B", lfn, payload)
    await catalogue.register(
        [
            CatalogueFile(lfn=lfn, size=len(p), checksum=adler32(p), replicas=("XRD-B",))
            for lfn, p in files.items()
        ]
    )
    report = await data.run_request(replicate(list(files), DAV), settings, catalogue, LHCB)
    assert report.failures == {}
    for lfn, payload in files.items():
        assert on_disk(settings, DAV, lfn).read_bytes() == payload
        url = settings.storage_endpoints[DAV].url(lfn)
        assert url.startswith("http://")
        asked = await asyncio.to_thread(httpx.head, url, headers={"Want-Digest": "adler32"})
        digest = asked.headers["Digest"]
        assert transfers.same_checksum(digest.replace("=", ":"), adler32(payload))
    request = {
        "Operations": [
            {
                "Type": "ReplicateAndRegister",
                "SourceSE": DAV,
                "TargetSE": ["XRD-C", "LOCAL"],
                "Files": [{"LFN": lfn, "Inputs": [f"input-{lfn}"]} for lfn in files],
            }
        ]
    }
    report = await data.run_request(request, settings, catalogue, LHCB)
    assert report.failures == {}
    for lfn, payload in files.items():
        assert on_disk(settings, "XRD-C", lfn).read_bytes() == payload
        assert settings.se_path("LOCAL", lfn).read_bytes() == payload
    held = await catalogue.replicas(list(files))
    assert {lfn: set(ses) for lfn, ses in held.items()} == {
        lfn: {"XRD-B", DAV, "XRD-C", "LOCAL"} for lfn in files
    }

    removal = {
        "Operations": [
            {"Type": "RemoveReplica", "TargetSE": DAV, "Files": request["Operations"][0]["Files"]}
        ]
    }  # type: ignore[index]
    assert (await data.run_request(removal, settings, catalogue, LHCB)).failures == {}
    assert not any(on_disk(settings, DAV, lfn).exists() for lfn in files)
    assert all(DAV not in ses for ses in (await catalogue.replicas(list(files))).values())


async def test_a_corrupted_or_missing_http_source_fails_its_file(
    settings: LocalSettings, catalogue: LocalFileCatalogue, db_url: str
) -> None:
    run = run_dir(db_url, "bad")
    rotten, gone = f"{run}/rotten", f"{run}/gone"
    good = b"what the catalogue knows\n" * 50
    put(settings, DAV, rotten, b"bit rot\n" * 60)
    await catalogue.register(
        [
            CatalogueFile(lfn=rotten, size=len(good), checksum=adler32(good), replicas=(DAV,)),
            CatalogueFile(lfn=gone, size=5, checksum=adler32(b"gone\n"), replicas=(DAV,)),
        ]
    )
    report = await data.run_request(replicate([rotten, gone], "XRD-B"), settings, catalogue, LHCB)
    mismatch = report.failures[rotten].failure
    assert (mismatch.failure_class, mismatch.storage_element) == (FailureClass.STAGE_OUT, "XRD-B")
    assert mismatch.tool_message.startswith("checksum mismatch: the copy has ")
    assert not on_disk(settings, "XRD-B", rotten).exists()
    missing = report.failures[gone].failure
    assert (missing.failure_class, missing.storage_element) == (FailureClass.STAGE_IN, DAV)
    assert missing.tool_message.startswith("HTTP 404 Not Found: Unable to open ")
    assert missing.tool_message.endswith("(source)")
    assert await catalogue.replicas([rotten, gone]) == {rotten: (DAV,), gone: (DAV,)}


async def test_a_job_stages_out_to_and_in_from_an_http_se(
    settings: LocalSettings, catalogue: LocalFileCatalogue, db_url: str, tmp_path: Path
) -> None:
    """A job's output uploaded to DAV-A (checked by the server's digest), then fetched back as
    the next job's `lfn:` input and checked against the catalogue."""
    lfn = f"{run_dir(db_url, 'job')}/out.dat"
    payload = b"an output\n" * 10_000
    spool = tmp_path / "spool"
    stage_out.spooled(spool, lfn).parent.mkdir(parents=True)
    stage_out.spooled(spool, lfn).write_bytes(payload)
    output = OutputFile("out", lfn, len(payload), adler32(payload), DAV)
    await stage_out.upload([output], spool, settings.storage_endpoints[DAV], timeout_s=60)
    assert on_disk(settings, DAV, lfn).read_bytes() == payload
    await catalogue.register(
        [CatalogueFile(lfn=lfn, size=len(payload), checksum=adler32(payload), replicas=(DAV,))]
    )
    into = tmp_path / "job"
    into.mkdir()
    staged = await fetch.stage(
        {"data": {"class": "File", "location": f"lfn:{lfn}"}}, settings, catalogue, into
    )
    fetched = Path(unquote(urlsplit(staged["data"]["location"]).path))
    assert await asyncio.to_thread(fetched.read_bytes) == payload
