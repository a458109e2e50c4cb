"""The conformance kit (`dxts adaptor check`) against the DiracX adaptor, served over gRPC and
speaking to a real DiracX server (`scripts/diracx`), with a test pilot running every job the kit
submits as soon as DiracX holds it — each in its own task, so a long job being cancelled does
not hold the others back, and a Kill reaches the running payload through the pilot's
heartbeat as it would on a worker node."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from adaptor_serving import serve_adaptor
from diracx_fixture import DiracXServer, TestPilot, running_diracx
from test_adaptor_check import PROPERTIES

from dxts.backends.diracx.adaptor import DiracXAdaptor
from dxts.cli.adaptor_check import check_adaptor
from dxts.core.grpc import DevKeys, channel
from dxts.v1 import backend_pb2_grpc


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DiracXServer]:
    with running_diracx(tmp_path_factory.mktemp("diracx")) as running:
        yield running


@contextlib.asynccontextmanager
async def pilot_running_every_job(server: DiracXServer, work: Path) -> AsyncIterator[TestPilot]:
    """A pilot that picks up every job DiracX receives, until the block ends."""
    pilot = TestPilot(server, work, {})
    runs: dict[int, asyncio.Task[object]] = {}

    async def pick_up() -> None:
        while True:
            for job_id in await pilot.waiting():
                if job_id not in runs:
                    runs[job_id] = asyncio.create_task(pilot.run(job_id))
            await asyncio.sleep(0.3)

    picker = asyncio.create_task(pick_up())
    try:
        yield pilot
    finally:
        picker.cancel()
        for task in [picker, *runs.values()]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await pilot.close()


async def test_the_diracx_adaptor_keeps_the_contract(server: DiracXServer, tmp_path: Path) -> None:
    keys = DevKeys.load_or_create(tmp_path / "keys")
    adaptor = DiracXAdaptor(server.adaptor_settings(tmp_path / "adaptor"))
    await adaptor.start()
    served = await serve_adaptor(adaptor, keys.verifier())
    token = keys.issue("dxts", "dxts-dispatcher", ["dispatcher"])
    try:
        async with (
            pilot_running_every_job(server, tmp_path / "pilot"),
            channel(served.address, token=token, default_timeout=60) as opened,
        ):
            stub = backend_pb2_grpc.BackendAdaptorServiceStub(opened)
            verdicts = await check_adaptor(stub, timeout_s=180)
    finally:
        await served.stop(grace=0)
        await adaptor.stop()
    assert [v.name for v in verdicts] == PROPERTIES
    failed = [v.line() for v in verdicts if v.status != "PASS"]
    assert not failed, "\n".join(failed)
