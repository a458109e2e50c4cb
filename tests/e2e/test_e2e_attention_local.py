"""Issue 32's scenario on the real local adaptor, on both databases and in both shapes (`dxts up`
and every component its own process): a production whose real CWL tool, run by cwltool in the
local adaptor's sandbox, fails on a third of its inputs (exit 3, a marked `ERROR:` line among 50
others on its stderr). Execution records the tool's own line (not the runner's log) with its
class, exit code and the adaptor's site; `dxts list -o json` shows the workgraph needing
attention, `dxts why` quotes the tool's line first, `dxts parcel` shows it, `dxts watch` ends
with the attention code; once the quarantined input is written off the workgraph completes
saying so, and `dxts errors` groups its failures in one row with their count and exit code.

The null adaptor's version of the scenario (tests/e2e/test_e2e_attention.py) injects the
failure; here nothing is injected: the tool fails by itself."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from e2e_local import SHAPES, LocalWorld, running_local
from e2e_world import I, W, check_invariants, workgraph
from typer.testing import CliRunner, Result

from dxts.cli.main import app
from dxts.cli.workgraphs import EXIT_ATTENTION
from dxts.core.db import Database
from dxts.core.ids import id_to_str

TOOL_LINE = "ERROR: cannot read calibration for run 7"
RUNS = (5, 6, 7)  # the tool fails on run 7: a third of the inputs
# The tool: 25 lines of progress, then for run 7 the marked line, 25 lines of clean-up and
# exit 3; otherwise an output file.
SCRIPT = f"""\
import json, sys
runs = [json.loads(text)["run"] for text in sys.argv[1:]]
for n in range(25):
    print(f"INFO step {{n}}: reading events", file=sys.stderr)
if 7 in runs:
    print({TOOL_LINE!r}, file=sys.stderr)
    for n in range(25):
        print(f"INFO cleanup {{n}}", file=sys.stderr)
    sys.exit(3)
open("out.txt", "w").write(f"calibrated runs {{runs}}\\n")
"""
TOOL: dict[str, Any] = {
    "class": "CommandLineTool",
    "requirements": {
        "InitialWorkDirRequirement": {"listing": [{"entryname": "calibrate.py", "entry": SCRIPT}]}
    },
    "baseCommand": ["python3", "calibrate.py"],
    "inputs": {
        "runs": {
            "type": {"type": "array", "items": ["File", "string"]},
            "inputBinding": {"position": 1},
        }
    },
    "outputs": {"out": {"type": "File", "outputBinding": {"glob": "out.txt"}}},
}
RETRY = {"HandleFailedInput": {"hook": "RetryUntilMaxErrors", "args": {"max_errors": 2}}}
# Generous: each parcel is a cwltool run, on a machine that may be loaded.
WITHIN_S = 300.0


def document() -> dict[str, Any]:
    runs = {
        "type": {"type": "array", "items": ["File", "string"]},
        "dirac:Feeder": {
            "name": "List",
            "args": {"inputs": [{"descriptor": {"run": n}} for n in RUNS]},
        },
    }
    step = {
        "hints": {"dirac:Transformation": {"packer": {"name": "PerInput", "args": {
            "input_parameter": "runs"}}, "hooks": RETRY}},
        "run": TOOL,
        "in": {"runs": "runs"},
        "out": ["out"],
    }  # fmt: skip
    return workgraph({"runs": runs}, {"Calibrate": step}, {"calibrated": "Calibrate/out"})


@pytest.fixture(scope="module", params=SHAPES)
def local_shape(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def world(
    local_shape: str, database: Database, db_url: str, tmp_path: Path
) -> AsyncIterator[LocalWorld]:
    async with running_local(local_shape, database, db_url, tmp_path) as running:
        yield running


def mine(result: Result, workgraph_id: str) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    (found,) = [w for w in json.loads(result.stdout) if w["workgraph_id"] == workgraph_id]
    return dict(found)


async def test_a_real_tool_failing_on_a_third_of_its_inputs_needs_attention(
    world: LocalWorld,
) -> None:
    runner = CliRunner()

    async def dxts(*args: str) -> Result:
        invoke = runner.invoke
        return await asyncio.to_thread(invoke, app, [*world.cli, *args], env={"COLUMNS": "200"})

    wg = await world.submit(document())
    await world.start(wg)
    wid = wg.workgraph_id
    deadline = time.monotonic() + WITHIN_S
    while not (found := mine(await dxts("list", "-o", "json"), wid))["attention"]:
        assert time.monotonic() < deadline, (
            f"no attention within {WITHIN_S} s\n{await world.describe(wg)}"
        )
        await asyncio.sleep(0.5)
    first = found["attention"][0]
    assert (first["kind"], first["step"]) == ("failure-rate", "Calibrate"), found["attention"]

    # Execution recorded the tool's own line, its class and exit code, and where it ran.
    (failed, *_) = [p for p in await world.parcels(wg, "Calibrate") if p.Status == "Failed"]
    outcome = failed.Annotations["outcome"]
    assert outcome["exit_code"] == 3, outcome
    assert outcome["failure"] == {
        "class": "application-error",
        "tool_message": TOOL_LINE,
        "site": world.site,
    }, outcome
    shown = await dxts("parcel", id_to_str(bytes(failed.ParcelID)))
    said = f"failure   application-error (exit code 3) [{world.site}]: {TOOL_LINE}"
    assert said in shown.stdout, shown.output

    why = await dxts("why", wid)
    assert why.exit_code == 0, why.output
    reason = why.stdout.splitlines()[0]
    assert reason.startswith("Calibrate: ") and f" parcels failed: {TOOL_LINE}" in reason, (
        why.stdout
    )
    watched = await dxts("watch", wid, "--interval", "0.5", "--timeout", str(WITHIN_S))
    assert watched.exit_code == EXIT_ATTENTION, watched.output
    assert f"{wid} needs attention: Calibrate: " in watched.stdout

    async def quarantined() -> bool:
        census = await world.census(wg)
        return census["Calibrate"]["inputs"] == {"Processed": 2, "Problematic": 1}

    await world.until("the failing input quarantined", quarantined, wg, timeout_s=WITHIN_S)
    kinds = [item["kind"] for item in mine(await dxts("list", "-o", "json"), wid)["attention"]]
    assert "problematic-inputs" in kinds, kinds
    written = await dxts("inputs", "write-off", f"{wid}/Calibrate", "--status", "problematic")
    assert written.stdout.strip() == "1 inputs written off", written.output
    await world.reach(wg, W.COMPLETED, timeout_s=WITHIN_S)

    ended = mine(await dxts("list", "-o", "json"), wid)
    assert ended["attention"] == []
    assert ended["ended_with"] == "1 written off, 2 parcels failed", ended
    census = await world.census(wg)
    assert census["Calibrate"]["inputs"] == {I.PROCESSED.value: 2, I.NOT_PROCESSED.value: 1}
    errors = await dxts("errors", wid, "-o", "json")
    assert errors.exit_code == 0, errors.output
    (row,) = json.loads(errors.stdout)
    assert (row["count"], row["failure_class"], row["exit_codes"]) == (
        2,
        "application-error",
        [3],
    ), row
    assert (row["message"], row["backend"], row["site"]) == (TOOL_LINE, "local", world.site)
    await check_invariants(world, wg)
