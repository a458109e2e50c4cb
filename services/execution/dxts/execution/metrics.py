"""Prometheus metrics of the execution service (the default registry the metrics server serves).

Part 1 (feeders, packers, sweeps) first; the outcome and failed-input sweeps add theirs at the
end of this module.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

PLUGIN_FAILURES = Counter(
    "dxts_execution_plugin_failures",
    "Feeder and packer invocations that failed (raised, proposed something refused, or could "
    "not be written); retried by the next sweep.",
    ["point", "plugin"],
)
INPUTS_FED = Counter(
    "dxts_execution_inputs_fed", "Inputs inserted by feeders (duplicates excluded).", ["feeder"]
)
FEEDERS_EXHAUSTED = Counter(
    "dxts_execution_feeders_exhausted", "Feeders that reported NoMoreInputs.", ["feeder"]
)
INPUTS_PACKED = Counter(
    "dxts_execution_inputs_packed",
    "Inputs a packer decided on, by outcome (assigned, problematic, delayed).",
    ["packer", "outcome"],
)
PARCELS_CREATED = Counter(
    "dxts_execution_parcels_created", "Parcels created by packers.", ["packer", "kind"]
)
RUN_SECONDS = Histogram(
    "dxts_execution_run_seconds",
    "Time of one feeder or packer invocation (one transformation).",
    ["point"],
)

# -- outcome recording and failed inputs (part 2) ----------------------------------------------

OUTCOMES = Counter(
    "dxts_execution_outcomes",
    "Outcomes the dispatcher forwarded, by disposition (recorded, already_recorded, "
    "unknown_parcel).",
    ["disposition"],
)
PARCELS_FAILED = Counter(
    "dxts_execution_parcels_failed",
    "Parcels a backend's outcome failed, by failure class (application-error, out-of-memory, "
    "time-exceeded, killed, lost, stage-in, stage-out, setup-error, refused, unclassified) and "
    "backend.",
    ["failure_class", "backend"],
)
PARCELS_RECORDED = Counter(
    "dxts_execution_parcels_recorded",
    "Completing parcels recorded, by the status they ended in.",
    ["status"],
)
FAILED_INPUTS_DECIDED = Counter(
    "dxts_execution_failed_inputs_decided",
    "Failed inputs HandleFailedInput decided, by decision.",
    ["decision"],
)
