"""The dispatcher with execution's own recording and cancellation (`dxts.execution`), on SQLite
and MariaDB: the two sides agree on the outcome contract and on the `cancel_requested` mark."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from dispatch_support import (
    Keys,
    assert_counters_exact,
    dispatcher,
    empty,
    parcels,
    statuses,
    transformation,
)

from dxts.backends.null.logic.adaptor import NullAdaptor
from dxts.backends.null.settings import NullUsage
from dxts.core.adaptor.mapping import ack_from_proto, outcome_to_proto
from dxts.core.adaptor.model import (
    Failure,
    FailureClass,
    Outcome,
    OutcomeAck,
    OutcomeDisposition,
    OutcomeResult,
    Payload,
    Submission,
    SubmitResult,
)
from dxts.core.counters import journal_parcels
from dxts.core.db import Database, Isolation
from dxts.core.errors import InvalidArgument
from dxts.core.ids import id_to_str
from dxts.core.schema import execution
from dxts.core.states import Kind
from dxts.execution.edge.servicer_operations import record_outcome_messages as record_outcomes
from dxts.execution.logic.operations import cancel_parcels

COMPUTE = {"name": "null", "address": "", "kind": "compute"}


class Execution:
    def __init__(self, database: Database) -> None:
        self.database = database
        self.acks: list[OutcomeAck] = []

    async def record(self, outcomes: Sequence[Outcome]) -> list[OutcomeAck]:
        recorded = await record_outcomes(self.database, [outcome_to_proto(o) for o in outcomes])
        acks = [ack_from_proto(a) for a in recorded]
        self.acks.extend(acks)
        return acks


async def test_outcomes_are_recorded_by_execution(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 12, transformation_id=tid, inputs_per_parcel=1)
    used = NullUsage(cpu_seconds=1800, wall_seconds=3600, max_memory_bytes=2 * 10**9)
    # Four chosen parcels fail (a failure share drawn from random ids may pick none).
    failing = [{"fate": "failure", "output_prefix": id_to_str(p)} for p in ids[::3]]
    adaptor, address = await null_adaptors(rules=failing, usage=used)
    sink = Execution(database)
    component = await dispatcher(database, [{**COMPUTE, "address": address}], keys, sink=sink)
    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 12
    assert await component.forwarder.poll_once(component.backends["null"]) == 12
    assert {a.disposition for a in sink.acks} == {OutcomeDisposition.RECORDED}
    states = await statuses(database, ids)
    for parcel_id in ids:
        failed = adaptor.jobs[id_to_str(parcel_id)].fate == "failure"
        assert states[parcel_id] == ("Failed" if failed else "Completing")
    assert "Failed" in states.values() and "Completing" in states.values()
    # The usage the backend measured went through the dispatcher untouched.
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        rows = await conn.execute(
            sa.select(execution.parcels.c.Annotations).where(execution.parcels.c.ParcelID.in_(ids))
        )
        usages = [row.Annotations["usage"] for row in rows]
    assert usages == [{"cpu_hours": 0.5, "wall_hours": 1.0, "memory_gb": 2.0}] * len(ids)
    assert await component.forwarder.poll_once(component.backends["null"]) == 0
    await assert_counters_exact(database)
    await component.stop()


async def test_cancellations_requested_by_execution_are_confirmed(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 4, transformation_id=tid, inputs_per_parcel=1)
    adaptor, address = await null_adaptors(delay_s=3600)
    sink = Execution(database)
    component = await dispatcher(database, [{**COMPUTE, "address": address}], keys, sink=sink)
    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 4
    cancellation = await cancel_parcels(database, parcel_ids=ids[:3], reason="operator")
    assert cancellation.cancel_requested == 3
    assert await component.forwarder.cancel_once(component.backends["null"]) == 3
    assert sum(job.cancelled for job in adaptor.jobs.values()) == 3
    states = await statuses(database, ids)
    assert [states[p] for p in ids] == ["Cancelled", "Cancelled", "Cancelled", "Assigned"]
    await assert_counters_exact(database)
    await component.stop()


class RefusingNull(NullAdaptor):
    """The null adaptor refusing every Submit as a whole, as one over its request bounds does."""

    async def submit(self, payload: Payload, parcels: Sequence[Submission]) -> list[SubmitResult]:
        raise InvalidArgument("at most 4 cores per job (test)", field="requirements.cores")


async def test_a_submit_refused_whole_fails_its_parcels_through_execution(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    """Execution records the dispatcher's word: Reserved → Failed with the adaptor's words and
    class `refused`, the inputs Failed (ErrorCount + 1) for their retry rules, the counters
    exact; a second record of it changes nothing."""
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 4, transformation_id=tid, inputs_per_parcel=2)
    _, address = await null_adaptors(RefusingNull)
    sink = Execution(database)
    component = await dispatcher(database, [{**COMPUTE, "address": address}], keys, sink=sink)
    try:
        assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 4
        assert {a.disposition for a in sink.acks} == {OutcomeDisposition.RECORDED}
        assert set((await statuses(database, ids)).values()) == {"Failed"}
        async with database.transaction(Isolation.READ_COMMITTED) as conn:
            rows = (
                await conn.execute(
                    sa.select(
                        execution.parcels.c.Annotations, execution.parcels.c.CompletedAt
                    ).where(execution.parcels.c.ParcelID.in_(ids))
                )
            ).all()
            held = (
                await conn.execute(
                    sa.select(execution.inputs.c.Status, execution.inputs.c.ErrorCount).where(
                        execution.inputs.c.TransformationID == tid
                    )
                )
            ).all()
        for row in rows:
            assert row.CompletedAt is not None
            assert row.Annotations["reason"] == (
                "null refused the submission: requirements.cores: at most 4 cores per job (test)"
            )
            assert row.Annotations["outcome"]["failure"]["class"] == "refused"
        assert sorted(held) == [("Failed", 1)] * 8
        again = await sink.record(
            [
                Outcome(
                    parcel_id=id_to_str(ids[0]),
                    backend="null",
                    result=OutcomeResult.FAILED,
                    failure=Failure(FailureClass.REFUSED, "again"),
                )
            ]
        )
        assert [a.disposition for a in again] == [OutcomeDisposition.ALREADY_RECORDED]
        await assert_counters_exact(database)
    finally:
        await component.stop()


async def test_only_a_refused_submission_from_its_own_backend_ends_a_reserved_parcel(
    database: Database,
) -> None:
    """A Reserved parcel ends only on the dispatcher's record of a refusal by the backend it
    was reserved for: another backend's, one carrying an identifier (the backend accepted
    something), or one of another class is not recorded."""
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 1, transformation_id=tid, inputs_per_parcel=1)
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        await conn.execute(
            sa.update(execution.parcels)
            .where(execution.parcels.c.ParcelID.in_(ids))
            .values(Status="Reserved", Backend="null")
        )
        await journal_parcels(conn, {(tid, "Unassigned", "Reserved"): 1})
    refused = Failure(FailureClass.REFUSED, "no")
    unrecordable = [
        Outcome(id_to_str(ids[0]), "slurm", "", OutcomeResult.FAILED, failure=refused),
        Outcome(id_to_str(ids[0]), "null", "42", OutcomeResult.FAILED, failure=refused),
        Outcome(
            id_to_str(ids[0]),
            "null",
            "",
            OutcomeResult.FAILED,
            failure=Failure(FailureClass.APPLICATION_ERROR, "no"),
        ),
        Outcome(id_to_str(ids[0]), "null", "", OutcomeResult.SUCCEEDED),
    ]
    sink = Execution(database)
    for outcome in unrecordable:
        (ack,) = await sink.record([outcome])
        assert ack.disposition is OutcomeDisposition.UNKNOWN_PARCEL, outcome
    assert set((await statuses(database, ids)).values()) == {"Reserved"}
    await assert_counters_exact(database)
