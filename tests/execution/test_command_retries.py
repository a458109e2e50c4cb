"""Two retries of one execution command racing, on MariaDB: the command applies once and both
answer its result (ResetInputs, WriteOffInputs, DecideFailedInput, CancelParcels, Flush), with one
log row; two different decisions racing on one Failed input, or an operator racing the hook:
the first wins."""

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
from dxts.core.plugins import Registry
from dxts.core.schema import execution
from dxts.core.settings import ServerSettings
from dxts.core.states import InputStatus, ParcelStatus
from dxts.execution.component import Execution, build_execution
from dxts.execution.logic.failed_inputs import handle_failed_inputs
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


async def all_failed(mariadb: Database, definitions: InMemoryTransformations) -> Any:
    """A transformation whose `INPUTS` inputs are all Failed, by hand with their journal."""
    t = await fed(mariadb, definitions)
    async with mariadb.transaction(s.RC) as conn:
        await conn.execute(
            sa.update(execution.inputs)
            .where(execution.inputs.c.TransformationID == t.id)
            .values(Status="Failed", ErrorCount=1)
        )
        await journal_inputs(conn, {(t.id, "Unassigned", "Failed"): INPUTS})
    return t


async def test_racing_decisions_on_a_failed_input_apply_once(
    mariadb: Database, definitions: InMemoryTransformations, operator: Any
) -> None:
    t = await all_failed(mariadb, definitions)
    first_input, second_input = sorted(r.InputID for r in await s.input_rows(mariadb, t.id))[:2]
    retried = execution_pb2.DecideFailedInputRequest(
        request_id="decide-1",
        transformation_id=id_to_str(t.id),
        input_id=id_to_str(first_input),
        reason="the site is back",
        retry=execution_pb2.RetryDecision(),
    )

    # Two retries of one request: one decision, both told it, one log row.
    first, second = await twice(operator.DecideFailedInput, retried)

    assert first == second
    assert first.status == enum_to_proto(InputStatus.UNASSIGNED)
    assert len(await logged(mariadb, t.id, "decide-1")) == 1

    # Two people deciding one input differently: the first wins, the second is told its state.
    retry_it = write_off(retried, "off-1", second_input)
    retry_it.retry.SetInParent()
    retry_it.request_id = "retry-2"
    outcomes = await asyncio.gather(
        operator.DecideFailedInput(write_off(retried, "off-1", second_input)),
        operator.DecideFailedInput(retry_it),
        return_exceptions=True,
    )

    refused = [o for o in outcomes if isinstance(o, Exception)]
    (won,) = [o for o in outcomes if not isinstance(o, Exception)]
    assert len(refused) == 1 and "only a Failed input is decided" in str(refused[0])
    rows = {r.InputID: r.Status for r in await s.input_rows(mariadb, t.id)}
    assert enum_to_proto(InputStatus(rows[second_input])) == won.status
    assert list(rows.values()).count("Failed") == INPUTS - 2
    await s.assert_counters_exact(mariadb, t.id)


def write_off(request: Any, request_id: str, input_id: bytes) -> Any:
    """`request` as a write-off of another input, under another request id."""
    changed = execution_pb2.DecideFailedInputRequest()
    changed.CopyFrom(request)
    changed.request_id, changed.input_id = request_id, id_to_str(input_id)
    changed.write_off.SetInParent()
    return changed


async def test_the_hook_and_an_operator_racing_on_a_failed_input_decide_it_once(
    mariadb: Database, definitions: InMemoryTransformations, operator: Any
) -> None:
    t = await all_failed(mariadb, definitions)
    chosen = sorted(r.InputID for r in await s.input_rows(mariadb, t.id))[INPUTS // 2]
    request = execution_pb2.DecideFailedInputRequest(
        request_id="off-race",
        transformation_id=id_to_str(t.id),
        input_id=id_to_str(chosen),
        reason="the file is corrupt",
        write_off=execution_pb2.WriteOffDecision(),
    )

    # The default hook retries every input (ErrorCount 1 is under its maximum) in batches.
    handled, decided = await asyncio.gather(
        handle_failed_inputs(mariadb, Registry.discover(), t, batch=BATCH),
        operator.DecideFailedInput(request),
        return_exceptions=True,
    )

    assert not isinstance(handled, BaseException), handled
    rows = {r.InputID: r.Status for r in await s.input_rows(mariadb, t.id)}
    if isinstance(decided, BaseException):  # the hook's batch took it first
        assert "is Unassigned: only a Failed input is decided" in str(decided)
        assert handled.decided == {"ToUnassigned": INPUTS}
        assert rows[chosen] == "Unassigned"
    else:
        assert handled.decided == {"ToUnassigned": INPUTS - 1}
        assert rows[chosen] == "NotProcessed"
    assert list(rows.values()).count("Unassigned") == handled.decided["ToUnassigned"]
    await s.assert_counters_exact(mariadb, t.id)
