"""A flush whose packer fails is seen, not lost (SQLite and MariaDB): a member's packer
(`FailsOnFlush`) holds its inputs back for a flush and raises on one. Its PeriodicFlush hook
flushes it: the failure, logged on the member by execution (PackerFailed, from a flush), is an
attention item `dxts why` and `dxts list` show with the packer's class and words; an operator's
`dxts flush` prints the same words and exits 1, and FlushTransformation's reply carries them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from e2e_plugins import FLUSH_FAILURE
from e2e_world import listed, running, step, workgraph
from typer.testing import CliRunner, Result

from dxts.backends.null.settings import NullSettings
from dxts.cli.main import app
from dxts.core.db import Database

HOOKS = {
    "Active": {
        "hook": "PeriodicFlush",
        "args": {"flush_every_s": 0.5, "pause_on_failures": False},
    }
}
WORDS = f"packer 'FailsOnFlush' ((tests/e2e)) raised RuntimeError: {FLUSH_FAILURE}"


async def test_a_failed_flush_reaches_its_caller_and_attention(
    database: Database, tmp_path: Path
) -> None:
    document = workgraph(
        {"raw": listed(3, "flush")},
        {"Held": step("raw", packer="FailsOnFlush", hooks=HOOKS)},
        {"held": "Held/out"},
    )
    async with running(
        database, tmp_path, null=NullSettings(name="null", outputs=["out"])
    ) as world:
        runner = CliRunner()

        async def dxts(*args: str) -> Result:
            invoke = runner.invoke
            return await asyncio.to_thread(invoke, app, [*world.cli, *args], env={"COLUMNS": "300"})

        wg = await world.submit(document)
        await world.start(wg)
        held = wg.members["Held"]

        async def hook_flush_failed() -> bool:
            _, logs = await world.logs(wg)
            return any(
                r.EventType == "PackerFailed" and (r.Data or {}).get("flush") for r in logs["Held"]
            )

        await world.until("the hook's flush to fail", hook_flush_failed, wg)
        _, logs = await world.logs(wg)
        failed = [r for r in logs["Held"] if r.EventType == "PackerFailed"]
        assert failed[0].Message == WORDS
        assert failed[0].Data == {"packer": "FailsOnFlush", "error": "PluginFailed", "flush": True}
        assert any(
            r.EventType == "Flush" and r.Author == "hook PeriodicFlush" for r in logs["Held"]
        )

        why = await dxts("why", wg.workgraph_id)
        assert why.exit_code == 0, why.output
        first = why.stdout.splitlines()[0]
        assert first.startswith("Held: its packer failed on a flush (PluginFailed)"), why.stdout
        assert WORDS in first, why.stdout
        listed_json = json.loads((await dxts("list", "-o", "json")).stdout)
        (mine,) = [w for w in listed_json if w["workgraph_id"] == wg.workgraph_id]
        item = mine["attention"][0]
        assert (item["kind"], item["step"], item["command"]) == (
            "packer-failed",
            "Held",
            f"dxts logs {held} --newest-first",
        )

        flushed = await dxts("flush", f"{wg.workgraph_id}/Held")
        assert flushed.exit_code == 1, flushed.output
        assert flushed.stdout == ""
        assert flushed.stderr == (
            f"error: {held} flush failed: its packer stopped (PluginFailed): {WORDS}; "
            f"dxts why {held}\n"
        )
        reply = await world.call("FlushTransformation", transformation_id=held)
        assert (reply.failure, reply.failure_class) == (WORDS, "PluginFailed")
        assert (reply.inputs_offered, reply.parcels_created) == (3, 0)
