"""Every operator command, and the transition primitives the lifecycle engine shares.

A command is one READ COMMITTED transaction that

1. locks the workgraph row (`SELECT ... FOR UPDATE`; a member's command locks its workgraph
   first, then the member), so all status changes of one workgraph are serialised;
2. checks the caller's rights: a caller from another VO is told NOT_FOUND (existence is not
   leaked), a plain user may steer only what it owns, the operator role anything of its VO;
3. checks the state machine (`StateMachine.check` with the actor taking the edge; a standalone
   transformation takes its workgraph's edges itself, by operator);
4. applies it: conditional UPDATEs whose row counts are the truth, the member fan-out of
   `MEMBER_FAN_OUT`, the reset of the entered state's action results, and the log rows (their
   Data carries the request id, which is how a retried command is recognised and answered
   without being applied twice).

Forwarded work (a flush, the input and parcel half of a halt) is asked of execution after the
commit, with request ids derived from the command's, so a retry forwards the same requests.

`move_workgraph` and `move_transformations` are the primitives: the lifecycle engine calls them
inside its own transaction with `Actor.CORE` or `Actor.HOOK`.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import Database, Isolation, db_now
from dxts.core.errors import (
    Aborted,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
)
from dxts.core.grpc.auth import Identity
from dxts.core.ids import id_from_str, id_to_str
from dxts.core.logs import (
    STATE_CHANGE,
    LogEntry,
    log_transformations,
    log_workgraphs,
    request_logged,
)
from dxts.core.plugins.points import Phase, PluginKind, Point
from dxts.core.state_machines import (
    BLOCKED_COUNTERPART,
    MEMBER_FAN_OUT,
    TRANSFORMATION,
    WORKGRAPH,
    Actor,
    member_state_compatible,
)
from dxts.core.states import ActionResult, TransformationStatus, WorkgraphStatus
from dxts.cwl.compile import APPROVING, EDGE_ARGUMENT, EDGE_FEEDER
from dxts.cwl.plugins import PluginCatalogue
from dxts.definition import db
from dxts.definition.execution_client import ExecutionClient

W = WorkgraphStatus
T = TransformationStatus
HALTED = "halted"  # Workgraphs.Annotations key execution reads (see `halt`)
AUTHOR_LENGTH = 64
UNBLOCKED = {blocked: state for state, blocked in BLOCKED_COUNTERPART.items()}
# Results an operator may force, per action list: checks pass, housekeeping is done.
FORCEABLE = {
    APPROVING: {ActionResult.PASSED, ActionResult.FAILED},
    "Finalizing": {ActionResult.PASSED, ActionResult.FAILED},
    "Archiving": {ActionResult.DONE, ActionResult.FAILED},
    "Cancelling": {ActionResult.DONE, ActionResult.FAILED},
}
FEEDER_STATES = frozenset({T.NEW, T.ACTIVE, T.PAUSED})
UNSET: Any = object()


# -- who asks ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """The authenticated caller of a command and the role that makes it an operator."""

    identity: Identity
    operator_role: str = "operator"

    @property
    def author(self) -> str:
        return self.identity.sub[:AUTHOR_LENGTH]

    @property
    def is_operator(self) -> bool:
        return self.identity.has_role(self.operator_role)


def authorise(caller: Caller, vo: str, sub: str, kind: str, identifier: bytes) -> None:
    """NotFound across VOs; PermissionDenied to a plain user steering someone else's."""
    if caller.identity.vo != vo:
        raise NotFound(kind, id_to_str(identifier))
    if caller.identity.sub != sub and not caller.is_operator:
        raise PermissionDenied(
            f"{kind} {id_to_str(identifier)} belongs to {sub}: steering it needs the "
            f"{caller.operator_role!r} role"
        )


def _data(request_id: str, reason: str, **extra: Any) -> dict[str, Any]:
    data = {"request_id": request_id, "reason": reason, **extra}
    return {k: v for k, v in data.items() if v not in (None, "", [], {})}


# -- locked rows ---------------------------------------------------------------------------------


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


async def lock_workgraph(conn: AsyncConnection, workgraph_id: bytes) -> LockedWorkgraph:
    """The workgraph and its members, the workgraph row locked; NotFound if there is none."""
    row = await db.lock_workgraph(conn, workgraph_id)
    if row is None:
        raise NotFound("workgraph", id_to_str(workgraph_id))
    members = tuple(
        Member(
            bytes(m.TransformationID),
            m.Status,
            m.Kind,
            m.Feeder,
            m.FeederArgs,
            bool(m.FeederEnabled),
            m.Annotations if isinstance(m.Annotations, dict) else {},
        )
        for m in await db.members_of(conn, bytes(row.OwnershipID))
    )
    return LockedWorkgraph(
        workgraph_id,
        row.Status,
        row.VO,
        row.Sub,
        bytes(row.OwnershipID),
        row.Annotations if isinstance(row.Annotations, dict) else {},
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


async def lock_transformation(
    conn: AsyncConnection, transformation_id: bytes
) -> LockedTransformation:
    """A transformation, its workgraph locked first when it is a member; NotFound if none."""
    owner = await db.transformation_owner(conn, transformation_id)
    if owner is None:
        raise NotFound("transformation", id_to_str(transformation_id))
    workgraph = None
    if owner.WorkgraphID is not None:
        workgraph = await lock_workgraph(conn, bytes(owner.WorkgraphID))
    row = await db.lock_transformation(conn, transformation_id)
    assert row is not None  # transformations are never deleted
    return LockedTransformation(
        transformation_id,
        row.Status,
        row.VO,
        row.Sub,
        row.Feeder,
        row.FeederArgs,
        bool(row.FeederEnabled),
        row.Annotations if isinstance(row.Annotations, dict) else {},
        workgraph,
    )


# -- primitives ----------------------------------------------------------------------------------


async def move_workgraph(
    conn: AsyncConnection,
    workgraph: LockedWorkgraph,
    target: str,
    *,
    actor: Actor,
    author: str,
    message: str | None = None,
    data: dict[str, Any] | None = None,
    member_targets: Mapping[bytes, str] | None = None,
) -> None:
    """One workgraph transition and its member fan-out, in the caller's transaction.

    `member_targets` chooses where the fan-out offers a choice (start: the position rule);
    otherwise every member goes to the one state `MEMBER_FAN_OUT` allows from its own.
    """
    source, wid = workgraph.status, workgraph.workgraph_id
    WORKGRAPH.check(source, target, actor, identifier=id_to_str(wid))
    fan_out = MEMBER_FAN_OUT[(source, target)]
    moves: list[tuple[Member, str]] = []
    for member in workgraph.members:
        if fan_out.requires is not None and member.status not in fan_out.requires:
            raise FailedPrecondition(
                f"workgraph {id_to_str(wid)} is {source}: it goes to {target} only when every "
                f"member is {' or '.join(sorted(fan_out.requires))}, and {member.name} is "
                f"{member.status}",
                current_state=source,
            )
        choices = fan_out.moves.get(member.status)
        if choices is None:
            raise FailedPrecondition(
                f"workgraph {id_to_str(wid)} is {source}: its member {member.name} is "
                f"{member.status}, which cannot follow it to {target}",
                current_state=source,
            )
        chosen = (member_targets or {}).get(member.transformation_id)
        if chosen is None:
            if len(choices) != 1:
                raise ValueError(f"{source}->{target}: choose a state for {member.name}")
            (chosen,) = choices
        if chosen not in choices:
            raise ValueError(f"{member.name} cannot go to {chosen} with {source}->{target}")
        if chosen != member.status:
            TRANSFORMATION.check(
                member.status,
                chosen,
                Actor.WORKGRAPH,
                identifier=id_to_str(member.transformation_id),
            )
            moves.append((member, chosen))
    now = await db_now(conn)
    if await db.set_workgraph_status(conn, wid, source, target, now) != 1:
        current = await db.workgraph_status(conn, wid)
        WORKGRAPH.check(current, target, actor, identifier=id_to_str(wid))
        raise Aborted(f"workgraph {id_to_str(wid)} changed while moving it; retry")
    if BLOCKED_COUNTERPART.get(target) != source:
        await db.reset_actions(conn, state=target, now=now, workgraph_id=wid)
    await log_workgraphs(conn, [LogEntry(wid, STATE_CHANGE, author, source, target, message, data)])
    grouped: dict[tuple[str, str], list[bytes]] = defaultdict(list)
    for member, chosen in moves:
        grouped[(member.status, chosen)].append(member.transformation_id)
    await _apply_moves(conn, grouped, author=author, message=message, data=data, now=now)


async def move_transformations(
    conn: AsyncConnection,
    transformations: Iterable[tuple[bytes, str]],
    target: str,
    *,
    actor: Actor,
    author: str,
    message: str | None = None,
    data: dict[str, Any] | None = None,
    standalone: bool = False,
) -> None:
    """Move (TransformationID, current status) pairs to `target`, in the caller's transaction."""
    grouped: dict[tuple[str, str], list[bytes]] = defaultdict(list)
    for transformation_id, status in transformations:
        TRANSFORMATION.check(
            status, target, actor, identifier=id_to_str(transformation_id), standalone=standalone
        )
        grouped[(status, target)].append(transformation_id)
    now = await db_now(conn)
    await _apply_moves(conn, grouped, author=author, message=message, data=data, now=now)


async def _apply_moves(
    conn: AsyncConnection,
    grouped: Mapping[tuple[str, str], list[bytes]],
    *,
    author: str,
    message: str | None,
    data: dict[str, Any] | None,
    now: Any,
) -> None:
    entries = []
    for (source, target), ids in grouped.items():
        moved = await db.set_transformations_status(conn, ids, source, target, now)
        if moved != len(ids):
            raise Aborted(
                f"{len(ids) - moved} of {len(ids)} transformations left {source} while moving "
                f"them to {target}; retry"
            )
        if BLOCKED_COUNTERPART.get(target) != source:
            await db.reset_actions(conn, state=target, now=now, transformation_ids=ids)
        entries += [LogEntry(t, STATE_CHANGE, author, source, target, message, data) for t in ids]
    await log_transformations(conn, entries)


# -- workgraph commands --------------------------------------------------------------------------


async def _steer(
    conn: AsyncConnection, caller: Caller, workgraph_id: bytes, request_id: str
) -> LockedWorkgraph | None:
    """The locked, authorised workgraph; None when this request was already applied."""
    workgraph = await lock_workgraph(conn, workgraph_id)
    authorise(caller, workgraph.vo, workgraph.sub, "workgraph", workgraph_id)
    if await request_logged(conn, request_id, workgraph_id=workgraph_id):
        return None
    return workgraph


def _require(workgraph: LockedWorkgraph, states: Iterable[str], command: str) -> None:
    allowed = tuple(states)
    if workgraph.status not in allowed:
        raise FailedPrecondition(
            f"workgraph {id_to_str(workgraph.workgraph_id)} is {workgraph.status}: {command} "
            f"needs it {' or '.join(allowed)}",
            current_state=workgraph.status,
        )


def _start_state(member: Member, scouts: bool) -> str:
    """The position rule as compiled: Paused waits for an operator, Stopped for approval."""
    if member.initial_state == "Paused":
        return T.PAUSED
    if member.initial_state == "Stopped" and scouts:
        return T.NEW
    return T.ACTIVE


async def start(
    database: Database,
    caller: Caller,
    workgraph_id: bytes,
    *,
    reason: str = "",
    request_id: str = "",
) -> None:
    """New → Scouting when a member runs in the scout and there is an approving list, else
    New → Active; each member by its compiled initial state."""

    async def work(conn: AsyncConnection) -> None:
        workgraph = await _steer(conn, caller, workgraph_id, request_id)
        if workgraph is None:
            return
        _require(workgraph, (W.NEW,), "start")
        scouts = await db.approving_count(conn, workgraph_id) > 0 and any(
            m.initial_state == "Active" for m in workgraph.members
        )
        await move_workgraph(
            conn,
            workgraph,
            W.SCOUTING if scouts else W.ACTIVE,
            actor=Actor.OPERATOR,
            author=caller.author,
            message=reason or "started",
            data=_data(request_id, reason),
            member_targets={
                m.transformation_id: _start_state(m, scouts) for m in workgraph.members
            },
        )

    await database.run(work, isolation=Isolation.READ_COMMITTED)


def _feeder_phases(workgraph: LockedWorkgraph | None) -> tuple[Phase, ...]:
    scouting = workgraph is not None and workgraph.status in (
        W.NEW,
        W.SCOUTING,
        W.APPROVING,
        W.APPROVING_BLOCKED,
    )
    return (Phase.SCOUTING, Phase.ACTIVE) if scouting else (Phase.ACTIVE,)


def _check_feeder_args(
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


async def extend_scout(
    database: Database,
    caller: Caller,
    workgraph_id: bytes,
    *,
    catalogue: PluginCatalogue,
    feeder_args: Mapping[bytes, Any] | None = None,
    reason: str = "",
    request_id: str = "",
) -> None:
    """Approving or ApprovingBlocked → Scouting ("scout further"): the running members' feeders
    are enabled again, with new arguments where given (checked for the scout and after it)."""
    new_args = dict(feeder_args or {})

    async def work(conn: AsyncConnection) -> None:
        workgraph = await _steer(conn, caller, workgraph_id, request_id)
        if workgraph is None:
            return
        _require(workgraph, (W.APPROVING, W.APPROVING_BLOCKED), "extending the scout")
        members = {m.transformation_id: m for m in workgraph.members}
        for tid, args in new_args.items():
            field = f"feeder_args_json[{id_to_str(tid)}]"
            if tid not in members:
                raise InvalidArgument("not a member of this workgraph", field=field)
            _check_feeder_args(
                catalogue, members[tid].feeder, args, (Phase.SCOUTING, Phase.ACTIVE), field
            )
        data = _data(request_id, reason)
        await move_workgraph(
            conn,
            workgraph,
            W.SCOUTING,
            actor=Actor.OPERATOR,
            author=caller.author,
            message=reason or "scout extended",
            data=data,
        )
        now = await db_now(conn)
        for tid, args in new_args.items():
            await db.set_feeder_args(conn, tid, args, now)
        running = [m.transformation_id for m in workgraph.members if m.status == T.ACTIVE]
        await db.set_feeders_enabled(conn, running, True, now)
        await log_transformations(
            conn,
            [
                LogEntry(tid, "FeederArgs", caller.author, data={**data, "args": args})
                for tid, args in new_args.items()
            ]
            + [
                LogEntry(tid, "FeederEnabled", caller.author, message="scout extended", data=data)
                for tid in running
            ],
        )

    await database.run(work, isolation=Isolation.READ_COMMITTED)


def outermost(workgraph: LockedWorkgraph, producers: Mapping[bytes, bytes]) -> list[bytes]:
    """Members fed from outside the workgraph: not by an edge from another member."""
    ids = {m.transformation_id for m in workgraph.members}
    found = []
    for member in workgraph.members:
        output = member.edge_output()
        if output is None or producers.get(output) not in ids:
            found.append(member.transformation_id)
    return found


async def _disable_feeders(
    conn: AsyncConnection,
    workgraph: LockedWorkgraph,
    ids: list[bytes],
    author: str,
    message: str,
    data: dict[str, Any],
) -> None:
    enabled = [t for t in ids if workgraph.member(t).feeder_enabled]
    await db.set_feeders_enabled(conn, enabled, False, await db_now(conn))
    await log_transformations(
        conn, [LogEntry(t, "FeederDisabled", author, message=message, data=data) for t in enabled]
    )


async def drain(
    database: Database,
    caller: Caller,
    workgraph_id: bytes,
    *,
    reason: str = "",
    request_id: str = "",
) -> None:
    """Disable the outermost feeders of an Active workgraph; in-flight work finishes, packers
    pack the remainder, and the drain guard moves it to Finalizing."""

    async def work(conn: AsyncConnection) -> None:
        workgraph = await _steer(conn, caller, workgraph_id, request_id)
        if workgraph is None:
            return
        _require(workgraph, (W.ACTIVE,), "drain")
        edges = [o for o in (m.edge_output() for m in workgraph.members) if o is not None]
        outer = outermost(workgraph, await db.output_producers(conn, edges))
        data = _data(request_id, reason)
        await log_workgraphs(
            conn,
            [LogEntry(workgraph_id, "Drain", caller.author, message=reason or None, data=data)],
        )
        await _disable_feeders(conn, workgraph, outer, caller.author, "drain", data)

    await database.run(work, isolation=Isolation.READ_COMMITTED)


def _forwarded_id(request_id: str, transformation_id: bytes, what: str) -> str:
    return f"{request_id}:{what}:{id_to_str(transformation_id)}"


async def halt(
    database: Database,
    caller: Caller,
    workgraph_id: bytes,
    *,
    execution: ExecutionClient,
    reason: str = "",
    request_id: str = "",
) -> None:
    """Disable every feeder and mark the workgraph halted (execution then stops packers and
    hooks and writes off inputs that fail later), then ask execution to cancel every member's
    in-flight parcels and write off its waiting inputs. Repeating it repeats the requests."""
    request_id = request_id or str(uuid.uuid4())
    members: list[bytes] = []

    async def work(conn: AsyncConnection) -> None:
        workgraph = await lock_workgraph(conn, workgraph_id)
        authorise(caller, workgraph.vo, workgraph.sub, "workgraph", workgraph_id)
        _require(workgraph, (W.ACTIVE,), "halt")
        members[:] = [m.transformation_id for m in workgraph.members]
        if await request_logged(conn, request_id, workgraph_id=workgraph_id):
            return
        data = _data(request_id, reason)
        annotations = {**workgraph.annotations, HALTED: True}
        await db.set_workgraph_annotations(conn, workgraph_id, annotations, await db_now(conn))
        await log_workgraphs(
            conn, [LogEntry(workgraph_id, "Halt", caller.author, message=reason or None, data=data)]
        )
        await _disable_feeders(conn, workgraph, members, caller.author, "halt", data)

    await database.run(work, isolation=Isolation.READ_COMMITTED)
    why = reason or "workgraph halted"
    for tid in members:
        await execution.cancel_in_flight(
            tid, request_id=_forwarded_id(request_id, tid, "cancel"), reason=why
        )
        await execution.write_off_waiting(
            tid, request_id=_forwarded_id(request_id, tid, "write-off"), reason=why
        )


async def cancel(
    database: Database,
    caller: Caller,
    workgraph_id: bytes,
    *,
    reason: str = "",
    request_id: str = "",
) -> None:
    """The workgraph and every member → Cancelling (their cleaning actions then run)."""

    async def work(conn: AsyncConnection) -> None:
        workgraph = await _steer(conn, caller, workgraph_id, request_id)
        if workgraph is None:
            return
        await move_workgraph(
            conn,
            workgraph,
            W.CANCELLING,
            actor=Actor.OPERATOR,
            author=caller.author,
            message=reason or "cancelled",
            data=_data(request_id, reason),
        )

    await database.run(work, isolation=Isolation.READ_COMMITTED)


async def return_to_active(
    database: Database,
    caller: Caller,
    workgraph_id: bytes,
    *,
    clear_bookmarks: bool = False,
    reason: str = "",
    request_id: str = "",
) -> None:
    """Finalizing → Active, every member → Active, after a failed finalisation; the halted
    mark is lifted. With `clear_bookmarks` every feeder is enabled again from the beginning
    (FeederState cleared; inputs it yields again are duplicates and ignored)."""

    async def work(conn: AsyncConnection) -> None:
        workgraph = await _steer(conn, caller, workgraph_id, request_id)
        if workgraph is None:
            return
        _require(workgraph, (W.FINALIZING,), "returning to Active")
        data = _data(request_id, reason, clear_bookmarks=clear_bookmarks or None)
        await move_workgraph(
            conn,
            workgraph,
            W.ACTIVE,
            actor=Actor.OPERATOR,
            author=caller.author,
            message=reason or "returned to Active",
            data=data,
        )
        now = await db_now(conn)
        if workgraph.halted:
            annotations = {k: v for k, v in workgraph.annotations.items() if k != HALTED}
            await db.set_workgraph_annotations(conn, workgraph_id, annotations or None, now)
        if clear_bookmarks:
            ids = [m.transformation_id for m in workgraph.members]
            await db.set_feeders_enabled(conn, ids, True, now, clear_state=True)
            await log_transformations(
                conn,
                [
                    LogEntry(
                        t, "FeederEnabled", caller.author, message="bookmark cleared", data=data
                    )
                    for t in ids
                ],
            )

    await database.run(work, isolation=Isolation.READ_COMMITTED)


# -- transformation commands ---------------------------------------------------------------------


async def _steer_transformation(
    conn: AsyncConnection, caller: Caller, transformation_id: bytes, request_id: str
) -> LockedTransformation | None:
    locked = await lock_transformation(conn, transformation_id)
    authorise(caller, locked.vo, locked.sub, "transformation", transformation_id)
    if await request_logged(conn, request_id, transformation_id=transformation_id):
        return None
    return locked


async def _unblock_guard(
    conn: AsyncConnection,
    state: str,
    *,
    workgraph_id: bytes | None = None,
    transformation_id: bytes | None = None,
) -> None:
    """Leaving a blocked state while one of its actions still says Failed would block again."""
    failed = await db.failed_actions(
        conn, state=state, workgraph_id=workgraph_id, transformation_id=transformation_id
    )
    if failed:
        raise FailedPrecondition(
            f"{failed} {state} action(s) still Failed: force or reset them first",
            current_state=BLOCKED_COUNTERPART[state],
        )


async def transition_transformation(
    database: Database,
    caller: Caller,
    transformation_id: bytes,
    target: str,
    *,
    reason: str = "",
    request_id: str = "",
) -> None:
    """One operator edge: pause, resume, leave a blocked state; for a standalone
    transformation also its workgraph's edges (start, cancel, back to Active)."""

    async def work(conn: AsyncConnection) -> None:
        locked = await _steer_transformation(conn, caller, transformation_id, request_id)
        if locked is None:
            return
        TRANSFORMATION.check(
            locked.status,
            target,
            Actor.OPERATOR,
            identifier=id_to_str(transformation_id),
            standalone=locked.standalone,
        )
        workgraph = locked.workgraph
        if workgraph is not None and not member_state_compatible(workgraph.status, target):
            raise FailedPrecondition(
                f"workgraph {id_to_str(workgraph.workgraph_id)} is {workgraph.status}: its "
                f"members cannot be {target} now",
                current_state=workgraph.status,
            )
        if UNBLOCKED.get(locked.status) == target:
            await _unblock_guard(conn, target, transformation_id=transformation_id)
        await move_transformations(
            conn,
            [(transformation_id, locked.status)],
            target,
            actor=Actor.OPERATOR,
            author=caller.author,
            message=reason or None,
            data=_data(request_id, reason),
            standalone=locked.standalone,
        )

    await database.run(work, isolation=Isolation.READ_COMMITTED)


async def pause(
    database: Database,
    caller: Caller,
    transformation_id: bytes,
    *,
    reason: str = "",
    request_id: str = "",
) -> None:
    await transition_transformation(
        database, caller, transformation_id, T.PAUSED, reason=reason, request_id=request_id
    )


async def resume(
    database: Database,
    caller: Caller,
    transformation_id: bytes,
    *,
    reason: str = "",
    request_id: str = "",
) -> None:
    await transition_transformation(
        database, caller, transformation_id, T.ACTIVE, reason=reason, request_id=request_id
    )


async def set_feeder(
    database: Database,
    caller: Caller,
    transformation_id: bytes,
    *,
    catalogue: PluginCatalogue,
    enabled: bool | None = None,
    args: Any = UNSET,
    reason: str = "",
    request_id: str = "",
) -> None:
    """Enable or disable a feeder, or give it new arguments (checked by the plugin's model for
    every phase it will still run in), while the transformation runs (New, Active, Paused)."""

    async def work(conn: AsyncConnection) -> None:
        locked = await _steer_transformation(conn, caller, transformation_id, request_id)
        if locked is None:
            return
        if locked.status not in FEEDER_STATES:
            raise FailedPrecondition(
                f"transformation {id_to_str(transformation_id)} is {locked.status}: its feeder "
                f"can be changed only while it is {', '.join(sorted(FEEDER_STATES))}",
                current_state=locked.status,
            )
        workgraph = locked.workgraph
        if enabled and workgraph is not None and workgraph.halted:
            raise FailedPrecondition(
                f"workgraph {id_to_str(workgraph.workgraph_id)} is halted: its feeders stay off",
                current_state=workgraph.status,
            )
        if args is not UNSET:
            _check_feeder_args(
                catalogue, locked.feeder, args, _feeder_phases(workgraph), "feeder_args_json"
            )
        data = _data(request_id, reason)
        now = await db_now(conn)
        entries = []
        if args is not UNSET:
            await db.set_feeder_args(conn, transformation_id, args, now)
            entries.append(
                LogEntry(
                    transformation_id,
                    "FeederArgs",
                    caller.author,
                    message=reason or None,
                    data={**data, "args": args, "previous": locked.feeder_args},
                )
            )
        if enabled is not None and enabled != locked.feeder_enabled:
            await db.set_feeders_enabled(conn, [transformation_id], enabled, now)
            entries.append(
                LogEntry(
                    transformation_id,
                    "FeederEnabled" if enabled else "FeederDisabled",
                    caller.author,
                    message=reason or None,
                    data=data,
                )
            )
        await log_transformations(conn, entries)

    await database.run(work, isolation=Isolation.READ_COMMITTED)


async def flush(
    database: Database,
    caller: Caller,
    transformation_id: bytes,
    *,
    execution: ExecutionClient,
    reason: str = "",
    request_id: str = "",
) -> None:
    """Ask for one packer invocation with flush=True on an Active transformation."""
    request_id = request_id or str(uuid.uuid4())

    async def work(conn: AsyncConnection) -> None:
        locked = await lock_transformation(conn, transformation_id)
        authorise(caller, locked.vo, locked.sub, "transformation", transformation_id)
        if locked.status != T.ACTIVE:
            raise FailedPrecondition(
                f"transformation {id_to_str(transformation_id)} is {locked.status}: only an "
                "Active transformation's packer runs",
                current_state=locked.status,
            )
        if locked.workgraph is not None and locked.workgraph.halted:
            raise FailedPrecondition(
                f"workgraph {id_to_str(locked.workgraph.workgraph_id)} is halted: its packers "
                "are stopped",
                current_state=locked.workgraph.status,
            )
        if not await request_logged(conn, request_id, transformation_id=transformation_id):
            await log_transformations(
                conn,
                [
                    LogEntry(
                        transformation_id,
                        "Flush",
                        caller.author,
                        message=reason or None,
                        data=_data(request_id, reason),
                    )
                ],
            )

    await database.run(work, isolation=Isolation.READ_COMMITTED)
    await execution.flush(transformation_id, request_id=request_id)


# -- actions -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ActionOwner:
    status: str
    vo: str
    sub: str
    workgraph: LockedWorkgraph | None  # the owner when a workgraph, else the member's
    transformation: LockedTransformation | None


async def _lock_action_owner(
    conn: AsyncConnection, caller: Caller, action_id: int
) -> tuple[Any, _ActionOwner]:
    """The action and its owner, both locked (owner first); NotFound across VOs."""
    row = await db.action_row(conn, action_id)
    if row is None:
        raise NotFound("action", action_id)
    if row.WorkgraphID is not None:
        workgraph = await lock_workgraph(conn, bytes(row.WorkgraphID))
        owner = _ActionOwner(workgraph.status, workgraph.vo, workgraph.sub, workgraph, None)
    else:
        locked = await lock_transformation(conn, bytes(row.TransformationID))
        owner = _ActionOwner(locked.status, locked.vo, locked.sub, locked.workgraph, locked)
    if caller.identity.vo != owner.vo:
        raise NotFound("action", action_id)
    locked_row = await db.lock_action(conn, action_id)
    assert locked_row is not None
    return locked_row, owner


def _authorise_action(
    caller: Caller, action: Any, owner: _ActionOwner, *, sign_off: bool = False
) -> None:
    """Who may force or reset an action: whoever may steer its owner; forcing (`sign_off`) an
    action that needs a role also needs that role (or the operator role). Holding the role a
    sign-off names is enough to force that one action, whoever owns the workgraph."""
    role = required_role(action, caller) if sign_off else None
    if role is not None and role != caller.operator_role and caller.identity.has_role(role):
        return
    owner_id = (
        owner.transformation.transformation_id
        if owner.transformation is not None
        else bytes(action.WorkgraphID)
    )
    kind = "workgraph" if owner.transformation is None else "transformation"
    authorise(caller, owner.vo, owner.sub, kind, owner_id)
    if role is not None and not (caller.identity.has_role(role) or caller.is_operator):
        raise PermissionDenied(
            f"forcing {action.Action} (action {action.ActionID}) needs the {role!r} role"
        )


def _require_list_running(action: Any, owner: _ActionOwner) -> None:
    if owner.status not in (action.State, BLOCKED_COUNTERPART.get(action.State)):
        raise FailedPrecondition(
            f"action {action.ActionID} belongs to the {action.State} list, and its owner is "
            f"{owner.status}: it can be forced or reset only while that list runs",
            current_state=owner.status,
        )


def required_role(action: Any, caller: Caller) -> str | None:
    """The role forcing this action needs: the one a sign-off names in its args (`role`), or
    the operator role for every approving action (the gate the operators own)."""
    args = action.Args if isinstance(action.Args, dict) else {}
    if isinstance(args.get("role"), str) and args["role"]:
        return str(args["role"])
    return caller.operator_role if action.State == APPROVING else None


async def _log_action(
    conn: AsyncConnection,
    action: Any,
    event: str,
    author: str,
    message: str | None,
    data: dict[str, Any],
) -> None:
    entry_data = {
        **data,
        "action_id": action.ActionID,
        "action": action.Action,
        "state": action.State,
        "position": action.Position,
    }
    if action.WorkgraphID is not None:
        await log_workgraphs(
            conn,
            [LogEntry(bytes(action.WorkgraphID), event, author, message=message, data=entry_data)],
        )
    else:
        await log_transformations(
            conn,
            [
                LogEntry(
                    bytes(action.TransformationID), event, author, message=message, data=entry_data
                )
            ],
        )


async def _leave_blocked(
    conn: AsyncConnection,
    action: Any,
    owner: _ActionOwner,
    caller: Caller,
    message: str,
    data: dict[str, Any],
) -> None:
    """Back to the unblocked state once no action of the list says Failed."""
    if owner.status != BLOCKED_COUNTERPART.get(action.State):
        return
    failed = await db.failed_actions(
        conn,
        state=action.State,
        workgraph_id=None if action.WorkgraphID is None else bytes(action.WorkgraphID),
        transformation_id=None
        if action.TransformationID is None
        else bytes(action.TransformationID),
    )
    if failed:
        return
    if owner.transformation is None:
        assert owner.workgraph is not None
        await move_workgraph(
            conn,
            owner.workgraph,
            action.State,
            actor=Actor.OPERATOR,
            author=caller.author,
            message=message,
            data=data,
        )
    else:
        await move_transformations(
            conn,
            [(owner.transformation.transformation_id, owner.status)],
            action.State,
            actor=Actor.OPERATOR,
            author=caller.author,
            message=message,
            data=data,
            standalone=owner.transformation.standalone,
        )


async def force_action(
    database: Database,
    caller: Caller,
    action_id: int,
    result: ActionResult,
    *,
    message: str = "",
    request_id: str = "",
) -> None:
    """Record `result` for an action of the list its owner is running (the author is the
    caller); a blocked owner with no Failed action left goes back to the unblocked state."""

    async def work(conn: AsyncConnection) -> None:
        action, owner = await _lock_action_owner(conn, caller, action_id)
        allowed = FORCEABLE.get(action.State, set())
        if result not in allowed:
            raise InvalidArgument(
                f"a {action.State} action is forced to one of "
                f"{', '.join(sorted(a.value for a in allowed))}, not {result}",
                field="result",
            )
        _authorise_action(caller, action, owner, sign_off=True)
        _require_list_running(action, owner)
        if await _already(conn, action, request_id):
            return
        data = _data(request_id, "", result=result.value)
        await db.set_action_result(
            conn,
            action_id,
            result=result.value,
            message=message[:512] or None,
            author=caller.author,
            now=await db_now(conn),
        )
        await _log_action(conn, action, "ActionForced", caller.author, message or None, data)
        await _leave_blocked(
            conn, action, owner, caller, f"action {action.Action} forced {result.value}", data
        )

    await database.run(work, isolation=Isolation.READ_COMMITTED)


async def reset_action(
    database: Database,
    caller: Caller,
    action_id: int,
    *,
    reason: str = "",
    request_id: str = "",
) -> None:
    """Clear an action's result so that the runner runs it again (the author is recorded)."""

    async def work(conn: AsyncConnection) -> None:
        action, owner = await _lock_action_owner(conn, caller, action_id)
        _authorise_action(caller, action, owner)
        _require_list_running(action, owner)
        if await _already(conn, action, request_id):
            return
        data = _data(request_id, reason)
        await db.set_action_result(
            conn,
            action_id,
            result=None,
            message=reason[:512] or None,
            author=caller.author,
            now=await db_now(conn),
        )
        await _log_action(conn, action, "ActionReset", caller.author, reason or None, data)
        await _leave_blocked(conn, action, owner, caller, f"action {action.Action} reset", data)

    await database.run(work, isolation=Isolation.READ_COMMITTED)


async def _already(conn: AsyncConnection, action: Any, request_id: str) -> bool:
    if action.WorkgraphID is not None:
        return await request_logged(conn, request_id, workgraph_id=bytes(action.WorkgraphID))
    return await request_logged(conn, request_id, transformation_id=bytes(action.TransformationID))
