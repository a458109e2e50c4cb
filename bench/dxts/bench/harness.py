"""The harness: a scratch database, interleaved timing against a plain-SQL baseline, JSON lines.

Timing: every operation runs one untimed warm-up round, then `rounds` timed rounds; a figure is
the median of the per-round rates (units done / seconds), which a shared two-core machine's
noise moves less than a mean. `setup` work (building rows, seeding tables) is never timed.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from dxts.bench.registry import BENCHMARKS
from dxts.core.db import Database
from dxts.core.errors import FailedPrecondition, InvalidArgument
from dxts.core.schema import metadata

log = logging.getLogger(__name__)

DEFAULT_SERVER_URL = "mysql+asyncmy://root@127.0.0.1:3306/"
SCALES = ("tiny", "small", "full")


@dataclass(frozen=True)
class Operation:
    """One timed round: `setup` (untimed) prepares it, `run` does it and returns units done."""

    run: Callable[[], Awaitable[int]]
    setup: Callable[[], Awaitable[None]] | None = None


@dataclass(frozen=True)
class Figure:
    """One measured figure, as printed."""

    benchmark: str
    figure: str
    value: float
    unit: str
    baseline: float
    params: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> str:
        return json.dumps(
            {
                "benchmark": self.benchmark,
                "figure": self.figure,
                "value": self.value,
                "unit": self.unit,
                "baseline": self.baseline,
                "ratio": self.value / self.baseline,
                "params": self.params,
            }
        )


class Bench:
    """What a benchmark module gets: the database, the scale, and the measuring helpers."""

    def __init__(self, name: str, scale: str, database: Database, out: TextIO) -> None:
        self.name = name
        self.scale = scale
        self.database = database
        self.out = out
        self.figures: list[Figure] = []

    async def compare(
        self,
        figure: str,
        *,
        unit: str,
        baseline: Operation,
        subject: Operation | None,
        rounds: int,
        params: dict[str, Any] | None = None,
        latency: bool = False,
    ) -> Figure:
        """Measure `subject` (the dxts path) against `baseline` (plain SQL), rounds alternating,
        and print the figure. `subject=None` reports the baseline itself (value = baseline).

        `latency=True` reports milliseconds per unit instead of a rate (the median of the
        rounds' 1000 / rate; lower is better), for figures named `..._ms`."""
        if rounds < 1:
            raise InvalidArgument(f"rounds must be at least 1, got {rounds}", field="rounds")
        operations = [baseline] if subject is None else [baseline, subject]
        rates: list[list[float]] = [[] for _ in operations]
        for round_number in range(rounds + 1):
            for index, operation in enumerate(operations):
                rate = await _timed_rate(operation)
                if round_number:  # round 0 warms caches and pools
                    rates[index].append(rate)
        if latency:
            rates = [[1000 / rate for rate in per_round] for per_round in rates]
        baseline_rate = significant(statistics.median(rates[0]))
        value = baseline_rate if subject is None else significant(statistics.median(rates[1]))
        measured = Figure(
            benchmark=self.name,
            figure=figure,
            value=value,
            unit=unit,
            baseline=baseline_rate,
            params={
                "scale": self.scale,
                "database": self.database.dialect_name,
                "server_version": self.database.server.version_string
                if self.database.server
                else None,
                "rounds": rounds,
                **(params or {}),
            },
        )
        self.figures.append(measured)
        print(measured.as_json(), file=self.out, flush=True)
        return measured

    def report(
        self,
        figure: str,
        value: float,
        *,
        unit: str,
        baseline: float,
        params: dict[str, Any] | None = None,
    ) -> Figure:
        """Print a figure measured once (a whole run, not rounds) against its `baseline`."""
        measured = Figure(
            benchmark=self.name,
            figure=figure,
            value=significant(value),
            unit=unit,
            baseline=significant(baseline),
            params={
                "scale": self.scale,
                "database": self.database.dialect_name,
                "server_version": self.database.server.version_string
                if self.database.server
                else None,
                **(params or {}),
            },
        )
        self.figures.append(measured)
        print(measured.as_json(), file=self.out, flush=True)
        return measured


async def _timed_rate(operation: Operation) -> float:
    if operation.setup is not None:
        await operation.setup()
    started = time.perf_counter()
    units = await operation.run()
    elapsed = time.perf_counter() - started
    if units <= 0:
        raise FailedPrecondition(f"a benchmark round did no work ({units} units)")
    return units / elapsed


def significant(rate: float, digits: int = 4) -> float:
    """Four significant digits: more would be noise on any machine."""
    return float(f"{rate:.{digits}g}")


@contextlib.asynccontextmanager
async def scratch_database(url: str | None) -> AsyncIterator[Database]:
    """A started Database holding the whole (empty) schema, cleaned away afterwards.

    A URL naming no database (the default, `mysql+asyncmy://root@127.0.0.1:3306/`, or a bare
    `sqlite+aiosqlite://`) gets a fresh scratch database, dropped at the end. A URL naming one
    uses it only if it holds no tables (a benchmark writes and deletes freely), and drops the
    schema at the end.
    """
    parsed = sa.make_url(url or DEFAULT_SERVER_URL)
    if parsed.get_backend_name() == "sqlite":
        async with _sqlite_scratch(parsed) as database:
            yield database
        return
    if parsed.database:
        async with _schema(parsed.render_as_string(hide_password=False)) as database:
            yield database
        return
    name = f"dxts_bench_{uuid.uuid4().hex[:12]}"
    await _server_statement(
        parsed, f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
    )
    try:
        scratch = parsed.set(database=name).render_as_string(hide_password=False)
        async with _schema(scratch) as database:
            yield database
    finally:
        await _server_statement(parsed, f"DROP DATABASE IF EXISTS `{name}`")


@contextlib.asynccontextmanager
async def _sqlite_scratch(parsed: sa.URL) -> AsyncIterator[Database]:
    if parsed.database in (None, "", ":memory:"):
        # A file, not memory: the pool's connections must all see one database.
        with tempfile.TemporaryDirectory(prefix="dxts-bench-") as folder:
            async with _schema(f"sqlite+aiosqlite:///{Path(folder) / 'bench.sqlite'}") as db:
                yield db
        return
    async with _schema(parsed.render_as_string(hide_password=False)) as database:
        yield database


@contextlib.asynccontextmanager
async def _schema(url: str) -> AsyncIterator[Database]:
    database = Database(url)
    await database.start()
    try:
        async with database.engine.begin() as conn:
            existing = await conn.run_sync(lambda sync: sa.inspect(sync).get_table_names())
            if existing:
                raise FailedPrecondition(
                    f"{database.url.database} already holds tables ({', '.join(existing[:5])}"
                    f"{', ...' if len(existing) > 5 else ''}): benchmarks need an empty database "
                    "or a URL naming none (a scratch database is then created and dropped)"
                )
            await conn.run_sync(metadata.create_all)
        try:
            yield database
        finally:
            async with database.engine.begin() as conn:
                await conn.run_sync(metadata.drop_all)
    finally:
        await database.dispose()


async def _server_statement(server: sa.URL, statement: str) -> None:
    engine = create_async_engine(server, poolclass=sa.pool.NullPool)
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text(statement))
    finally:
        await engine.dispose()


async def run_benchmark(
    name: str,
    scale: str,
    db_url: str | None,
    out: TextIO,
    rows: int | None = None,
    replicas: int | None = None,
) -> list[Figure]:
    """Run one registered benchmark at `scale` and print its figures to `out`.

    `rows` overrides the scale's row count, for a benchmark defining `with_rows(params, rows)`;
    `replicas` likewise through `with_replicas(params, replicas)`.
    """
    if name not in BENCHMARKS:
        raise InvalidArgument(
            f"unknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}", field="name"
        )
    module = importlib.import_module(BENCHMARKS[name])
    if scale not in module.SCALES:
        raise InvalidArgument(f"benchmark {name} has no scale {scale!r}", field="scale")
    params = module.SCALES[scale]
    if rows is not None:
        if not hasattr(module, "with_rows"):
            raise InvalidArgument(f"benchmark {name} takes no --rows", field="rows")
        params = module.with_rows(params, rows)
    if replicas is not None:
        if not hasattr(module, "with_replicas"):
            raise InvalidArgument(f"benchmark {name} takes no --replicas", field="replicas")
        params = module.with_replicas(params, replicas)
    async with scratch_database(db_url) as database:
        log.info(
            "%s at scale %s on %s %s, database %s",
            name,
            scale,
            database.dialect_name,
            database.server.version_string if database.server else "?",
            database.url.database,
        )
        bench = Bench(name, scale, database, out)
        await module.run(bench, params)
    return bench.figures
