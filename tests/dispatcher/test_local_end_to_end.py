"""From Unassigned to the outcome reaching execution, through the local adaptor running real CWL
with cwltool (SQLite and MariaDB): the status report is keyed by the parcel's real inputs, the
manifest names the files written to the storage element, a failing user job comes back FAILED."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from dispatch_support import (
    FakeExecution,
    Keys,
    assert_counters_exact,
    dispatcher,
    empty,
    identifiers,
    parcels,
    serve,
    statuses,
    transformation,
)

from dxts.backends.local.logic.adaptor import LocalAdaptor
from dxts.backends.local.settings import LocalSettings
from dxts.core.adaptor.model import OutcomeResult
from dxts.core.db import Database, Isolation
from dxts.core.errors import NotFound
from dxts.core.grpc import GrpcServer, channel
from dxts.core.ids import id_to_str
from dxts.core.schema import execution
from dxts.core.settings import ServerSettings
from dxts.core.states import Kind
from dxts.v1 import dispatcher_pb2, dispatcher_pb2_grpc

WRITE = (
    "import json, sys; open('result.txt', 'w').write(sys.argv[1]);"
    "open('report.json', 'w').write(json.dumps({i: {'action': 'SUCCESS'} for i in sys.argv[2:]}))"
)
WRITER = {
    "class": "CommandLineTool",
    "cwlVersion": "v1.2",
    "baseCommand": [sys.executable, "-c", WRITE],
    "inputs": {
        "message": {"type": "string", "inputBinding": {"position": 1}},
        "dxts-input-ids": {"type": "string[]", "inputBinding": {"position": 2}},
    },
    "outputs": {
        "output-data": {"type": "File", "outputBinding": {"glob": "result.txt"}},
        "status-report": {"type": "File", "outputBinding": {"glob": "report.json"}},
    },
}
FAILING = {
    "class": "CommandLineTool",
    "cwlVersion": "v1.2",
    "baseCommand": [sys.executable, "-c", "raise SystemExit(2)"],
    "inputs": {},
    "outputs": {},
}


@pytest.fixture
async def local(tmp_path: Path, keys: Keys) -> AsyncIterator[tuple[LocalAdaptor, str]]:
    adaptor = LocalAdaptor(LocalSettings(work_dir=tmp_path / "local", workers=2))
    await adaptor.start()
    server = await serve(adaptor, keys)
    yield adaptor, server.address
    await server.stop(grace=0)
    await adaptor.stop()


async def test_compute_parcels_run_with_cwltool_and_their_outcomes_reach_execution(
    database: Database, keys: Keys, local: tuple[LocalAdaptor, str]
) -> None:
    await empty(database)
    adaptor, address = local
    tid = await transformation(database)
    produced = await parcels(
        database,
        2,
        transformation_id=tid,
        process=WRITER,
        parameters={"message": "hello"},
        inputs_per_parcel=2,
    )
    (user,) = await parcels(database, 1, process=FAILING, parameters={})
    sink = FakeExecution(database)
    component = await dispatcher(
        database, [{"name": "local", "address": address, "kind": "compute"}], keys, sink=sink
    )
    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 3
    assert set(await identifiers(database, "local")) == {*produced, user}

    for _ in range(600):
        await component.forwarder.poll_once(component.backends["local"])
        if len(sink.by_parcel()) == 3:
            break
        await asyncio.sleep(0.1)
    seen = sink.by_parcel()
    assert set(seen) == {*produced, user}

    inputs = await _inputs(database)
    for parcel_id in produced:
        (outcome,) = seen[parcel_id]
        assert outcome.result is OutcomeResult.SUCCEEDED, outcome.message
        assert json.loads(outcome.status_report_json) == {
            id_to_str(i): {"action": "SUCCESS"} for i in inputs[parcel_id]
        }
        (output,) = outcome.outputs
        assert output.lfn == f"/lhcb/dxts/{id_to_str(tid)}/{id_to_str(parcel_id)}/result.txt"
        assert adaptor.settings.se_path(output.storage_element, output.lfn).read_text() == "hello"
    (failed,) = seen[user]
    assert failed.result is OutcomeResult.FAILED
    states = await statuses(database, [*produced, user])
    assert [states[p] for p in [*produced, user]] == ["Completing", "Completing", "Failed"]
    await assert_counters_exact(database)
    await _the_logs_come_from_the_backend_that_ran_them(component, keys, produced, user)
    await component.stop()


async def _the_logs_come_from_the_backend_that_ran_them(
    component: Any, keys: Keys, produced: list[bytes], user: bytes
) -> None:
    """GetParcelLogs: the dispatcher asks the adaptor that ran the parcel (GetLogs, with its
    own token) for a person of the parcel's VO; another VO's person finds no such parcel."""
    server = GrpcServer(
        component.services,
        settings=ServerSettings(listen="127.0.0.1:0"),
        verifier=keys.keys.verifier(),
    )
    await server.start()
    try:
        async with channel(server.address, token=keys.keys.issue("lhcb", "pia", [])) as ch:
            stub = dispatcher_pb2_grpc.DispatcherServiceStub(ch)
            got = await stub.GetParcelLogs(
                dispatcher_pb2.GetParcelLogsRequest(parcel_id=id_to_str(user))
            )
            assert got.backend == "local"
            sandbox = Path(got.logs.sandbox)
            assert sandbox.name == got.identifier and (sandbox / "job.json").exists()
            assert "SystemExit" in got.logs.stderr or "exited" in got.logs.stderr
            ran = await stub.GetParcelLogs(
                dispatcher_pb2.GetParcelLogsRequest(parcel_id=id_to_str(produced[0]), max_bytes=8)
            )
            assert ran.logs.truncated and len(ran.logs.stderr.encode()) <= 8
            assert (
                '"output-data"'
                in (
                    await stub.GetParcelLogs(
                        dispatcher_pb2.GetParcelLogsRequest(parcel_id=id_to_str(produced[0]))
                    )
                ).logs.stdout
            )
        async with channel(server.address, token=keys.keys.issue("other", "oz", [])) as ch:
            stub = dispatcher_pb2_grpc.DispatcherServiceStub(ch)
            with pytest.raises(NotFound):
                await stub.GetParcelLogs(
                    dispatcher_pb2.GetParcelLogsRequest(parcel_id=id_to_str(user))
                )
    finally:
        await server.stop(grace=0)


async def _inputs(database: Database) -> dict[bytes, list[bytes]]:
    async def work(conn: Any) -> dict[bytes, list[bytes]]:
        found: dict[bytes, list[bytes]] = {}
        for row in await conn.execute(sa.select(execution.parcel_inputs)):
            found.setdefault(bytes(row.ParcelID), []).append(bytes(row.InputID))
        return found

    return await database.run(work, isolation=Isolation.READ_COMMITTED)
