"""A job's `lfn:` inputs that only an XRootD SE holds are fetched into its folder and checked
against the catalogue's adler32 (`dxts.backends.runner.fetch`); a file the server lacks or
whose copy does not match fails the job at stage-in, naming the file and the SE, in the
server's words. On both catalogue databases, against the real servers."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import unquote

import pytest
from test_xrootd_transfers import adler32, on_disk, put
from xrootd_servers import endpoints

from dxts.backends.runner.cwl import stage
from dxts.backends.runner.failures import JobFailed
from dxts.backends.runner.settings import RunnerEnvironment
from dxts.core.adaptor.model import FailureClass
from dxts.core.catalogue import CatalogueFile, CatalogueSettings, LocalFileCatalogue


@pytest.fixture(scope="module")
async def catalogue(db_url: str) -> AsyncIterator[LocalFileCatalogue]:
    catalogue = LocalFileCatalogue(CatalogueSettings(url=db_url))
    await catalogue.start()
    try:
        yield catalogue
    finally:
        await catalogue.close()


@pytest.fixture
def settings(tmp_path: Path) -> RunnerEnvironment:
    return RunnerEnvironment(work_dir=tmp_path / "work", storage_endpoints=endpoints())


def contents(path: Path) -> bytes:
    return path.read_bytes()


def inputs(lfn: str) -> dict[str, object]:
    return {"events": {"class": "File", "location": f"lfn:{lfn}"}}


async def test_an_input_only_a_server_holds_is_fetched_and_checked(
    settings: RunnerEnvironment, catalogue: LocalFileCatalogue, tmp_path: Path, db_url: str
) -> None:
    lfn = f"/lhcb/stage/{db_url.split(':')[0]}/{time.monotonic_ns()}/in.dst"
    payload = b"events\n" * 1000
    put(settings, "XRD-C", lfn, payload)  # type: ignore[arg-type]
    await catalogue.register(
        [CatalogueFile(lfn=lfn, size=len(payload), checksum=adler32(payload), replicas=("XRD-C",))]
    )
    staged = await stage(inputs(lfn), settings, catalogue, tmp_path / "staged")
    path = Path(unquote(staged["events"]["location"].removeprefix("file://")))
    assert path.is_relative_to(tmp_path / "staged")
    assert contents(path) == payload


async def test_a_corrupted_or_missing_replica_fails_at_stage_in(
    settings: RunnerEnvironment, catalogue: LocalFileCatalogue, tmp_path: Path, db_url: str
) -> None:
    run = f"/lhcb/stage/{db_url.split(':')[0]}/{time.monotonic_ns()}"
    rotten, missing = f"{run}/rotten.dst", f"{run}/missing.dst"
    put(settings, "XRD-A", rotten, b"bit rot")  # type: ignore[arg-type]
    await catalogue.register(
        [
            CatalogueFile(lfn=rotten, size=4, checksum=adler32(b"good"), replicas=("XRD-A",)),
            CatalogueFile(lfn=missing, size=4, checksum=adler32(b"good"), replicas=("XRD-B",)),
        ]
    )
    with pytest.raises(JobFailed) as raised:
        await stage(inputs(rotten), settings, catalogue, tmp_path / "a")
    failure = raised.value.failure
    assert (failure.failure_class, failure.lfn, failure.storage_element) == (
        FailureClass.STAGE_IN,
        rotten,
        "XRD-A",
    )
    assert failure.tool_message == (
        f"checksum mismatch: the copy has {adler32(b'bit rot')}, the catalogue says "
        f"{adler32(b'good')}"
    )
    with pytest.raises(JobFailed) as raised:
        await stage(inputs(missing), settings, catalogue, tmp_path / "b")
    failure = raised.value.failure
    assert (failure.failure_class, failure.storage_element) == (FailureClass.STAGE_IN, "XRD-B")
    assert "[3011]" in failure.tool_message and "no such file" in failure.tool_message
    assert str(raised.value).startswith(f"cannot stage lfn:{missing} from XRD-B: ")
    assert not on_disk(settings, "XRD-B", missing).exists()  # type: ignore[arg-type]
