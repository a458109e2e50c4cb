"""Benchmarks: `python -m dxts.bench NAME [--scale small|full] [--db-url URL]`.

Each run prints one JSON object per line per figure (see BENCHMARKS.md):

    {"figure": ..., "value": ..., "unit": ..., "baseline": ..., "ratio": value / baseline, ...}

`baseline` is the same operation done with plain SQL (a hand-written SQLAlchemy Core statement,
no dxts logic) on the same database in the same run, measured by `Bench.compare`, which
alternates the two so that both see the same machine; `ratio` is then the cost of dxts over what
the database itself can do.

Adding a benchmark is one module and one registration:

1. `bench/dxts/bench/NAME.py` defines `SCALES`, a dict from scale name ("tiny" for the tests,
   "small" finishing in under a minute, "full") to that benchmark's parameters, and
   `async def run(bench: Bench, params) -> None`, which seeds what it needs in `bench.database`
   (a started Database with the whole schema, in a scratch database the harness drops
   afterwards) and calls `await bench.compare(...)` once per figure, with an `Operation` for
   the dxts path and one for its plain-SQL baseline (`raw.py` is the example).
2. One line in `registry.py`: `"NAME": "dxts.bench.NAME"`.
"""
