"""Two retries of one execution command racing, on MariaDB: the command applies once and both
answer its result (ResetInputs, WriteOffInputs, CancelParcels, Flush), with one log row."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
import runner_support as s
import sqlalchemy as sa
from definition_double import InMemoryTransformations

from dxts.core.catalogue import CatalogueSettings
from dxts.core.catalogue.local import LocalFileCatalogue
from dxts.core.counters import journal_inputs
from dxts.core.db import Database
from dxts.core.grpc import DevKeys, GrpcServer, channel
from dxts.core.grpc.convert import enum_to_proto
from dxts.core.ids import id_to_str
from dxts.core.schema import execution
from dxts.core.settings import ServerSettings
from dxts.core.states import InputStatus, ParcelStatus
from dxts.execution.component import Execution, build_execution
from dxts.execution.logic.feeding import run_feeder
from dxts.execution.logic.packing import run_packer
from dxts.execution.logic.transformations import ActiveTransformation
from dxts.execution.settings import ExecutionSettings
from dxts.v1 import execution_pb2, execution_pb2_grpc

pytestmark = pytest.mark.mariadb_only

INPUTS = 40
BATCH = 7  # several transactions per command: a wide window for the race


@pytest.fixture(scope="module")
def definitions() -> InMemoryTransformations:
    return InMemoryTransformations()


@pytest.fixture(scope="module")
async def operator(
    mariadb: Database,
    definitions: InMemoryTransformations,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Any]:
    """An operator's stub of a served execution component (no sweeps running)."""
    folder = tmp_path_factory.mktemp("catalogue")
    catalogue = LocalFileCatalogue(CatalogueSettings(url=f"sqlite+aiosqlite:///{folder}/c.sqlite"))
    await catalogue.start()
    component: Execution = await build_execution(
        mariadb,
        settings=ExecutionSettings(operation_batch=BATCH),
        registry=s.registry({}),
        catalogue=catalogue,
        definition_client=definitions,
        start_sweeps=False,
    )
    keys = DevKeys.load_or_create(tmp_path_factory.mktemp("keys"))
    server = GrpcServer(
        component.services, settings=ServerSettings(listen="127.0.0.1:0"), verifier=keys.verifier()
    )
    try:
        async with server:
            opened = channel(server.address, token=keys.issue("lhcb", "olga", ["operator"]))
            try:
                yield execution_pb2_grpc.ExecutionServiceStub(opened)  # type: ignore[no-untyped-call]
            finally:
                await opened.close()
    finally:
        await component.stop()
        await catalogue.close()


async def fed(mariadb: Database, definitions: InMemoryTransformations) -> ActiveTransformation:
    """A transformation with `INPUTS` Unassigned inputs, known to definition."""
    feeding = {"inputs": [{"lfn": f"/lhcb/r/{i:03d}", "lfn_size": i} for i in range(INPUTS)]}
    t = await s.transformation(mariadb, feeder="List", feeder_args=feeding)
    await run_feeder(mariadb, s.registry({}), t)
    t = replace(t, feeder_enabled=False)
    definitions.put(t)
    return t


async def logged(mariadb: Database, transformation_id: bytes, request_id: str) -> list[Any]:
    """The transformation's log rows carrying `request_id`."""
    rows = await s.log_rows(mariadb, transformation_id)
    return [r for r in rows if (r.Data or {}).get("request_id") == request_id]


async def twice(call: Any, request: Any) -> tuple[Any, Any]:
    first, second = await asyncio.gather(call(request), call(request))
    return first, second


def by_statuses(*statuses: Any) -> list[Any]:
    return [enum_to_proto(status) for status in statuses]


async def test_racing_resets_apply_once(
    mariadb: Database, definitions: InMemoryTransformations, operator: Any
) -> None:
    t = await fed(mariadb, definitions)
    async with mariadb.transaction(s.RC) as conn:  # all Problematic, by hand with their journal
        await conn.execute(
            sa.update(execution.inputs)
            .where(execution.inputs.c.TransformationID == t.id)
            .values(Status="Problematic", ErrorCount=3)
        )
        await journal_inputs(conn, {(t.id, "Unassigned", "Problematic"): INPUTS})
    request = execution_pb2.ResetInputsRequest(
        request_id="reset-1",
        transformation_id=id_to_str(t.id),
        selection=execution_pb2.InputSelection(statuses=by_statuses(InputStatus.PROBLEMATIC)),
    )

    first, second = await twice(operator.ResetInputs, request)

    assert first.reset_count == second.reset_count == INPUTS
    assert len(await logged(mariadb, t.id, "reset-1")) == 1
    assert s.by_status(await s.input_rows(mariadb, t.id)) == {"Unassigned": INPUTS}


async def test_racing_write_offs_apply_once(
    mariadb: Database, definitions: InMemoryTransformations, operator: Any
) -> None:
    t = await fed(mariadb, definitions)
    request = execution_pb2.WriteOffInputsRequest(
        request_id="halt-1",
        transformation_id=id_to_str(t.id),
        selection=execution_pb2.InputSelection(statuses=by_statuses(InputStatus.UNASSIGNED)),
        reason="halted",
    )

    first, second = await twice(operator.WriteOffInputs, request)

    assert first.written_off_count == second.written_off_count == INPUTS
    assert len(await logged(mariadb, t.id, "halt-1")) == 1
    assert s.by_status(await s.input_rows(mariadb, t.id)) == {"NotProcessed": INPUTS}


async def test_racing_cancellations_apply_once(
    mariadb: Database, definitions: InMemoryTransformations, operator: Any
) -> None:
    t = await fed(mariadb, definitions)
    packed = await run_packer(mariadb, s.registry({}), t)  # one Unassigned parcel per input
    assert packed.parcels == INPUTS
    request = execution_pb2.CancelParcelsRequest(
        request_id="cancel-1",
        transformation_id=id_to_str(t.id),
        selection=execution_pb2.ParcelSelection(statuses=by_statuses(ParcelStatus.UNASSIGNED)),
        reason="enough",
    )

    first, second = await twice(operator.CancelParcels, request)

    assert (first.cancelled_count, first.cancel_requested_count) == (INPUTS, 0)
    assert first == second
    assert len(await logged(mariadb, t.id, "cancel-1")) == 1
    assert s.by_status(await s.input_rows(mariadb, t.id)) == {"NotProcessed": INPUTS}


async def test_racing_flushes_apply_once(
    mariadb: Database, definitions: InMemoryTransformations, operator: Any
) -> None:
    t = await fed(mariadb, definitions)
    request = execution_pb2.FlushRequest(request_id="flush-1", transformation_id=id_to_str(t.id))

    first, second = await twice(operator.Flush, request)

    assert (first.parcels_created, first.inputs_assigned) == (INPUTS, INPUTS)
    assert first == second
    assert len(await logged(mariadb, t.id, "flush-1")) == 1
    async with mariadb.transaction(s.RC) as conn:
        (parcels,) = (
            await conn.execute(
                sa.select(sa.func.count()).where(execution.parcels.c.TransformationID == t.id)
            )
        ).one()
    assert parcels == INPUTS
