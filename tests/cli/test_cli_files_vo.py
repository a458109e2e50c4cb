"""Files belong to a VO (issue 33, findings 1 and 8), played from the outside: VO B's plain user,
through `dxts` against the components `dxts up` composes with their sweeps running (SQLite and
MariaDB), goes after VO A's files — gets them, writes over them, names them in a List feeder,
queries the whole catalogue with `conditions: {}` and removes what it is fed — and gets none of
them; LFNs that alias another (`/./A`, `//A`) or hold a control character are refused, and a
replica whose bytes changed is not returned as the file."""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from dxts.cli.connection import CONNECTION_FILE, Connection
from dxts.cli.main import app
from dxts.cli.up import STORAGE_ELEMENTS, compose
from dxts.core.catalogue import CatalogueSettings, FileCatalogue, open_catalogue
from dxts.core.db import Database
from dxts.core.grpc import DevKeys

SE = STORAGE_ELEMENTS[0]
A_FILES = ["/vo-a/raw/1.raw", "/vo-a/raw/2.raw"]
SHARED = "/vo-a/shared/"
HEADER = """\
cwlVersion: v1.2
class: Workflow
$namespaces: {dirac: https://diracgrid.org/cwl#}
"""


@dataclass
class Installation:
    data_dir: Path
    catalogue: FileCatalogue
    alice: str  # a plain user of VO vo-a
    bob: str  # a plain user of VO vo-b

    async def dxts(self, token: str, *args: str) -> Result:
        options = ["--data-dir", str(self.data_dir), "--token", token]
        return await asyncio.to_thread(CliRunner().invoke, app, [*options, *args])

    def replica(self, lfn: str) -> Path:
        return self.data_dir / "storage" / SE / lfn.lstrip("/")


@pytest.fixture(scope="module")
async def installation(
    database: Database, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Installation]:
    data_dir = tmp_path_factory.mktemp("dxts-files")
    keys = DevKeys.load_or_create(data_dir)
    url = f"sqlite+aiosqlite:///{data_dir / 'catalogue.sqlite'}"
    catalogue = await open_catalogue(CatalogueSettings(url=url))
    stack = await compose(
        database, data_dir=data_dir, verifier=keys.verifier(), catalogue=catalogue
    )
    try:
        Connection(
            definition=stack.address("definition"),
            execution=stack.address("execution"),
            accounting=stack.address("accounting"),
            storage=str(data_dir / "storage"),
            storage_elements=",".join(STORAGE_ELEMENTS),
            catalogue=url,
        ).write(data_dir / CONNECTION_FILE)
        world = Installation(
            data_dir,
            catalogue,
            keys.issue("vo-a", "alice", ["user"]),
            keys.issue("vo-b", "bob", ["user"]),
        )
        for lfn in [*A_FILES, f"{SHARED}calib.db"]:
            local = data_dir / "upload.bin"
            local.write_bytes(f"VO A's {lfn}".encode())
            put = await world.dxts(world.alice, "file", "put", str(local), "--se", SE, "--lfn", lfn)
            assert put.exit_code == 0, put.output
        yield world
    finally:
        await stack.stop()
        await catalogue.close()


def one_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


async def test_vo_b_neither_gets_nor_overwrites_vo_a_files(
    installation: Installation, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = installation
    got = await world.dxts(world.bob, "file", "get", A_FILES[0], str(tmp_path / "stolen"))
    assert "/vo-a/raw/1.raw is VO vo-a's file: VO vo-b may read only files under /vo-b/" in (
        one_line(got)
    )
    assert not (tmp_path / "stolen").exists()

    forged = tmp_path / "forged.bin"
    forged.write_bytes(b"bob was here")
    for lfn in (A_FILES[0], "/vo-a/raw/new.raw"):
        put = await world.dxts(world.bob, "file", "put", str(forged), "--se", SE, "--lfn", lfn)
        assert f"{lfn} is VO vo-a's file: VO vo-b may change or remove only" in one_line(put)
    assert world.replica(A_FILES[0]).read_bytes() == f"VO A's {A_FILES[0]}".encode()
    assert not world.replica("/vo-a/raw/new.raw").exists()

    # A file put without an LFN lands in the uploader's namespace.
    mine = await world.dxts(world.bob, "file", "put", str(forged), "--se", SE)
    assert mine.exit_code == 0 and mine.stdout.startswith("/vo-b/dxts/uploads/"), mine.output

    # What VO A shares (an operator setting) VO B reads, and never writes.
    shared = f"{SHARED}calib.db"
    assert (await world.dxts(world.bob, "file", "get", shared, str(tmp_path))).exit_code == 1
    monkeypatch.setenv("DXTS_FILES_SHARED", json.dumps([SHARED]))
    got = await world.dxts(world.bob, "file", "get", shared, str(tmp_path))
    assert got.exit_code == 0, got.output
    assert (tmp_path / "calib.db").read_bytes() == f"VO A's {shared}".encode()
    put = await world.dxts(world.bob, "file", "put", str(forged), "--se", SE, "--lfn", shared)
    assert "VO vo-b may change or remove only files under /vo-b/" in one_line(put)


async def test_a_token_naming_vo_a_that_the_installation_did_not_sign_gets_nothing(
    installation: Installation, tmp_path: Path
) -> None:
    """The VO `dxts file` acts for is the one the definition service reads from the verified
    token, not one the client reads from any token: VO B's user with a token of his own making
    that names VO A neither reads VO A's file nor writes one, and nothing is touched."""
    world = installation
    forged = DevKeys.load_or_create(tmp_path / "bobs-keys").issue("vo-a", "bob", ["user"])
    got = await world.dxts(forged, "file", "get", A_FILES[0], str(tmp_path / "stolen"))
    assert "invalid bearer token: Signature verification failed" in one_line(got)
    assert not (tmp_path / "stolen").exists()
    local = tmp_path / "bob.bin"
    local.write_bytes(b"bob was here")
    put = await world.dxts(forged, "file", "put", str(local), "--se", SE, "--lfn", A_FILES[1])
    assert "invalid bearer token: Signature verification failed" in one_line(put)
    assert world.replica(A_FILES[1]).read_bytes() == f"VO A's {A_FILES[1]}".encode()


def write(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text(HEADER + textwrap.dedent(body))
    return path


async def test_a_list_feeder_naming_vo_a_files_is_refused_at_submission(
    installation: Installation, tmp_path: Path
) -> None:
    world = installation
    listed = f'{{name: List, args: {{inputs: [{{lfn: "{A_FILES[0]}", lfn_size: 1}}]}}}}'
    document = write(
        tmp_path,
        "remove.cwl",
        f"""\
        hints:
          dirac:Workgraph:
            schema_version: '1.0'
            data_management:
              - {{id: Remove, operation: remove, files: raw, initial_state: Active}}
        inputs:
          raw:
            type: {{type: array, items: [File, string]}}
            dirac:Feeder: {listed}
        outputs: []
        steps: []
        """,
    )
    refused = await world.dxts(world.bob, "submit", str(document))
    assert refused.exit_code == 1, refused.output
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error  plugin-args  inputs.raw.dirac:Feeder.args.inputs[0].lfn")
    assert "/vo-a/raw/1.raw is VO vo-a's file: VO vo-b may change or remove only" in line
    # The owner may name it.
    accepted = await world.dxts(world.alice, "submit", "--dry-run", str(document))
    assert accepted.exit_code == 0, accepted.output


async def test_a_query_feeds_and_a_removal_touches_only_the_callers_files(
    installation: Installation, tmp_path: Path
) -> None:
    """`conditions: {}` is the whole catalogue as VO B sees it: its own file, not VO A's; the
    removal member it feeds removes that file and leaves VO A's registered and on disk."""
    world = installation
    own = tmp_path / "own.bin"
    own.write_bytes(b"VO B's file")
    put = await world.dxts(world.bob, "file", "put", str(own), "--se", SE, "--lfn", "/vo-b/r/1")
    assert put.exit_code == 0, put.output
    document = write(
        tmp_path,
        "sweep.cwl",
        """\
        hints:
          dirac:Workgraph:
            schema_version: '1.0'
            data_management:
              - {id: Remove, operation: remove, files: raw, initial_state: Active}
        inputs:
          raw:
            type: {type: array, items: [File, string]}
            dirac:Feeder: {name: Query, args: {conditions: {}, exhaust_after_pass: true}}
        outputs: []
        steps: []
        """,
    )
    submitted = await world.dxts(world.bob, "submit", str(document))
    assert submitted.exit_code == 0, submitted.output
    workgraph = submitted.stdout.strip().split()[-1]
    started = await world.dxts(world.bob, "start", workgraph)
    assert started.exit_code == 0, started.output
    for _ in range(600):
        if not await world.catalogue.files(["/vo-b/r/1"]):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("VO B's removal never ran")
    inputs = await world.dxts(world.bob, "inputs", "list", f"{workgraph}/Remove", "-o", "json")
    assert inputs.exit_code == 0, inputs.output
    fed = [i["lfn"] for i in json.loads(inputs.stdout)]
    assert "/vo-b/r/1" in fed and all(lfn.startswith("/vo-b/") for lfn in fed), fed
    assert set(await world.catalogue.files(A_FILES)) == set(A_FILES)
    assert all(world.replica(lfn).is_file() for lfn in A_FILES)


@pytest.mark.parametrize("alias", ["/vo-a/./raw/1.raw", "//vo-a/raw/1.raw", "/vo-a/raw/1.raw/"])
async def test_an_lfn_aliasing_another_is_refused_and_writes_nothing(
    installation: Installation, tmp_path: Path, alias: str
) -> None:
    world = installation
    other = tmp_path / "other.bin"
    other.write_bytes(b"other bytes")
    put = await world.dxts(world.alice, "file", "put", str(other), "--se", SE, "--lfn", alias)
    assert f"error  --lfn  {alias!r} is refused: an LFN has no" in one_line(put)
    got = await world.dxts(world.alice, "file", "get", A_FILES[0], str(tmp_path / "back"))
    assert got.exit_code == 0, got.output
    assert (tmp_path / "back").read_bytes() == f"VO A's {A_FILES[0]}".encode()


async def test_an_lfn_with_a_control_character_is_refused(
    installation: Installation, tmp_path: Path
) -> None:
    world = installation
    local = tmp_path / "x.bin"
    local.write_bytes(b"x")
    for lfn in ("/vo-a/raw/new\nline", "/vo-a/raw/nul\x01"):
        put = await world.dxts(world.alice, "file", "put", str(local), "--se", SE, "--lfn", lfn)
        assert "no control character" in one_line(put)
    assert not list(world.replica("/vo-a/raw/x").parent.glob("n*"))


async def test_a_replica_whose_bytes_changed_is_not_returned(
    installation: Installation, tmp_path: Path
) -> None:
    world = installation
    local = tmp_path / "tampered.bin"
    local.write_bytes(b"the registered bytes")
    lfn = "/vo-a/raw/tampered.raw"
    put = await world.dxts(world.alice, "file", "put", str(local), "--se", SE, "--lfn", lfn)
    assert put.exit_code == 0, put.output
    world.replica(lfn).write_bytes(b"other bytes, same LFN")
    got = await world.dxts(world.alice, "file", "get", lfn, str(tmp_path / "back"))
    line = one_line(got)
    assert f"checksum mismatch for {lfn}: registered adler32:" in line
    assert f"but {SE} holds adler32:" in line
    assert not (tmp_path / "back").exists()
