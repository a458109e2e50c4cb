"""The web component against running services: the components `dxts up` composes (without
their sweeps: nothing moves unless a test moves it) over the module's database, the web app
over them in the same event loop, and browsers as httpx clients holding a session cookie."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner, Result
from web_support import Browser, Dxts

from dxts.cli.main import app as dxts_app
from dxts.cli.up import Stack, compose
from dxts.core.catalogue import CatalogueSettings, open_catalogue
from dxts.core.db import Database
from dxts.core.grpc import DevKeys
from dxts.web.app import Web, build_app
from dxts.web.settings import WebSettings


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dxts-data")


@pytest.fixture(scope="module")
def dev_keys(data_dir: Path) -> DevKeys:
    """The data directory's key pair, as `dxts up` has it: the components' own tokens (the
    dispatcher asking definition for a parcel's VO) and the people's are signed alike."""
    return DevKeys.load_or_create(data_dir)


@pytest.fixture(scope="module")
async def stack(database: Database, data_dir: Path, dev_keys: DevKeys) -> AsyncIterator[Stack]:
    catalogue = await open_catalogue(
        CatalogueSettings(url=f"sqlite+aiosqlite:///{data_dir / 'catalogue.sqlite'}")
    )
    running = await compose(
        database, data_dir=data_dir, verifier=dev_keys.verifier(), catalogue=catalogue, sweeps=False
    )
    try:
        yield running
    finally:
        await running.stop()
        await catalogue.close()


@pytest.fixture(scope="module")
async def web(stack: Stack) -> AsyncIterator[Web]:
    served = Web(
        WebSettings(
            definition_address=stack.address("definition"),
            execution_address=stack.address("execution"),
            accounting_address=stack.address("accounting"),
            dispatcher_address=stack.address("dispatcher"),
        )
    )
    yield served
    await served.services.close()


@pytest.fixture(scope="module")
def token(dev_keys: DevKeys) -> Callable[[str, str], str]:
    """`token(vo, subject)`: an operator's token the services accept."""
    return lambda vo, subject: dev_keys.issue(vo, subject, ["operator", "user"])


@pytest.fixture(scope="module")
def anonymous(web: Web) -> Callable[[], httpx.AsyncClient]:
    """A browser with no session."""
    application = build_app(web)
    return lambda: httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application), base_url="http://web.test"
    )


@pytest.fixture(scope="module")
def browser(anonymous: Callable[[], httpx.AsyncClient]) -> Browser:
    """`await browser(token)`: a browser signed in with `token` through the sign-in form."""

    async def signed_in(token: str) -> httpx.AsyncClient:
        client = anonymous()
        reply = await client.post("/signin", data={"token": token, "next": "/workgraphs"})
        assert reply.status_code == 303, reply.text
        return client

    return signed_in


@pytest.fixture(scope="module")
def dxts(stack: Stack, token: Callable[[str, str], str]) -> Dxts:
    """`await dxts("submit", path)`: the command as an operator of VO `demo`."""
    runner = CliRunner()
    options = ["--token", token("demo", "olivia")]
    for name in ("definition", "execution", "accounting"):
        options += [f"--{name}", stack.address(name)]

    async def invoke(*args: str) -> Result:
        return await asyncio.to_thread(runner.invoke, dxts_app, [*options, *args])

    return invoke
