"""A job's outputs staged out to an XRootD output SE (`dxts.backends.runner.stage_out`): uploaded,
their adler32 checked at the server against what the job wrote, the manifest naming the SE; the
registered outputs staged in again by the next job, on both catalogue databases; an upload the
server refuses or whose copy differs fails at stage-out, naming the file and the SE, in the
server's words, and leaves nothing at the SE. Against the real servers."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import unquote

import pytest
from test_xrootd_transfers import adler32, on_disk
from xrootd_servers import endpoints

from dxts.backends.runner import stage_out
from dxts.backends.runner.cwl import collect_outputs, stage
from dxts.backends.runner.failures import JobFailed
from dxts.backends.runner.settings import RunnerEnvironment
from dxts.core import transfers
from dxts.core.adaptor.model import FailureClass, Submission
from dxts.core.catalogue import CatalogueFile, CatalogueSettings, LocalFileCatalogue
from dxts.core.storage import StorageEndpoint


@pytest.fixture(scope="module")
async def catalogue(db_url: str) -> AsyncIterator[LocalFileCatalogue]:
    catalogue = LocalFileCatalogue(CatalogueSettings(url=db_url))
    await catalogue.start()
    try:
        yield catalogue
    finally:
        await catalogue.close()


def settings(tmp_path: Path, output_se: str) -> RunnerEnvironment:
    return RunnerEnvironment(
        work_dir=tmp_path / "work", storage_endpoints=endpoints(), output_se=output_se
    )


def contents(path: Path) -> bytes:
    return path.read_bytes()


def job_outputs(tmp_path: Path, payloads: dict[str, bytes]) -> tuple[dict[str, object], Path]:
    """What a runner leaves: files under out/ and the output object naming them."""
    out = tmp_path / "out"
    out.mkdir()
    files = []
    for name, payload in payloads.items():
        (out / name).write_bytes(payload)
        files.append({"class": "File", "location": (out / name).as_uri()})
    return {"datasets": files}, out


async def test_outputs_are_uploaded_verified_and_staged_in_again(
    tmp_path: Path, catalogue: LocalFileCatalogue, db_url: str
) -> None:
    prefix = f"/lhcb/stage-out/{db_url.split(':')[0]}/{time.monotonic_ns()}"
    payloads = {"a.dst": b"candidates\n" * 5000, "b.dst": b"more\n" * 300}
    output_object, out = job_outputs(tmp_path, payloads)
    chosen = settings(tmp_path, "XRD-B")
    spool = tmp_path / "stage-out"
    collected = collect_outputs(
        output_object, Submission("p1", output_prefix=prefix), chosen, out, spool
    )
    await stage_out.upload(collected.outputs, spool, chosen.storage_endpoints["XRD-B"], 60)
    assert not spool.exists()  # uploaded: the job's folder keeps no second copy
    assert {(f.lfn, f.storage_element, f.size, f.checksum) for f in collected.outputs} == {
        (f"{prefix}/{name}", "XRD-B", len(payload), adler32(payload))
        for name, payload in payloads.items()
    }
    for name, payload in payloads.items():
        url = chosen.storage_endpoints["XRD-B"].url(f"{prefix}/{name}")
        assert transfers.same_checksum(transfers.checksum(url) or "", adler32(payload))
        assert on_disk(chosen, "XRD-B", f"{prefix}/{name}").read_bytes() == payload
    # Registered as the execution service registers a manifest, then the next job's input.
    await catalogue.register(
        [
            CatalogueFile(lfn=f.lfn, size=f.size, checksum=f.checksum, replicas=("XRD-B",))
            for f in collected.outputs
        ]
    )
    staged = await stage(
        {"input": {"class": "File", "location": f"lfn:{prefix}/a.dst"}},
        chosen,
        catalogue,
        tmp_path / "staged",
    )
    path = Path(unquote(staged["input"]["location"].removeprefix("file://")))
    assert contents(path) == payloads["a.dst"]


async def test_a_copy_that_differs_from_what_the_job_wrote_fails_and_is_not_kept(
    tmp_path: Path,
) -> None:
    prefix = f"/lhcb/stage-out/rot/{time.monotonic_ns()}"
    output_object, out = job_outputs(tmp_path, {"c.dst": b"written by the job"})
    chosen = settings(tmp_path, "XRD-A")
    spool = tmp_path / "stage-out"
    collected = collect_outputs(
        output_object, Submission("p2", output_prefix=prefix), chosen, out, spool
    )
    stage_out.spooled(spool, f"{prefix}/c.dst").write_bytes(b"changed before the upload")
    with pytest.raises(JobFailed) as raised:
        await stage_out.upload(collected.outputs, spool, chosen.storage_endpoints["XRD-A"], 60)
    failure = raised.value.failure
    assert (failure.failure_class, failure.lfn, failure.storage_element) == (
        FailureClass.STAGE_OUT,
        f"{prefix}/c.dst",
        "XRD-A",
    )
    assert failure.tool_message == (
        f"checksum mismatch: the copy has {adler32(b'changed before the upload')}, "
        f"expected {adler32(b'written by the job')}"
    )
    assert not on_disk(chosen, "XRD-A", f"{prefix}/c.dst").exists()


async def test_an_upload_the_server_refuses_fails_at_stage_out_in_its_words(
    tmp_path: Path,
) -> None:
    endpoints()  # the client's settings: a server that does not answer is an error at once
    nobody = StorageEndpoint.parse("XRD-GONE", "root://127.0.0.1:10949//dxts")
    output_object, out = job_outputs(tmp_path, {"d.dst": b"nowhere to go"})
    chosen = settings(tmp_path, "XRD-A")
    spool = tmp_path / "stage-out"
    collected = collect_outputs(
        output_object, Submission("p3", output_prefix="/lhcb/stage-out/gone"), chosen, out, spool
    )
    with pytest.raises(JobFailed) as raised:
        await stage_out.upload(collected.outputs, spool, nobody, 60)
    failure = raised.value.failure
    assert (failure.failure_class, failure.lfn, failure.storage_element) == (
        FailureClass.STAGE_OUT,
        "/lhcb/stage-out/gone/d.dst",
        "XRD-GONE",
    )
    assert str(raised.value) == (
        f"cannot stage out lfn:/lhcb/stage-out/gone/d.dst to XRD-GONE: {failure.tool_message}"
    )
    assert failure.tool_message  # the client's own words: the connection was refused
