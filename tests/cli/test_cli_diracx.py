"""`dxts up --backend diracx --diracx-url URL`: the example production runs to Completed with its
compute parcels as jobs of a real DiracX server (`scripts/diracx`), which the test pilot runs
through DiracX's API (data parcels still move between the local storage elements) — and the
first job stalls in DiracX instead: its parcel is reported lost, and its inputs are retried."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from diracx_fixture import DiracXServer, TestPilot, running_diracx
from test_cli_demo import RUN_TIMEOUT_S, Up, check_completed, small_example, up  # noqa: F401

FINISHED = ("Completed", "Archiving", "Archived", "Failed")


async def _jobs(server: DiracXServer) -> dict[int, str]:
    admin = server.client("admin")
    try:
        rows = await admin.search(
            [{"parameter": "JobName", "operator": "like", "value": "dxts-%"}], ["JobID", "Status"]
        )
    finally:
        await admin.close()
    return {int(row["JobID"]): str(row["Status"]) for row in rows}


async def _run_waiting(server: DiracXServer, work: Path, stalled: list[int]) -> int:
    """Run the waiting jobs; the very first one of the test stalls instead (its pilot is
    matched, then vanishes)."""
    pilot = TestPilot(server, work, {})
    try:
        waiting = await pilot.waiting()
        if waiting and not stalled:
            stalled.append(waiting.pop(0))
            await pilot.match(stalled[0])
            await pilot.pilot.set_status(stalled, "Stalled", "test: the pilot vanished")
        for job_id in waiting:
            await pilot.run(job_id)
        return len(waiting)
    finally:
        await pilot.close()


def test_the_demo_completes_with_its_compute_parcels_as_diracx_jobs(up: Up, tmp_path: Path) -> None:  # noqa: F811
    with running_diracx(tmp_path / "diracx") as server:
        username, group = server.users["adaptor"]
        up.start(
            "--backend",
            "diracx",
            "--diracx-url",
            server.url,
            environment={
                "DXTS_DIRACX_API_KEY": server.api_key,
                "DXTS_DIRACX_VO": server.vo,
                "DXTS_DIRACX_USERNAME": username,
                "DXTS_DIRACX_GROUP": group,
            },
        )
        workgraph = up.submit_and_start(small_example(tmp_path))
        ran, stalled = 0, []
        deadline = time.monotonic() + RUN_TIMEOUT_S  # a bound on the loop, not an assertion
        while up.json("show", workgraph)["status"] not in FINISHED:
            assert time.monotonic() < deadline, up.json("show", workgraph)
            ran += asyncio.run(_run_waiting(server, tmp_path / "pilot", stalled))
            time.sleep(0.5)
        check_completed(up, workgraph)
        jobs = asyncio.run(_jobs(server))
        # Simulation, reconstruction, merge: each parcel one job; the stalled one was killed
        # (it cannot come back beside its retry) and its inputs ran again in a new parcel.
        assert jobs.pop(stalled[0]) == "Killed"
        assert ran == len(jobs) >= 4
        assert set(jobs.values()) == {"Done"}
        up.stop()
