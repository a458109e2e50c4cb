"""The `definition` benchmark: its lines at the tiny scale, and a baseline writing what a
submission writes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from dxts.bench import definition as bench
from dxts.bench.__main__ import main
from dxts.core.config import DefinitionConfig
from dxts.core.db import Database, Isolation
from dxts.core.errors import FailedPrecondition
from dxts.core.kernel.authorisation import rpc, serving
from dxts.core.plugins.registry import Registry
from dxts.core.schema import accounting, definition
from dxts.definition.logic.submit import submit_workgraph
from dxts.v1.definition_pb2_grpc import DefinitionServiceServicer

FIGURES = ("submit_ms_p50", "submit_ms_p99", "submit_per_s")
TINY = bench.SCALES["tiny"]
WRITTEN = (
    definition.processes,
    definition.process_references,
    definition.requirements,
    definition.workgraphs,
    definition.ownership,
    definition.transformations,
    definition.compute_transformations,
    definition.transformation_outputs,
    definition.actions,
    accounting.workgraph_log,
    accounting.transformation_log,
)


def test_tiny_on_sqlite_prints_p50_p99_and_throughput_per_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bench.sqlite"
    assert main(["definition", "--scale", "tiny", "--db-url", f"sqlite+aiosqlite:///{path}"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert [(f["figure"], f["params"]["steps"]) for f in lines] == [
        (figure, steps) for steps in TINY.steps for figure in FIGURES
    ]
    for figure in lines:
        assert figure["benchmark"] == "definition"
        assert figure["value"] > 0 and figure["baseline"] > 0
        assert figure["ratio"] == figure["value"] / figure["baseline"]
        assert figure["params"]["database"] == "sqlite"
        assert figure["params"]["scale"] == "tiny"
    by_name = {(f["figure"], f["params"]["steps"]): f for f in lines}
    for steps in TINY.steps:
        p50, p99 = by_name["submit_ms_p50", steps], by_name["submit_ms_p99", steps]
        assert p50["unit"] == p99["unit"] == "ms"
        assert p50["params"]["statistic"] == "median"
        assert p99["params"]["statistic"] == (
            f"p99, nearest rank ({TINY.submissions} of {TINY.submissions})"
        )
        assert p50["params"]["rounds"] == p99["params"]["rounds"] == TINY.submissions
        rate = by_name["submit_per_s", steps]
        assert rate["unit"] == "submissions/s"
        assert rate["params"]["concurrency"] == TINY.concurrency
        assert rate["params"]["submissions_per_round"] == TINY.throughput_submissions
    with sqlite3.connect(path) as conn:
        assert conn.execute("select count(*) from sqlite_master where type='table'").fetchone() == (
            0,
        )


async def _counts(database: Database) -> dict[str, int]:
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return {
            table.name: int(await conn.scalar(sa.select(sa.func.count()).select_from(table)) or 0)
            for table in WRITTEN
        }


async def _rows(database: Database, table: sa.Table, columns: list[str], kind: str) -> list[Any]:
    """`columns` of `table`'s rows belonging to the transformations of Type `kind`, sorted."""
    transformations = definition.transformations
    query = sa.select(*(table.c[c] for c in columns))
    if table is not transformations:
        query = query.join(
            transformations, transformations.c.TransformationID == table.c.TransformationID
        )
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        result = await conn.execute(query.where(transformations.c.Type == kind))
        return sorted(json.dumps(list(row), sort_keys=True, default=str) for row in result)


async def test_the_baseline_writes_the_rows_a_submission_writes(database: Database) -> None:
    steps, catalogue, config = 4, Registry.discover(), DefinitionConfig()
    before = await _counts(database)
    bundle = next(bench.bundles(steps))
    with serving(rpc(DefinitionServiceServicer.SubmitWorkgraph)):
        await submit_workgraph(
            database, bundle, vo=bench.VO, sub=bench.SUB, catalogue=catalogue, config=config
        )
    submitted = await _counts(database)
    plan = bench.fresh_plans(steps, catalogue, config)()
    await bench.insert_rows(database, bench.plan_rows(plan, "Plain"))
    written = await _counts(database)
    by_submission = {name: submitted[name] - before[name] for name in before}
    by_baseline = {name: written[name] - submitted[name] for name in before}
    assert by_submission == by_baseline
    assert by_submission["Transformations"] == by_submission["Processes"] == steps
    assert by_submission["TransformationLog"] == steps
    assert by_submission["Actions"] > steps
    # Row for row the same content, ids and types apart.
    for table, columns in (
        (definition.transformations, ["Kind", "Feeder", "Packer", "PackerArgs", "Hooks"]),
        (definition.actions, ["State", "Position", "Action", "Args"]),
        (definition.transformation_outputs, ["Name", "Intermediate"]),
        (accounting.transformation_log, ["EventType", "OldStatus", "NewStatus", "Message"]),
    ):
        assert await _rows(database, table, columns, f"{bench.SUBMITTED_TYPE}{steps}") == (
            await _rows(database, table, columns, "Plain")
        ), table.name


async def test_check_created_fails_when_a_submission_is_missing(database: Database) -> None:
    steps, catalogue, config = 2, Registry.discover(), DefinitionConfig()
    plans = bench.fresh_plans(steps, catalogue, config)
    for bundle, _ in zip(bench.bundles(steps), range(2), strict=False):
        with serving(rpc(DefinitionServiceServicer.SubmitWorkgraph)):
            await submit_workgraph(
                database, bundle, vo=bench.VO, sub=bench.SUB, catalogue=catalogue, config=config
            )
        await bench.insert_rows(database, bench.plan_rows(plans(), f"{bench.PLAIN_TYPE}{steps}"))
    await bench.check_created(database, steps, 2)
    with pytest.raises(FailedPrecondition, match="BenchChain2: 2 workgraphs"):
        await bench.check_created(database, steps, 3)


def test_every_tool_body_differs_per_step_and_per_submission() -> None:
    first, second = bench.bundles(3), bench.bundles(3)
    texts = {next(supply).read(bench.MAIN) for supply in (first, first, second, second)}
    assert len(texts) == 4
    plan = bench.fresh_plans(3, Registry.discover(), DefinitionConfig())()
    assert len({p.process_id for p in plan.processes}) == 3
