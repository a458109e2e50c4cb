"""`dxts-cwl-runner` and `dxts file` against the components `dxts up` composes, with their
sweeps running and the local backend running cwltool for real (SQLite and MariaDB): a plain
CWL tool (no dirac: hint) runs as a user job, its local input File put to a storage element
first, its output fetched into --outdir and printed as cwltool prints it; a failing tool exits
1; a file put is got back byte for byte."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
from collections.abc import AsyncIterator
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dxts.cli.connection import CONNECTION_FILE, Connection
from dxts.cli.cwl_runner import declared_outputs, secondary_patterns, stage_inputs
from dxts.cli.cwl_runner import main as runner_main
from dxts.cli.main import app
from dxts.cli.up import STORAGE_ELEMENTS, compose
from dxts.core.catalogue import CatalogueSettings, open_catalogue
from dxts.core.db import Database
from dxts.core.grpc import DevKeys

TOOL = """\
cwlVersion: v1.2
class: CommandLineTool
baseCommand: [cat]
stdout: copy.txt
inputs:
  source: {type: File, inputBinding: {position: 1}}
outputs:
  copy: {type: stdout}
  none: {type: "File?", outputBinding: {glob: absent.txt}}
"""
FAILING = """\
cwlVersion: v1.2
class: CommandLineTool
baseCommand: ["false"]
inputs: {}
outputs: {}
"""


KINDS = """\
cwlVersion: v1.2
class: CommandLineTool
baseCommand: [sh, -c, "mkdir -p out/sub && echo hi > out/sub/a.txt && echo hi > word.txt"]
inputs: {}
outputs:
  folder: {type: Directory, outputBinding: {glob: out}}
  word:
    type: string
    outputBinding: {glob: word.txt, loadContents: true, outputEval: "$(self[0].contents)"}
"""


@pytest.fixture(scope="module")
async def installation(
    database: Database, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Path]:
    """A running installation's data directory, its connection file written as `dxts up`
    writes it."""
    data_dir = tmp_path_factory.mktemp("dxts-runner")
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
            token=keys.issue("demo", "olivia", ["operator", "user"]),
            storage=str(data_dir / "storage"),
            storage_elements=",".join(STORAGE_ELEMENTS),
            catalogue=url,
        ).write(data_dir / CONNECTION_FILE)
        yield data_dir
    finally:
        await stack.stop()
        await catalogue.close()


async def run_runner(*args: str) -> tuple[int, str]:
    def call() -> tuple[int, str]:
        printed = io.StringIO()
        with redirect_stdout(printed):
            code = runner_main(list(args))
        return code, printed.getvalue()

    return await asyncio.to_thread(call)


async def test_a_plain_tool_runs_and_prints_its_output_object(
    installation: Path, tmp_path: Path
) -> None:
    (tmp_path / "tool.cwl").write_text(TOOL)
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "hello.txt").write_text("hello, dxts\n")
    # A relative location is read beside the job file, as cwltool reads it.
    (tmp_path / "job.yaml").write_text("source: {class: File, location: inputs/hello.txt}\n")
    outdir = tmp_path / "out"
    code, printed = await run_runner(
        "--data-dir",
        str(installation),
        "--quiet",
        "--outdir",
        str(outdir),
        str(tmp_path / "tool.cwl"),
        str(tmp_path / "job.yaml"),
    )
    assert code == 0
    result = json.loads(printed)
    copy = result["copy"]
    assert (copy["class"], copy["basename"], copy["size"]) == ("File", "copy.txt", 12)
    assert copy["checksum"] == "sha1$" + hashlib.sha1(b"hello, dxts\n").hexdigest()
    assert copy["location"] == (outdir / "copy.txt").as_uri()
    assert (outdir / "copy.txt").read_text() == "hello, dxts\n"
    assert result["none"] is None
    # The input was put to the first storage element under its content hash and name.
    stored = list((installation / "storage" / STORAGE_ELEMENTS[0]).rglob("hello.txt"))
    assert [p.read_text() for p in stored] == ["hello, dxts\n"]


async def test_outputs_of_every_kind_come_back_as_the_backend_reported_them(
    installation: Path, tmp_path: Path
) -> None:
    (tmp_path / "kinds.cwl").write_text(KINDS)
    outdir = tmp_path / "out"
    code, printed = await run_runner(
        "--data-dir",
        str(installation),
        "--quiet",
        "--outdir",
        str(outdir),
        str(tmp_path / "kinds.cwl"),
    )
    assert code == 0
    result = json.loads(printed)
    assert result["word"] == "hi\n"  # not a File: only the reported output object has it
    folder = result["folder"]
    assert (folder["class"], folder["path"]) == ("Directory", str(outdir / "out"))
    (sub,) = folder["listing"]
    (inner,) = sub["listing"]
    assert (sub["class"], inner["basename"]) == ("Directory", "a.txt")
    fetched = outdir / "out" / "sub" / "a.txt"
    assert (inner["location"], inner["path"]) == (fetched.as_uri(), str(fetched))
    assert fetched.read_text() == "hi\n"


async def test_a_failing_tool_exits_1(installation: Path, tmp_path: Path) -> None:
    (tmp_path / "fail.cwl").write_text(FAILING)
    code, printed = await run_runner(
        "--data-dir", str(installation), "--outdir", str(tmp_path), str(tmp_path / "fail.cwl")
    )
    assert (code, printed) == (1, "")


async def test_a_file_put_is_got_back(installation: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    local = tmp_path / "data.bin"
    local.write_bytes(bytes(range(256)) * 10)
    options = ["--data-dir", str(installation)]
    put = await asyncio.to_thread(
        runner.invoke,
        app,
        [*options, "file", "put", str(local), "--se", "LOCAL-ARCHIVE", "--lfn", "/demo/data.bin"],
    )
    assert (put.exit_code, put.stdout.strip()) == (0, "/demo/data.bin")
    again = await asyncio.to_thread(
        runner.invoke, app, [*options, "file", "put", str(local), "--se", "LOCAL-ARCHIVE"]
    )
    assert again.exit_code == 0 and again.stdout.startswith("/demo/dxts/uploads/")
    got = await asyncio.to_thread(
        runner.invoke, app, [*options, "file", "get", "/demo/data.bin", str(tmp_path / "back")]
    )
    assert got.exit_code == 0
    assert (tmp_path / "back").read_bytes() == local.read_bytes()
    local.write_bytes(b"other content")
    refused = await asyncio.to_thread(
        runner.invoke,
        app,
        [*options, "file", "put", str(local), "--se", "LOCAL-ARCHIVE", "--lfn", "/demo/data.bin"],
    )
    assert refused.exit_code == 1
    assert "registered with other content" in refused.stderr
    unknown = await asyncio.to_thread(
        runner.invoke, app, [*options, "file", "put", str(local), "--se", "NOWHERE"]
    )
    assert unknown.exit_code == 1 and "NOWHERE" in unknown.stderr


async def test_inputs_are_staged_as_lfns_and_directories_as_absolute_uris(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "dir").mkdir()
    put: list[Path] = []

    async def fake_put(path: Path, siblings: tuple[Path, ...] = ()) -> str:
        assert not siblings
        put.append(path)
        return f"/up/{path.name}"

    staged = await stage_inputs(
        {
            "one": {
                "class": "File",
                "path": "a.txt",
                "secondaryFiles": [{"class": "File", "location": (tmp_path / "a.txt").as_uri()}],
            },
            "many": [{"class": "File", "location": "lfn:/already/there"}],
            "folder": {"class": "Directory", "location": "dir"},
            "text": {"class": "File", "contents": "inline"},
            "number": 3,
        },
        tmp_path,
        fake_put,
    )
    assert staged == {
        "one": {
            "class": "File",
            "location": "lfn:/up/a.txt",
            "secondaryFiles": [{"class": "File", "location": "lfn:/up/a.txt"}],
        },
        "many": [{"class": "File", "location": "lfn:/already/there"}],
        "folder": {"class": "Directory", "location": (tmp_path / "dir").as_uri()},
        "text": {"class": "File", "contents": "inline"},
        "number": 3,
    }
    assert put == [tmp_path / "a.txt", tmp_path / "a.txt"]


async def test_secondary_files_asked_for_by_pattern_are_put_beside_their_file(
    tmp_path: Path,
) -> None:
    """After the conformance test secondary_files_in_unnamed_records: `A.s2` beside `A` goes
    with it when the process asks for `.s2`, `A.bai` for `^.bai` (no extension to strip) and
    `B.idx` beside `B.txt` for `^.idx`; a name no pattern gives, or one not there, does not."""
    for name in ("A", "A.s2", "A.bai", "A.other", "B.txt", "B.idx"):
        (tmp_path / name).write_text(name)
    process = {
        "inputs": {
            "record": {
                "type": {
                    "type": "record",
                    "fields": {"f1": {"type": "File", "secondaryFiles": ".s2"}},
                }
            },
            "indexed": {
                "type": "File",
                "secondaryFiles": [{"pattern": "^.idx", "required": False}, "$(self.basename)"],
            },
        },
    }
    step = {"inputs": {"x": {"type": "File", "secondaryFiles": ["^.bai?", ".absent"]}}}
    patterns = secondary_patterns([process, step])
    assert patterns == (".s2", "^.idx", "^.bai", ".absent")
    put: list[tuple[Path, tuple[Path, ...]]] = []

    async def fake_put(path: Path, siblings: tuple[Path, ...] = ()) -> str:
        put.append((path, siblings))
        return f"/up/{path.name}"

    staged = await stage_inputs(
        {
            "a": {"class": "File", "location": "A"},
            "b": {"class": "File", "location": "B.txt"},
        },
        tmp_path,
        fake_put,
        patterns,
    )
    assert staged["a"] == {"class": "File", "location": "lfn:/up/A"}
    assert put == [
        (tmp_path / "A", (tmp_path / "A.bai", tmp_path / "A.s2")),
        (tmp_path / "B.txt", (tmp_path / "B.idx",)),
    ]


def test_declared_outputs_say_which_are_arrays(tmp_path: Path) -> None:
    (tmp_path / "map.cwl").write_text(
        "class: CommandLineTool\noutputs:\n  one: File\n  many: File[]\n"
        "  maybe: {type: ['null', {type: array, items: File}]}\n  opt: File?\n"
    )
    (tmp_path / "list.cwl").write_text(
        "class: Workflow\noutputs:\n- {id: '#main/out', type: 'string[]?'}\n- {id: b, type: int}\n"
    )
    assert declared_outputs(tmp_path / "map.cwl") == {
        "one": False,
        "many": True,
        "maybe": True,
        "opt": False,
    }
    assert declared_outputs(tmp_path / "list.cwl") == {"out": True, "b": False}
    (tmp_path / "packed.cwl").write_text(
        "$graph:\n- {id: '#main', class: Workflow, outputs: [{id: '#main/o', type: File}]}\n"
        "- {id: '#other', class: CommandLineTool, outputs: [{id: '#other/x', type: 'File[]'}]}\n"
    )
    assert declared_outputs(tmp_path / "packed.cwl") == {"o": False}
    assert declared_outputs(tmp_path / "packed.cwl", "other") == {"x": True}
