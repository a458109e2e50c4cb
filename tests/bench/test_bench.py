"""The benchmark harness: JSON lines with the required keys, baselines, scratch databases."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from dxts.bench.__main__ import main
from dxts.bench.harness import Bench, Operation, run_benchmark, scratch_database
from dxts.core.errors import FailedPrecondition, InvalidArgument

REQUIRED = {"figure", "value", "unit", "baseline", "ratio"}
RAW_FIGURES = {"insert_multirow", "insert_executemany", "claim_skip_locked", "single_row_commit"}


def parse_figures(text: str) -> list[dict[str, Any]]:
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines, "no figures printed"
    figures = [json.loads(line) for line in lines]
    for figure in figures:
        assert isinstance(figure, dict)
        assert figure.keys() >= REQUIRED, figure
        assert figure["value"] > 0 and figure["baseline"] > 0
        assert figure["ratio"] == figure["value"] / figure["baseline"]
    return figures


def test_raw_tiny_on_sqlite_prints_one_json_line_per_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'bench.sqlite'}"
    assert main(["raw", "--scale", "tiny", "--db-url", url]) == 0
    figures = parse_figures(capsys.readouterr().out)
    assert {f["figure"] for f in figures} == RAW_FIGURES
    assert len(figures) == len(RAW_FIGURES)
    for figure in figures:
        # `raw` reports baselines alone.
        assert figure["value"] == figure["baseline"]
        assert figure["ratio"] == 1.0
        assert figure["params"]["database"] == "sqlite"
    claim = next(f for f in figures if f["figure"] == "claim_skip_locked")
    assert claim["unit"] == "claims/s"
    assert claim["params"]["connections"] == 4
    # The named database was used and its schema dropped afterwards.
    with sqlite3.connect(tmp_path / "bench.sqlite") as conn:
        assert conn.execute("select count(*) from sqlite_master where type='table'").fetchone() == (
            0,
        )


def test_unknown_benchmark_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["nonesuch"])
    assert caught.value.code == 2
    assert "raw" in capsys.readouterr().err


def test_a_database_holding_tables_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "precious.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("create table keep (x integer)")
        conn.execute("insert into keep values (1)")
    assert main(["raw", "--scale", "tiny", "--db-url", f"sqlite+aiosqlite:///{path}"]) == 1
    assert "already holds tables" in capsys.readouterr().err
    with sqlite3.connect(path) as conn:
        assert conn.execute("select x from keep").fetchall() == [(1,)]


async def test_unknown_scale_is_refused() -> None:
    with pytest.raises(InvalidArgument):
        await run_benchmark("raw", "enormous", "sqlite+aiosqlite://", io.StringIO())


async def test_compare_alternates_rounds_and_skips_the_warm_up() -> None:
    calls: list[str] = []

    def operation(label: str, units: int) -> Operation:
        async def setup() -> None:
            calls.append(f"setup-{label}")

        async def run() -> int:
            calls.append(label)
            await asyncio.sleep(0)
            return units

        return Operation(run, setup)

    out = io.StringIO()
    async with scratch_database("sqlite+aiosqlite://") as database:
        bench = Bench("unit", "tiny", database, out)
        figure = await bench.compare(
            "thing",
            unit="things/s",
            baseline=operation("plain", 10),
            subject=operation("dxts", 10),
            rounds=3,
            params={"batch": 7},
        )
    # Warm-up round plus three timed rounds, baseline and subject alternating, setup first.
    assert calls == ["setup-plain", "plain", "setup-dxts", "dxts"] * 4
    [printed] = parse_figures(out.getvalue())
    assert printed["figure"] == "thing"
    assert printed["value"] == figure.value
    assert printed["baseline"] == figure.baseline
    assert printed["params"]["rounds"] == 3
    assert printed["params"]["batch"] == 7
    assert bench.figures == [figure]


async def test_a_round_doing_no_work_is_an_error() -> None:
    async def nothing() -> int:
        return 0

    async with scratch_database("sqlite+aiosqlite://") as database:
        bench = Bench("unit", "tiny", database, io.StringIO())
        with pytest.raises(FailedPrecondition):
            await bench.compare(
                "none", unit="x/s", baseline=Operation(nothing), subject=None, rounds=1
            )


async def test_raw_tiny_on_mariadb_uses_a_scratch_database_and_drops_it(
    mysql_test_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The server of the test database, naming no database: the harness makes its own.
    server = sa.make_url(mysql_test_url).set(database="")
    bare = server.render_as_string(hide_password=False)
    out = io.StringIO()
    with caplog.at_level(logging.INFO, logger="dxts.bench.harness"):
        await run_benchmark("raw", "tiny", bare, out)
    figures = parse_figures(out.getvalue())
    assert {f["figure"] for f in figures} == RAW_FIGURES
    assert {f["params"]["database"] for f in figures} == {"mariadb"}
    [name] = re.findall(r"database (dxts_bench_[0-9a-f]{12})", caplog.text)
    engine = create_async_engine(mysql_test_url, poolclass=sa.pool.NullPool)
    async with engine.connect() as conn:
        left = await conn.scalar(
            sa.text("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = :n"),
            {"n": name},
        )
    await engine.dispose()
    assert left == 0
