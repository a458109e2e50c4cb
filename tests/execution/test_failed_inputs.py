"""The HandleFailedInput sweep: the default RetryUntilMaxErrors, a splitting hook, a hook that
fails, and a halted workgraph's write-off — on SQLite and MariaDB."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from recording_world import (
    World,
    assert_counters_exact,
    empty,
    feed,
    inputs_of,
    outcome,
    pack,
    statuses,
    transformation,
)

from dxts.core.db import Database, Isolation
from dxts.core.ids import id_to_str
from dxts.core.plugins import (
    FileInput,
    InputRecord,
    Parcel,
    Registry,
    SplitInto,
    ToUnassigned,
    hook,
)
from dxts.core.schema import accounting
from dxts.execution.edge.servicer_operations import record_outcome_messages as record_outcomes
from dxts.execution.logic.failed_inputs import handle_failed_inputs
from dxts.v1 import common_pb2

FAILED = common_pb2.OUTCOME_RESULT_FAILED


async def fail(database: Database, world: World, input_ids: list[bytes], why: str) -> None:
    """Pack the inputs into one parcel whose backend reports a failure."""
    (p,) = await pack(database, world, [input_ids])
    await record_outcomes(database, [outcome(p, result=FAILED, message=why)])


async def log_rows(database: Database, world: World, event: str) -> list[Any]:
    table = accounting.transformation_log
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return list(
            await conn.execute(
                sa.select(table).where(
                    table.c.TransformationID == world.transformation_id,
                    table.c.EventType == event,
                )
            )
        )


@pytest.fixture
async def world(database: Database) -> World:
    await empty(database)
    return await transformation(
        database,
        hooks={"HandleFailedInput": {"hook": "RetryUntilMaxErrors", "args": {"max_errors": 2}}},
    )


async def test_retry_until_max_errors_then_problematic_with_the_reason(
    database: Database, world: World
) -> None:
    registry = Registry.discover()
    inputs = await feed(database, world, 3)
    await fail(database, world, inputs, "worker node lost")

    handled = await handle_failed_inputs(database, registry, world.record(hooks=world.hooks))

    assert handled.decided == {"ToUnassigned": 3}
    assert await statuses(database, world.transformation_id) == {"Unassigned": 3}
    # Failing a second time reaches max_errors = 2.
    await fail(database, world, inputs[:2], "worker node lost again")
    handled = await handle_failed_inputs(database, registry, world.record(hooks=world.hooks))

    assert handled.decided == {"ToProblematic": 2}
    rows = await inputs_of(database, world.transformation_id)
    assert {(r.Status, r.ErrorCount) for k, r in rows.items() if k in inputs[:2]} == {
        ("Problematic", 2)
    }
    reasons = await log_rows(database, world, "InputProblematic")
    assert sorted(r.Data["input_id"] for r in reasons) == sorted(map(id_to_str, inputs[:2]))
    assert {r.Message for r in reasons} == {"failed in 2 parcels (limit 2): worker node lost again"}
    await assert_counters_exact(database)


async def test_the_default_maximum_comes_from_the_configuration(
    database: Database, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DXTS_HOOK_RETRY_MAX_ERRORS", "1")
    registry = Registry.discover()
    inputs = await feed(database, world, 1)
    await fail(database, world, inputs, "boom")

    # No binding: the default hook, with the configured maximum.
    await handle_failed_inputs(database, registry, world.record())

    assert await statuses(database, world.transformation_id) == {"Problematic": 1}


@hook("HandleFailedInput")
def halves(*, input: InputRecord, parcel: Parcel | None) -> SplitInto | ToUnassigned:
    if input.lfn is None:
        return ToUnassigned()
    assert parcel is not None and parcel.reason == "too big"
    size = input.lfn_size or 0
    return SplitInto(
        [
            FileInput(lfn=input.lfn, lfn_size=size, descriptor={"Mask": "1-50"}),
            FileInput(lfn=input.lfn, lfn_size=size, descriptor={"Mask": "51-100"}),
        ]
    )


@hook("HandleFailedInput")
def raises(*, input: InputRecord) -> ToUnassigned:
    if (input.descriptor or {}).get("Mask") == "1-50":
        raise RuntimeError("cannot decide")
    return ToUnassigned()


async def test_a_split_decision_inserts_the_children_and_splits_the_parent(
    database: Database, world: World
) -> None:
    registry = Registry.of({"hook": {"Halves": halves}})
    inputs = await feed(database, world, 2)
    await fail(database, world, inputs, "too big")
    bound = world.record(hooks={"HandleFailedInput": {"hook": "Halves"}})

    handled = await handle_failed_inputs(database, registry, bound)

    assert handled.decided == {"SplitInto": 2}
    rows = await inputs_of(database, world.transformation_id)
    assert {rows[i].Status for i in inputs} == {"Split"}
    children = [r for r in rows.values() if r.ParentInputID is not None]
    assert len(children) == 4
    assert {(c.Status, c.ErrorCount) for c in children} == {("Unassigned", 1)}
    assert {bytes(c.ParentInputID) for c in children} == set(inputs)
    await assert_counters_exact(database)


async def test_a_failing_hook_leaves_its_input_failed_and_is_logged(
    database: Database, world: World
) -> None:
    registry = Registry.of({"hook": {"Halves": halves, "Raises": raises}})
    inputs = await feed(database, world, 1)
    await fail(database, world, inputs, "too big")
    await handle_failed_inputs(
        database, registry, world.record(hooks={"HandleFailedInput": {"hook": "Halves"}})
    )
    # Both children fail; the hook then fails on one of them.
    children = [
        k
        for k, r in (await inputs_of(database, world.transformation_id)).items()
        if r.ParentInputID
    ]
    await fail(database, world, children, "again")

    handled = await handle_failed_inputs(
        database, registry, world.record(hooks={"HandleFailedInput": {"hook": "Raises"}})
    )

    assert (handled.decided, handled.hook_failures) == ({"ToUnassigned": 1}, 1)
    assert await statuses(database, world.transformation_id) == {
        "Split": 1,
        "Failed": 1,
        "Unassigned": 1,
    }
    (logged,) = await log_rows(database, world, "HookFailed")
    assert "cannot decide" in logged.Message
    # An unknown hook name fails every input the same way, and changes nothing.
    handled = await handle_failed_inputs(
        database, registry, world.record(hooks={"HandleFailedInput": {"hook": "Nowhere"}})
    )
    assert (handled.decided, handled.hook_failures) == ({}, 1)
    await assert_counters_exact(database)


async def test_failed_inputs_of_a_halted_workgraph_are_written_off(
    database: Database, world: World
) -> None:
    inputs = await feed(database, world, 3)
    await fail(database, world, inputs[:2], "lost")

    handled = await handle_failed_inputs(
        database, Registry.of({}), world.record(halted=True), batch=1
    )

    assert handled.written_off == 2
    assert await statuses(database, world.transformation_id) == {
        "NotProcessed": 2,
        "Unassigned": 1,
    }
    await assert_counters_exact(database)
