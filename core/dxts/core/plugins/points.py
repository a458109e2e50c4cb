"""The extension points (docs/extensions.md): which kind serves each, what the core passes.

A plugin's entry-point group says its kind; a hook or action also says which extension point(s)
it serves with the `hook`/`action` decorators, because one group holds several points whose
context differs (a HandleFailedInput hook receives an input, a workgraph's Active hook the
members). The core passes each point's context by parameter name and a plugin declares only the
names it uses; every other parameter is injected by annotation (see `providers`).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Literal, TypeVar

F = TypeVar("F", bound=Callable[..., object])

# The attribute the decorators set on a plugin function.
POINTS_ATTRIBUTE = "__dxts_points__"


class PluginKind(StrEnum):
    """The four kinds; each is one entry-point group, `dxts.<kind>s`."""

    FEEDER = "feeder"
    PACKER = "packer"
    HOOK = "hook"
    ACTION = "action"

    @property
    def group(self) -> str:
        return f"dxts.{self.value}s"


class Phase(StrEnum):
    """Which phase a workgraph is in: plugin arguments are validated for the phase they run in."""

    SCOUTING = "scouting"
    ACTIVE = "active"


class Point(StrEnum):
    """One extension point: the values are the names docs/extensions.md and the CWL hints use."""

    FEEDER = "Feeder"
    PACKER = "Packer"
    SCOUTING_TO_APPROVING = "ScoutingToApproving"
    WORKGRAPH_ACTIVE = "WorkgraphActive"
    TRANSFORMATION_ACTIVE = "TransformationActive"
    HANDLE_FAILED_INPUT = "HandleFailedInput"
    APPROVING = "Approving"
    FINALIZING = "Finalizing"
    ARCHIVING = "Archiving"
    CLEANING = "Cleaning"

    @property
    def kind(self) -> PluginKind:
        return _KIND[self]

    @property
    def args_parameter(self) -> str:
        """The parameter that receives the validated args model (the spec's names)."""
        return {Point.FEEDER: "feeder_args", Point.PACKER: "packer_args"}.get(self, "args")

    @property
    def context(self) -> frozenset[str]:
        """The parameter names the runner supplies when it invokes a plugin at this point."""
        return _CONTEXT[self]

    @property
    def fixed(self) -> frozenset[str]:
        """Every parameter name the core fills itself; the rest are injected."""
        derived = {"scouting"} if self is Point.FEEDER else set()
        return self.context | {self.args_parameter} | derived

    @property
    def state(self) -> str:
        """For an action point, the entity state its list runs in (Actions.State)."""
        if self.kind is not PluginKind.ACTION:
            raise ValueError(f"{self} is not an action list")
        return "Cancelling" if self is Point.CLEANING else self.value

    @classmethod
    def of_hook_binding(cls, owner: Literal["workgraph", "transformation"], key: str) -> Point:
        """The point a Hooks-column key names: `Active` means a different point per owner."""
        points = _HOOK_BINDINGS.get(owner, {})
        if key not in points:
            raise ValueError(f"a {owner} has no hook {key!r}; it has {', '.join(sorted(points))}")
        return points[key]


_KIND = {
    Point.FEEDER: PluginKind.FEEDER,
    Point.PACKER: PluginKind.PACKER,
    Point.SCOUTING_TO_APPROVING: PluginKind.HOOK,
    Point.WORKGRAPH_ACTIVE: PluginKind.HOOK,
    Point.TRANSFORMATION_ACTIVE: PluginKind.HOOK,
    Point.HANDLE_FAILED_INPUT: PluginKind.HOOK,
    Point.APPROVING: PluginKind.ACTION,
    Point.FINALIZING: PluginKind.ACTION,
    Point.ARCHIVING: PluginKind.ACTION,
    Point.CLEANING: PluginKind.ACTION,
}

_WORKGRAPH = frozenset({"workgraph", "transformations", "input_overviews"})
_TRANSFORMATION = frozenset({"transformation", "input_overview"})
_CONTEXT = {
    Point.FEEDER: frozenset({"transformation", "feeder_state"}),
    Point.PACKER: frozenset(
        {"transformation", "inputs", "flush", "feeder_active", "input_overview"}
    ),
    Point.SCOUTING_TO_APPROVING: _WORKGRAPH,
    Point.WORKGRAPH_ACTIVE: _WORKGRAPH,
    Point.TRANSFORMATION_ACTIVE: _TRANSFORMATION,
    Point.HANDLE_FAILED_INPUT: frozenset({"transformation", "input", "parcel"}),
    Point.APPROVING: _WORKGRAPH,
    Point.FINALIZING: _TRANSFORMATION,
    Point.ARCHIVING: _TRANSFORMATION,
    Point.CLEANING: _TRANSFORMATION,
}

_HOOK_BINDINGS = {
    "workgraph": {
        "ScoutingToApproving": Point.SCOUTING_TO_APPROVING,
        "Active": Point.WORKGRAPH_ACTIVE,
    },
    "transformation": {
        "Active": Point.TRANSFORMATION_ACTIVE,
        "HandleFailedInput": Point.HANDLE_FAILED_INPUT,
    },
}


def hook(point: Point | str) -> Callable[[F], F]:
    """Declare which hook point a hook plugin serves: `@hook("HandleFailedInput")`."""
    served = Point(point)
    if served.kind is not PluginKind.HOOK:
        raise ValueError(f"{served} is not a hook point")
    return _mark(frozenset({served}))


def action(*lists: Point | str) -> Callable[[F], F]:
    """Declare the action lists an action may be bound in: `@action("Archiving", "Cleaning")`.

    An Approving action sees the workgraph and its members, the others one transformation, so
    one function serves either Approving or the transformation lists, not both.
    """
    served = frozenset(Point(name) for name in lists)
    if not served:
        raise ValueError("an action serves at least one action list")
    if any(point.kind is not PluginKind.ACTION for point in served):
        raise ValueError(f"not action lists: {sorted(p for p in served if p.kind != 'action')}")
    if Point.APPROVING in served and len(served) > 1:
        raise ValueError("an Approving action cannot also serve a transformation's lists")
    return _mark(served)


def _mark(points: frozenset[Point]) -> Callable[[F], F]:
    def decorate(function: F) -> F:
        setattr(function, POINTS_ATTRIBUTE, points)
        return function

    return decorate
