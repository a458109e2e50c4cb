"""RetryWith and WriteOff through execution's runners, on SQLite and MariaDB: the hook is shown
the failed parcel's raw status, exit code, message, failure class, tool message and
requirements; a RetryWith is kept on the
failed parcel and followed by the packing core (the raised requirements over the template, the
backend named set on the next parcel); a WriteOff ends the input NotProcessed; every decision is
logged with its note, and the counters stay exact."""

from __future__ import annotations

from typing import Any

import runner_support as s
import sqlalchemy as sa

from dxts.core.counters import journal_parcels
from dxts.core.db import Database, db_now
from dxts.core.ids import id_to_str, new_id
from dxts.core.plugins import Registry
from dxts.core.schema import definition, execution
from dxts.execution.edge.servicer_operations import record_outcome_messages
from dxts.execution.logic.failed_inputs import handle_failed_inputs
from dxts.execution.logic.feeding import run_feeder
from dxts.execution.logic.packing import run_packer
from dxts.v1 import common_pb2

RULES = [
    {"name": "site", "match": {"message": "(?i)site .* banned"}, "action": "elsewhere",
     "backend": "other"},
    {"name": "oom", "match": {"failure_class": "out-of-memory", "exit_code": 137},
     "action": "raise", "raise": {"memory_mb": {"factor": 3, "max": 5000}}},
    {"name": "missing", "match": {"failure_class": ["application-error", "stage-in"],
                                  "message": "No such file"}, "action": "give_up"},
]  # fmt: skip
HOOKS = {"HandleFailedInput": {"hook": "RetryByRules", "args": {"rules": RULES}}}


def failed(
    parcel_id: bytes,
    status: str,
    message: str,
    exit_code: int,
    failure_class: common_pb2.FailureClass.ValueType = common_pb2.FAILURE_CLASS_UNSPECIFIED,
    tool_message: str = "",
) -> common_pb2.Outcome:
    return common_pb2.Outcome(
        parcel_id=id_to_str(parcel_id),
        backend="null",
        identifier=id_to_str(new_id()),
        result=common_pb2.OUTCOME_RESULT_FAILED,
        backend_status=status,
        message=message,
        exit_code=exit_code,
        failure=common_pb2.Failure(failure_class=failure_class, tool_message=tool_message),
    )


async def parcels(database: Database, tid: bytes) -> list[Any]:
    """The transformation's parcels in creation order, with the requirements each asks and
    the backend it is directed to (its DirectedParcels row; None when it has none)."""
    p, c, r = execution.parcels.c, execution.compute_parcels.c, definition.requirements.c
    d = execution.directed_parcels.c
    async with database.transaction(s.RC) as conn:
        rows = await conn.execute(
            sa.select(
                p.ParcelID, p.Status, d.Backend.label("Directed"), p.Annotations, r.Requirements
            )
            .select_from(
                execution.parcels.join(execution.compute_parcels, c.ParcelID == p.ParcelID)
                .join(definition.requirements, r.RequirementsID == c.RequirementsID)
                .outerjoin(execution.directed_parcels, d.ParcelID == p.ParcelID)
            )
            .where(p.TransformationID == tid)
            .order_by(p.ParcelID)
        )
        return list(rows)


async def dispatched(database: Database, tid: bytes) -> None:
    """What the dispatcher does: every Unassigned parcel taken to Assigned on `null` (with the
    counter journal's row)."""
    table = execution.parcels
    async with database.transaction(s.RC) as conn:
        moved = await conn.execute(
            sa.update(table)
            .where(table.c.TransformationID == tid, table.c.Status == "Unassigned")
            .values(Status="Assigned", Backend="null", UpdatedAt=await db_now(conn))
        )
        await journal_parcels(conn, [((tid, "Unassigned", "Assigned"), moved.rowcount)])


async def test_retry_directives_reach_the_next_parcels_and_write_offs_end_the_input(
    database: Database,
) -> None:
    await s.empty(database)
    registry = Registry.discover()
    t = await s.transformation(
        database,
        feeder_args={"inputs": [{"lfn": f"/lhcb/r{n}", "lfn_size": 1} for n in range(3)]},
        hooks=HOOKS,
    )
    await run_feeder(database, registry, t)
    assert (await run_packer(database, registry, t)).parcels == 3
    await s.disable_feeder(database, t.id)
    await dispatched(database, t.id)
    first = await parcels(database, t.id)
    assert [row.Requirements for row in first] == [s.TEMPLATE] * 3
    banned, oom, missing = (bytes(row.ParcelID) for row in first)
    acks = await record_outcome_messages(
        database,
        [
            failed(banned, "Failed", "Site LCG.CERN.cern banned", 1),
            failed(oom, "Failed", "killed", 137, common_pb2.FAILURE_CLASS_OUT_OF_MEMORY),
            # The rule's words are the tool's own line, not the backend's message.
            failed(
                missing,
                "Failed",
                "the payload exited with 2",
                2,
                common_pb2.FAILURE_CLASS_APPLICATION_ERROR,
                "ERROR: open calib.db: No such file or directory",
            ),
        ],
    )
    assert {ack.disposition for ack in acks} == {common_pb2.OUTCOME_DISPOSITION_RECORDED}

    handled = await handle_failed_inputs(database, registry, t)

    assert handled.decided == {"RetryWith": 2, "WriteOff": 1}
    inputs = {row.LFN: row for row in await s.input_rows(database, t.id)}
    assert {lfn: (row.Status, row.ErrorCount) for lfn, row in inputs.items()} == {
        "/lhcb/r0": ("Unassigned", 1),
        "/lhcb/r1": ("Unassigned", 1),
        "/lhcb/r2": ("NotProcessed", 1),
    }
    logs = await s.log_rows(database, t.id)
    assert sorted(r.Message for r in logs if r.EventType == "FailedInputDecided") == [
        "rule missing: written off",
        "rule oom: retried with memory_mb 2000 → 5000",  # 3 times 2000, capped at 5000
        "rule site: retried on other",
    ]
    assert [r.Message for r in logs if r.EventType == "InputWrittenOff"] == [
        "rule missing: null Failed exit code 2: ERROR: open calib.db: No such file or directory"
    ]

    assert (await run_packer(database, registry, t)).parcels == 2
    again = {bytes(row.ParcelID): row for row in await parcels(database, t.id)}
    retried = {bytes(inputs[lfn].InputID): lfn for lfn in ("/lhcb/r0", "/lhcb/r1")}  # input → LFN
    async with database.transaction(s.RC) as conn:
        links = await conn.execute(
            sa.select(execution.parcel_inputs.c.ParcelID, execution.parcel_inputs.c.InputID).where(
                execution.parcel_inputs.c.InputID.in_(list(retried))
            )
        )
        newest = {
            retried[bytes(i)]: again[bytes(p)] for p, i in links if bytes(p) not in (banned, oom)
        }
    assert (newest["/lhcb/r0"].Directed, newest["/lhcb/r0"].Requirements) == ("other", s.TEMPLATE)
    assert (newest["/lhcb/r1"].Directed, newest["/lhcb/r1"].Requirements) == (
        None,
        {**s.TEMPLATE, "memory_mb": 5000},
    )
    await s.assert_counters_exact(database, t.id)
