"""A real in-process server on port 0 serving the test-only Probe service, and clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_probe import PROBE_RULES, Probe

from dxts.core.grpc import DevKeys, GrpcServer, channel
from dxts.core.settings import ServerSettings


@pytest.fixture(scope="module")
def dev_keys(tmp_path_factory: pytest.TempPathFactory) -> DevKeys:
    directory: Path = tmp_path_factory.mktemp("dxts-data")
    return DevKeys.load_or_create(directory)


@pytest.fixture(scope="module")
def token(dev_keys: DevKeys) -> str:
    return dev_keys.issue("lhcb", "alice", ["operator", "user"])


@pytest.fixture(scope="module")
def probe() -> Probe:
    return Probe()


@pytest.fixture(scope="module")
async def server(dev_keys: DevKeys, token: str, probe: Probe) -> AsyncIterator[GrpcServer]:
    """The module's running server: the Probe service, authenticated by the dev keys."""
    running = GrpcServer(
        [probe.service()],
        settings=ServerSettings(listen="127.0.0.1:0"),
        verifier=dev_keys.verifier(),
        extra_rules=PROBE_RULES,
    )
    async with running:
        probe.address, probe.token = running.address, token
        yield running


@pytest.fixture
async def client(server: GrpcServer, token: str) -> AsyncIterator[grpc.aio.Channel]:
    """A channel() client carrying a valid token."""
    async with channel(server.address, token=token) as ch:
        yield ch


@pytest.fixture
async def raw_client(server: GrpcServer, token: str) -> AsyncIterator[grpc.aio.Channel]:
    """A plain grpc.aio channel (no conversion): to look at codes and details as sent."""
    async with grpc.aio.insecure_channel(server.address) as ch:
        yield ch
