"""`python -m dxts.bench NAME [--scale small|full] [--db-url URL] [--rows N | --seeds N]
[--replicas N]`: JSON lines."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from dxts.bench.harness import DEFAULT_SERVER_URL, SCALES, run_benchmark
from dxts.bench.registry import BENCHMARKS
from dxts.core.errors import DxtsError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dxts.bench",
        description="Run one benchmark; print one JSON object per figure on stdout.",
    )
    parser.add_argument("name", choices=sorted(BENCHMARKS), help="the benchmark to run")
    parser.add_argument(
        "--scale",
        choices=SCALES,
        default="small",
        metavar="{small,full}",
        help="small finishes in under a minute (default); full is the reference run",
    )
    parser.add_argument(
        "--db-url",
        default=None,
        help=f"database URL (default: a scratch database created and dropped on "
        f"{DEFAULT_SERVER_URL}); a URL naming a database uses it if it is empty",
    )
    parser.add_argument(
        "--rows",
        type=int,
        default=None,
        help="the row count, for benchmarks that take one (counters: the counted rows read)",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        dest="rows",
        default=None,
        help="the seeds of the e2e benchmark's workgraph (its --rows)",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=None,
        help="e2e: run again with N replicas of execution and of the dispatcher, and print the "
        "speed-up over one of each",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    try:
        asyncio.run(
            run_benchmark(args.name, args.scale, args.db_url, sys.stdout, args.rows, args.replicas)
        )
    except DxtsError as error:
        print(f"dxts.bench: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
