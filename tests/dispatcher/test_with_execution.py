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

from dxts.backends.null.settings import NullUsage
from dxts.core.adaptor.mapping import ack_from_proto, outcome_to_proto
from dxts.core.adaptor.model import Outcome, OutcomeAck, OutcomeDisposition
from dxts.core.db import Database, Isolation
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
