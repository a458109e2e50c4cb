"""The drain guard: the last step of the Active sweep (docs/architecture.md, "Lifecycle").

A member is drained when it is Active (Paused does not drain), its feeder is disabled, and none
of its inputs or parcels is in a non-terminal state — Problematic included, since a quarantine
holds the workgraph open until an operator decides. When every member is drained the workgraph
and all members move to Finalizing in one transaction.

Order matters: the feeders are seen disabled first, then the exact counters are read (accounting,
over gRPC), then under the workgraph's row lock the members are checked again (an operator may
have re-enabled a feeder or paused a member meanwhile) before the transition is taken.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dxts.core.db import Isolation, Transaction
from dxts.core.state_machines import LIVE_INPUT_STATES, LIVE_PARCEL_STATES, Actor
from dxts.core.states import InputStatus, ParcelStatus, TransformationStatus, WorkgraphStatus
from dxts.definition.logic.lifecycle.engine import Engine
from dxts.definition.logic.lifecycle.views import AUTHOR, as_uuid
from dxts.definition.logic.locked import lock_workgraph
from dxts.definition.logic.moves import move_workgraph
from dxts.definition.logic.queries import WorkgraphDetail

T, W = TransformationStatus, WorkgraphStatus
HELD = "Held"  # the state of a feeder reason when a quota holds the feeder


@dataclass(frozen=True)
class Holding:
    """One reason a member is not drained: its `status`, its enabled `feeder`, or `count`
    `inputs` or `parcels` in the live `state`."""

    kind: str  # "status", "feeder", "inputs" or "parcels"
    message: str
    state: str = ""
    count: int = 0


def holding(
    status: str,
    feeder_enabled: bool,
    inputs: Mapping[InputStatus, int] | None = None,
    parcels: Mapping[ParcelStatus, int] | None = None,
    *,
    feeder_held: str | None = None,
) -> list[Holding]:
    """Every reason a member is not drained (none: it is), in the guard's order. A feeder a
    quota holds (`feeder_held`: why) is enabled, and says why it feeds nothing (state Held)."""
    reasons = []
    if status != T.ACTIVE:
        reasons.append(Holding("status", f"it is {status}", state=status))
    if feeder_enabled and feeder_held:
        reasons.append(Holding("feeder", feeder_held, state=HELD))
    elif feeder_enabled:
        reasons.append(Holding("feeder", "its feeder is enabled"))
    for kind, counts, live in (
        ("inputs", inputs, LIVE_INPUT_STATES),
        ("parcels", parcels, LIVE_PARCEL_STATES),
    ):
        reasons.extend(
            Holding(kind, f"{n} {s} {kind}", state=str(s), count=n)
            for s, n in (counts or {}).items()
            if n and s in live
        )
    return reasons


def undrained(
    status: str,
    feeder_enabled: bool,
    inputs: Mapping[InputStatus, int] | None = None,
    parcels: Mapping[ParcelStatus, int] | None = None,
) -> str | None:
    """Why a member is not drained, or None when it is (counts None: not read yet): its status
    or feeder when they hold it, else its live inputs and parcels."""
    reasons = holding(status, feeder_enabled, inputs, parcels)
    gates = [r for r in reasons if r.kind in ("status", "feeder")]
    return (gates or [Holding("", ", ".join(r.message for r in reasons))])[0].message or None


def _feeders_off(members: Iterable[tuple[str, bool]]) -> bool:
    return all(undrained(status, enabled) is None for status, enabled in members)


async def drain_guard(engine: Engine, detail: WorkgraphDetail) -> bool:
    """Move the workgraph to Finalizing if every member is drained; whether it moved."""
    members = detail.members
    if detail.workgraph.status != W.ACTIVE or not members:
        return False
    if not _feeders_off((m.status, m.feeder_enabled) for m in members):
        return False
    ids = [as_uuid(m.transformation_id) for m in members]
    inputs = await engine.counts.inputs(ids)
    parcels = await engine.counts.parcels(ids)
    if any(undrained(T.ACTIVE, False, inputs.get(i), parcels.get(i)) for i in ids):
        return False
    expected = {m.transformation_id for m in members}

    async def work(conn: Transaction) -> bool:
        workgraph = await lock_workgraph(conn, detail.workgraph.workgraph_id)
        if workgraph.status != W.ACTIVE or {m.transformation_id for m in workgraph.members} != (
            expected
        ):
            return False
        if not _feeders_off((m.status, m.feeder_enabled) for m in workgraph.members):
            return False
        await move_workgraph(
            conn,
            workgraph,
            W.FINALIZING,
            actor=Actor.CORE,
            author=AUTHOR,
            message="every member drained",
        )
        return True

    return await engine.database.run(work, isolation=Isolation.READ_COMMITTED)
