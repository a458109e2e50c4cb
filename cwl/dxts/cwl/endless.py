"""A workgraph that cannot end by itself: a member fed by a feeder that never says it has no
more inputs (Seeds issues seeds for ever: "Pacing Seeds to an event target" in
docs/extensions.md), with no Active hook on the workgraph to stop it. Such a workgraph stays
Active for good once its work is done; it is accepted (an operator may mean to drain it by
hand) with a warning naming the fix."""

from __future__ import annotations

from dxts.cwl.analysis import Analysis
from dxts.cwl.problems import Kind, Problem, warning

# Feeders that never report exhaustion, each with the hook the project ships to end it.
ENDLESS_FEEDERS = {"Seeds": "{hook: OutputTarget, args: {target_events: N}}"}


def endless_feeders(analysis: Analysis) -> list[Problem]:
    """A warning per endless feeder when the workgraph has no Active hook (OutputTarget, or one
    of the experiment's, which may end it)."""
    hooks = analysis.workgraph_hint.get("hooks")
    if isinstance(hooks, dict) and hooks.get("Active"):
        return []
    problems = []
    for input_id, feeder in analysis.feeders.items():
        name = feeder.get("name")
        if isinstance(name, str) and name in ENDLESS_FEEDERS:
            problems.append(
                warning(
                    Kind.ENDLESS_FEEDER,
                    f"inputs.{input_id}.dirac:Feeder",
                    f"the {name} feeder never runs out of inputs and no Active hook stops it: "
                    "the workgraph cannot end by itself (it stays Active once its work is "
                    f"done); add `hooks: {{Active: {ENDLESS_FEEDERS[name]}}}` to "
                    "dirac:Workgraph, or end it by hand with `dxts drain WG`",
                )
            )
    return problems
