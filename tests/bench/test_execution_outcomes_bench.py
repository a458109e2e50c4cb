"""`outcome_parcels_per_s` at tiny scale on SQLite: the figure, and that every parcel was really
recorded (the benchmark fails otherwise)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from dxts.bench.execution_outcomes import SCALES, run_outcomes
from dxts.bench.harness import Bench, scratch_database


async def test_outcome_recording_tiny_on_sqlite(tmp_path: Path) -> None:
    out = io.StringIO()
    async with scratch_database(f"sqlite+aiosqlite:///{tmp_path / 'bench.sqlite'}") as database:
        await run_outcomes(Bench("execution", "tiny", database, out))
    (figure,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert (figure["figure"], figure["unit"]) == ("outcome_parcels_per_s", "parcels/s")
    assert figure["value"] > 0 and figure["baseline"] > 0
    assert figure["params"]["parcels"] == SCALES["tiny"].parcels
    assert figure["params"]["database"] == "sqlite"
