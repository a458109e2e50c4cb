"""Read-only storage elements (`NAME:ro` in `DXTS_STORAGE_ENDPOINTS`) against the real XRootD
servers (`scripts/xrootd`), on both catalogue databases: read from, never a replication
destination, never a removal's target; each file a request would write or remove there fails
as `refused` naming the SE with nothing touched, and components refuse one as their output SE
when they start."""

from __future__ import annotations

import shutil
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from xrootd_servers import data_path, endpoints

from dxts.backends.local.logic import data
from dxts.backends.local.settings import LocalSettings
from dxts.backends.runner.settings import StorageElements
from dxts.cli.files import Storage
from dxts.core.adaptor.model import FailureClass
from dxts.core.catalogue import CatalogueFile, CatalogueSettings, LocalFileCatalogue
from dxts.core.errors import InvalidArgument
from dxts.core.lfn import FileNamespace
from dxts.core.storage import parse_endpoints

LHCB = data.VOFiles("lhcb", FileNamespace())
READ_ONLY = "XRD-C"


@pytest.fixture(scope="module")
async def catalogue(db_url: str) -> AsyncIterator[LocalFileCatalogue]:
    catalogue = LocalFileCatalogue(CatalogueSettings(url=db_url))
    await catalogue.start()
    try:
        yield catalogue
    finally:
        await catalogue.close()


def read_only_endpoints() -> dict[str, str]:
    """The test servers, XRD-C named read-only."""
    return {(f"{se}:ro" if se == READ_ONLY else se): url for se, url in endpoints().items()}


@pytest.fixture
def settings(tmp_path: Path) -> LocalSettings:
    return LocalSettings(
        work_dir=tmp_path / "work",
        storage_elements=["LOCAL"],
        storage_endpoints=read_only_endpoints(),
        transfer_timeout_s=60,
    )


def adler32(payload: bytes) -> str:
    return f"adler32:{zlib.adler32(payload):08x}"


def on_disk(settings: LocalSettings, se: str, lfn: str) -> Path:
    return data_path(se, settings.storage_endpoints[se].path(lfn))


def put(settings: LocalSettings, se: str, lfn: str, payload: bytes) -> None:
    """A replica placed on the server's disk directly, owned by the server."""
    path = on_disk(settings, se, lfn)
    missing = [p for p in [path.parent, *path.parent.parents] if not p.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    for made in [path, *missing]:
        shutil.chown(made, "xrootd", "xrootd")


async def registered(
    catalogue: LocalFileCatalogue, settings: LocalSettings, lfn: str, payload: bytes, *ses: str
) -> None:
    for se in ses:
        put(settings, se, lfn, payload)
    await catalogue.register(
        [CatalogueFile(lfn=lfn, size=len(payload), checksum=adler32(payload), replicas=ses)]
    )


def request(kind: str, lfns: list[str], *targets: str) -> dict[str, object]:
    step: dict[str, object] = {
        "Type": kind,
        "Files": [{"LFN": lfn, "Inputs": [f"input-{lfn}"]} for lfn in lfns],
    }
    if targets:
        step["TargetSE"] = list(targets)
    return {"Operations": [step]}


def run_dir(db_url: str, what: str) -> str:
    return f"/lhcb/readonly/{db_url.split(':')[0]}/{what}-{time.monotonic_ns()}"


async def test_a_read_only_se_is_a_source_but_never_a_destination(
    settings: LocalSettings, catalogue: LocalFileCatalogue, db_url: str
) -> None:
    """Replicating to XRD-B and the read-only XRD-C fails every file as refused, naming XRD-C,
    and copies nothing (not even to XRD-B); from XRD-C to XRD-B the copy is made."""
    run = run_dir(db_url, "replicate")
    files = {f"{run}/f{n}": f"payload {n}\n".encode() * 100 for n in range(2)}
    for lfn, payload in files.items():
        await registered(catalogue, settings, lfn, payload, READ_ONLY)
    refused = await data.run_request(
        request("ReplicateAndRegister", list(files), "XRD-B", READ_ONLY), settings, catalogue, LHCB
    )
    assert set(refused.failures) == set(files)
    for lfn in files:
        failure = refused.failures[lfn].failure
        assert failure.failure_class is FailureClass.REFUSED
        assert failure.storage_element == READ_ONLY
        assert failure.tool_message == f"{READ_ONLY} is read-only: no replica is written to it"
        assert not on_disk(settings, "XRD-B", lfn).exists()
    assert refused.status_report() == {f"input-{lfn}": {"action": "FAILURE"} for lfn in files}
    assert await catalogue.replicas(list(files)) == {lfn: (READ_ONLY,) for lfn in files}

    copied = await data.run_request(
        request("ReplicateAndRegister", list(files), "XRD-B"), settings, catalogue, LHCB
    )
    assert copied.failures == {}
    for lfn, payload in files.items():
        assert on_disk(settings, "XRD-B", lfn).read_bytes() == payload
    held = await catalogue.replicas(list(files))
    assert {lfn: set(ses) for lfn, ses in held.items()} == {
        lfn: {READ_ONLY, "XRD-B"} for lfn in files
    }


async def test_replicas_at_a_read_only_se_are_never_removed(
    settings: LocalSettings, catalogue: LocalFileCatalogue, db_url: str
) -> None:
    """RemoveReplica there, and RemoveFile of a file with a replica there, fail the file as
    refused with every replica kept on the servers and in the catalogue; another file of the
    same RemoveFile, held only by writable SEs, is removed."""
    run = run_dir(db_url, "remove")
    kept, gone = f"{run}/kept", f"{run}/gone"
    await registered(catalogue, settings, kept, b"kept\n", "XRD-A", READ_ONLY)
    await registered(catalogue, settings, gone, b"gone\n", "XRD-A")

    report = await data.run_request(
        request("RemoveReplica", [kept], READ_ONLY), settings, catalogue, LHCB
    )
    failure = report.failures[kept].failure
    assert (failure.failure_class, failure.storage_element) == (FailureClass.REFUSED, READ_ONLY)
    assert failure.tool_message == f"{READ_ONLY} is read-only: no replica is removed from it"

    report = await data.run_request(request("RemoveFile", [kept, gone]), settings, catalogue, LHCB)
    assert list(report.failures) == [kept]
    assert report.failures[kept].failure.failure_class is FailureClass.REFUSED
    assert report.status_report() == {
        f"input-{kept}": {"action": "FAILURE"},
        f"input-{gone}": {"action": "SUCCESS"},
    }
    assert on_disk(settings, READ_ONLY, kept).read_bytes() == b"kept\n"
    assert on_disk(settings, "XRD-A", kept).read_bytes() == b"kept\n"
    assert set((await catalogue.replicas([kept]))[kept]) == {"XRD-A", READ_ONLY}
    assert not on_disk(settings, "XRD-A", gone).exists()
    assert await catalogue.files([gone]) == {}


def test_a_read_only_se_is_refused_as_output_se_and_by_dxts_file_put(tmp_path: Path) -> None:
    """Where a write is knowable before any byte moves, it is refused then, naming the SE."""
    with pytest.raises(ValueError, match=f"output_se '{READ_ONLY}' is read-only"):
        LocalSettings(
            work_dir=tmp_path / "work",
            storage_endpoints=read_only_endpoints(),
            output_se=READ_ONLY,
        )
    # The Slurm node's copy of the settings keeps the flag (the task table's round trip).
    storage = StorageElements(
        storage_root=tmp_path, storage_elements=["LOCAL"], storage_endpoints=read_only_endpoints()
    )
    again = StorageElements.model_validate(storage.model_dump(mode="json"))
    assert again.storage_endpoints[READ_ONLY].read_only
    assert not again.storage_endpoints["XRD-A"].read_only
    local = tmp_path / "f.dat"
    local.write_bytes(b"x")
    files = Storage(tmp_path / "se", (), "", "lhcb", parse_endpoints(read_only_endpoints()))
    with pytest.raises(InvalidArgument, match=f"{READ_ONLY} is read-only: nothing is put there"):
        files._entry(local, READ_ONLY, "/lhcb/readonly/f.dat")
