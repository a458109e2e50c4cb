"""Cancellation, the dispatcher's part (SQLite and MariaDB): cancel requests reach the adaptor
and the confirmations come back as outcomes, whatever state the parcel was caught in."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from dispatch_support import (
    FakeDefinition,
    FakeExecution,
    Keys,
    assert_counters_exact,
    dispatcher,
    empty,
    identifiers,
    parcels,
    request_cancel,
    statuses,
    transformation,
)

from dxts.core.adaptor.model import DataPayload, OutcomeResult, Submission, SubmitDisposition
from dxts.core.counters import journal_parcels
from dxts.core.db import Database, Isolation, db_now
from dxts.core.ids import id_to_str
from dxts.core.schema import execution
from dxts.core.states import Kind

COMPUTE = {"name": "null", "address": "", "kind": "compute"}


class Killed(BaseException):
    pass


class DyingDefinition(FakeDefinition):
    async def transformation_scope(self, transformation_id: bytes) -> tuple[str, str]:
        raise Killed


async def cancel_unassigned(database: Database, parcel_ids: list[bytes], tid: bytes) -> None:
    """Execution's Unassigned → Cancelled."""

    async def work(conn: Any) -> None:
        await conn.execute(
            sa.update(execution.parcels)
            .where(execution.parcels.c.ParcelID.in_(parcel_ids))
            .values(Status="Cancelled", UpdatedAt=await db_now(conn))
        )
        await journal_parcels(conn, {(tid, "Unassigned", "Cancelled"): len(parcel_ids)})

    await database.run(work, isolation=Isolation.READ_COMMITTED)


async def test_a_cancelled_unassigned_parcel_is_never_submitted(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 4, transformation_id=tid)
    await cancel_unassigned(database, ids[:2], tid)
    adaptor, address = await null_adaptors()
    component = await dispatcher(database, [{**COMPUTE, "address": address}], keys)
    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 2
    assert set(adaptor.submits) == {id_to_str(p) for p in ids[2:]}
    assert [s for _, s in sorted((await statuses(database, ids)).items())] == [
        "Cancelled",
        "Cancelled",
        "Assigned",
        "Assigned",
    ]
    await assert_counters_exact(database)
    await component.stop()


async def test_a_parcel_cancelled_while_being_submitted_is_cancelled_at_the_backend(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 3, transformation_id=tid)
    adaptor, address = await null_adaptors(delay_s=3600)
    sink = FakeExecution(database)
    component = await dispatcher(database, [{**COMPUTE, "address": address}], keys, sink=sink)
    backend = component.dispatcher.backends["null"]
    real_submit = backend.submit

    async def submit_while_cancelling(*args: Any) -> Any:
        answer = await real_submit(*args)
        assert await request_cancel(database, ids[:1]) == ids[:1]  # execution, meanwhile
        return answer

    backend.submit = submit_while_cancelling  # type: ignore[method-assign]
    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 3
    states = await statuses(database, ids)
    assert [states[p] for p in ids] == ["Completing", "Assigned", "Assigned"]
    assert set(await identifiers(database, "null")) == set(ids)
    assert adaptor.jobs[id_to_str(ids[0])].cancelled
    assert not adaptor.jobs[id_to_str(ids[1])].cancelled

    assert await component.forwarder.cancel_once(backend) == 1
    (outcome,) = sink.outcomes
    assert outcome.parcel_id == id_to_str(ids[0])
    assert outcome.result is OutcomeResult.CANCELLED
    assert (await statuses(database, ids[:1]))[ids[0]] == "Cancelled"
    await assert_counters_exact(database)
    await component.stop()


async def test_an_assigned_parcel_is_cancelled_and_the_confirmation_forwarded(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 3, transformation_id=tid)
    adaptor, address = await null_adaptors(delay_s=3600)
    sink = FakeExecution(database)
    component = await dispatcher(
        database,
        [{**COMPUTE, "address": address}],
        keys,
        sink=sink,
        cancel_resend_s=3600,
        poll_batch=1,  # the cancel requests are read (and polled) one page of one at a time
    )
    backend = component.backends["null"]
    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 3
    assert await component.forwarder.poll_once(backend) == 0  # still running
    assert await request_cancel(database, ids[:2]) == ids[:2]

    cancel_calls: list[Any] = []
    real_cancel = backend.cancel

    async def counting_cancel(*args: Any, **kwargs: Any) -> Any:
        cancel_calls.append(kwargs)
        return await real_cancel(*args, **kwargs)

    backend.cancel = counting_cancel  # type: ignore[method-assign]
    sink.unavailable = True  # the confirmations cannot be recorded yet
    assert await component.forwarder.cancel_once(backend) == 2
    assert {id_to_str(p) for p in ids[:2]} == {
        key for key, job in adaptor.jobs.items() if job.cancelled
    }
    assert await component.forwarder.cancel_once(backend) == 0  # not asked again so soon
    assert len(cancel_calls) == 1
    sink.unavailable = False
    assert await component.forwarder.cancel_once(backend) == 0
    assert sorted(o.parcel_id for o in sink.outcomes) == sorted(id_to_str(p) for p in ids[:2])
    assert {o.result for o in sink.outcomes} == {OutcomeResult.CANCELLED}
    states = await statuses(database, ids)
    assert [states[p] for p in ids] == ["Cancelled", "Cancelled", "Assigned"]
    await assert_counters_exact(database)
    await component.stop()


@pytest.mark.parametrize("dies", ["after_claim", "after_submit"])
async def test_a_cancelled_parcel_whose_dispatcher_died_is_settled_by_its_key(
    database: Database, keys: Keys, null_adaptors: Any, dies: str
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 2, transformation_id=tid)
    adaptor, address = await null_adaptors(delay_s=3600)
    crashing = await dispatcher(
        database,
        [{**COMPUTE, "address": address}],
        keys,
        definition=DyingDefinition(database) if dies == "after_claim" else None,
    )
    if dies == "after_submit":
        backend = crashing.dispatcher.backends["null"]
        real_submit = backend.submit

        async def submit_then_die(*args: Any) -> Any:
            await real_submit(*args)
            raise Killed

        backend.submit = submit_then_die  # type: ignore[method-assign]
    with pytest.raises(Killed):
        await crashing.dispatcher.dispatch_once(Kind.COMPUTE)
    assert await request_cancel(database, ids) == ids
    assert await identifiers(database, "null") == {}

    sink = FakeExecution(database)
    young = await dispatcher(
        database, [{**COMPUTE, "address": address}], keys, sink=sink, lease_s=3600
    )
    assert await young.forwarder.cancel_once(young.backends["null"]) == 0  # may still submit
    survivor = await dispatcher(
        database, [{**COMPUTE, "address": address}], keys, sink=sink, lease_s=0.001
    )
    assert await survivor.forwarder.cancel_once(survivor.backends["null"]) == 2
    assert set((await statuses(database, ids)).values()) == {"Cancelled"}
    assert {o.result for o in sink.outcomes} == {OutcomeResult.CANCELLED}
    recorded = await identifiers(database, "null")
    if dies == "after_claim":
        assert recorded == {}  # nothing ran, nothing will: the keys are refused from now on
        assert adaptor.cancelled_keys == {id_to_str(p) for p in ids}
        assert {o.identifier for o in sink.outcomes} == {""}
        answers = await survivor.backends["null"].submit(
            DataPayload(), [Submission(parcel_id=id_to_str(p)) for p in ids]
        )
        assert {a.disposition for a in answers} == {SubmitDisposition.REFUSED}
    else:
        assert {id_to_str(p): id_to_str(i) for p, i in recorded.items()} == {
            key: job.identifier for key, job in adaptor.jobs.items()
        }
        assert all(job.cancelled for job in adaptor.jobs.values())
        assert adaptor.started == {id_to_str(p): 1 for p in ids}
    await assert_counters_exact(database)
    for component in (crashing, young, survivor):
        await component.stop()
