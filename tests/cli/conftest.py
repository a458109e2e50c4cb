"""The `dxts` command against running services: the components `dxts up` composes, built over
the module's database (SQLite and MariaDB) without their sweeps, each served on port 0, and
the command run in a thread (it has an event loop of its own) with the addresses and a
development operator token as its global options."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cli_support import Dxts
from typer.testing import CliRunner, Result

from dxts.cli.main import app
from dxts.cli.up import Stack, compose
from dxts.core.catalogue import CatalogueSettings, open_catalogue
from dxts.core.db import Database
from dxts.core.grpc import DevKeys


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path: Path = tmp_path_factory.mktemp("dxts-data")
    return path


@pytest.fixture(scope="module")
def dev_keys(data_dir: Path) -> DevKeys:
    return DevKeys.load_or_create(data_dir)


@pytest.fixture(scope="module")
async def stack(database: Database, data_dir: Path, dev_keys: DevKeys) -> AsyncIterator[Stack]:
    catalogue = await open_catalogue(
        CatalogueSettings(url=f"sqlite+aiosqlite:///{data_dir / 'catalogue.sqlite'}")
    )
    running = await compose(
        database,
        data_dir=data_dir,
        verifier=dev_keys.verifier(),
        catalogue=catalogue,
        sweeps=False,
    )
    try:
        yield running
    finally:
        await running.stop()
        await catalogue.close()


@pytest.fixture(scope="module")
def dxts(stack: Stack, dev_keys: DevKeys) -> Dxts:
    """`await dxts("show", wg)`: the command's result, run as an operator of VO `demo`."""
    runner = CliRunner()
    options = ["--token", dev_keys.issue("demo", "olivia", ["operator"])]
    for name in ("definition", "execution", "accounting", "dispatcher"):
        if name in stack.servers:
            options += [f"--{name}", stack.address(name)]

    async def invoke(*args: str) -> Result:
        return await asyncio.to_thread(runner.invoke, app, [*options, *args])

    return invoke
