"""What an operator or a hook may do to a feeder: the states it may be changed in, the check of
new arguments against the plugin for every phase it will still run in, and the reset of the
feeders it enables again.

A feeder is on while its switch (Transformations.FeederEnabled, definition's) is on and it has
not said NoMoreInputs (execution's FeederStates row, `Exhausted`). Enabling an exhausted feeder
asks execution to reset it (`reset_exhausted`) before the transaction that turns the switch on,
so that once that commits the feeder is on: the drain guard never sees the switch turned on
and the feeder still exhausted. A command retried after it committed asks again, which at worst
lets a feeder that has since said NoMoreInputs again run once more (what it yields again is a
duplicate, ignored).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from dxts.core.db import Database, Isolation
from dxts.core.errors import InvalidArgument
from dxts.core.plugins.points import Phase, PluginKind, Point
from dxts.core.states import TransformationStatus, WorkgraphStatus
from dxts.cwl.plugins import PluginCatalogue
from dxts.definition.logic.execution import FeederResets
from dxts.definition.logic.locked import LockedWorkgraph
from dxts.definition.store.feeder_states import feeder_states_of

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


async def reset_exhausted(
    database: Database,
    execution: FeederResets,
    transformation_ids: Sequence[bytes],
    *,
    request_id: str,
    clear_bookmarks: bool = False,
) -> set[bytes]:
    """Ask execution to reset those of the feeders that said NoMoreInputs or a quota holds (with
    `clear_bookmarks`, every one with a bookmark too); returns the exhausted ones, which were
    off until now whatever their switch said. Nothing is asked when there is nothing to reset."""
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        states = await feeder_states_of(conn, list(transformation_ids))
    exhausted = {tid for tid, state in states.items() if state.exhausted}
    held = {tid for tid, state in states.items() if state.held}  # released too
    wanted = sorted(states if clear_bookmarks else exhausted | held)
    if wanted:
        await execution.reset_feeders(
            wanted, clear_bookmarks=clear_bookmarks, request_id=request_id
        )
    return exhausted
