"""Reads: workgraphs, transformations and their actions, as plain values for the servicer.

Visibility: a caller sees its own VO; a caller from another VO is told NOT_FOUND, never that
the thing exists. dxts's own components (the service role: the execution sweeps, the
dispatcher) see every VO. Within a VO everyone may look (shifters follow productions they do
not own); steering is checked by the commands (`logic.authorise`).

Lists page by id (UUIDv7, so creation order): each returns one page and the last id of it when
there may be more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from dxts.core.db import Database, Isolation, Transaction
from dxts.core.errors import NotFound
from dxts.core.handles import handle, member_handle
from dxts.core.identity import Identity
from dxts.core.ids import id_from_str, id_to_str
from dxts.core.kernel.authorisation import CallerKind
from dxts.core.states import WorkgraphStatus
from dxts.cwl.compile import EDGE_ARGUMENT, EDGE_FEEDER
from dxts.definition.logic.locked import HALTED
from dxts.definition.store import actions as actions_db
from dxts.definition.store import handles as handles_db
from dxts.definition.store import transformations as transformations_db
from dxts.definition.store import workgraphs as workgraphs_db
from dxts.definition.store.actions import ActionRecord
from dxts.definition.store.feeder_states import FeederState, feeder_states_of
from dxts.definition.store.transformations import TransformationRecord
from dxts.definition.store.workgraphs import WorkgraphRecord

T = TypeVar("T")


# Until the scout is approved the feeders take only its sample: a workgraph Approving (or blocked
# there) has not been approved to run in full.
SCOUT_UNTIL_APPROVED = frozenset(
    {WorkgraphStatus.SCOUTING, WorkgraphStatus.APPROVING, WorkgraphStatus.APPROVING_BLOCKED}
)


@dataclass(frozen=True)
class Viewer:
    identity: Identity
    service_role: str = "service"

    @property
    def all_vos(self) -> bool:
        """dxts's components read every VO's rows: the services, and the dispatcher (the
        processes and transformations of the parcels it dispatches)."""
        return self.identity.has_role(self.service_role) or self.identity.has_role(
            CallerKind.DISPATCHER
        )

    def sees(self, vo: str) -> bool:
        return self.all_vos or self.identity.vo == vo

    def vo_filter(self, asked: str) -> str | None:
        """The VO a list is restricted to (None: every VO); asking for another VO's rows
        without the service role finds nothing, as if there were none."""
        if self.all_vos:
            return asked or None
        return self.identity.vo if asked in ("", self.identity.vo) else "\x00"


@dataclass(frozen=True)
class WorkgraphView:
    workgraph_id: bytes
    type: str
    status: str
    vo: str
    sub: str
    annotations: dict[str, Any] | None
    hooks: dict[str, Any] | None
    transformation_ids: tuple[bytes, ...]
    updated_at: datetime
    handle: str = ""  # wg-42

    @property
    def halted(self) -> bool:
        return bool((self.annotations or {}).get(HALTED))


@dataclass(frozen=True)
class OutputView:
    output_id: bytes
    name: str
    intermediate: bool


@dataclass(frozen=True)
class TransformationView:
    transformation_id: bytes
    workgraph_id: bytes | None
    step: str
    type: str
    kind: str
    status: str
    vo: str
    sub: str
    executing_identity: str | None
    feeder: str | None
    feeder_args: Any
    feeder_enabled: bool
    packer: str
    packer_args: Any
    annotations: dict[str, Any] | None
    hooks: dict[str, Any] | None
    process_id: bytes | None
    requirements_template_id: bytes | None
    outputs: tuple[OutputView, ...]
    upstream_ids: tuple[bytes, ...]
    producer_id: bytes | None  # its Edge feeder's producer (one of upstream_ids)
    scouting: bool
    halted: bool
    updated_at: datetime
    # Only for the execution sweeps (ListActiveTransformations).
    feeder_state: Any = None
    requirements_template: Any = None
    handle: str = ""  # wg-42/Reco, or t-7 standalone


@dataclass(frozen=True)
class ActionView:
    action_id: int
    workgraph_id: bytes | None
    transformation_id: bytes | None
    state: str
    position: int
    action: str
    args: Any
    result: str | None
    message: str | None
    author: str | None
    updated_at: datetime | None


@dataclass(frozen=True)
class WorkgraphDetail:
    workgraph: WorkgraphView
    members: tuple[TransformationView, ...]
    actions: tuple[ActionView, ...]
    stripped_spec: Any


@dataclass(frozen=True)
class TransformationDetail:
    transformation: TransformationView
    actions: tuple[ActionView, ...]


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    last: bytes | None  # the id to continue after; None on the last page


@dataclass(frozen=True)
class WorkgraphFilters:
    statuses: Sequence[str] = ()
    type: str = ""
    vo: str = ""
    owner_sub: str = ""
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TransformationFilters:
    workgraph_id: bytes | None = None
    ids: Sequence[bytes] = ()  # only these (with `active_only`: whatever their status)
    statuses: Sequence[str] = ()
    kinds: Sequence[str] = ()
    type: str = ""
    vo: str = ""
    owner_sub: str = ""


def _page(items: list[T], limit: int, key: Any) -> Page[T]:
    if len(items) > limit:
        items = items[:limit]
        return Page(items, key(items[-1]))
    return Page(items, None)


def action_view(row: ActionRecord) -> ActionView:
    return ActionView(
        action_id=row.action_id,
        workgraph_id=row.workgraph_id,
        transformation_id=row.transformation_id,
        state=row.state,
        position=row.position,
        action=row.action,
        args=row.args,
        result=row.result,
        message=row.message,
        author=row.author,
        updated_at=row.updated_at,
    )


async def _workgraph_views(conn: Transaction, rows: list[WorkgraphRecord]) -> list[WorkgraphView]:
    members = await workgraphs_db.member_ids(conn, [r.ownership_id for r in rows])
    numbers = await handles_db.workgraph_numbers(conn, [r.workgraph_id for r in rows])
    return [
        WorkgraphView(
            workgraph_id=r.workgraph_id,
            type=r.type,
            status=r.status,
            vo=r.vo,
            sub=r.sub,
            annotations=r.annotations,
            hooks=r.hooks,
            transformation_ids=tuple(members.get(r.ownership_id, [])),
            updated_at=r.updated_at,
            handle=handle("workgraph", numbers[r.workgraph_id])
            if r.workgraph_id in numbers
            else "",
        )
        for r in rows
    ]


def _edge_output(row: TransformationRecord) -> bytes | None:
    args = row.feeder_args if isinstance(row.feeder_args, dict) else {}
    text = args.get(EDGE_ARGUMENT)
    if row.feeder != EDGE_FEEDER or not isinstance(text, str):
        return None
    return id_from_str(text, field="FeederArgs.transformation_output_id")


def _after(row: TransformationRecord) -> list[bytes]:
    annotations = row.annotations if isinstance(row.annotations, dict) else {}
    after = annotations.get("after")
    return [id_from_str(t, field="after") for t in after] if isinstance(after, list) else []


def _feeding(switch: Any, state: FeederState | None) -> bool:
    """A feeder is on while its switch is on and it has not said NoMoreInputs."""
    return bool(switch) and not (state is not None and state.exhausted)


async def _transformation_views(
    conn: Transaction, rows: list[TransformationRecord], *, for_execution: bool = False
) -> list[TransformationView]:
    ids = [r.transformation_id for r in rows]
    outputs: dict[bytes, list[OutputView]] = {t: [] for t in ids}
    for o in await transformations_db.outputs_of(conn, ids):
        outputs[o.transformation_id].append(
            OutputView(o.transformation_output_id, o.name, o.intermediate)
        )
    feeders = await feeder_states_of(conn, ids)
    edges = {r.transformation_id: _edge_output(r) for r in rows}
    producers = await transformations_db.output_producers(conn, [e for e in edges.values() if e])
    templates = (
        await transformations_db.requirements_of(
            conn, [r.requirements_template_id for r in rows if r.requirements_template_id]
        )
        if for_execution
        else {}
    )
    numbers = await handles_db.transformation_numbers(conn, ids)
    workgraph_numbers = await handles_db.workgraph_numbers(
        conn, {r.workgraph_id for r in rows if r.workgraph_id is not None}
    )
    views = []
    for r in rows:
        tid = r.transformation_id
        edge = edges[tid]
        producer = producers.get(edge) if edge else None
        upstream = ([producer] if producer else []) + _after(r)
        annotations = r.annotations if isinstance(r.annotations, dict) else {}
        workgraph_annotations = (
            r.workgraph_annotations if isinstance(r.workgraph_annotations, dict) else {}
        )
        template_id = r.requirements_template_id
        views.append(
            TransformationView(
                transformation_id=tid,
                workgraph_id=r.workgraph_id,
                step=str(annotations.get("id") or ""),
                type=r.type,
                kind=r.kind,
                status=r.status,
                vo=r.vo,
                sub=r.sub,
                executing_identity=r.executing_identity,
                feeder=r.feeder,
                feeder_args=r.feeder_args,
                feeder_enabled=_feeding(r.feeder_enabled, feeders.get(tid)),
                packer=r.packer,
                packer_args=r.packer_args,
                annotations=r.annotations,
                hooks=r.hooks,
                process_id=r.process_id,
                requirements_template_id=template_id,
                outputs=tuple(outputs[tid]),
                upstream_ids=tuple(dict.fromkeys(upstream)),
                producer_id=producer,
                scouting=r.workgraph_status in SCOUT_UNTIL_APPROVED,
                halted=bool(workgraph_annotations.get(HALTED)),
                updated_at=r.updated_at,
                feeder_state=feeders[tid].bookmark if for_execution and tid in feeders else None,
                requirements_template=templates.get(template_id) if template_id else None,
                handle=member_handle(
                    workgraph_numbers.get(r.workgraph_id) if r.workgraph_id else None,
                    str(annotations.get("id") or ""),
                    numbers.get(tid),
                ),
            )
        )
    return views


@dataclass(frozen=True)
class MemberState:
    """What attention needs of a member it was not handed whole (a workgraph's members): a
    list of a thousand workgraphs reads this, not every member's definition and outputs."""

    transformation_id: bytes
    workgraph_id: bytes | None
    status: str
    step: str
    halted: bool
    updated_at: datetime


async def member_states(conn: Transaction, ids: Sequence[bytes]) -> list[MemberState]:
    """The transformations of `ids` (no visibility check: the caller has read their
    workgraphs), for attention."""
    found = []
    for r in await transformations_db.member_rows(conn, ids):
        annotations = r.annotations if isinstance(r.annotations, dict) else {}
        of_workgraph = r.workgraph_annotations if isinstance(r.workgraph_annotations, dict) else {}
        found.append(
            MemberState(
                transformation_id=r.transformation_id,
                workgraph_id=r.workgraph_id,
                status=r.status,
                step=str(annotations.get("id") or ""),
                halted=bool(of_workgraph.get(HALTED)),
                updated_at=r.updated_at,
            )
        )
    return found


async def get_workgraph(database: Database, viewer: Viewer, workgraph_id: bytes) -> WorkgraphDetail:
    """A workgraph with its members (dataflow edges as upstream ids) and its own actions."""

    async def work(conn: Transaction) -> WorkgraphDetail:
        rows = await workgraphs_db.workgraph_rows(conn, ids=[workgraph_id])
        if not rows or not viewer.sees(rows[0].vo):
            raise NotFound("workgraph", id_to_str(workgraph_id))
        (workgraph,) = await _workgraph_views(conn, rows)
        members = await _transformation_views(
            conn, await transformations_db.transformation_rows(conn, workgraph_id=workgraph_id)
        )
        actions = await actions_db.actions_of(conn, workgraph_id=workgraph_id)
        return WorkgraphDetail(
            workgraph,
            tuple(members),
            tuple(action_view(a) for a in actions),
            rows[0].stripped_spec,
        )

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def list_workgraphs(
    database: Database,
    viewer: Viewer,
    filters: WorkgraphFilters,
    *,
    limit: int,
    after: bytes | None = None,
) -> Page[WorkgraphView]:
    async def work(conn: Transaction) -> Page[WorkgraphView]:
        rows = await workgraphs_db.workgraph_rows(
            conn,
            vo=viewer.vo_filter(filters.vo),
            statuses=filters.statuses,
            type=filters.type or None,
            owner_sub=filters.owner_sub or None,
            labels=filters.labels,
            after=after,
            limit=limit + 1,
        )
        page = _page(rows, limit, lambda r: r.workgraph_id)
        return Page(await _workgraph_views(conn, page.items), page.last)

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def get_transformation(
    database: Database, viewer: Viewer, transformation_id: bytes
) -> TransformationDetail:
    async def work(conn: Transaction) -> TransformationDetail:
        rows = await transformations_db.transformation_rows(conn, ids=[transformation_id])
        if not rows or not viewer.sees(rows[0].vo):
            raise NotFound("transformation", id_to_str(transformation_id))
        (view,) = await _transformation_views(conn, rows)
        actions = await actions_db.actions_of(conn, transformation_ids=[transformation_id])
        return TransformationDetail(view, tuple(action_view(a) for a in actions))

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def list_transformations(
    database: Database,
    viewer: Viewer,
    filters: TransformationFilters,
    *,
    limit: int,
    after: bytes | None = None,
    active_only: bool = False,
) -> Page[TransformationView]:
    """Transformations matching `filters`; with `active_only`, the Active ones (or those of
    `filters.ids`, whatever their status: execution records their parcels' outcomes after they
    have left Active) with what the execution sweeps need (bookmark and requirements template
    included)."""
    statuses = filters.statuses
    if active_only and not filters.ids:
        statuses = ("Active",)

    async def work(conn: Transaction) -> Page[TransformationView]:
        rows = await transformations_db.transformation_rows(
            conn,
            ids=filters.ids or None,
            workgraph_id=filters.workgraph_id,
            statuses=statuses,
            kinds=filters.kinds,
            type=filters.type or None,
            vo=viewer.vo_filter(filters.vo),
            owner_sub=filters.owner_sub or None,
            after=after,
            limit=limit + 1,
        )
        page = _page(rows, limit, lambda r: r.transformation_id)
        views = await _transformation_views(conn, page.items, for_execution=active_only)
        return Page(views, page.last)

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def get_action(database: Database, viewer: Viewer, action_id: int) -> ActionView:
    async def work(conn: Transaction) -> ActionView:
        row = await actions_db.action_row(conn, action_id)
        if row is None:
            raise NotFound("action", action_id)
        vo: str | None = None
        if row.workgraph_id is not None:
            owners = await workgraphs_db.workgraph_rows(conn, ids=[row.workgraph_id])
            vo = owners[0].vo if owners else None
        else:
            assert row.transformation_id is not None  # an action's owner is one or the other
            members = await transformations_db.transformation_rows(
                conn, ids=[row.transformation_id]
            )
            vo = members[0].vo if members else None
        if vo is None or not viewer.sees(vo):
            raise NotFound("action", action_id)
        return action_view(row)

    return await database.run(work, isolation=Isolation.READ_COMMITTED)
