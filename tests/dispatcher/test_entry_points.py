"""The console entry points the Helm chart runs: `dxts-backend-null`, `dxts-backend-local` and
`dxts-dispatcher` start from their environment, answer over gRPC, and stop on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from dxts.core.grpc import DevKeys, channel
from dxts.core.grpc.ports import free_port
from dxts.core.schema import metadata
from dxts.v1 import backend_pb2, backend_pb2_grpc, dispatcher_pb2, dispatcher_pb2_grpc

BIN = Path(sys.executable).parent


def free_address() -> str:
    return f"127.0.0.1:{free_port()}"


@contextlib.asynccontextmanager
async def running(command: str, env: dict[str, str], log: Path) -> AsyncIterator[Any]:
    with log.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            str(BIN / command), env={**os.environ, **env}, stdout=stderr, stderr=stderr
        )
        try:
            yield process
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                await asyncio.wait_for(process.wait(), timeout=30)


async def until(call: Any, patience_s: float = 90.0) -> Any:
    """The call's answer once the process answers (a loaded machine starts it slowly)."""
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            return await call()
        await asyncio.sleep(0.1)
    raise AssertionError("the process never answered")


@pytest.fixture
def token(tmp_path: Path) -> str:
    # Describes the adaptors as the dispatcher does, reads the dispatcher's status as a service.
    return DevKeys.load_or_create(tmp_path).issue("dxts", "test", ["dispatcher", "service"])


async def test_the_processes_start_answer_and_stop(tmp_path: Path, token: str) -> None:
    database = tmp_path / "dxts.sqlite"
    engine = create_async_engine(f"sqlite+aiosqlite:///{database}", poolclass=sa.pool.NullPool)
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    await engine.dispose()
    null_address, local_address, dispatcher_address = (free_address() for _ in range(3))
    common = {"DXTS_DATA_DIR": str(tmp_path)}
    backends = (
        f'[{{"name": "null", "address": "{null_address}", "kind": "compute"}},'
        f' {{"name": "local", "address": "{local_address}", "kind": "data"}}]'
    )
    async with (
        running(
            "dxts-backend-null",
            {**common, "DXTS_LISTEN": null_address, "DXTS_NULL_CAPACITY": "7"},
            tmp_path / "null.log",
        ),
        running(
            "dxts-backend-local",
            {
                **common,
                "DXTS_LISTEN": local_address,
                "DXTS_LOCAL_WORK_DIR": str(tmp_path / "local"),
                "DXTS_LOCAL_KIND": "data",
                "DXTS_CATALOGUE_URL": f"sqlite+aiosqlite:///{tmp_path / 'catalogue.sqlite'}",
            },
            tmp_path / "local.log",
        ),
        running(
            "dxts-dispatcher",
            {
                **common,
                "DXTS_LISTEN": dispatcher_address,
                "DXTS_DB_URL": f"sqlite+aiosqlite:///{database}",
                "DXTS_BACKENDS": backends,
                "DXTS_DEFINITION_ADDRESS": free_address(),
                "DXTS_EXECUTION_ADDRESS": free_address(),
                "DXTS_DISPATCH_STATUS_INTERVAL_S": "0.2",
            },
            tmp_path / "dispatcher.log",
        ) as dispatcher_process,
    ):
        async with channel(null_address, token=token, default_timeout=2) as ch:
            null = await until(
                lambda: backend_pb2_grpc.BackendAdaptorServiceStub(ch).Describe(
                    backend_pb2.DescribeRequest()
                )
            )
        assert (null.name, null.capacity) == ("null", 7)
        async with channel(local_address, token=token, default_timeout=2) as ch:
            local = await until(
                lambda: backend_pb2_grpc.BackendAdaptorServiceStub(ch).Describe(
                    backend_pb2.DescribeRequest()
                )
            )
        assert local.name == "local"

        async def reachable() -> Any:
            async with channel(dispatcher_address, token=token, default_timeout=2) as ch:
                status = await dispatcher_pb2_grpc.DispatcherServiceStub(ch).DispatcherStatus(
                    dispatcher_pb2.DispatcherStatusRequest()
                )
            assert all(b.reachable for b in status.backends)
            return status

        status = await until(reachable)
        assert {(b.backend, b.capacity) for b in status.backends} == {("null", 7), ("local", 0)}
        dispatcher_process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(dispatcher_process.wait(), timeout=30) == 0
