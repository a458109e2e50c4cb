"""The `after` wait (scenario 10's removal, and a compute step after its staging), run by the
packer runner with execution's ConsumerLookup, on SQLite and MariaDB: a file is packed once
every consumer has it Processed (or Split), withheld while one has not, set aside once one gave
up on it; what was set aside follows a consumer's write-off, and is taken once the consumer's
copy has been reset and processed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
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
SECOND = timedelta(seconds=1)
I = InputStatus  # noqa: E741


@pytest.fixture(scope="module")
def plugins(database: Database) -> Any:
    registry = s.builtins()
    snapshot = ActiveSnapshot(InMemoryTransformations(), max_age_s=0)
    install_providers(registry.providers, database, snapshot, None, watermark_interval_s=0)
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
            "/lhcb/aw/done": I.PROCESSED,
            "/lhcb/aw/split": I.SPLIT,
            "/lhcb/aw/assigned": I.ASSIGNED,
            "/lhcb/aw/failed": I.FAILED,
            "/lhcb/aw/dropped": I.NOT_PROCESSED,
            "/lhcb/aw/quarantined": I.PROBLEMATIC,
            "/lhcb/aw/one-of-two": I.PROCESSED,
        },
    )
    second = await consumer(
        database,
        plugins,
        {
            "/lhcb/aw/done": I.PROCESSED,
            "/lhcb/aw/split": I.PROCESSED,
            "/lhcb/aw/one-of-two": I.UNASSIGNED,
        },
    )
    removal = await fed(
        database,
        plugins,
        [
            "/lhcb/aw/done",
            "/lhcb/aw/split",
            "/lhcb/aw/assigned",
            "/lhcb/aw/failed",
            "/lhcb/aw/dropped",
            "/lhcb/aw/quarantined",
            "/lhcb/aw/one-of-two",
            "/lhcb/aw/unfed",
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
    assert {lfn for lfn, r in rows.items() if r.Status == I.ASSIGNED} == {
        "/lhcb/aw/done",
        "/lhcb/aw/split",
    }
    gave_up = {lfn for lfn, r in rows.items() if r.Status == I.PROBLEMATIC}
    assert gave_up == {"/lhcb/aw/dropped", "/lhcb/aw/quarantined"}
    waiting = {lfn for lfn, r in rows.items() if r.Status == I.UNASSIGNED}
    assert waiting == {
        "/lhcb/aw/assigned",
        "/lhcb/aw/failed",
        "/lhcb/aw/one-of-two",
        "/lhcb/aw/unfed",
    }
    assert all(rows[lfn].DelayedUntil is not None for lfn in waiting)
    assert all(rows[lfn].DelayedUntil is None for lfn in gave_up | {"/lhcb/aw/done"})
    logged = await s.log_rows(database, removal.id)
    reasons = {r.Data["input_id"]: r.Message for r in logged if r.EventType == "InputProblematic"}
    consumer_id = str(UUID(bytes=first.id))
    for lfn, given in (
        ("/lhcb/aw/dropped", "NotProcessed"),
        ("/lhcb/aw/quarantined", "Problematic"),
    ):
        reason = reasons[id_to_str(bytes(rows[lfn].InputID))]
        assert consumer_id in reason and given in reason

    # Once every consumer is done with a withheld file, the next pass takes it; one the second
    # consumer was never fed still waits, whatever the first made of it.
    async with database.transaction(RC) as conn:
        await conn.execute(
            sa.update(execution.inputs)
            .where(execution.inputs.c.TransformationID.in_([first.id, second.id]))
            .where(
                execution.inputs.c.LFN.in_(
                    ["/lhcb/aw/assigned", "/lhcb/aw/failed", "/lhcb/aw/one-of-two"]
                )
            )
            .values(Status=I.PROCESSED.value)
        )
        await conn.execute(
            sa.update(execution.inputs)
            .where(execution.inputs.c.TransformationID == removal.id)
            .values(DelayedUntil=None)
        )
    second_run = await run_packer(database, plugins, removal)
    assert second_run.error is None
    rows = {r.LFN: r for r in await s.input_rows(database, removal.id)}
    assigned = {lfn for lfn, r in rows.items() if r.Status == I.ASSIGNED}
    assert assigned == {"/lhcb/aw/done", "/lhcb/aw/split", "/lhcb/aw/one-of-two"}
    still = {lfn for lfn, r in rows.items() if r.Status == I.UNASSIGNED}
    assert still == {"/lhcb/aw/assigned", "/lhcb/aw/failed", "/lhcb/aw/unfed"}
    # What the first consumer wrote off, the removal wrote off too; its quarantine stays.
    assert rows["/lhcb/aw/dropped"].Status == I.NOT_PROCESSED
    assert rows["/lhcb/aw/quarantined"].Status == I.PROBLEMATIC
    assert second_run.followed == 1
    logged = await s.log_rows(database, removal.id)
    assert [r.Data["inputs"] for r in logged if r.EventType == "AfterWrittenOff"] == [1]

    # The consumer's copy processed: not before the quarantine (it is about something else),
    # but once it was reset and processed since, the quarantine is lifted.
    set_aside = rows["/lhcb/aw/quarantined"].UpdatedAt
    for moment, lifted in ((set_aside - SECOND, 0), (set_aside + SECOND, 1)):
        async with database.transaction(RC) as conn:
            await conn.execute(
                sa.update(execution.inputs)
                .where(execution.inputs.c.TransformationID == first.id)
                .where(execution.inputs.c.LFN == "/lhcb/aw/quarantined")
                .values(Status=I.PROCESSED.value, UpdatedAt=moment)
            )
        third_run = await run_packer(database, plugins, removal)
        assert third_run.error is None and third_run.followed == lifted
    # Lifted, it meets the wait again: the second consumer was never fed it.
    lifted_row = {r.LFN: r for r in await s.input_rows(database, removal.id)}[
        "/lhcb/aw/quarantined"
    ]
    assert lifted_row.Status == I.UNASSIGNED and lifted_row.DelayedUntil is not None
    logged = await s.log_rows(database, removal.id)
    assert [r.EventType for r in logged].count("AfterQuarantineLifted") == 1


async def test_a_compute_step_waits_like_a_data_member(database: Database, plugins: Any) -> None:
    staging = await consumer(
        database, plugins, {"/lhcb/cw/staged": I.PROCESSED, "/lhcb/cw/staging": I.ASSIGNED}
    )
    strip = await fed(
        database,
        plugins,
        ["/lhcb/cw/staged", "/lhcb/cw/staging"],
        annotations={"after": [id_to_str(staging.id)]},
    )
    assert (await run_packer(database, plugins, strip)).error is None
    rows = {r.LFN: r for r in await s.input_rows(database, strip.id)}
    assert rows["/lhcb/cw/staged"].Status == I.ASSIGNED
    assert rows["/lhcb/cw/staging"].Status == I.UNASSIGNED
    assert rows["/lhcb/cw/staging"].DelayedUntil is not None


async def test_a_wait_without_a_lookup_is_refused() -> None:
    record = InputRecord(id=UUID(int=1), lfn="/lhcb/aw/x", lfn_size=1, descriptor=None)
    assert await screen([record], after=[], consumers=None, delay_s=1) == ([record], [])
    with pytest.raises(FailedPrecondition):
        await screen([record], after=[UUID(int=2)], consumers=None, delay_s=1)
