"""`dxts-accounting` as the chart runs it: a process configured by the environment that serves
health, the AccountingService and metrics, folds, and stops cleanly on SIGTERM (SQLite)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import urllib.request
from pathlib import Path

import grpc
import sqlalchemy as sa
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy.ext.asyncio import create_async_engine

from dxts.core.counters import journal_inputs
from dxts.core.grpc import DevKeys, channel
from dxts.core.grpc.ports import free_port
from dxts.core.ids import id_to_str, new_id
from dxts.core.schema import definition, metadata
from dxts.v1 import accounting_pb2, common_pb2
from dxts.v1.accounting_pb2_grpc import AccountingServiceStub

ENTRY_POINT = Path(sys.executable).parent / "dxts-accounting"


async def prepared_database(url: str) -> bytes:
    """The schema, and one transformation with three journalled (unfolded) inputs."""
    engine = create_async_engine(url)
    tid, ownership = new_id(), new_id()
    try:
        async with engine.begin() as conn:
            await conn.run_sync(metadata.create_all)
            await conn.execute(
                sa.insert(definition.ownership).values(OwnershipID=ownership, VO="lhcb", Sub="a")
            )
            await conn.execute(
                sa.insert(definition.transformations).values(
                    TransformationID=tid,
                    OwnershipID=ownership,
                    Type="T",
                    Kind="Compute",
                    Packer="p",
                    UpdatedAt=sa.func.now(),
                )
            )
            await journal_inputs(conn, {(tid, None, "Unassigned"): 3})
    finally:
        await engine.dispose()
    return tid


async def serving(address: str, process: asyncio.subprocess.Process) -> None:
    async with grpc.aio.insecure_channel(address) as ch:
        health = health_pb2_grpc.HealthStub(ch)
        for _ in range(600):
            assert process.returncode is None, "dxts-accounting exited early"
            try:
                reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(0.05)
    raise AssertionError("dxts-accounting never reported SERVING")


async def test_the_entry_point_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'dxts.sqlite'}"
    tid = await prepared_database(url)
    address, metrics_port = f"127.0.0.1:{free_port()}", free_port()
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("DXTS_")
    } | {
        "DXTS_DB_URL": url,
        "DXTS_LISTEN": address,
        "DXTS_METRICS_PORT": str(metrics_port),
        "DXTS_DATA_DIR": str(tmp_path / "data"),
        "DXTS_SHUTDOWN_GRACE_S": "1",
        "DXTS_ACCOUNTING_FOLD_INTERVAL_S": "0.05",
    }
    process = await asyncio.create_subprocess_exec(
        str(ENTRY_POINT),
        env=environment,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await serving(address, process)
        # As definition's lifecycle reads counts: a person's read would ask the definition
        # service (not running here) what that person may see.
        token = DevKeys.load_or_create(tmp_path / "data").issue("dxts", "sam", ["service"])
        async with channel(address, token=token) as ch:
            reply = await AccountingServiceStub(ch).GetCounts(
                accounting_pb2.GetCountsRequest(
                    transformation_ids=[id_to_str(tid)], entity=common_pb2.ENTITY_INPUT
                )
            )
        assert reply.counts[0].total == 3
        url_metrics = f"http://127.0.0.1:{metrics_port}/metrics"
        text = await asyncio.to_thread(lambda: urllib.request.urlopen(url_metrics).read().decode())
        assert "dxts_counter_journal_rows" in text
        assert "dxts_grpc_server_handled_total" in text
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        _, errors = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 0, errors.decode()
    assert "signal received: stopping" in errors.decode()
