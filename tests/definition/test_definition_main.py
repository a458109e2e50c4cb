"""`dxts-definition` as the chart runs it, and the definition settings it reads."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import yaml
from cwl_support import EXAMPLES as EXAMPLE
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hostile import billion_laughs
from sqlalchemy.ext.asyncio import create_async_engine

from dxts.core.config import DocumentLimits, load_installation_config
from dxts.core.errors import DxtsError, InvalidArgument, Unavailable
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


@dataclass
class RunningDefinition:
    process: asyncio.subprocess.Process
    address: str
    token: str
    errors: str = ""  # its stderr, once it has exited


@asynccontextmanager
async def running_definition(
    tmp_path: Path, grace_s: float = 1.0
) -> AsyncIterator[RunningDefinition]:
    """`dxts-definition` over a fresh SQLite file, serving; SIGTERM at the end of the block
    (unless it has exited), then its stderr is read."""
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
        "DXTS_SHUTDOWN_GRACE_S": str(grace_s),
    }
    process = await asyncio.create_subprocess_exec(
        str(ENTRY_POINT),
        env=environment,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    running = RunningDefinition(process, address, "")
    try:
        await serving(address, process)
        running.token = DevKeys.load_or_create(tmp_path / "data").issue("lhcb", "sam", ["user"])
        yield running
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        _, errors = await asyncio.wait_for(process.communicate(), timeout=30)
        running.errors = errors.decode()


async def test_the_entry_point_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    async with (
        running_definition(tmp_path) as definition,
        channel(definition.address, token=definition.token) as ch,
    ):
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
    assert definition.process.returncode == 0, definition.errors
    assert "signal received: stopping" in definition.errors


# -- hostile documents against the process as deployed -----------------------------------------


def _proc(pid: int) -> tuple[int, float]:
    """(resident bytes, CPU seconds used) of process `pid`."""
    with open(f"/proc/{pid}/status") as status:
        rss = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return rss, (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def _submission(text: str) -> definition_pb2.SubmitWorkgraphRequest:
    return definition_pb2.SubmitWorkgraphRequest(
        bundle=common_pb2.DocumentBundle(main_path="main.cwl", files={"main.cwl": text.encode()}),
        dry_run=True,
    )


async def test_the_alias_bomb_leaves_the_process_as_it_was(tmp_path: Path) -> None:
    async with (
        running_definition(tmp_path) as definition,
        channel(definition.address, token=definition.token) as ch,
    ):
        stub = DefinitionServiceStub(ch)
        for _ in range(3):  # every code path of a refusal warmed up
            with pytest.raises(InvalidArgument):
                await stub.SubmitWorkgraph(_submission(billion_laughs(3)))
        rss_before, _ = _proc(definition.process.pid)
        started = time.perf_counter()
        with pytest.raises(InvalidArgument) as refused:
            await stub.SubmitWorkgraph(_submission(billion_laughs()), timeout=10)
        elapsed = time.perf_counter() - started
        rss_after, _ = _proc(definition.process.pid)
    assert "document_limits.max_nodes" in str(refused.value)
    grown = rss_after - rss_before
    print(f"alias bomb: refused in {elapsed * 1000:.1f} ms, RSS {rss_before} -> {rss_after}")
    assert grown < 4 << 20, f"the process grew by {grown} bytes"
    assert elapsed < 1.0, elapsed


async def test_sigterm_ends_a_process_busy_with_a_large_legal_submission_within_its_grace(
    tmp_path: Path,
) -> None:
    grace = 1.0
    # Within every default limit, and seconds (minutes on a loaded machine) of YAML parsing.
    bulk = ",".join(["1"] * (DocumentLimits().max_nodes - 1000))
    large = (EXAMPLE / "simulation.cwl").read_text().replace(
        "inputs:\n", f"inputs:\n  bulk:\n    type: Any\n    default: [{bulk}]\n", 1
    )
    async with running_definition(tmp_path, grace_s=grace) as definition:
        pid = definition.process.pid
        async with channel(definition.address, token=definition.token) as ch:
            stub = DefinitionServiceStub(ch)
            _, cpu_before = _proc(pid)
            call = asyncio.ensure_future(stub.SubmitWorkgraph(_submission(large), timeout=600))
            for _ in range(600):  # until it has spent half a second of CPU on the submission
                if _proc(pid)[1] - cpu_before >= 0.5 or call.done():
                    break
                await asyncio.sleep(0.05)
            assert not call.done(), "the submission was not busy long enough to test anything"
            started = time.monotonic()
            definition.process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(definition.process.wait(), timeout=60)
            stopped = time.monotonic() - started
            try:
                await call
                answered = True
            except (grpc.aio.AioRpcError, DxtsError):
                answered = False
    print(f"SIGTERM while busy: exited {stopped:.2f} s after the signal (grace {grace} s)")
    assert definition.process.returncode == 0, definition.errors
    # The parse was cut short at the grace, not waited for (which would have answered it); the
    # bound only catches a hang, loosely, as a loaded machine stretches every step.
    assert not answered, "the process finished the submission instead of stopping"
    assert stopped < grace + 30.0, definition.errors
