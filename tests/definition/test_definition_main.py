"""`dxts-definition` as the chart runs it, and the definition settings it reads."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import signal
import sys
from pathlib import Path

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy.ext.asyncio import create_async_engine

from dxts.core.config import load_installation_config
from dxts.core.errors import InvalidArgument, Unavailable
from dxts.core.grpc import DevKeys, channel
from dxts.core.grpc.ports import free_port
from dxts.core.schema import metadata
from dxts.definition.__main__ import main
from dxts.definition.settings import DefinitionSettings
from dxts.v1 import common_pb2, definition_pb2
from dxts.v1.definition_pb2_grpc import DefinitionServiceStub

ENTRY_POINT = Path(sys.executable).parent / "dxts-definition"
JOB = """
cwlVersion: v1.2
class: CommandLineTool
$namespaces: {dirac: https://diracgrid.org/cwl#}
hints: {dirac:Job: {}}
baseCommand: ["true"]
inputs: {}
outputs: {}
"""


def test_the_console_script_is_the_definition_main() -> None:
    (script,) = [
        e
        for e in importlib.metadata.entry_points(group="console_scripts")
        if e.name == "dxts-definition"
    ]
    assert script.load() is main


def test_the_installation_file_sections_become_the_definition_config(tmp_path: Path) -> None:
    path = tmp_path / "dxts.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "installation": {"packer": {"name": "BySize", "args": {"group_size": 5}}},
                "vos": {"lhcb": {"types": {"MC": {"executing_identity": "lhcb_mc"}}}},
                "backend_policy": {},  # the dispatcher's section
            }
        )
    )
    config = load_installation_config(path).definition
    assert config.installation.packer == {"name": "BySize", "args": {"group_size": 5}}
    # The built-in defaults the section does not set are kept.
    assert config.installation.hooks == {"HandleFailedInput": {"hook": "RetryUntilMaxErrors"}}
    assert config.vos["lhcb"].types["MC"].executing_identity == "lhcb_mc"
    assert DefinitionSettings(config_file=path).definition_config() == config


def test_a_bad_installation_file_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "dxts.yaml"
    path.write_text(yaml.safe_dump({"installation": {"packer": "BySize"}}))
    with pytest.raises(InvalidArgument) as refused:
        load_installation_config(path)
    assert [v.field for v in refused.value.violations] == ["installation.packer"]


async def serving(address: str, process: asyncio.subprocess.Process) -> None:
    async with grpc.aio.insecure_channel(address) as ch:
        health = health_pb2_grpc.HealthStub(ch)
        for _ in range(600):
            assert process.returncode is None, "dxts-definition exited early"
            try:
                reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(0.05)
    raise AssertionError("dxts-definition never reported SERVING")


async def test_the_entry_point_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'dxts.sqlite'}"
    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
    await engine.dispose()
    config = tmp_path / "dxts.yaml"
    config.write_text(yaml.safe_dump({"installation": {}, "backend_policy": {}}))
    address = f"127.0.0.1:{free_port()}"
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("DXTS_")
    } | {
        "DXTS_DB_URL": url,
        "DXTS_LISTEN": address,
        "DXTS_DATA_DIR": str(tmp_path / "data"),
        "DXTS_CONFIG_FILE": str(config),
        "DXTS_SHUTDOWN_GRACE_S": "1",
    }
    process = await asyncio.create_subprocess_exec(
        str(ENTRY_POINT),
        env=environment,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await serving(address, process)
        token = DevKeys.load_or_create(tmp_path / "data").issue("lhcb", "sam", ["user"])
        async with channel(address, token=token) as ch:
            stub = DefinitionServiceStub(ch)
            listed = await stub.ListWorkgraphs(definition_pb2.ListWorkgraphsRequest())
            assert list(listed.workgraphs) == []
            # No DXTS_EXECUTION_ADDRESS: a job is validated and stored, then refused for now.
            with pytest.raises(Unavailable):
                await stub.SubmitJob(
                    definition_pb2.SubmitJobRequest(
                        bundle=common_pb2.DocumentBundle(
                            main_path="job.cwl", files={"job.cwl": JOB.encode()}
                        )
                    )
                )
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        _, errors = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 0, errors.decode()
    assert "signal received: stopping" in errors.decode()
