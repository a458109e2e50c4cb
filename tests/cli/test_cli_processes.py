"""The process registry, and where the command finds the services (options, environment, the
connection file `dxts up` writes)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from cli_support import EXAMPLES, Dxts
from typer.testing import CliRunner

from dxts.cli.connection import Connection
from dxts.cli.main import app
from dxts.cli.up import Stack
from dxts.core.grpc import DevKeys


@pytest.fixture(scope="module")
async def process_id(dxts: Dxts) -> str:
    result = await dxts("submit", str(EXAMPLES / "mc-demo.cwl"))
    assert result.exit_code == 0, result.output
    shown = json.loads((await dxts("show", result.stdout.strip(), "-o", "json")).stdout)
    found: str = shown["members"][0]["transformation"]["process_id"]
    return found


async def test_publish_resolve_and_list_versions(dxts: Dxts, process_id: str) -> None:
    published = await dxts("registry", "publish", "simulate", "1.0", process_id, "-o", "json")
    assert published.exit_code == 0, published.output
    version = json.loads(published.stdout)
    assert (version["name"], version["version"], version["vo"]) == ("simulate", "1.0", "demo")
    assert version["process_id"] == process_id and version["author"] == "olivia"

    resolved = json.loads((await dxts("registry", "resolve", "simulate@1.0", "-o", "json")).stdout)
    assert resolved["process_id"] == process_id
    await dxts("registry", "publish", "simulate", "1.1", process_id)
    listed = json.loads((await dxts("registry", "versions", "simulate", "-o", "json")).stdout)
    assert sorted(v["version"] for v in listed) == ["1.0", "1.1"]
    table = await dxts("registry", "versions", "simulate")
    assert table.exit_code == 0 and "1.1" in table.stdout


async def test_registry_errors_are_one_line(dxts: Dxts, process_id: str) -> None:
    for args in (
        ("registry", "resolve", "simulate@9.9"),
        ("registry", "resolve", "no-version"),
        ("registry", "publish", "simulate", "2.0", "0" * 64),
    ):
        result = await dxts(*args)
        assert result.exit_code == 1, (args, result.output)
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert "Traceback" not in result.stderr


async def test_the_connection_file_environment_and_options(
    stack: Stack, dev_keys: DevKeys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("DXTS_DEFINITION_ADDRESS", "DXTS_ACCOUNTING_ADDRESS", "DXTS_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    runner = CliRunner()

    async def run(*args: str) -> list[str]:
        result = await asyncio.to_thread(runner.invoke, app, ["--data-dir", str(tmp_path), *args])
        return [str(result.exit_code), *result.stderr.splitlines()]

    nothing = await run("list")
    assert nothing[0] == "1" and len(nothing) == 2 and "dxts up" in nothing[1]
    Connection(
        definition=stack.address("definition"),
        accounting=stack.address("accounting"),
        token=dev_keys.issue("demo", "carl", ["user"]),
    ).write(tmp_path / "connection.json")
    assert (tmp_path / "connection.json").stat().st_mode & 0o077 == 0
    assert await run("list") == ["0"]
    # The environment wins over the file, and an option over both.
    monkeypatch.setenv("DXTS_TOKEN", "not-a-token")
    refused = await run("list")
    assert refused[0] == "1" and len(refused) == 2 and "token" in refused[1]
    good = dev_keys.issue("demo", "carl", ["user"])
    assert (await run("--token", good, "list"))[0] == "0"
