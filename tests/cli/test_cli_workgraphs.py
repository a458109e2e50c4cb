"""Submitting, reading and steering workgraphs with the `dxts` command, against the services."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from cli_support import EXAMPLES, Dxts, write_document

from dxts.cli.operate import IN_MOTION
from dxts.core.db import Database, Isolation
from dxts.core.ids import id_from_str
from dxts.core.schema.accounting import workgraph_log
from dxts.v1.definition_pb2_grpc import DefinitionServiceServicer as Definition


@pytest.fixture(scope="module")
async def workgraph(dxts: Dxts) -> str:
    result = await dxts("submit", str(EXAMPLES / "mc-demo.cwl"), "--label", "campaign=cli")
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


async def test_submit_prints_the_id_and_show_reads_it_back(dxts: Dxts, workgraph: str) -> None:
    result = await dxts("show", workgraph, "--output", "json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["workgraph"]["workgraph_id"] == workgraph
    assert shown["status"] == "New"
    steps = [m["transformation"]["step"] for m in shown["members"]]
    assert steps == ["Simulation", "Reconstruction", "Merge", "DatasetReplication"]
    assert all(m["status"] == "New" and m["blocked_by"] == [] for m in shown["members"])
    labels = shown["workgraph"]["annotations"]["labels"]
    assert labels == {"campaign": "cli"}


async def test_each_submit_sends_a_request_id_of_its_own(
    dxts: Dxts, database: Database, workgraph: str
) -> None:
    """One key per invocation (reused only by retries of that call): running the command again
    is a new submission, not a retry of the last one."""
    again = await dxts("submit", str(EXAMPLES / "mc-demo.cwl"), "--label", "campaign=cli-2")
    assert again.exit_code == 0, again.output
    second = again.stdout.strip()
    assert second != workgraph
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        rows = await conn.execute(
            sa.select(workgraph_log.c.Data).where(
                workgraph_log.c.WorkgraphID.in_([id_from_str(workgraph), id_from_str(second)]),
                workgraph_log.c.OldStatus.is_(None),
            )
        )
        keys = [data["request_id"] for (data,) in rows]
    assert len(keys) == 2 and len(set(keys)) == 2
    assert all(uuid.UUID(key) for key in keys)


async def test_a_dry_run_prints_the_plan_and_stores_nothing(dxts: Dxts, workgraph: str) -> None:
    before = json.loads((await dxts("list", "--output", "json")).stdout)
    result = await dxts("submit", str(EXAMPLES / "mc-demo.cwl"), "--dry-run")
    assert result.exit_code == 0, result.output
    for step in ("Simulation", "Reconstruction", "Merge", "DatasetReplication"):
        assert step in result.stdout
    assert "feeder Seeds" in result.stdout and "after Merge" in result.stdout
    after = json.loads((await dxts("list", "--output", "json")).stdout)
    assert len(after) == len(before)


async def test_a_bad_document_lists_every_problem_and_fails(dxts: Dxts, tmp_path: Path) -> None:
    document = write_document(
        tmp_path,
        """
        steps:
          sim:
            run: tools/simulate.cwl
            in: {seed: nowhere}
            out: [sim-files]
        """,
    )
    result = await dxts("submit", str(document))
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = [line.split("  ", 3) for line in result.stderr.splitlines()]
    found = {(line[0], line[1], line[2]) for line in lines}
    assert found == {
        ("error", "bare-step", "steps.sim.hints"),
        ("error", "unknown-source", "steps.sim.in.seed"),
        ("error", "orphan-output", "steps.sim.out.sim-files"),
        ("error", "no-driving-input", "steps.sim.in"),
    }
    assert all(len(line) == 4 and line[3] for line in lines)
    # The lines are `dxts validate`'s, the position of each path included.
    validated = await dxts("validate", str(document))
    assert sorted(result.stderr.splitlines()) == sorted(
        line for line in validated.stdout.splitlines() if line.startswith("error  ")
    )
    assert all(line.endswith(")") and "  (line " in line for line in result.stderr.splitlines())


async def test_list_filters_and_parses_as_json(dxts: Dxts, workgraph: str) -> None:
    found = json.loads((await dxts("list", "--label", "campaign=cli", "-o", "json")).stdout)
    assert [w["workgraph_id"] for w in found] == [workgraph]
    none = json.loads((await dxts("list", "--status", "completed", "-o", "json")).stdout)
    assert none == []
    table = await dxts("list", "--type", "MCSimulation")
    handle = found[0]["handle"]
    assert handle.startswith("wg-")
    assert table.exit_code == 0 and f"\n{handle} " in table.stdout, table.stdout


async def test_an_unknown_id_is_one_line(dxts: Dxts) -> None:
    missing = "0190f1c2-7a4b-7c3d-8e9f-0123456789ab"
    for args in (("show", missing), ("start", missing), ("logs", missing), ("pause", missing)):
        result = await dxts(*args)
        assert result.exit_code == 1, (args, result.output)
        assert result.stdout == ""
        assert len(result.stderr.splitlines()) == 1 and missing in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


async def test_a_malformed_id_is_one_line(dxts: Dxts) -> None:
    result = await dxts("show", "not-an-id")
    assert (result.exit_code, result.stderr) == (
        1,
        "error: workgraph or member not-an-id not found\n",
    )


async def members(dxts: Dxts, workgraph: str) -> dict[str, dict]:
    shown = json.loads((await dxts("show", workgraph, "-o", "json")).stdout)
    return {m["transformation"]["step"]: m for m in shown["members"]}


async def test_an_operator_steers_a_workgraph(dxts: Dxts, workgraph: str) -> None:
    started = await dxts("start", workgraph, "--reason", "go")
    simulation = (await members(dxts, workgraph))["Simulation"]["transformation"]
    handle = simulation["handle"].partition("/")[0]
    assert (started.exit_code, started.stdout) == (
        0,
        f"{handle} Active: {IN_MOTION[Definition.StartWorkgraph]}\n",
    )
    tf, named = simulation["transformation_id"], simulation["handle"]
    assert simulation["feeder_enabled"] is True

    paused = await dxts("pause", tf)
    assert (paused.exit_code, paused.stdout) == (
        0,
        f"{named} Paused, feeder on: {IN_MOTION[Definition.PauseTransformation]}\n",
    )
    assert (await members(dxts, workgraph))["Simulation"]["status"] == "Paused"
    resumed = await dxts("resume", tf, "-o", "json")
    assert json.loads(resumed.stdout)["transformation"]["status"] == "Active"

    off = await dxts("feeder", "disable", tf)
    assert off.stdout == f"{named} Active, feeder off\n"
    on = await dxts("feeder", "enable", tf)
    assert on.stdout == f"{named} Active, feeder on\n"
    args = {"target_events": 4000, "events_per_seed": 2000}
    changed = await dxts("feeder", "args", tf, json.dumps(args), "-o", "json")
    assert changed.exit_code == 0, changed.output
    # The keys given change; the others are kept.
    assert json.loads(changed.stdout)["transformation"]["feeder_args"] == {
        **simulation["feeder_args"],
        **args,
    }
    refused = await dxts("feeder", "args", tf, '{"target_events": 0, "events_per_seed": 1}')
    assert refused.exit_code == 1 and "target_events" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1

    # A transition the machine refuses is one line naming the current state.
    wrong = await dxts("return-to-active", workgraph)
    assert wrong.exit_code == 1 and "Active" in wrong.stderr
    assert len(wrong.stderr.splitlines()) == 1
    wrong = await dxts("extend-scout", workgraph, "--feeder-args", f"{tf}={json.dumps(args)}")
    assert wrong.exit_code == 1 and len(wrong.stderr.splitlines()) == 1

    log = json.loads((await dxts("logs", workgraph, "-o", "json")).stdout)
    assert any(e["message"] == "go" and e["author"] == "olivia" for e in log)
    tf_log = await dxts("logs", tf, "--newest-first")
    assert tf_log.exit_code == 0 and "Paused" in tf_log.stdout

    drained = await dxts("drain", workgraph)
    assert drained.exit_code == 0, drained.output
    assert all(
        not m["transformation"]["feeder_enabled"] or m["transformation"]["feeder"] == "Edge"
        for m in (await members(dxts, workgraph)).values()
    )
