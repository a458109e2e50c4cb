"""The local data adaptor's requests against real XRootD servers (`scripts/xrootd`), on both
catalogue databases: third-party and streamed copies verified by adler32 before they are
registered, a corrupted source refused, a missing source and a dead or silent server each a
failed file in the words of what failed, removal, and the timeout holding."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from xrootd_servers import PrivateServers, data_path, endpoints, place, private_servers

from dxts.backends.local.logic import data
from dxts.backends.local.settings import LocalSettings
from dxts.core import transfers
from dxts.core.adaptor.model import FailureClass
from dxts.core.catalogue import CatalogueFile, CatalogueSettings, LocalFileCatalogue
from dxts.core.lfn import FileNamespace

LHCB = data.VOFiles("lhcb", FileNamespace())  # every file here is under /lhcb/


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
        storage_endpoints=endpoints(),
        transfer_timeout_s=60,
    )


def adler32(payload: bytes) -> str:
    return f"adler32:{zlib.adler32(payload):08x}"


def put(settings: LocalSettings, se: str, lfn: str, payload: bytes) -> None:
    """A replica placed on the server's disk directly, as another site's upload would."""
    place(data_path(se, settings.storage_endpoints[se].path(lfn)), payload)


def on_disk(settings: LocalSettings, se: str, lfn: str) -> Path:
    return data_path(se, settings.storage_endpoints[se].path(lfn))


def replicate(lfns: list[str], *targets: str, source: str = "") -> dict[str, object]:
    step: dict[str, object] = {
        "Type": "ReplicateAndRegister",
        "TargetSE": list(targets),
        "Files": [{"LFN": lfn, "Inputs": [f"input-{lfn}"]} for lfn in lfns],
    }
    if source:
        step["SourceSE"] = source
    return {"Operations": [step]}


async def test_replicas_are_copied_verified_and_registered(
    settings: LocalSettings, catalogue: LocalFileCatalogue, db_url: str
) -> None:
    """XRD-A -> XRD-B is a third-party copy, XRD-A -> XRD-C streams (C does no TPC), and a
    local directory SE takes part as well; each copy's checksum is the catalogue's."""
    run = f"/lhcb/xfer/{db_url.split(':')[0]}/{time.monotonic_ns()}"
    files = {f"{run}/f{n}": os.urandom(50_000 + n) for n in range(3)}
    for lfn, payload in files.items():
        put(settings, "XRD-A", lfn, payload)
    await catalogue.register(
        [
            CatalogueFile(lfn=lfn, size=len(p), checksum=adler32(p), replicas=("XRD-A",))
            for lfn, p in files.items()
        ]
    )
    assert transfers.can_copy_third_party(
        settings.storage_endpoints["XRD-A"].url("/x"), settings.storage_endpoints["XRD-B"].url("/x")
    )
    assert not transfers.can_copy_third_party(
        settings.storage_endpoints["XRD-A"].url("/x"), settings.storage_endpoints["XRD-C"].url("/x")
    )
    report = await data.run_request(
        replicate(list(files), "XRD-B", "XRD-C", "LOCAL"), settings, catalogue, LHCB
    )
    assert report.failures == {}
    assert report.status_report() == {f"input-{lfn}": {"action": "SUCCESS"} for lfn in files}
    for lfn, payload in files.items():
        assert on_disk(settings, "XRD-B", lfn).read_bytes() == payload
        assert on_disk(settings, "XRD-C", lfn).read_bytes() == payload
        assert settings.se_path("LOCAL", lfn).read_bytes() == payload
        url = settings.storage_endpoints["XRD-B"].url(lfn)
        assert transfers.same_checksum(transfers.checksum(url) or "", adler32(payload))
    held = await catalogue.replicas(list(files))
    assert {lfn: set(ses) for lfn, ses in held.items()} == {
        lfn: {"XRD-A", "XRD-B", "XRD-C", "LOCAL"} for lfn in files
    }
    again = await data.run_request(replicate(list(files), "XRD-B"), settings, catalogue, LHCB)
    assert again.failures == {}


async def test_a_corrupted_source_is_refused_and_nothing_is_registered(
    settings: LocalSettings, catalogue: LocalFileCatalogue, db_url: str
) -> None:
    lfn = f"/lhcb/xfer/{db_url.split(':')[0]}/corrupt-{time.monotonic_ns()}"
    good, bad = b"the content the catalogue knows\n" * 100, b"bit rot\n" * 400
    put(settings, "XRD-A", lfn, bad)
    await catalogue.register(
        [CatalogueFile(lfn=lfn, size=len(good), checksum=adler32(good), replicas=("XRD-A",))]
    )
    report = await data.run_request(replicate([lfn], "XRD-B"), settings, catalogue, LHCB)
    failure = report.failures[lfn].failure
    assert failure.failure_class is FailureClass.STAGE_OUT
    assert failure.storage_element == "XRD-B"
    assert f"checksum mismatch: the copy has {adler32(bad)}, expected {adler32(good)}" in (
        failure.tool_message
    )
    assert report.status_report() == {f"input-{lfn}": {"action": "FAILURE"}}
    assert not on_disk(settings, "XRD-B", lfn).exists()
    assert await catalogue.replicas([lfn]) == {lfn: ("XRD-A",)}


async def test_a_missing_source_fails_in_the_servers_words(
    settings: LocalSettings, catalogue: LocalFileCatalogue, db_url: str
) -> None:
    run = f"/lhcb/xfer/{db_url.split(':')[0]}/missing-{time.monotonic_ns()}"
    there, gone = f"{run}/there", f"{run}/gone"
    put(settings, "XRD-A", there, b"here\n")
    await catalogue.register(
        [
            CatalogueFile(lfn=there, size=5, checksum=adler32(b"here\n"), replicas=("XRD-A",)),
            CatalogueFile(lfn=gone, size=5, checksum=adler32(b"gone\n"), replicas=("XRD-A",)),
        ]
    )
    report = await data.run_request(replicate([there, gone], "XRD-B"), settings, catalogue, LHCB)
    assert list(report.failures) == [gone]
    failure = report.failures[gone].failure
    assert failure.failure_class is FailureClass.STAGE_IN
    assert failure.storage_element == "XRD-A"
    assert "[3011]" in failure.tool_message and "no such file or directory" in failure.tool_message
    assert report.summary().startswith(f"1 of 2 files failed: {gone} at XRD-A: ")
    assert set(await catalogue.replicas([there])) == {there}
    assert set((await catalogue.replicas([there]))[there]) == {"XRD-A", "XRD-B"}
    assert (await catalogue.replicas([gone]))[gone] == ("XRD-A",)


async def test_removal_deletes_replicas_and_forgets_them(
    settings: LocalSettings, catalogue: LocalFileCatalogue, db_url: str
) -> None:
    run = f"/lhcb/xfer/{db_url.split(':')[0]}/remove-{time.monotonic_ns()}"
    lfns = [f"{run}/a", f"{run}/b"]
    for lfn in lfns:
        put(settings, "XRD-A", lfn, b"a")
        put(settings, "XRD-B", lfn, b"a")
    await catalogue.register(
        [
            CatalogueFile(lfn=lfn, size=1, checksum=adler32(b"a"), replicas=("XRD-A", "XRD-B"))
            for lfn in lfns
        ]
    )
    files = [{"LFN": lfn} for lfn in lfns]
    request = {"Operations": [{"Type": "RemoveReplica", "TargetSE": "XRD-B", "Files": files}]}
    assert (await data.run_request(request, settings, catalogue, LHCB)).failures == {}
    assert not any(on_disk(settings, "XRD-B", lfn).exists() for lfn in lfns)
    assert await catalogue.replicas(lfns) == {lfn: ("XRD-A",) for lfn in lfns}
    request = {"Operations": [{"Type": "RemoveFile", "Files": files}]}
    assert (await data.run_request(request, settings, catalogue, LHCB)).failures == {}
    assert not any(on_disk(settings, "XRD-A", lfn).exists() for lfn in lfns)
    assert await catalogue.files(lfns) == {}


# -- a server that stops answering: its own servers, so the shared ones stay up ---------------


@pytest.fixture(scope="module")
def failing() -> Iterator[PrivateServers]:
    with private_servers() as servers:
        yield servers


async def test_a_silent_server_is_failed_at_the_timeout_and_nothing_kept(
    settings: LocalSettings,
    catalogue: LocalFileCatalogue,
    failing: PrivateServers,
    db_url: str,
) -> None:
    """The source server is stopped (SIGSTOP: up, but silent): the copy would wait for ever;
    it fails as timed out, the file is not registered at the target, and the request ends."""
    settings = settings.model_copy(
        update={
            "storage_endpoints": {**settings.storage_endpoints, **failing.endpoints()},
            "transfer_timeout_s": 4,
        }
    )
    lfn = f"/lhcb/xfer/{db_url.split(':')[0]}/silent-{time.monotonic_ns()}"
    payload = os.urandom(1000)
    await catalogue.register(
        [CatalogueFile(lfn=lfn, size=1000, checksum=adler32(payload), replicas=("DOOMED-A",))]
    )
    place(failing.data("A", settings.storage_endpoints["DOOMED-A"].path(lfn)), payload)
    os.kill(failing.pid("A"), signal.SIGSTOP)
    try:
        report = await data.run_request(replicate([lfn], "XRD-B"), settings, catalogue, LHCB)
    finally:
        os.kill(failing.pid("A"), signal.SIGCONT)
    assert lfn in report.failures, f"the copy from a stopped server succeeded: {report}"
    failure = report.failures[lfn].failure
    assert failure.failure_class is FailureClass.TIME_EXCEEDED
    assert failure.tool_message == "timed out after 4 s"
    assert not on_disk(settings, "XRD-B", lfn).exists()
    assert await catalogue.replicas([lfn]) == {lfn: ("DOOMED-A",)}


async def test_a_server_killed_mid_transfer_fails_the_file_with_its_reason(
    settings: LocalSettings,
    catalogue: LocalFileCatalogue,
    failing: PrivateServers,
    db_url: str,
) -> None:
    """The destination is killed while a large copy is being written to it: the file fails
    (in the client's words, or as timed out), nothing is registered there."""
    settings = settings.model_copy(
        update={
            "storage_endpoints": {**settings.storage_endpoints, **failing.endpoints()},
            "transfer_timeout_s": 60,
        }
    )
    lfn = f"/lhcb/xfer/{db_url.split(':')[0]}/killed-{time.monotonic_ns()}"
    payload = os.urandom(64 << 20)
    put(settings, "XRD-A", lfn, payload)
    await catalogue.register(
        [CatalogueFile(lfn=lfn, size=len(payload), checksum=adler32(payload), replicas=("XRD-A",))]
    )
    target = failing.data("B", settings.storage_endpoints["DOOMED-B"].path(lfn))
    running = asyncio.create_task(
        data.run_request(replicate([lfn], "DOOMED-B"), settings, catalogue, LHCB)
    )
    victim = failing.pid("B")
    assert await asyncio.to_thread(_appears, target, 60), "the copy never reached the server"
    os.kill(victim, signal.SIGKILL)
    report = await running
    restarted = await asyncio.to_thread(failing.script, "start")
    assert restarted.returncode == 0, restarted.stderr
    failure = report.failures[lfn].failure
    assert failure.failure_class in (FailureClass.STAGE_OUT, FailureClass.TIME_EXCEEDED), failure
    assert failure.storage_element == "DOOMED-B"
    assert failure.tool_message
    assert await catalogue.replicas([lfn]) == {lfn: ("XRD-A",)}


def _appears(path: Path, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.002)
    return False


def test_a_server_that_was_down_is_spoken_to_again_once_it_is_back(
    failing: PrivateServers,
) -> None:
    """A server down when asked whether it does third-party copies is streamed to for now, and
    asked again the next time; once it is back, this process's client speaks to it at once
    (the answer used to be kept for the process, and the client library fails every call to a
    server for 30 minutes after a connection error)."""
    # Named as no other test names it, so that no answer from before is kept for it.
    server = f"root://localhost:{failing.first_port + 1}"  # DOOMED-B: third-party copies on
    stopped = failing.script("stop")
    try:
        assert stopped.returncode == 0, stopped.stderr
        assert not transfers.third_party_capable(server)
        with pytest.raises(transfers.StorageError, match="Connection error"):
            transfers.checksum(f"{server}//doomed/nothing-here")
    finally:
        restarted = failing.script("start")
    assert restarted.returncode == 0, restarted.stderr
    assert transfers.checksum(f"{server}//doomed/nothing-here") is None  # the server's answer
    assert transfers.third_party_capable(server)
