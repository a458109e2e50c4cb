"""`dxts errors` against the services, on SQLite and MariaDB: a member's 12 failures of one tool
are one row (class, exit code, the tool's own line, count, examples), a stage-in failure another;
the same in JSON; `--since`; another VO's user sees none of it; `dxts parcel` and `dxts logs`
print the class and the tool's line first."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import sqlalchemy as sa
from cli_support import EXAMPLES, Dxts
from typer.testing import CliRunner

from dxts.cli.main import app
from dxts.cli.up import Stack
from dxts.core.db import Database, Isolation, db_now
from dxts.core.grpc import DevKeys
from dxts.core.ids import id_from_str, id_to_str, new_ids
from dxts.core.schema import execution
from dxts.core.schema.handles import parcel_handles


@pytest.fixture(scope="module")
async def failing(dxts: Dxts, database: Database) -> dict[str, Any]:
    """A workgraph whose Simulation failed 12 times on one tool error, and whose
    Reconstruction failed once staging an input."""
    submitted = await dxts("submit", str(EXAMPLES / "mc-demo.cwl"))
    assert submitted.exit_code == 0, submitted.output
    wg = submitted.stdout.strip()
    shown = json.loads((await dxts("show", wg, "-o", "json")).stdout)
    members = {
        m["transformation"]["step"]: m["transformation"]["transformation_id"]
        for m in shown["members"]
    }
    outcomes = [
        (
            members["Simulation"],
            {
                "result": "OUTCOME_RESULT_FAILED",
                "backend": "null",
                "message": f"the tool exited with 3: ERROR: seed {n} is out of range",
                "exit_code": 3,
                "failure": {"class": "application-error", "tool_message": f"ERROR: seed {n} bad"},
            },
        )
        for n in range(12)
    ]
    outcomes.append(
        (
            members["Reconstruction"],
            {
                "result": "OUTCOME_RESULT_FAILED",
                "backend": "null",
                "message": "cannot stage lfn:/demo/a.dst: no replica at LOCAL",
                "failure": {"class": "stage-in", "lfn": "/demo/a.dst", "storage_element": "LOCAL"},
            },
        )
    )
    ids = new_ids(len(outcomes))
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        now = await db_now(conn)
        await conn.execute(
            sa.insert(execution.parcels),
            [
                {
                    "ParcelID": parcel_id,
                    "TransformationID": id_from_str(tid, field="t"),
                    "Kind": "Compute",
                    "Status": "Failed",
                    "Backend": "null",
                    "Annotations": {"outcome": outcome},
                    "UpdatedAt": now,
                    "CompletedAt": now,
                }
                for parcel_id, (tid, outcome) in zip(ids, outcomes, strict=True)
            ],
        )
        # Numbered as execution numbers the parcels it creates (their handles, p-N).
        await conn.execute(sa.insert(parcel_handles), [{"ParcelID": p} for p in ids])
    return {"wg": wg, "parcels": [id_to_str(p) for p in ids]}


async def test_errors_groups_a_tools_failures_in_one_row(
    dxts: Dxts, failing: dict[str, Any]
) -> None:
    wg = failing["wg"]
    shown = await dxts("errors", wg, "-o", "json")
    assert shown.exit_code == 0, shown.output
    tool, staging = json.loads(shown.stdout)
    assert (tool["count"], tool["failure_class"], tool["exit_codes"]) == (
        12,
        "application-error",
        [3],
    )
    assert tool["reason"] == "ERROR: seed # bad" and tool["backend"] == "null"
    assert len(tool["example_parcel_ids"]) == 3
    assert set(tool["example_parcel_ids"]) <= set(failing["parcels"][:12])
    handles = tool["example_parcel_handles"]  # issue 32: the names a person types
    assert len(handles) == 3 and all(h.startswith("p-") for h in handles), handles
    assert (staging["count"], staging["failure_class"]) == (1, "stage-in")

    text = await dxts("errors", wg)
    assert text.exit_code == 0, text.output
    first, said, seen, examples, *rest = text.stdout.splitlines()
    assert first == "12 failed  application-error (exit code 3)  on null"
    assert seen.startswith("  last ") and ", first " in seen
    assert said.startswith("  ERROR: seed ") and said.endswith(" bad")
    assert examples.startswith("  e.g. parcels ")
    assert examples.removeprefix("  e.g. parcels ").split(", ")[0] in handles
    assert rest[0].startswith("1 failed  stage-in  on null")

    one = json.loads((await dxts("errors", f"{wg}/Reconstruction", "-o", "json")).stdout)
    assert [g["failure_class"] for g in one] == ["stage-in"]
    everything = json.loads((await dxts("errors", "--since", "1h", "-o", "json")).stdout)
    assert sum(g["count"] for g in everything) >= 13
    bad = await dxts("errors", wg, "--since", "yesterday")
    assert bad.exit_code == 1 and len(bad.stderr.splitlines()) == 1
    assert "--since 'yesterday'" in bad.stderr


async def test_parcel_and_logs_say_the_class_and_the_tool_s_line_first(
    dxts: Dxts, failing: dict[str, Any]
) -> None:
    shown = await dxts("parcel", failing["parcels"][0])
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert lines[3] == "failure   application-error (exit code 3): ERROR: seed 0 bad"
    staged = await dxts("parcel", failing["parcels"][12])
    assert "failure   stage-in: /demo/a.dst at LOCAL" in staged.stdout
    logged = await dxts("logs", f"{failing['wg']}/Simulation")
    assert logged.exit_code == 0, logged.output
    assert logged.stdout.splitlines()[0].startswith(
        "12 failed: application-error (exit code 3) on null: ERROR: seed "
    )


async def test_another_vo_sees_none_of_it(
    stack: Stack, dev_keys: DevKeys, failing: dict[str, Any]
) -> None:
    options = ["--token", dev_keys.issue("other", "mallory", ["operator"])]
    for name in ("definition", "execution", "accounting"):
        options += [f"--{name}", stack.address(name)]
    runner = CliRunner()
    named = await asyncio.to_thread(runner.invoke, app, [*options, "errors", failing["wg"]])
    assert named.exit_code == 1 and len(named.stderr.splitlines()) == 1
    everything = await asyncio.to_thread(runner.invoke, app, [*options, "errors", "-o", "json"])
    assert everything.exit_code == 0, everything.output
    assert json.loads(everything.stdout) == []
