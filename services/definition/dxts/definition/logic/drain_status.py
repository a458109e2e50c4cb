"""Why a workgraph is not finishing, as data (GetDrainStatus): the drain guard's own reasons,
member by member.

The guard moves an Active workgraph to Finalizing once every member is drained
(`lifecycle.drain`); what holds each member is `drain.holding` on its status, its feeder and the
exact counters, read here through the core in one statement for every member (the counters are
every component's to read), so the answer is the guard's judgement, not a second opinion.
"""

from __future__ import annotations

from dataclasses import dataclass

from dxts.core.counters import TRANSFORMATION, Entity
from dxts.core.db import Database, Isolation
from dxts.core.states import InputStatus, ParcelStatus, WorkgraphStatus
from dxts.definition.logic import queries
from dxts.definition.logic.lifecycle.drain import Holding, holding
from dxts.definition.store.feeder_states import FeederState, feeder_states_of

W = WorkgraphStatus
# Past the drain guard: every member drained (what follows is the action lists' business).
DRAINED = frozenset({W.FINALIZING, W.COMPLETED, W.ARCHIVING, W.ARCHIVED})


@dataclass(frozen=True)
class MemberDrain:
    transformation_id: bytes
    step: str
    status: str
    reasons: list[Holding]

    @property
    def drained(self) -> bool:
        return not self.reasons


@dataclass(frozen=True)
class DrainStatus:
    workgraph_id: bytes
    status: str
    reasons: list[str]  # the workgraph's own: the guard only judges an Active workgraph
    members: list[MemberDrain]

    @property
    def drained(self) -> bool:
        """Whether the guard would move it to Finalizing now."""
        return not self.reasons and all(m.drained for m in self.members)


async def drain_status(
    database: Database, viewer: queries.Viewer, workgraph_id: bytes
) -> DrainStatus:
    """What holds each member of the workgraph (NotFound across VOs, like GetWorkgraph); past
    the guard (Finalizing and after) nothing does, and a cancelled one says so."""
    detail = await queries.get_workgraph(database, viewer, workgraph_id)
    ids = [m.transformation_id for m in detail.members]
    inputs: dict[bytes, dict[InputStatus, int]] = {}
    parcels: dict[bytes, dict[ParcelStatus, int]] = {}
    feeders: dict[bytes, FeederState] = {}
    if ids:
        async with database.transaction(Isolation.READ_COMMITTED) as conn:
            reading = await TRANSFORMATION.read(conn, {"TransformationID": ids})
            feeders = await feeder_states_of(conn, ids)
        for (tid, entity, status), values in reading.items():
            if entity == Entity.INPUT.value:
                inputs.setdefault(bytes(tid), {})[InputStatus(status)] = values["Count"]
            elif entity == Entity.PARCEL.value:
                parcels.setdefault(bytes(tid), {})[ParcelStatus(status)] = values["Count"]
    workgraph = detail.workgraph
    if workgraph.status in DRAINED:
        return DrainStatus(
            workgraph.workgraph_id,
            workgraph.status,
            [],
            [MemberDrain(m.transformation_id, m.step, m.status, []) for m in detail.members],
        )
    own = []
    if workgraph.status != WorkgraphStatus.ACTIVE:
        own.append(f"the workgraph is {workgraph.status}: the drain guard judges it once Active")
    members = [
        MemberDrain(
            m.transformation_id,
            m.step,
            m.status,
            holding(
                m.status,
                m.feeder_enabled,
                inputs.get(m.transformation_id),
                parcels.get(m.transformation_id),
                feeder_held=_held(feeders.get(m.transformation_id)),
            ),
        )
        for m in detail.members
    ]
    return DrainStatus(workgraph.workgraph_id, workgraph.status, own, members)


def _held(state: FeederState | None) -> str | None:
    """Why a quota holds the member's feeder (None: it does not)."""
    return None if state is None else state.held
