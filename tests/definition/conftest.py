"""The definition service under test: built over the module's database (SQLite and MariaDB),
served by a real in-process gRPC server on port 0, called with development tokens.

Callers: `operator` (lhcb, operator role), `owner` (lhcb, owns the fixture workgraphs, plain
user), `colleague` (lhcb, plain user, owns nothing), `manager` (lhcb, holds only the
mc_production_manager sign-off role) and `outsider` (another VO, operator role there).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cwl_support import catalogue
from definition_world import ExecutionDouble, Stub

from dxts.core.db import Database
from dxts.core.grpc import DevKeys, GrpcServer, channel
from dxts.core.settings import ServerSettings
from dxts.definition.component import Definition, build_definition
from dxts.definition.settings import DefinitionSettings
from dxts.v1 import definition_pb2_grpc

CALLERS = {
    "operator": ("lhcb", "olivia", ["operator"]),
    "owner": ("lhcb", "ursula", ["user"]),
    "colleague": ("lhcb", "carl", ["user"]),
    "manager": ("lhcb", "mona", ["mc_production_manager"]),
    "outsider": ("atlas", "otto", ["operator"]),
    "service": ("dxts", "dxts-dispatcher", ["service"]),
}


@pytest.fixture(scope="module")
def dev_keys(tmp_path_factory: pytest.TempPathFactory) -> DevKeys:
    directory: Path = tmp_path_factory.mktemp("dxts-data")
    return DevKeys.load_or_create(directory)


@pytest.fixture(scope="module")
def execution() -> ExecutionDouble:
    return ExecutionDouble()


@pytest.fixture(scope="module")
async def definition(database: Database, execution: ExecutionDouble) -> AsyncIterator[Definition]:
    built = await build_definition(
        database,
        settings=DefinitionSettings(),
        catalogue=catalogue(),
        execution=execution.factory,
    )
    try:
        yield built
    finally:
        await built.stop()


@pytest.fixture(scope="module")
async def server(definition: Definition, dev_keys: DevKeys) -> AsyncIterator[GrpcServer]:
    running = GrpcServer(
        definition.services,
        settings=ServerSettings(listen="127.0.0.1:0"),
        verifier=dev_keys.verifier(),
    )
    async with running:
        yield running


@pytest.fixture(scope="module")
async def stubs(server: GrpcServer, dev_keys: DevKeys) -> AsyncIterator[dict[str, Stub]]:
    """One client per caller; calls raise the domain errors the server raised."""
    channels = {
        name: channel(server.address, token=dev_keys.issue(vo, sub, roles))
        for name, (vo, sub, roles) in CALLERS.items()
    }
    try:
        yield {
            name: definition_pb2_grpc.DefinitionServiceStub(ch)  # type: ignore[misc]
            for name, ch in channels.items()
        }
    finally:
        for ch in channels.values():
            await ch.close()


@pytest.fixture
async def replica(mysql_test_url: str, mariadb: Database) -> AsyncIterator[Database]:
    """MariaDB only: a second "replica": its own Database (pool) over the same MariaDB database."""
    other = Database(mysql_test_url)
    await other.start()
    try:
        yield other
    finally:
        await other.dispose()
