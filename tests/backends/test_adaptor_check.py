"""The adaptor conformance kit (`dxts adaptor check`) against the adaptors this project ships —
null, local and Slurm (on the real cluster), each served over gRPC — which keep the contract,
and against an adaptor that breaks idempotency, which it must fail naming the property."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from adaptor_serving import serve_adaptor
from slurm_cluster import slurm_conf
from typer.testing import CliRunner

from dxts.backends.local.adaptor import LocalAdaptor
from dxts.backends.local.settings import LocalSettings
from dxts.backends.logic import Adaptor
from dxts.backends.null.adaptor import NullAdaptor
from dxts.backends.null.settings import NullSettings
from dxts.backends.slurm.adaptor import SlurmAdaptor
from dxts.backends.slurm.settings import SlurmSettings
from dxts.cli.adaptor_check import check_adaptor
from dxts.cli.main import app
from dxts.core.adaptor.model import Payload, Submission, SubmitResult
from dxts.core.grpc import DevKeys, GrpcServer, channel
from dxts.core.ids import id_to_str, new_id
from dxts.v1 import backend_pb2_grpc

PROPERTIES = [
    "describe",
    "idempotent-submit",
    "results-in-order",
    "refuses-malformed-keys",
    "refuses-cancelled-keys",
    "poll-terminal-outcome",
    "lost-identifiers",
    "cancel-in-flight",
    "empty-requests",
]


class ForgetfulAdaptor(NullAdaptor):
    """Breaks the contract's backbone: a second Submit of a key starts it again."""

    async def submit(self, payload: Payload, parcels: Sequence[Submission]) -> list[SubmitResult]:
        for parcel in parcels:
            job = self.jobs.pop(parcel.parcel_id, None)
            if job is not None:  # forget it: the key is new again
                self.by_identifier[job.identifier].parcel_id = id_to_str(new_id())
        return await super().submit(payload, parcels)


async def served(adaptor: Adaptor, keys: DevKeys) -> GrpcServer:
    await adaptor.start()
    return await serve_adaptor(adaptor, keys.verifier())


@pytest.fixture
async def keys(tmp_path: Path) -> DevKeys:
    return DevKeys.load_or_create(tmp_path / "keys")


async def verdicts_of(adaptor: Adaptor, keys: DevKeys) -> dict[str, tuple[str, str]]:
    server = await served(adaptor, keys)
    token = keys.issue("dxts", "dxts-dispatcher", ["dispatcher"])
    try:
        async with channel(server.address, token=token, default_timeout=60) as opened:
            stub = backend_pb2_grpc.BackendAdaptorServiceStub(opened)
            verdicts = await check_adaptor(stub, timeout_s=180)
    finally:
        await server.stop(grace=0)
        await adaptor.stop()
    assert [v.name for v in verdicts] == PROPERTIES
    return {v.name: (v.status, v.reason) for v in verdicts}


def all_pass(verdicts: dict[str, tuple[str, str]]) -> None:
    assert {name: status for name, (status, _) in verdicts.items()} == dict.fromkeys(
        PROPERTIES, "PASS"
    ), verdicts


async def test_the_null_adaptor_keeps_the_contract(keys: DevKeys) -> None:
    all_pass(await verdicts_of(NullAdaptor(NullSettings(delay_s=0.5)), keys))


async def test_the_local_adaptor_keeps_the_contract(keys: DevKeys, tmp_path: Path) -> None:
    settings = LocalSettings(work_dir=tmp_path / "local", kill_grace_s=1)
    all_pass(await verdicts_of(LocalAdaptor(settings), keys))


async def test_the_slurm_adaptor_keeps_the_contract(keys: DevKeys, tmp_path: Path) -> None:
    slurm_conf()
    settings = SlurmSettings(work_dir=tmp_path / "slurm")
    all_pass(await verdicts_of(SlurmAdaptor(settings), keys))


async def test_an_adaptor_breaking_idempotency_fails_naming_the_property(
    keys: DevKeys,
) -> None:
    server = await served(ForgetfulAdaptor(NullSettings()), keys)
    token = keys.issue("dxts", "dxts-dispatcher", ["dispatcher"])
    try:
        result = await asyncio.to_thread(
            CliRunner().invoke, app, ["adaptor", "check", server.address, "--token", token]
        )
    finally:
        await server.stop(grace=0)
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert any(
        line.startswith("FAIL idempotent-submit: the same key got two identifiers")
        for line in lines
    ), result.output
    assert "PASS describe: null" in result.output
    assert lines[-1].startswith("1 of 9 properties failed: idempotent-submit")
