"""Issue 32's scenario, on both databases and in both shapes: a production whose tool fails on
a third of its inputs (exit 3, a marked `ERROR:` line among 50 others). Within a minute
`dxts list -o json` shows the workgraph needing attention, `dxts why` gives the failures first,
`dxts why` quotes the tool's own line first, `dxts watch` ends with the attention code; once the
quarantined inputs are written off it completes, and says so ("Completed with 3 written off"),
and `dxts errors` groups the failures in one row with their count and exit code."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from typing import Any

from e2e_cluster import ClusterWorld
from e2e_world import VO, I, Launch, W, check_invariants, listed, step, workgraph
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner, Result

from dxts.backends.null.settings import NullRule, NullSettings
from dxts.cli.main import app
from dxts.cli.workgraphs import EXIT_ATTENTION
from dxts.core.adaptor.failures import tool_message
from dxts.core.adaptor.model import FailureClass

TOOL_LINE = "ERROR: cannot read calibration for run 7 (exit 3)"
STDERR = "\n".join(
    [*(f"INFO step {n}: reading events" for n in range(25)), TOOL_LINE]
    + [f"INFO cleanup {n}" for n in range(25)]
)
FAILING = (0, 3, 6)  # a third of the nine inputs
RETRY = {"HandleFailedInput": {"hook": "RetryUntilMaxErrors", "args": {"max_errors": 2}}}
WITHIN_S = 60.0


async def gauged(world: ClusterWorld) -> bool:
    """Whether the definition process's metrics count the workgraph needing attention."""
    port = world.cluster.components["definition"].env["DXTS_METRICS_PORT"]
    url = f"http://127.0.0.1:{port}/metrics"
    text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read())
    samples = {
        (s.name, s.labels.get("kind", "")): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
        if s.labels.get("vo") == VO
    }
    return (
        samples.get(("dxts_workgraphs_needing_attention", ""), 0) >= 1
        and samples.get(("dxts_attention_items", "failure-rate"), 0) >= 1
        and samples.get(("dxts_failed_parcel_share", ""), 0) > 0
    )


def mine(result: Result, workgraph_id: str) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    (found,) = [w for w in json.loads(result.stdout) if w["workgraph_id"] == workgraph_id]
    return dict(found)


async def test_a_production_failing_on_a_third_of_its_inputs_needs_attention(
    launch: Launch,
) -> None:
    null = NullSettings(
        name="null",
        outputs=["out"],
        rules=[
            NullRule(
                fate="failure",
                lfn=f"/e2e/t/{n}.raw",
                exit_code=3,
                message=STDERR,
                failure_class=FailureClass.APPLICATION_ERROR,
                tool_message=tool_message(STDERR),
            )
            for n in FAILING
        ],
    )
    assert tool_message(STDERR) == TOOL_LINE  # what every adaptor picks out of its stderr
    async with launch(null=null) as world:
        runner = CliRunner()

        async def dxts(*args: str) -> Result:
            invoke = runner.invoke
            return await asyncio.to_thread(invoke, app, [*world.cli, *args], env={"COLUMNS": "200"})

        wg = await world.submit(
            workgraph({"raw": listed(9, "t")}, {"Sim": step("raw", hooks=RETRY)}, {"s": "Sim/out"})
        )
        await world.start(wg)
        wid = wg.workgraph_id
        deadline = time.monotonic() + WITHIN_S
        while not (found := mine(await dxts("list", "-o", "json"), wid))["attention"]:
            assert time.monotonic() < deadline, f"no attention within {WITHIN_S} s"
            await asyncio.sleep(0.2)
        first = found["attention"][0]
        assert (first["kind"], first["step"]) == ("failure-rate", "Sim")
        assert first["transformation_id"] == wg.members["Sim"]
        assert first["command"] == f"dxts errors {wg.members['Sim']}"

        why = await dxts("why", wid)
        assert why.exit_code == 0, why.output
        reason = why.stdout.splitlines()[0]
        assert reason.startswith("Sim: ") and f" parcels failed: {TOOL_LINE}" in reason, why.stdout

        shown = json.loads((await dxts("show", wid, "-o", "json")).stdout)
        assert shown["attention"] and shown["workgraph"]["attention"]
        (sim,) = shown["members"]
        assert sim["attention"][0]["kind"] == "failure-rate"
        assert "needs attention: Sim: " in (await dxts("show", wid)).stdout

        if isinstance(world, ClusterWorld):  # the deployed shape: the gauges of its process
            await world.until("the attention gauges", lambda: gauged(world), wg)

        watched = await dxts("watch", wid, "--interval", "0.2", "--timeout", str(WITHIN_S))
        assert watched.exit_code == EXIT_ATTENTION, watched.output
        assert f"{wid} needs attention: Sim: " in watched.stdout

        async def quarantined() -> bool:
            census = await world.census(wg)
            return census["Sim"]["inputs"] == {"Processed": 6, "Problematic": 3}

        await world.until("the failing inputs quarantined", quarantined, wg)
        listed_now = mine(await dxts("list", "-o", "json"), wid)
        kinds = [item["kind"] for item in listed_now["attention"]]
        assert "problematic-inputs" in kinds, listed_now["attention"]
        written = await dxts("inputs", "write-off", f"{wid}/Sim", "--status", "problematic")
        assert written.stdout.strip() == "3 inputs written off", written.output
        await world.reach(wg, W.COMPLETED)

        ended = mine(await dxts("list", "-o", "json"), wid)
        assert ended["attention"] == []
        assert ended["ended_with"] == "3 written off, 6 parcels failed"
        table = await dxts("list")
        assert "Completed with 3 written off, 6 parcels failed" in table.stdout, table.stdout
        census = await world.census(wg)
        assert census["Sim"]["inputs"] == {I.PROCESSED.value: 6, I.NOT_PROCESSED.value: 3}
        errors = await dxts("errors", wid, "-o", "json")
        assert errors.exit_code == 0, errors.output
        (row,) = json.loads(errors.stdout)
        assert (row["count"], row["failure_class"], row["exit_codes"]) == (
            6,
            "application-error",
            [3],
        )
        assert row["message"] == TOOL_LINE
        await check_invariants(world, wg)
