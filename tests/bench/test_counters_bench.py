"""The `counters` benchmark: its figures at tiny scale, `--rows`, latency figures, self-checks."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from dxts.bench import counters, harness
from dxts.bench.__main__ import main
from dxts.bench.harness import Bench, Operation, run_benchmark, scratch_database
from dxts.core.errors import FailedPrecondition

REQUIRED = {"benchmark", "figure", "value", "unit", "baseline", "ratio", "params"}
TINY = counters.SCALES["tiny"]
WRITER_FIGURES = ("counter_writer_txn_per_s", "counter_writer_txn_per_s_folding")


def parse(text: str) -> list[dict[str, Any]]:
    figures = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert figures, "no figures printed"
    for figure in figures:
        assert figure.keys() >= REQUIRED, figure
        assert figure["benchmark"] == "counters"
        assert figure["value"] > 0 and figure["baseline"] > 0
        assert figure["ratio"] == figure["value"] / figure["baseline"]
    return figures


def check_tiny_figures(figures: list[dict[str, Any]], database: str) -> None:
    names = [f["figure"] for f in figures]
    reads = [f for f in figures if f["figure"] == "counter_read_ms"]
    assert names == ["counter_read_ms"] * len(TINY.read_rows) + [*WRITER_FIGURES, "fold_rows_per_s"]
    assert {f["params"]["database"] for f in figures} == {database}

    assert [f["params"]["rows"] for f in reads] == sorted(TINY.read_rows)
    for read in reads:
        assert read["unit"] == "ms"
        params = read["params"]
        # The counter and COUNT(*) saw the same rows: the statuses sum to them.
        assert sum(params["statuses"].values()) == params["rows"]
        assert params["journal_backlog_rows"] == 2 * TINY.backlog_moves
        assert params["counter_reads_per_round"] == TINY.counter_reads
        assert "COUNT(*)" in params["baseline"]

    for name in WRITER_FIGURES:
        [writers] = [f for f in figures if f["figure"] == name]
        assert writers["unit"] == "txn/s"
        assert writers["params"]["writers"] == 8
        assert writers["params"]["rows_per_transaction"] == TINY.writer_batch
        assert writers["params"]["transactions_per_writer_per_round"] == TINY.writer_txns
        assert writers["params"]["folding"] is (name == "counter_writer_txn_per_s_folding")
    folding = figures[names.index("counter_writer_txn_per_s_folding")]["params"]
    assert folding["fold_batch"] == TINY.fold_batch

    [fold] = [f for f in figures if f["figure"] == "fold_rows_per_s"]
    assert fold["unit"] == "rows/s"
    assert fold["params"]["fold_batch"] == TINY.fold_batch
    assert fold["params"]["journal_rows"] >= TINY.fold_rows
    assert fold["params"]["journal_rows"] % (2 * fold["params"]["distinct_keys"]) == 0
    assert "ON DUPLICATE KEY UPDATE" in fold["params"]["baseline"]


def test_tiny_on_sqlite_prints_every_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'bench.sqlite'}"
    assert main(["counters", "--scale", "tiny", "--db-url", url]) == 0
    check_tiny_figures(parse(capsys.readouterr().out), "sqlite")


def test_rows_reads_at_that_row_count_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'bench.sqlite'}"
    assert main(["counters", "--scale", "tiny", "--db-url", url, "--rows", "777"]) == 0
    reads = [f for f in parse(capsys.readouterr().out) if f["figure"] == "counter_read_ms"]
    assert [f["params"]["rows"] for f in reads] == [777]


@pytest.mark.parametrize("rows", ["0", "-5"])
def test_rows_must_be_positive(rows: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["counters", "--scale", "tiny", "--db-url", "sqlite+aiosqlite://", "--rows", rows])
        == 1
    )
    assert "rows must be a positive integer" in capsys.readouterr().err


def test_rows_is_refused_by_a_benchmark_without_a_row_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["raw", "--scale", "tiny", "--db-url", "sqlite+aiosqlite://", "--rows", "10"]) == 1
    assert "takes no --rows" in capsys.readouterr().err


async def test_latency_figures_are_median_milliseconds_per_unit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [0.0]

    def taking(units: int, seconds: list[float]) -> Operation:
        rounds = iter(seconds)

        async def run() -> int:
            clock[0] += next(rounds)
            return units

        return Operation(run)

    out = io.StringIO()
    async with scratch_database("sqlite+aiosqlite://") as database:
        bench = Bench("unit", "tiny", database, out)
        # The harness's clock (time.perf_counter) advances only as the operations say.
        monkeypatch.setattr(harness.time, "perf_counter", lambda: clock[0])
        figure = await bench.compare(
            "thing_ms",
            unit="ms",
            # Warm-up round first (ignored), then three: 4 units in 0.4/0.8/0.2 s.
            baseline=taking(4, [9.0, 0.4, 0.8, 0.2]),
            # 10 units in 0.03/0.02/0.01 s: 3, 2 and 1 ms each.
            subject=taking(10, [9.0, 0.03, 0.02, 0.01]),
            rounds=3,
            latency=True,
        )
        monkeypatch.undo()
    assert (figure.value, figure.baseline) == (2.0, 100.0)
    [printed] = [json.loads(line) for line in out.getvalue().splitlines()]
    assert (printed["value"], printed["baseline"], printed["ratio"]) == (2.0, 100.0, 0.02)


async def test_writers_whose_journal_drops_deltas_fail_the_benchmark(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The self-check after the writer figures is real: a writer journalling one row fewer per
    move than it moved leaves the counter off COUNT(*), and the run fails instead of printing."""
    real = counters.journal_input_transition

    async def short(conn: Any, tid: bytes, old: str, new: str, count: int) -> int:
        return await real(conn, tid, old, new, count - 1)

    monkeypatch.setattr(counters, "journal_input_transition", short)
    out = io.StringIO()
    async with scratch_database("sqlite+aiosqlite://") as database:
        bench = Bench("counters", "tiny", database, out)
        with pytest.raises(FailedPrecondition, match="after the writers"):
            await counters._writer_figures(bench, TINY)


async def test_the_fold_figure_leaves_every_key_at_zero() -> None:
    out = io.StringIO()
    async with scratch_database("sqlite+aiosqlite://") as database:
        await counters._fold_figure(Bench("counters", "tiny", database, out), TINY)
        async with database.engine.connect() as conn:
            left = await conn.scalar(sa.select(sa.func.count()).select_from(counters.journal))
            rows = (await conn.execute(sa.select(counters.counters.c.Count))).scalars().all()
    assert left == 0
    assert rows and set(rows) == {0}  # folded keys stay as zero rows, none negative
    [figure] = parse(out.getvalue())
    assert figure["figure"] == "fold_rows_per_s"


async def test_tiny_on_mariadb(mysql_test_url: str) -> None:
    server = sa.make_url(mysql_test_url).set(database="")
    out = io.StringIO()
    await run_benchmark("counters", "tiny", server.render_as_string(hide_password=False), out)
    check_tiny_figures(parse(out.getvalue()), "mariadb")
