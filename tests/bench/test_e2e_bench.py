"""The `e2e` benchmark through its whole code path at a tiny size, on SQLite and MariaDB: every
component started as its own process, the workgraph run to Completed, every figure printed
(the figures' values are timings, and not asserted)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dxts.bench.__main__ import main
from dxts.bench.e2e import document

COMPONENTS = {"definition", "execution", "accounting", "dispatcher", "backend-null"}


def test_the_document_carries_the_seeds_asked_for() -> None:
    body = document(1234)
    assert body["inputs"]["seeds"]["dirac:Feeder"]["args"]["target_events"] == 1234
    assert body["hints"]["dirac:Workgraph"]["hooks"]["Active"]["args"]["target_events"] == 1234
    assert set(body["steps"]) == {"Simulation", "Merge"}


def test_e2e_runs_a_production_to_completed_and_prints_its_figures(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["e2e", "--scale", "tiny", "--seeds", "150", "--db-url", db_url]) == 0
    figures = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    for figure in figures:
        assert figure["value"] > 0 and figure["baseline"] > 0
        assert figure["ratio"] == figure["value"] / figure["baseline"]
    by_name: dict[str, list[dict[str, object]]] = {}
    for figure in figures:
        by_name.setdefault(figure["figure"], []).append(figure)
    (pipeline,) = by_name["pipeline_parcels_per_s"]
    (completed,) = by_name["e2e_completed_s"]
    assert completed["params"]["seeds"] == 150  # type: ignore[index]
    (sim,) = by_name["e2e_sim_parcels_per_s"]
    assert sim["baseline"] == pipeline["value"]
    # Every seed went through both members: 150 simulated, merged 100 + 50.
    counts = {
        (f["figure"], f["params"]["member"]): f["params"]["count"]  # type: ignore[index]
        for name in ("e2e_member_inputs_per_s", "e2e_member_parcels_per_s")
        for f in by_name[name]
    }
    assert counts == {
        ("e2e_member_inputs_per_s", "Simulation"): 150,
        ("e2e_member_parcels_per_s", "Simulation"): 150,
        ("e2e_member_inputs_per_s", "Merge"): 150,
        ("e2e_member_parcels_per_s", "Merge"): 2,
    }
    for name in ("e2e_peak_rss_mb", "e2e_cpu_s"):
        assert {f["params"]["component"] for f in by_name[name]} == COMPONENTS  # type: ignore[index]
    (size,) = by_name["e2e_database_mb"]
    pool = size["params"].get("innodb_buffer_pool_mb")  # type: ignore[attr-defined]
    assert (pool is None) == db_url.startswith("sqlite") and (pool is None or pool > 0)
    # What a parcel cost, the run's and the pipeline's, with the cores each kept busy: the
    # components' CPU (and the server's) over the parcels, so no less than their own figures.
    (spent,) = by_name["e2e_cpu_ms_per_parcel"]
    cost: dict[str, Any] = spent["params"]
    assert cost["cores_used"] > 0 and cost["pipeline_cores_used"] > 0
    components_s = sum(float(f["value"]) for f in by_name["e2e_cpu_s"])
    assert float(spent["value"]) >= 0.99 * components_s * 1000 / cost["parcels"]


def test_with_replicas_it_runs_again_scaled_out_and_prints_the_speedup(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["e2e", "--scale", "tiny", "--seeds", "120", "--replicas", "2", "--db-url", db_url])
        == 0
    )
    figures = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    by_name: dict[str, list[dict[str, object]]] = {}
    for figure in figures:
        by_name.setdefault(figure["figure"], []).append(figure)
    single, scaled = by_name["e2e_completed_s"]
    assert (single["params"]["replicas"], scaled["params"]["replicas"]) == (1, 2)  # type: ignore[index]
    # Both runs took every seed through both members, nothing done twice with two replicas.
    counts = [
        (f["params"]["replicas"], f["params"]["member"], f["params"]["count"])  # type: ignore[index]
        for f in by_name["e2e_member_parcels_per_s"]
    ]
    assert sorted(counts) == [
        (1, "Merge", 2),
        (1, "Simulation", 120),
        (2, "Merge", 2),
        (2, "Simulation", 120),
    ]
    # Each replica is its own process, measured as such.
    components = {
        f["params"]["component"] for f in by_name["e2e_cpu_s"] if f["params"]["replicas"] == 2
    }  # type: ignore[index]
    assert components == COMPONENTS | {"execution-2", "dispatcher-2"}
    (completed,) = by_name["e2e_replicas_completed_s"]
    assert completed["value"] == scaled["value"] and completed["baseline"] == single["value"]
    assert completed["params"]["speedup"] == round(single["value"] / scaled["value"], 3)  # type: ignore[index, operator]
    (rate,) = by_name["e2e_replicas_sim_parcels_per_s"]
    sims = {f["params"]["replicas"]: f["value"] for f in by_name["e2e_sim_parcels_per_s"]}  # type: ignore[index]
    assert (rate["value"], rate["baseline"]) == (sims[2], sims[1])


@pytest.mark.parametrize("replicas", ["0", "-1"])
def test_replicas_must_be_at_least_one(replicas: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["e2e", "--scale", "tiny", "--db-url", "sqlite+aiosqlite://", "--replicas", replicas]
    assert main(argv) == 1
    assert f"--replicas must be at least 1, got {replicas}" in capsys.readouterr().err


def test_replicas_is_refused_by_a_benchmark_without_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["raw", "--scale", "tiny", "--db-url", "sqlite+aiosqlite://", "--replicas", "2"]
    assert main(argv) == 1
    assert "takes no --replicas" in capsys.readouterr().err
