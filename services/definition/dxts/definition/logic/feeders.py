"""What an operator or a hook may do to a feeder: the states it may be changed in, and the
check of new arguments against the plugin for every phase it will still run in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dxts.core.errors import InvalidArgument
from dxts.core.plugins.points import Phase, PluginKind, Point
from dxts.core.states import TransformationStatus, WorkgraphStatus
from dxts.cwl.plugins import PluginCatalogue
from dxts.definition.logic.locked import LockedWorkgraph

W = WorkgraphStatus
T = TransformationStatus
FEEDER_STATES = frozenset({T.NEW, T.ACTIVE, T.PAUSED})
UNSET: Any = object()


def feeder_phases(workgraph: LockedWorkgraph | None) -> tuple[Phase, ...]:
    scouting = workgraph is not None and workgraph.status in (
        W.NEW,
        W.SCOUTING,
        W.APPROVING,
        W.APPROVING_BLOCKED,
    )
    return (Phase.SCOUTING, Phase.ACTIVE) if scouting else (Phase.ACTIVE,)


def check_feeder_args(
    catalogue: PluginCatalogue,
    feeder: str | None,
    args: Any,
    phases: Iterable[Phase],
    field: str,
) -> None:
    if feeder is None:
        raise InvalidArgument("this transformation has no feeder", field=field)
    if not isinstance(args, dict):
        raise InvalidArgument("feeder arguments are a JSON object", field=field)
    for phase in phases:
        catalogue.validate_args(
            PluginKind.FEEDER,
            feeder,
            args,
            phase=phase,
            point=Point.FEEDER,
            name_field=f"{field}.feeder",
            args_field=field,
        )
