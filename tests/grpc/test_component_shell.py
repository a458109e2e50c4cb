"""The shell every server runs in: a Component starts and stops in one shape, and `serve` stops
the served component gracefully on SIGTERM, even one that arrives while it starts."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_probe import Probe

from dxts.core.component import Component, Process, serve_until_signalled
from dxts.core.grpc.ports import free_port
from dxts.core.kernel.sweeps import Pacing, Sweep, SweepRunner
from dxts.core.settings import ServerSettings

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
log = logging.getLogger("dxts.test.shell")


async def watch(address: str) -> AsyncIterator[int]:
    """Every status change the server reports, from the moment it answers."""
    async with grpc.aio.insecure_channel(address) as ch:
        stream = health_pb2_grpc.HealthStub(ch).Watch(
            health_pb2.HealthCheckRequest(), timeout=30, wait_for_ready=True
        )
        async for reply in stream:
            yield reply.status


@pytest.fixture
def address(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    listen = f"127.0.0.1:{free_port()}"
    monkeypatch.setenv("DXTS_LISTEN", listen)
    monkeypatch.setenv("DXTS_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DXTS_SHUTDOWN_GRACE_S", "1")
    return listen


async def test_a_component_starts_its_steps_then_its_sweeps_and_stops_last_opened_first() -> None:
    said: list[str] = []

    async def round_() -> int:
        said.append("round")
        return 0

    async def step() -> None:
        said.append("started")

    runner = SweepRunner([Sweep("s", round_, Pacing(interval_s=3600, first_idle_s=3600))])
    component = Component(
        runner=runner,
        on_start=[step],
        cleanups=[lambda: said.append("first opened"), lambda: said.append("last opened")],
    )
    await component.start()
    assert runner.running
    await component.start()  # a second start leaves the running sweeps alone
    for _ in range(100):
        if "round" in said:
            break
        await asyncio.sleep(0.01)
    await component.stop()
    await component.stop()  # idempotent
    assert not runner.running
    assert said == ["started", "started", "round", "last opened", "first opened"]


async def test_sigterm_stops_the_served_component_gracefully(address: str) -> None:
    stopped: list[str] = []

    async def build(settings: ServerSettings, process: Process) -> Component:
        return Component(services=[Probe().service()], cleanups=[lambda: stopped.append("x")])

    serving = asyncio.create_task(serve_until_signalled(ServerSettings, build, log))
    statuses = watch(address)
    assert await anext(statuses) == SERVING
    os.kill(os.getpid(), signal.SIGTERM)
    assert await anext(statuses) == NOT_SERVING
    await statuses.aclose()
    await asyncio.wait_for(serving, timeout=30)
    assert stopped == ["x"]


async def test_a_sigterm_while_the_component_starts_stops_it_once_started(address: str) -> None:
    said: list[str] = []

    async def build(settings: ServerSettings, process: Process) -> Component:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(0.05)  # the signal is delivered (and remembered) before the start

        async def started() -> None:
            said.append("started")

        return Component(
            services=[Probe().service()],
            on_start=[started],
            cleanups=[lambda: said.append("stopped")],
        )

    await asyncio.wait_for(serve_until_signalled(ServerSettings, build, log), timeout=30)
    assert said == ["started", "stopped"]
    with pytest.raises(grpc.aio.AioRpcError):
        async with grpc.aio.insecure_channel(address) as ch:
            await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=2)
