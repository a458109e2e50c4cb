"""The lifecycle engine: the definition service's sweep over workgraphs and standalone
transformations (docs/architecture.md, "Lifecycle"; hooks and actions: docs/extensions.md).

* `sweep` — one task per workgraph under its named lock (skipped when another replica holds
  it), by state: ScoutingToApproving, the approving list, the Active hooks and the drain guard,
  the Finalizing/Archiving/Cleaning lists upstream first, Completed → Archiving after a delay.
* `actions_runner` — one action list of one owner: the lowest position without a result.
* `operations` — a hook's Operations applied (feeder arguments, enable/disable, pause, flush).
* `drain` — the drain guard on the exact counters.
* `views` — what plugins see of a workgraph and its members, read from definition's own rows.
* `plugin_check` — the start-up check that every injected parameter has a provider.

Its peers (accounting's counters, execution's rows and controls) are reached over gRPC by the
clients in `dxts.definition.edge`; the engine is assembled in `dxts.definition.component`.
"""
