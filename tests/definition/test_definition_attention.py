"""Attention over gRPC: each rule raises an explained item on the member and its workgraph (and
only when it should), and an ended workgraph says how it ended. Rows are written straight into
execution's tables with their counters journalled, as the recording would leave them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from definition_world import RC, Fixture, Stub, build_workgraph

from dxts.core.counters import journal_inputs, journal_parcels
from dxts.core.db import Database, db_now
from dxts.core.ids import id_to_str, input_hash, new_id
from dxts.core.logs import LogEntry, log_transformations
from dxts.core.schema import accounting, definition, execution
from dxts.v1 import definition_pb2

pb = definition_pb2
RUNNING = {"simulate": "Active", "reconstruct": "Active", "replicate": "Active"}
TOOL_LINE = "ERROR: seed 7 is cursed (exit 3)"


async def add_parcels(
    database: Database,
    tid: bytes,
    status: str,
    count: int,
    *,
    reason: str = "",
    failure: dict[str, str] | None = None,
    backend: str = "local",
    ago: timedelta = timedelta(0),
) -> None:
    """`count` parcels of the member in `status`, ended `ago` (a failed one with `reason`)."""
    async with database.transaction(RC) as conn:
        when = await db_now(conn) - ago
        ended = status in ("Done", "PartiallyDone", "Failed", "Cancelled")
        await conn.execute(
            sa.insert(execution.parcels),
            [
                {
                    "ParcelID": new_id(),
                    "TransformationID": tid,
                    "Kind": "Compute",
                    "Status": status,
                    "Backend": backend,
                    "Annotations": {
                        **({"reason": reason} if reason else {}),
                        **({"outcome": {"failure": failure}} if failure else {}),
                    },
                    "UpdatedAt": when,
                    "CompletedAt": when if ended else None,
                }
                for _ in range(count)
            ],
        )
        await journal_parcels(conn, {(tid, None, status): count})


async def add_inputs(
    database: Database, tid: bytes, status: str, count: int, ago: timedelta = timedelta(0)
) -> None:
    async with database.transaction(RC) as conn:
        when = await db_now(conn) - ago
        rows = []
        for _ in range(count):
            input_id = new_id()
            lfn = f"/lhcb/{input_id.hex()}"
            rows.append(
                {
                    "TransformationID": tid,
                    "InputID": input_id,
                    "InputHash": input_hash(lfn, None),
                    "LFN": lfn,
                    "Status": status,
                    "UpdatedAt": when,
                }
            )
        await conn.execute(sa.insert(execution.inputs), rows)
        await journal_inputs(conn, {(tid, None, status): count})


async def age_members(database: Database, fixture: Fixture, ago: timedelta) -> None:
    """The members last changed `ago` (their status, their feeder switch)."""
    async with database.transaction(RC) as conn:
        now = await db_now(conn)
        t = definition.transformations
        await conn.execute(
            sa.update(t)
            .where(t.c.TransformationID.in_(list(fixture.ids.values())))
            .values(UpdatedAt=now - ago)
        )


async def read(stubs: dict[str, Stub], fixture: Fixture) -> tuple[Any, dict[str, Any]]:
    """(the workgraph, its members by step) as GetWorkgraph answers them."""
    got = await stubs["owner"].GetWorkgraph(pb.GetWorkgraphRequest(workgraph_id=fixture.wid))
    return got.workgraph, {m.step: m for m in got.members}


def kinds(items: Any) -> list[str]:
    return [i.kind for i in items]


async def test_a_healthy_running_workgraph_needs_no_attention(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Active", members=RUNNING)
    sim = fixture.ids["simulate"]
    await add_parcels(database, sim, "Done", 8)
    await add_parcels(database, sim, "Failed", 1, reason=TOOL_LINE)  # 1 of 9: below 25 %
    await add_parcels(database, sim, "Assigned", 2)
    await add_inputs(database, sim, "Assigned", 2)
    workgraph, members = await read(stubs, fixture)
    assert list(workgraph.attention) == []
    assert all(list(m.attention) == [] for m in members.values())
    assert workgraph.ended_with == ""


async def test_a_failure_rate_above_the_threshold_quotes_the_latest_failure(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Active", members=RUNNING)
    sim = fixture.ids["simulate"]
    await add_parcels(database, sim, "Done", 6, ago=timedelta(minutes=5))
    await add_parcels(database, sim, "Failed", 3, reason=TOOL_LINE, ago=timedelta(minutes=2))
    workgraph, members = await read(stubs, fixture)
    (item,) = members["simulate"].attention
    assert item.kind == "failure-rate"
    assert item.what == f"3 of its last 9 parcels failed: {TOOL_LINE}"
    assert item.command == f"dxts errors {fixture.tid('simulate')}"
    assert item.HasField("since")
    # The workgraph carries its member's item, naming the member.
    (raised,) = workgraph.attention
    assert (raised.kind, raised.step, raised.transformation_id) == (
        "failure-rate",
        "simulate",
        fixture.tid("simulate"),
    )
    # ListWorkgraphs answers the same items.
    listed = await stubs["owner"].ListWorkgraphs(pb.ListWorkgraphsRequest())
    (found,) = [w for w in listed.workgraphs if w.workgraph_id == fixture.wid]
    assert kinds(found.attention) == ["failure-rate"]
    # And GetTransformation, on the member alone.
    member = await stubs["owner"].GetTransformation(
        pb.GetTransformationRequest(transformation_id=fixture.tid("simulate"))
    )
    assert kinds(member.transformation.attention) == ["failure-rate"]
    # ListTransformations too, unless asked to leave them out (the errors page's names).
    for without, expected in ((False, ["failure-rate"]), (True, [])):
        members_listed = await stubs["owner"].ListTransformations(
            pb.ListTransformationsRequest(workgraph_id=fixture.wid, without_attention=without)
        )
        (listed_sim,) = [
            t
            for t in members_listed.transformations
            if t.transformation_id == fixture.tid("simulate")
        ]
        assert kinds(listed_sim.attention) == expected
    # dxts's own components read workgraphs for other reasons: they are spared the reads.
    machine = await stubs["service"].GetWorkgraph(pb.GetWorkgraphRequest(workgraph_id=fixture.wid))
    assert list(machine.workgraph.attention) == []


async def test_the_failure_rate_quotes_the_tools_own_line_over_the_runners_log(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Active", members=RUNNING)
    sim = fixture.ids["simulate"]
    await add_parcels(database, sim, "Done", 2)
    runner_log = "the CWL runner exited with 1: INFO -c 3.3.2026 ... (13 lines)"
    failure = {"class": "application-error", "tool_message": TOOL_LINE}
    await add_parcels(database, sim, "Failed", 2, reason=runner_log, failure=failure)
    _, members = await read(stubs, fixture)
    (item,) = members["simulate"].attention
    assert item.what == f"2 of its last 4 parcels failed: {TOOL_LINE}"


async def test_one_problematic_input_waits_for_a_decision(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Active", members=RUNNING)
    await add_inputs(database, fixture.ids["reconstruct"], "Problematic", 1, timedelta(minutes=9))
    _, members = await read(stubs, fixture)
    (item,) = members["reconstruct"].attention
    assert item.what == "1 Problematic input waits for a decision"


async def test_problematic_inputs_wait_for_a_decision(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Active", members=RUNNING)
    await add_inputs(database, fixture.ids["reconstruct"], "Problematic", 2, timedelta(minutes=9))
    workgraph, members = await read(stubs, fixture)
    (item,) = members["reconstruct"].attention
    assert item.kind == "problematic-inputs"
    assert item.what == "2 Problematic inputs wait for a decision"
    assert item.command == f"dxts inputs {fixture.tid('reconstruct')} --status Problematic"
    assert item.since.ToDatetime() < workgraph.updated_at.ToDatetime()
    assert kinds(workgraph.attention) == ["problematic-inputs"]


async def test_a_member_with_work_and_no_progress_for_long_needs_attention(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Active", members=RUNNING)
    sim = fixture.ids["simulate"]
    await add_parcels(database, sim, "Done", 2, ago=timedelta(hours=2))
    await add_parcels(database, sim, "Assigned", 1, ago=timedelta(hours=2))
    await age_members(database, fixture, timedelta(hours=2))
    _, members = await read(stubs, fixture)
    (item,) = members["simulate"].attention
    assert item.kind == "no-progress"
    assert item.what.startswith("no parcel of it has ended for 1") and " min" in item.what
    # Nothing to do (reconstruct, replicate): no stall, however old.
    assert list(members["reconstruct"].attention) == []


async def test_no_progress_is_not_raised_while_paused_or_held_by_a_sign_off(
    database: Database, stubs: dict[str, Stub]
) -> None:
    paused = await build_workgraph(
        database, status="Active", members={**RUNNING, "simulate": "Paused"}
    )
    held = await build_workgraph(database, status="Approving", members=RUNNING)
    for fixture in (paused, held):
        await add_inputs(database, fixture.ids["simulate"], "Unassigned", 3, timedelta(hours=2))
        await age_members(database, fixture, timedelta(hours=2))
        workgraph, members = await read(stubs, fixture)
        assert list(members["simulate"].attention) == []
        assert list(workgraph.attention) == []


async def test_a_failed_check_needs_attention_with_the_command_that_helps(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(
        database, status="ApprovingBlocked", results={"workgraph/Approving/1": "Failed"}
    )
    action = fixture.actions["workgraph/Approving/1"]
    workgraph, _ = await read(stubs, fixture)
    (item,) = workgraph.attention
    assert item.kind == "action-failed"
    assert item.command == f"dxts reset {action}"
    assert f"dxts force {action} passed" in item.todo
    assert item.step == ""
    # Back in Scouting (an extended scout), the old result holds nothing until the list runs.
    scouting = await build_workgraph(
        database, status="Scouting", results={"workgraph/Approving/1": "Failed"}
    )
    workgraph, _ = await read(stubs, scouting)
    assert list(workgraph.attention) == []


async def test_parcels_lost_by_the_backend_need_attention(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Active", members=RUNNING)
    sim = fixture.ids["simulate"]
    await add_parcels(database, sim, "Done", 9)
    await add_parcels(
        database, sim, "Failed", 1, reason="lost by the backend: slurm no longer knows 42"
    )
    _, members = await read(stubs, fixture)
    (item,) = members["simulate"].attention
    assert item.kind == "backend-lost"
    assert item.what.startswith("1 of its last parcels were lost by local: lost by the backend")
    # As the failure taxonomy classes it, whatever the words.
    classed = await build_workgraph(database, status="Active", members=RUNNING)
    await add_parcels(database, classed.ids["simulate"], "Done", 9, backend="slurm")
    await add_parcels(
        database,
        classed.ids["simulate"],
        "Failed",
        1,
        reason="gone",
        failure={"class": "lost"},
        backend="slurm",
    )
    _, members = await read(stubs, classed)
    assert [(i.kind, i.what) for i in members["simulate"].attention] == [
        ("backend-lost", "1 of its last parcels were lost by slurm: gone")
    ]


async def test_a_completed_workgraph_says_what_it_wrote_off_and_what_failed(
    database: Database, stubs: dict[str, Stub]
) -> None:
    done = dict.fromkeys(RUNNING, "Completed")
    clean = await build_workgraph(database, status="Completed", members=done)
    await add_inputs(database, clean.ids["simulate"], "Processed", 4)
    fixture = await build_workgraph(database, status="Completed", members=done)
    sim = fixture.ids["simulate"]
    await add_inputs(database, sim, "Processed", 2)
    await add_inputs(database, sim, "NotProcessed", 2)
    await add_parcels(database, sim, "Failed", 6, reason=TOOL_LINE)
    listed = await stubs["owner"].ListWorkgraphs(pb.ListWorkgraphsRequest())
    by_id = {w.workgraph_id: w for w in listed.workgraphs}
    assert by_id[fixture.wid].ended_with == "2 written off, 6 parcels failed"
    assert by_id[clean.wid].ended_with == ""
    # An ended member's old failures are history, not attention.
    assert list(by_id[fixture.wid].attention) == []


async def test_another_vo_sees_no_attention_of_ours(
    database: Database, stubs: dict[str, Stub]
) -> None:
    fixture = await build_workgraph(database, status="Active", members=RUNNING)
    await add_inputs(database, fixture.ids["simulate"], "Problematic", 1)
    listed = await stubs["outsider"].ListWorkgraphs(pb.ListWorkgraphsRequest())
    assert fixture.wid not in {w.workgraph_id for w in listed.workgraphs}
    assert id_to_str(fixture.workgraph_id) == fixture.wid


async def test_the_gauges_count_attention_per_vo_and_kind_and_clear_when_it_goes(
    database: Database,
) -> None:
    from prometheus_client import REGISTRY

    from dxts.definition.logic.attention import AttentionRules
    from dxts.definition.logic.attention_metrics import AttentionGauges

    vo = f"gauges{new_id().hex()[:8]}"
    fixture = await build_workgraph(database, status="Active", members=RUNNING, owner=(vo, "u"))
    sim = fixture.ids["simulate"]
    await add_inputs(database, sim, "Problematic", 2)
    await add_parcels(database, sim, "Done", 2)
    await add_parcels(database, sim, "Failed", 2, reason=TOOL_LINE)
    gauges = AttentionGauges(database, AttentionRules())

    def sample(name: str, **labels: str) -> float | None:
        return REGISTRY.get_sample_value(name, {"vo": vo, **labels})

    await gauges.measure()
    assert sample("dxts_attention_items", kind="problematic-inputs") == 1
    assert sample("dxts_attention_items", kind="failure-rate") == 1
    assert sample("dxts_workgraphs_needing_attention") == 1
    assert sample("dxts_failed_parcel_share") == 0.5
    async with database.transaction(RC) as conn:
        w = definition.workgraphs
        await conn.execute(
            sa.update(w).where(w.c.WorkgraphID == fixture.workgraph_id).values(Status="Cancelled")
        )
    await gauges.measure()
    assert sample("dxts_attention_items", kind="problematic-inputs") == 0
    assert sample("dxts_workgraphs_needing_attention") == 0


async def test_parcels_the_backend_refused_need_attention_in_its_words(
    database: Database, stubs: dict[str, Stub]
) -> None:
    """A whole Submit refused fails its parcels with class `refused`: the member says so,
    quoting the adaptor's words, and the workgraph carries it by step (list, why, web)."""
    fixture = await build_workgraph(database, status="Active", members=RUNNING)
    sim = fixture.ids["simulate"]
    await add_parcels(database, sim, "Done", 9, backend="slurm")
    await add_parcels(
        database,
        sim,
        "Failed",
        1,
        reason="slurm refused the submission: requirements.cores: at most 4 cores",
        failure={"class": "refused", "tool_message": "requirements.cores: at most 4 cores"},
        backend="slurm",
    )
    workgraph, members = await read(stubs, fixture)
    assert [(i.kind, i.what) for i in members["simulate"].attention] == [
        (
            "backend-refused",
            "1 of its last parcels were refused by slurm: requirements.cores: at most 4 cores",
        )
    ]
    (item,) = workgraph.attention
    assert item.kind == "backend-refused" and item.step == "simulate"
    # Another class of failure is not a refusal.
    other = await build_workgraph(database, status="Active", members=RUNNING)
    await add_parcels(database, other.ids["simulate"], "Done", 9)
    await add_parcels(
        database, other.ids["simulate"], "Failed", 1, failure={"class": "application-error"}
    )
    _, members = await read(stubs, other)
    assert "backend-refused" not in [i.kind for i in members["simulate"].attention]


async def log_packer_failure(
    database: Database,
    tid: bytes,
    words: str,
    *,
    flush: bool,
    ago: timedelta = timedelta(0),
    error: str = "PluginFailed",
) -> None:
    """A PackerFailed row as execution logs it (`packing._record_failure`), `ago`."""
    entry = LogEntry(
        tid,
        "PackerFailed",
        "execution",
        message=words,
        data={"packer": "BySize", "error": error, "flush": flush},
    )
    async with database.transaction(RC) as conn:
        await log_transformations(conn, [entry])
        if ago:
            log = accounting.transformation_log
            newest = sa.select(sa.func.max(log.c.LogID)).scalar_subquery()
            now = await db_now(conn)
            await conn.execute(
                sa.update(log).where(log.c.LogID == newest).values(CreatedAt=now - ago)
            )


async def test_a_packer_that_failed_lately_needs_attention_in_its_words(
    database: Database, stubs: dict[str, Stub]
) -> None:
    """A packer's failure, a round's or a flush's (a PeriodicFlush hook's), logged on the member
    by execution, is an item while it is recent (30 min): the newest's class and words."""
    fixture = await build_workgraph(database, status="Active", members=RUNNING)
    sim, reco = fixture.ids["simulate"], fixture.ids["reconstruct"]
    words = "packer 'BySize' (dxts) raised OSError: staging area full"
    await log_packer_failure(database, sim, "an old one", flush=False, ago=timedelta(hours=2))
    # A batch that lost a race with a write-off: the next round packs again, nobody need act.
    await log_packer_failure(database, sim, "a lost race", flush=False, error="ClaimLost")
    await log_packer_failure(database, reco, "a round's", flush=False, ago=timedelta(minutes=5))
    await log_packer_failure(database, reco, words, flush=True)
    workgraph, members = await read(stubs, fixture)
    assert list(members["simulate"].attention) == []  # old, or a lost race: not failing
    (item,) = members["reconstruct"].attention
    assert (item.kind, item.what) == (
        "packer-failed",
        f"its packer failed on a flush (PluginFailed), 2 times in the last 30 min: {words}",
    )
    assert item.command == f"dxts logs {fixture.tid('reconstruct')} --newest-first"
    assert item.since.ToDatetime() < workgraph.updated_at.ToDatetime()  # the first, 5 min ago
    (listed,) = workgraph.attention
    assert (listed.kind, listed.step) == ("packer-failed", "reconstruct")
    # A hook's flush execution did not run (the lifecycle's FlushFailed row) says so.
    entry = LogEntry(
        fixture.ids["replicate"],
        "FlushFailed",
        "hook PeriodicFlush",
        message="execution is restarting",
        data={"error": "Unavailable", "flush": True},
    )
    async with database.transaction(RC) as conn:
        await log_transformations(conn, [entry])
    _, members = await read(stubs, fixture)
    assert [(i.kind, i.what) for i in members["replicate"].attention] == [
        (
            "packer-failed",
            "a flush of it was not run (Unavailable): execution is restarting",
        )
    ]
