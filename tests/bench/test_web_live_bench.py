"""The `web-live` benchmark at the tiny scale, on SQLite and MariaDB: the seeded pages and a
running production's, each timed while the production ran and once it was Completed (the
values are timings, and not asserted; that the production ran while they were taken is)."""

from __future__ import annotations

import json

import pytest

from dxts.bench import web_live
from dxts.bench.__main__ import main

TINY = web_live.SCALES["tiny"]


def test_tiny_times_every_page_while_the_production_runs(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["web-live", "--scale", "tiny", "--db-url", db_url]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert [f["figure"] for f in lines] == [
        "list_page_ms",
        "workgraph_page_ms",
        "member_page_ms",
        "errors_page_ms",
        "parcel_page_ms",
        "seeded_workgraph_page_ms",
        "seeded_member_page_ms",
    ]
    for figure in lines:
        assert figure["benchmark"] == "web-live" and figure["unit"] == "ms"
        assert figure["value"] > 0 and figure["baseline"] > 0
        params = figure["params"]
        assert 1 <= params["samples"] <= TINY.live_rounds
        assert params["max_ms"] >= figure["value"]
        assert params["seeds"] == TINY.seeds
        assert params["workgraphs"] == TINY.seeded.workgraphs + 2
        # The production was running: parcels of it were done while the pages were timed.
        assert params["simulation_parcels_done_in_window"] > 0
