"""The lifecycle engine: the definition service's sweep over workgraphs and standalone
transformations (STATE-MACHINES.md, DX-ADR-006 "Hooks" and "Actions").

* `sweep` — one task per workgraph under its named lock (skipped when another replica holds
  it), by state: ScoutingToApproving, the approving list, the Active hooks and the drain guard,
  the Finalizing/Archiving/Cleaning lists upstream first, Completed → Archiving after a delay.
* `actions_runner` — one action list of one owner: the lowest position without a result.
* `operations` — a hook's Operations applied (feeder arguments, enable/disable, pause, flush).
* `drain` — the drain guard on the exact counters.
* `clients` — accounting and execution over gRPC (and doubles) for the engine and the built-ins.
"""
