"""The benchmarks `python -m dxts.bench NAME` can run: name → module (imported only when run)."""

BENCHMARKS: dict[str, str] = {
    "raw": "dxts.bench.raw",
    "dispatch": "dxts.bench.dispatch",
    "counters": "dxts.bench.counters",
    "definition": "dxts.bench.definition",
    "execution": "dxts.bench.execution",
    "slurm": "dxts.bench.slurm",
    "web": "dxts.bench.web",
    "web-live": "dxts.bench.web_live",
    "cli": "dxts.bench.cli",
    "e2e": "dxts.bench.e2e",
    "job": "dxts.bench.job",
    "transfer": "dxts.bench.transfer",
}
