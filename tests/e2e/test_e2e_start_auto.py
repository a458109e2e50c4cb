"""`start: auto` (SQLite and MariaDB): a workgraph whose dirac:Workgraph hint asks for it is
started by the request that submits it, as its submitter, and runs to Completed with no
StartWorkgraph call; the start is logged once, by the start command, with its reason and its
request id."""

from __future__ import annotations

from pathlib import Path

from e2e_world import W, check_invariants, running, seeds, step, workgraph

from dxts.core.db import Database
from dxts.definition.logic.submit import AUTO_START_REQUEST


async def test_a_start_auto_workgraph_runs_without_being_started(
    database: Database, tmp_path: Path
) -> None:
    document = workgraph(
        {"seeds": seeds(3)},
        {"Sim": step("seeds")},
        {"sims": "Sim/out"},
        start="auto",
        target={"output": "sims", "files": 3},
        hooks={"Active": {"hook": "OutputTarget"}},
    )
    async with running(database, tmp_path) as world:
        wg = await world.submit(document)
        await world.reach(wg, W.COMPLETED)
        await check_invariants(world, wg)

        census = await world.census(wg)
        assert census["Sim"]["inputs"] == {"Processed": 3}
        workgraph_log, _ = await world.logs(wg)
        started = [
            (row.OldStatus, row.NewStatus, row.Message, row.Data["request_id"])
            for row in workgraph_log
            if row.OldStatus == W.NEW
        ]
        assert started == [("New", "Active", "start: auto", AUTO_START_REQUEST)]
