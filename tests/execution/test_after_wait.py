"""The `after` wait of a Data transformation (scenario 10's removal), run by the packer runner
with execution's ConsumerLookup, on SQLite and MariaDB: a file is packed once every consumer
has it Processed (or Split), withheld while one has not, set aside once one gave up on it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from uuid import UUID

import pytest
import runner_support as s
import sqlalchemy as sa
from definition_double import InMemoryTransformations

from dxts.core.builtins.after import screen
from dxts.core.db import Database
from dxts.core.errors import FailedPrecondition
from dxts.core.ids import id_to_str
from dxts.core.plugins import InputRecord
from dxts.core.schema import execution
from dxts.core.states import InputStatus, Kind
from dxts.execution.component import install_providers
from dxts.execution.logic.feeding import run_feeder
from dxts.execution.logic.packing import run_packer
from dxts.execution.logic.transformations import ActiveSnapshot

RC = s.RC
I = InputStatus  # noqa: E741


@pytest.fixture(scope="module")
def plugins(database: Database) -> Any:
    registry = s.builtins()
    snapshot = ActiveSnapshot(InMemoryTransformations(), max_age_s=0)
    install_providers(registry.providers, database, snapshot, None)  # no catalogue
    return registry


async def fed(database: Database, plugins: Any, lfns: Sequence[str], **options: Any) -> Any:
    args = {"inputs": [{"lfn": lfn, "lfn_size": 1} for lfn in lfns]}
    t = await s.transformation(database, feeder="List", feeder_args=args, **options)
    assert (await run_feeder(database, plugins, t)).error is None
    return replace(t, feeder_enabled=True)


async def consumer(database: Database, plugins: Any, statuses: dict[str, InputStatus]) -> Any:
    """A transformation fed `statuses`' files, each then set to its status."""
    t = await fed(database, plugins, list(statuses))
    inputs = execution.inputs
    async with database.transaction(RC) as conn:
        for status in set(statuses.values()):
            lfns = [lfn for lfn, given in statuses.items() if given == status]
            await conn.execute(
                sa.update(inputs)
                .where(inputs.c.TransformationID == t.id, inputs.c.LFN.in_(lfns))
                .values(Status=status.value)
            )
    return t


async def test_a_removal_takes_only_what_its_consumers_processed(
    database: Database, plugins: Any
) -> None:
    first = await consumer(
        database,
        plugins,
        {
            "/aw/done": I.PROCESSED,
            "/aw/split": I.SPLIT,
            "/aw/assigned": I.ASSIGNED,
            "/aw/failed": I.FAILED,
            "/aw/dropped": I.NOT_PROCESSED,
            "/aw/quarantined": I.PROBLEMATIC,
            "/aw/one-of-two": I.PROCESSED,
        },
    )
    second = await consumer(
        database,
        plugins,
        {"/aw/done": I.PROCESSED, "/aw/split": I.PROCESSED, "/aw/one-of-two": I.UNASSIGNED},
    )
    removal = await fed(
        database,
        plugins,
        [
            "/aw/done",
            "/aw/split",
            "/aw/assigned",
            "/aw/failed",
            "/aw/dropped",
            "/aw/quarantined",
            "/aw/one-of-two",
            "/aw/unfed",
        ],
        kind=Kind.DATA,
        annotations={
            "data_management": {"operation": "remove"},
            "after": [id_to_str(first.id), id_to_str(second.id)],
        },
    )
    result = await run_packer(database, plugins, removal)
    assert result.error is None
    rows = {r.LFN: r for r in await s.input_rows(database, removal.id)}
    assert {lfn for lfn, r in rows.items() if r.Status == I.ASSIGNED} == {"/aw/done", "/aw/split"}
    gave_up = {lfn for lfn, r in rows.items() if r.Status == I.PROBLEMATIC}
    assert gave_up == {"/aw/dropped", "/aw/quarantined"}
    waiting = {lfn for lfn, r in rows.items() if r.Status == I.UNASSIGNED}
    assert waiting == {"/aw/assigned", "/aw/failed", "/aw/one-of-two", "/aw/unfed"}
    assert all(rows[lfn].DelayedUntil is not None for lfn in waiting)
    assert all(rows[lfn].DelayedUntil is None for lfn in gave_up | {"/aw/done"})
    logged = await s.log_rows(database, removal.id)
    reasons = {r.Data["input_id"]: r.Message for r in logged if r.EventType == "InputProblematic"}
    consumer_id = str(UUID(bytes=first.id))
    for lfn, given in (("/aw/dropped", "NotProcessed"), ("/aw/quarantined", "Problematic")):
        reason = reasons[id_to_str(bytes(rows[lfn].InputID))]
        assert consumer_id in reason and given in reason

    # Once every consumer is done with a withheld file, the next pass takes it; one the second
    # consumer was never fed still waits, whatever the first made of it.
    async with database.transaction(RC) as conn:
        await conn.execute(
            sa.update(execution.inputs)
            .where(execution.inputs.c.TransformationID.in_([first.id, second.id]))
            .where(execution.inputs.c.LFN.in_(["/aw/assigned", "/aw/failed", "/aw/one-of-two"]))
            .values(Status=I.PROCESSED.value)
        )
        await conn.execute(
            sa.update(execution.inputs)
            .where(execution.inputs.c.TransformationID == removal.id)
            .values(DelayedUntil=None)
        )
    assert (await run_packer(database, plugins, removal)).error is None
    rows = {r.LFN: r for r in await s.input_rows(database, removal.id)}
    assigned = {lfn for lfn, r in rows.items() if r.Status == I.ASSIGNED}
    assert assigned == {"/aw/done", "/aw/split", "/aw/one-of-two"}
    still = {lfn for lfn, r in rows.items() if r.Status == I.UNASSIGNED}
    assert still == {"/aw/assigned", "/aw/failed", "/aw/unfed"}


async def test_a_wait_without_a_lookup_is_refused() -> None:
    record = InputRecord(id=UUID(int=1), lfn="/aw/x", lfn_size=1, descriptor=None)
    assert await screen([record], after=[], consumers=None, delay_s=1) == ([record], [])
    with pytest.raises(FailedPrecondition):
        await screen([record], after=[UUID(int=2)], consumers=None, delay_s=1)
