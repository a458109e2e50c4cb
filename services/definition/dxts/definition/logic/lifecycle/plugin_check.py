"""The start-up check of the plugins the lifecycle engine runs: every parameter they are
injected with has a provider here (what `Registry.check` proves, for the lifecycle's points).
"""

from __future__ import annotations

from pydantic import ValidationError

from dxts.core.plugins import PluginRegistryError
from dxts.core.plugins.points import Point
from dxts.core.plugins.protocols.lifecycle import Counts, ExecutionControl, ExecutionView, Siblings
from dxts.core.plugins.registry import Registry

LIFECYCLE_POINTS = frozenset(
    {
        Point.SCOUTING_TO_APPROVING,
        Point.WORKGRAPH_ACTIVE,
        Point.TRANSFORMATION_ACTIVE,
        Point.APPROVING,
        Point.FINALIZING,
        Point.ARCHIVING,
        Point.CLEANING,
    }
)


SERVICES = (Counts, ExecutionView, ExecutionControl, Siblings, Registry)


def check_lifecycle_plugins(registry: Registry) -> None:
    """What `Registry.check` proves, for the plugins this engine runs: every parameter they
    are injected with has a provider here (settings classes read now). Feeders and packers run
    in execution and are checked there."""
    problems = []
    for plugin in registry:
        if not plugin.points & LIFECYCLE_POINTS:
            continue
        for injection in plugin.injections:
            annotation = injection.annotation
            name = getattr(annotation, "__qualname__", repr(annotation))
            wanted = not injection.optional or annotation in SERVICES
            if wanted and not registry.providers.can_provide(annotation):
                problems.append(
                    f"{plugin.label} ({plugin.provider}): parameter {injection.parameter!r} is "
                    f"annotated {name}, which the definition service does not provide"
                )
                continue
            try:
                registry.providers.prepare(annotation)
            except (ValidationError, ValueError) as error:
                problems.append(f"{plugin.label}: {name} is invalid: {error}")
    if problems:
        raise PluginRegistryError(problems)
