"""The operator commands on a workgraph: start, extend the scout, drain, halt, cancel, return
to Active — each one kernel command (`logic.commands.workgraph_command`) whose result is what
its log row records and what a retry with the same request id is answered.

Forwarded work (the input and parcel half of a halt) is asked of execution after the commit,
with request ids derived from the command's, so a retry forwards the same requests.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from dxts.core.builtins.lifecycle_hooks import SCOUT_ROUND, scout_round
from dxts.core.db import Database, Isolation, Transaction, db_now
from dxts.core.errors import FailedPrecondition, InvalidArgument
from dxts.core.ids import id_from_str, id_to_str
from dxts.core.kernel.commands import Result
from dxts.core.logs import LogEntry, log_transformations
from dxts.core.plugins.points import Phase
from dxts.core.state_machines import Actor
from dxts.core.states import TransformationStatus, WorkgraphStatus
from dxts.cwl.plugins import PluginCatalogue
from dxts.definition.logic.authorise import Caller, command_data
from dxts.definition.logic.commands import workgraph_command
from dxts.definition.logic.execution import ExecutionClient
from dxts.definition.logic.feeders import check_feeder_args, reset_exhausted
from dxts.definition.logic.locked import HALTED, LockedWorkgraph, Member, lock_workgraph
from dxts.definition.logic.moves import move_workgraph
from dxts.definition.logic.quotas import check_active_workgraphs
from dxts.definition.store import actions as actions_db
from dxts.definition.store import transformations as transformations_db
from dxts.definition.store import workgraphs as workgraphs_db

W = WorkgraphStatus
T = TransformationStatus


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
) -> Result:
    """New → Scouting when a member runs in the scout and there is an approving list, else
    New → Active; each member by its compiled initial state."""

    async def apply(conn: Transaction, workgraph: LockedWorkgraph) -> Result:
        _require(workgraph, (W.NEW,), "start")
        await check_active_workgraphs(
            conn, caller.policy, workgraph.vo, workgraph.sub, starting=True
        )
        scouts = await actions_db.approving_count(conn, workgraph_id) > 0 and any(
            m.initial_state == "Active" for m in workgraph.members
        )
        target = W.SCOUTING if scouts else W.ACTIVE
        await move_workgraph(
            conn,
            workgraph,
            target,
            actor=Actor.OPERATOR,
            author=caller.author,
            message=reason or "started",
            data=command_data(request_id, reason),
            member_targets={
                m.transformation_id: _start_state(m, scouts) for m in workgraph.members
            },
        )
        return {"status": target}

    return await workgraph_command(
        database,
        caller,
        workgraph_id,
        apply,
        request_id=request_id,
        reason=reason,
    )


async def extend_scout(
    database: Database,
    caller: Caller,
    workgraph_id: bytes,
    *,
    catalogue: PluginCatalogue,
    execution: ExecutionClient,
    feeder_args: Mapping[bytes, Any] | None = None,
    reason: str = "",
    request_id: str = "",
) -> Result:
    """Approving or ApprovingBlocked → Scouting ("scout further"): the running members' feeders
    are enabled again, with new arguments where given (checked for the scout and after it).
    Without arguments the workgraph's scout round (`scout_round` in its annotations) advances:
    the scouting hook grows the sample (ScoutUntilSettled: the next of its `event_stages`, one
    more step past the last, or each member's first sample again)."""
    new_args = dict(feeder_args or {})
    workgraph = await _read_workgraph(database, workgraph_id)
    if workgraph.status in (W.APPROVING, W.APPROVING_BLOCKED):
        running = [m.transformation_id for m in workgraph.members if m.status == T.ACTIVE]
        await reset_exhausted(
            database, execution, running, request_id=f"{request_id}:reset-feeders"
        )

    async def apply(conn: Transaction, workgraph: LockedWorkgraph) -> Result:
        _require(workgraph, (W.APPROVING, W.APPROVING_BLOCKED), "extending the scout")
        members = {m.transformation_id: m for m in workgraph.members}
        for tid, args in new_args.items():
            field = f"feeder_args_json[{id_to_str(tid)}]"
            if tid not in members:
                raise InvalidArgument("not a member of this workgraph", field=field)
            check_feeder_args(
                catalogue, members[tid].feeder, args, (Phase.SCOUTING, Phase.ACTIVE), field
            )
        data = command_data(request_id, reason)
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
            await transformations_db.set_feeder_args(conn, tid, args, now)
        advanced = None
        if not new_args:
            advanced = scout_round(workgraph.annotations) + 1
            annotations = {**workgraph.annotations, SCOUT_ROUND: advanced}
            await workgraphs_db.set_workgraph_annotations(conn, workgraph_id, annotations, now)
        running = [m.transformation_id for m in workgraph.members if m.status == T.ACTIVE]
        await transformations_db.set_feeders_enabled(conn, running, True, now)
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
        result: Result = {"status": W.SCOUTING.value, "enabled": [id_to_str(t) for t in running]}
        if advanced is not None:
            result[SCOUT_ROUND] = advanced
        return result

    return await workgraph_command(
        database, caller, workgraph_id, apply, request_id=request_id, reason=reason
    )


async def _read_workgraph(database: Database, workgraph_id: bytes) -> LockedWorkgraph:
    """The workgraph and its members as they are now, in a transaction of its own (what a
    command asks of execution before its own transaction)."""
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        return await lock_workgraph(conn, workgraph_id)


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
    conn: Transaction,
    workgraph: LockedWorkgraph,
    ids: list[bytes],
    author: str,
    message: str,
    data: dict[str, Any],
) -> list[str]:
    """Disable those of `ids` whose feeder is enabled; their ids, as text."""
    enabled = [t for t in ids if workgraph.member(t).feeder_enabled]
    await transformations_db.set_feeders_enabled(conn, enabled, False, await db_now(conn))
    await log_transformations(
        conn, [LogEntry(t, "FeederDisabled", author, message=message, data=data) for t in enabled]
    )
    return [id_to_str(t) for t in enabled]


async def drain(
    database: Database,
    caller: Caller,
    workgraph_id: bytes,
    *,
    reason: str = "",
    request_id: str = "",
) -> Result:
    """Disable the outermost feeders of an Active workgraph; in-flight work finishes, packers
    pack the remainder, and the drain guard moves it to Finalizing."""

    async def apply(conn: Transaction, workgraph: LockedWorkgraph) -> Result:
        _require(workgraph, (W.ACTIVE,), "drain")
        edges = [o for o in (m.edge_output() for m in workgraph.members) if o is not None]
        outer = outermost(workgraph, await transformations_db.output_producers(conn, edges))
        data = command_data(request_id, reason)
        disabled = await _disable_feeders(conn, workgraph, outer, caller.author, "drain", data)
        return {"status": workgraph.status, "disabled": disabled}

    return await workgraph_command(
        database,
        caller,
        workgraph_id,
        apply,
        request_id=request_id,
        reason=reason,
    )


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
) -> Result:
    """Disable every feeder and mark the workgraph halted (execution then stops packers and
    hooks and writes off inputs that fail later), then ask execution to cancel every member's
    in-flight parcels and write off its waiting inputs. Repeating it repeats the requests (to
    the members the first one recorded)."""
    request_id = request_id or str(uuid.uuid4())

    async def apply(conn: Transaction, workgraph: LockedWorkgraph) -> Result:
        members = [m.transformation_id for m in workgraph.members]
        data = command_data(request_id, reason)
        annotations = {**workgraph.annotations, HALTED: True}
        await workgraphs_db.set_workgraph_annotations(
            conn, workgraph_id, annotations, await db_now(conn)
        )
        disabled = await _disable_feeders(conn, workgraph, members, caller.author, "halt", data)
        return {
            "status": workgraph.status,
            "members": [id_to_str(t) for t in members],
            "disabled": disabled,
        }

    def admit(workgraph: LockedWorkgraph) -> None:
        _require(workgraph, (W.ACTIVE,), "halt")

    result = await workgraph_command(
        database,
        caller,
        workgraph_id,
        apply,
        request_id=request_id,
        reason=reason,
        admit=admit,
    )
    why = reason or "workgraph halted"
    for tid in (id_from_str(t, field="members") for t in result["members"]):
        await execution.cancel_in_flight(
            tid, request_id=_forwarded_id(request_id, tid, "cancel"), reason=why
        )
        await execution.write_off_waiting(
            tid, request_id=_forwarded_id(request_id, tid, "write-off"), reason=why
        )
    return result


async def cancel(
    database: Database,
    caller: Caller,
    workgraph_id: bytes,
    *,
    reason: str = "",
    request_id: str = "",
) -> Result:
    """The workgraph and every member → Cancelling (their cleaning actions then run)."""

    async def apply(conn: Transaction, workgraph: LockedWorkgraph) -> Result:
        await move_workgraph(
            conn,
            workgraph,
            W.CANCELLING,
            actor=Actor.OPERATOR,
            author=caller.author,
            message=reason or "cancelled",
            data=command_data(request_id, reason),
        )
        return {"status": W.CANCELLING.value}

    return await workgraph_command(
        database,
        caller,
        workgraph_id,
        apply,
        request_id=request_id,
        reason=reason,
    )


async def return_to_active(
    database: Database,
    caller: Caller,
    workgraph_id: bytes,
    *,
    execution: ExecutionClient,
    clear_bookmarks: bool = False,
    reason: str = "",
    request_id: str = "",
) -> Result:
    """Finalizing → Active, every member → Active, after a failed finalisation; the halted
    mark is lifted. With `clear_bookmarks` every feeder is enabled again from the beginning
    (execution asked first to forget its bookmark and its NoMoreInputs; inputs it yields again
    are duplicates and ignored)."""
    if clear_bookmarks:
        workgraph = await _read_workgraph(database, workgraph_id)
        if workgraph.status == W.FINALIZING:
            await reset_exhausted(
                database,
                execution,
                [m.transformation_id for m in workgraph.members],
                request_id=f"{request_id}:reset-feeders",
                clear_bookmarks=True,
            )

    async def apply(conn: Transaction, workgraph: LockedWorkgraph) -> Result:
        _require(workgraph, (W.FINALIZING,), "returning to Active")
        data = command_data(request_id, reason, clear_bookmarks=clear_bookmarks or None)
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
            await workgraphs_db.set_workgraph_annotations(
                conn, workgraph_id, annotations or None, now
            )
        if clear_bookmarks:
            ids = [m.transformation_id for m in workgraph.members]
            await transformations_db.set_feeders_enabled(conn, ids, True, now)
            await log_transformations(
                conn,
                [
                    LogEntry(
                        t, "FeederEnabled", caller.author, message="bookmark cleared", data=data
                    )
                    for t in ids
                ],
            )
        return {"status": W.ACTIVE.value, "clear_bookmarks": clear_bookmarks}

    return await workgraph_command(
        database,
        caller,
        workgraph_id,
        apply,
        request_id=request_id,
        reason=reason,
    )
