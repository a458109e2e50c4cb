"""The accounting service under test: built over the module's database (SQLite and MariaDB),
served by a real in-process gRPC server on port 0, called with development tokens."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from accounting_world import SETTINGS, Lister, World, build_world

from dxts.accounting import Accounting, build_accounting
from dxts.core.db import Database
from dxts.core.grpc import DevKeys, GrpcServer, channel
from dxts.core.settings import ServerSettings
from dxts.v1 import accounting_pb2_grpc


@pytest.fixture(scope="module")
def dev_keys(tmp_path_factory: pytest.TempPathFactory) -> DevKeys:
    directory: Path = tmp_path_factory.mktemp("dxts-data")
    return DevKeys.load_or_create(directory)


@pytest.fixture(scope="module")
def operator_token(dev_keys: DevKeys) -> str:
    return dev_keys.issue("lhcb", "olivia", ["operator", "user"])


@pytest.fixture(scope="module")
def user_token(dev_keys: DevKeys) -> str:
    return dev_keys.issue("lhcb", "ursula", ["user"])


@pytest.fixture(scope="module")
def lister() -> Lister:
    return Lister()


@pytest.fixture(scope="module")
async def accounting(database: Database, lister: Lister) -> AsyncIterator[Accounting]:
    """The component with its sweeps built but not running: the tests drive them."""
    built = await build_accounting(database, settings=SETTINGS, members=lister, start_sweeps=False)
    try:
        yield built
    finally:
        await built.stop()


@pytest.fixture(scope="module")
async def world(database: Database, lister: Lister) -> World:
    built = await build_world(database)
    lister.workgraphs[built.workgraph_id] = built.members
    return built


@pytest.fixture(scope="module")
async def server(accounting: Accounting, dev_keys: DevKeys) -> AsyncIterator[GrpcServer]:
    running = GrpcServer(
        accounting.services,
        settings=ServerSettings(listen="127.0.0.1:0"),
        verifier=dev_keys.verifier(),
    )
    async with running:
        yield running


@pytest.fixture
async def stub(
    server: GrpcServer, operator_token: str
) -> AsyncIterator[accounting_pb2_grpc.AccountingServiceAsyncStub]:
    """An operator's client: calls raise the domain errors the server raised."""
    async with channel(server.address, token=operator_token) as ch:
        yield accounting_pb2_grpc.AccountingServiceStub(ch)  # type: ignore[misc]


@pytest.fixture
async def user_stub(
    server: GrpcServer, user_token: str
) -> AsyncIterator[accounting_pb2_grpc.AccountingServiceAsyncStub]:
    async with channel(server.address, token=user_token) as ch:
        yield accounting_pb2_grpc.AccountingServiceStub(ch)  # type: ignore[misc]


@pytest.fixture
async def anonymous_stub(
    server: GrpcServer,
) -> AsyncIterator[accounting_pb2_grpc.AccountingServiceAsyncStub]:
    """No token at all, and no conversion: the status code as sent."""
    async with grpc.aio.insecure_channel(server.address) as ch:
        yield accounting_pb2_grpc.AccountingServiceStub(ch)  # type: ignore[misc]
