"""Locked reads: a workgraph (and its members) or a transformation, its row locked first.

Every status change of a workgraph or of one of its members takes the workgraph's row lock
first (`SELECT ... FOR UPDATE`), then the member's, so they are serialised per workgraph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dxts.core.db import Transaction
from dxts.core.errors import NotFound
from dxts.core.ids import id_from_str, id_to_str
from dxts.cwl.compile import EDGE_ARGUMENT, EDGE_FEEDER
from dxts.definition.store import transformations as transformations_db
from dxts.definition.store import workgraphs as workgraphs_db
from dxts.definition.store.feeder_states import feeder_states_of

HALTED = "halted"  # Workgraphs.Annotations key execution reads (see `halt`)


@dataclass(frozen=True)
class Member:
    transformation_id: bytes
    status: str
    kind: str
    feeder: str | None
    feeder_args: Any
    feeder_enabled: bool
    annotations: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.annotations.get("id") or id_to_str(self.transformation_id))

    @property
    def initial_state(self) -> str:
        """Active (runs in the scout), Stopped (held until approval) or Paused (compile.py)."""
        return str(self.annotations.get("initial_state") or "Active")

    def edge_output(self) -> bytes | None:
        """The producer's TransformationOutputID when an edge feeder feeds it."""
        args = self.feeder_args if isinstance(self.feeder_args, dict) else {}
        text = args.get(EDGE_ARGUMENT)
        if self.feeder != EDGE_FEEDER or not isinstance(text, str):
            return None
        return id_from_str(text, field="FeederArgs.transformation_output_id")


@dataclass(frozen=True)
class LockedWorkgraph:
    workgraph_id: bytes
    status: str
    vo: str
    sub: str
    ownership_id: bytes
    annotations: dict[str, Any]
    members: tuple[Member, ...]

    @property
    def halted(self) -> bool:
        return bool(self.annotations.get(HALTED))

    def member(self, transformation_id: bytes) -> Member:
        return next(m for m in self.members if m.transformation_id == transformation_id)


async def _exhausted(conn: Transaction, transformation_ids: list[bytes]) -> set[bytes]:
    """Those whose feeder said NoMoreInputs: off, whatever their switch says."""
    states = await feeder_states_of(conn, transformation_ids)
    return {tid for tid, state in states.items() if state.exhausted}


async def lock_workgraph(conn: Transaction, workgraph_id: bytes) -> LockedWorkgraph:
    """The workgraph and its members, the workgraph row locked; NotFound if there is none."""
    row = await workgraphs_db.lock_workgraph(conn, workgraph_id)
    if row is None:
        raise NotFound("workgraph", id_to_str(workgraph_id))
    states = await workgraphs_db.members_of(conn, row.ownership_id)
    exhausted = await _exhausted(conn, [m.transformation_id for m in states])
    members = tuple(
        Member(
            m.transformation_id,
            m.status,
            m.kind,
            m.feeder,
            m.feeder_args,
            m.feeder_enabled and m.transformation_id not in exhausted,
            m.annotations,
        )
        for m in states
    )
    return LockedWorkgraph(
        workgraph_id,
        row.status,
        row.vo,
        row.sub,
        row.ownership_id,
        row.annotations if isinstance(row.annotations, dict) else {},
        members,
    )


@dataclass(frozen=True)
class LockedTransformation:
    transformation_id: bytes
    status: str
    vo: str
    sub: str
    feeder: str | None
    feeder_args: Any
    feeder_enabled: bool
    annotations: dict[str, Any]
    workgraph: LockedWorkgraph | None  # None: standalone

    @property
    def standalone(self) -> bool:
        return self.workgraph is None


async def lock_transformation(conn: Transaction, transformation_id: bytes) -> LockedTransformation:
    """A transformation, its workgraph locked first when it is a member; NotFound if none."""
    owner = await transformations_db.transformation_owner(conn, transformation_id)
    if owner is None:
        raise NotFound("transformation", id_to_str(transformation_id))
    workgraph = None
    if owner.workgraph_id is not None:
        workgraph = await lock_workgraph(conn, owner.workgraph_id)
    locked = await transformations_db.lock_transformation(conn, transformation_id)
    assert locked is not None  # transformations are never deleted
    state, locked_owner = locked
    return LockedTransformation(
        transformation_id,
        state.status,
        locked_owner.vo,
        locked_owner.sub,
        state.feeder,
        state.feeder_args,
        state.feeder_enabled and not await _exhausted(conn, [transformation_id]),
        state.annotations,
        workgraph,
    )
