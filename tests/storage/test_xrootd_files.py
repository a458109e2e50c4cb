"""`dxts file put/get/ls` with XRootD storage elements, against the real servers and on both
catalogue databases: put uploads, checks the server's adler32 and registers; get fetches and
verifies (a replica that rotted at the server is refused, naming the SE); ls lists each replica
with its SE, URL, size and checksum; a server that does not answer is an error in the client's
words with nothing registered; and the VO boundary holds for every one of them."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_xrootd_transfers import adler32
from typer.testing import CliRunner, Result
from xrootd_servers import data_path, endpoints, place

from dxts.cli.connection import CONNECTION_FILE, Connection
from dxts.cli.main import app
from dxts.cli.up import STORAGE_ELEMENTS, compose
from dxts.core.catalogue import CatalogueSettings, open_catalogue
from dxts.core.db import Database
from dxts.core.grpc import DevKeys


@pytest.fixture(scope="module")
async def installation(
    database: Database, db_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Path]:
    """A running installation whose connection file names the XRootD SEs, as `dxts up` writes
    it when DXTS_STORAGE_ENDPOINTS is set (plus one SE on a port no server listens on)."""
    data_dir = tmp_path_factory.mktemp("dxts-files")
    keys = DevKeys.load_or_create(data_dir)
    catalogue = await open_catalogue(CatalogueSettings(url=db_url))
    stack = await compose(
        database, data_dir=data_dir, verifier=keys.verifier(), catalogue=catalogue
    )
    servers = ",".join(f"{se}={url}" for se, url in endpoints().items())
    try:
        Connection(
            definition=stack.address("definition"),
            execution=stack.address("execution"),
            accounting=stack.address("accounting"),
            token=keys.issue("demo", "olivia", ["operator", "user"]),
            storage=str(data_dir / "storage"),
            storage_elements=",".join(STORAGE_ELEMENTS),
            catalogue=db_url,
            storage_endpoints=f"{servers},XRD-GONE=root://127.0.0.1:10949//dxts",
        ).write(data_dir / CONNECTION_FILE)
        yield data_dir
    finally:
        await stack.stop()
        await catalogue.close()


async def dxts(installation: Path, *args: str) -> Result:
    return await asyncio.to_thread(
        CliRunner().invoke, app, ["--data-dir", str(installation), *args]
    )


def at_server(se: str, lfn: str) -> Path:
    return data_path(se, f"/dxts{lfn}")


def contents(path: Path) -> bytes:
    return path.read_bytes()


async def test_put_get_and_ls_over_xrootd(installation: Path, tmp_path: Path, db_url: str) -> None:
    lfn = f"/demo/files/{db_url.split(':')[0]}/{time.monotonic_ns()}/data.bin"
    local = tmp_path / "data.bin"
    payload = bytes(range(256)) * 4000
    local.write_bytes(payload)
    put = await dxts(installation, "file", "put", str(local), "--se", "XRD-B", "--lfn", lfn)
    assert (put.exit_code, put.stdout.strip()) == (0, lfn), put.output
    assert contents(at_server("XRD-B", lfn)) == payload
    query = ["xrdfs", "127.0.0.1:10941", "query", "checksum", f"/dxts{lfn}"]
    answered = await asyncio.to_thread(
        subprocess.run, query, capture_output=True, text=True, check=True
    )
    answer = answered.stdout.split()
    assert int(answer[1], 16) == int(adler32(payload)[8:], 16)
    again = await dxts(installation, "file", "put", str(local), "--se", "XRD-B", "--lfn", lfn)
    assert again.exit_code == 0, again.output
    also = await dxts(installation, "file", "put", str(local), "--se", "XRD-C", "--lfn", lfn)
    assert also.exit_code == 0, also.output  # a second replica of the same content

    got = await dxts(installation, "file", "get", lfn, str(tmp_path / "back.bin"))
    assert got.exit_code == 0, got.output
    assert contents(tmp_path / "back.bin") == payload

    listed = await dxts(installation, "file", "ls", lfn)
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.splitlines() == [
        f"{lfn}  size {len(payload)}  {adler32(payload)}",
        f"  XRD-B  {endpoints()['XRD-B']}{lfn}  {len(payload)}  {adler32(payload)}",
        f"  XRD-C  {endpoints()['XRD-C']}{lfn}  {len(payload)}  {adler32(payload)}",
    ]


async def test_a_rotten_replica_is_refused_naming_its_se(
    installation: Path, tmp_path: Path, db_url: str
) -> None:
    lfn = f"/demo/files/{db_url.split(':')[0]}/{time.monotonic_ns()}/rot.bin"
    local = tmp_path / "rot.bin"
    local.write_bytes(b"good bytes")
    put = await dxts(installation, "file", "put", str(local), "--se", "XRD-A", "--lfn", lfn)
    assert put.exit_code == 0, put.output
    place(at_server("XRD-A", lfn), b"bad bytes!")
    got = await dxts(installation, "file", "get", lfn, str(tmp_path / "out.bin"))
    assert got.exit_code == 1
    assert f"cannot get {lfn}: XRD-A holds {adler32(b'bad bytes!')}, registered " in got.stderr
    assert not (tmp_path / "out.bin").exists()


async def test_a_server_that_does_not_answer_registers_nothing(
    installation: Path, tmp_path: Path, db_url: str
) -> None:
    lfn = f"/demo/files/{db_url.split(':')[0]}/{time.monotonic_ns()}/gone.bin"
    local = tmp_path / "gone.bin"
    local.write_bytes(b"nowhere")
    put = await dxts(installation, "file", "put", str(local), "--se", "XRD-GONE", "--lfn", lfn)
    assert put.exit_code == 1
    assert f"cannot put {lfn} at XRD-GONE: " in put.stderr
    assert "Traceback" not in put.output
    listed = await dxts(installation, "file", "ls", lfn)
    assert listed.exit_code == 1 and f"{lfn} is not in the catalogue" in listed.stderr


async def test_another_vos_files_stay_out_of_reach(installation: Path, tmp_path: Path) -> None:
    lfn = f"/lhcb/files/{time.monotonic_ns()}/theirs.bin"
    local = tmp_path / "theirs.bin"
    local.write_bytes(b"not yours")
    put = await dxts(installation, "file", "put", str(local), "--se", "XRD-A", "--lfn", lfn)
    assert put.exit_code == 1 and "lhcb" in put.stderr
    assert not at_server("XRD-A", lfn).exists()
    for verb in ("get", "ls"):
        refused = await dxts(installation, "file", verb, lfn)
        assert refused.exit_code == 1 and "lhcb" in refused.stderr, refused.output
