"""An operator forcing or resetting an action of the list its owner is running.

Forcing records a result (the caller is its author); resetting clears it so that the runner
runs it again. Either brings a blocked owner back to its list's state once no action of the
list says Failed. Each is one kernel command (`run_command`) logged in the owner's log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dxts.core.db import Database, Transaction, db_now
from dxts.core.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from dxts.core.identity import Identity
from dxts.core.kernel.commands import LogScope, Result, run_command
from dxts.core.state_machines import BLOCKED_COUNTERPART, Actor
from dxts.core.states import ActionResult
from dxts.cwl.compile import APPROVING
from dxts.definition.logic.authorise import Caller, authorise, command_data
from dxts.definition.logic.commands import command_request
from dxts.definition.logic.locked import (
    LockedTransformation,
    LockedWorkgraph,
    lock_transformation,
    lock_workgraph,
)
from dxts.definition.logic.moves import move_transformations, move_workgraph
from dxts.definition.store import actions as actions_db
from dxts.definition.store.actions import ActionRecord

FORCEABLE = {
    APPROVING: {ActionResult.PASSED, ActionResult.FAILED},
    "Finalizing": {ActionResult.PASSED, ActionResult.FAILED},
    "Archiving": {ActionResult.DONE, ActionResult.FAILED},
    "Cancelling": {ActionResult.DONE, ActionResult.FAILED},
}


@dataclass(frozen=True)
class _ActionOwner:
    status: str
    vo: str
    sub: str
    workgraph: LockedWorkgraph | None  # the owner when a workgraph, else the member's
    transformation: LockedTransformation | None


async def _lock_action_owner(
    conn: Transaction, caller: Caller, action_id: int
) -> tuple[ActionRecord, _ActionOwner]:
    """The action and its owner, both locked (owner first); NotFound across VOs."""
    row = await actions_db.action_row(conn, action_id)
    if row is None:
        raise NotFound("action", action_id)
    if row.workgraph_id is not None:
        workgraph = await lock_workgraph(conn, row.workgraph_id)
        owner = _ActionOwner(workgraph.status, workgraph.vo, workgraph.sub, workgraph, None)
    else:
        assert row.transformation_id is not None  # an action's owner is one or the other
        locked = await lock_transformation(conn, row.transformation_id)
        owner = _ActionOwner(locked.status, locked.vo, locked.sub, locked.workgraph, locked)
    if caller.identity.vo != owner.vo:
        raise NotFound("action", action_id)
    locked_row = await actions_db.lock_action(conn, action_id)
    assert locked_row is not None
    return locked_row, owner


def _authorise_action(
    caller: Caller,
    action: ActionRecord,
    owner: _ActionOwner,
    *,
    sign_off: bool = False,
) -> None:
    """Who may force or reset an action: whoever may steer its owner; forcing (`sign_off`) an
    action that needs a role also needs that role (or the operator role). Holding the role a
    sign-off names is enough to force that one action, whoever owns the workgraph.

    The installation's policy (`dxts.core.policy`) has the last word on an approving action:
    a role it does not allow to sign off (one every plain user holds) counts for nothing, the
    operator role is needed instead; and the submitter may not force her own workgraph's
    approving actions unless the policy allows it (`self_sign_off`)."""
    policy = caller.policy.for_vo(owner.vo)
    role = required_role(action, caller) if sign_off else None
    if role is not None and policy.sign_off_problem(role) is not None:
        role = caller.operator_role
    own = caller.identity.vo == owner.vo and caller.identity.sub == owner.sub
    if sign_off and action.state == APPROVING and own and not policy.self_sign_off:
        raise PermissionDenied(
            f"{action.action} (action {action.action_id}) is an approval of your own "
            "workgraph: the installation wants it signed off by someone else "
            "(policy.self_sign_off)"
        )
    if role is not None and role != caller.operator_role and caller.identity.has_role(role):
        return
    if owner.transformation is not None:
        owner_id = owner.transformation.transformation_id
    else:
        assert action.workgraph_id is not None  # no transformation owns it: a workgraph does
        owner_id = action.workgraph_id
    kind = "workgraph" if owner.transformation is None else "transformation"
    authorise(caller, owner.vo, owner.sub, kind, owner_id)
    if role is not None and not (caller.identity.has_role(role) or caller.is_operator):
        raise PermissionDenied(
            f"forcing {action.action} (action {action.action_id}) needs the {role!r} role"
        )


def _require_list_running(action: ActionRecord, owner: _ActionOwner) -> None:
    if owner.status not in (action.state, BLOCKED_COUNTERPART.get(action.state)):
        raise FailedPrecondition(
            f"action {action.action_id} belongs to the {action.state} list, and its owner is "
            f"{owner.status}: it can be forced or reset only while that list runs",
            current_state=owner.status,
        )


def required_role(action: ActionRecord, caller: Caller) -> str | None:
    """The role forcing this action needs: the one a sign-off names in its args (`role`), or
    the operator role for every approving action (the gate the operators own)."""
    args = action.args if isinstance(action.args, dict) else {}
    if isinstance(args.get("role"), str) and args["role"]:
        return str(args["role"])
    return caller.operator_role if action.state == APPROVING else None


def _details(action: ActionRecord) -> dict[str, Any]:
    """What the command's log row records of the action."""
    return {
        "action_id": action.action_id,
        "action": action.action,
        "state": action.state,
        "position": action.position,
    }


def _scope(target: tuple[ActionRecord, _ActionOwner]) -> LogScope:
    """The log of the action's owner: its workgraph's, or its transformation's."""
    action, _ = target
    if action.workgraph_id is not None:
        return LogScope(workgraph_id=action.workgraph_id)
    return LogScope(transformation_id=action.transformation_id)


async def _leave_blocked(
    conn: Transaction,
    action: ActionRecord,
    owner: _ActionOwner,
    caller: Caller,
    message: str,
    data: dict[str, Any],
) -> None:
    """Back to the unblocked state once no action of the list says Failed."""
    if owner.status != BLOCKED_COUNTERPART.get(action.state):
        return
    failed = await actions_db.failed_actions(
        conn,
        state=action.state,
        workgraph_id=None if action.workgraph_id is None else action.workgraph_id,
        transformation_id=None if action.transformation_id is None else action.transformation_id,
    )
    if failed:
        return
    if owner.transformation is None:
        assert owner.workgraph is not None
        await move_workgraph(
            conn,
            owner.workgraph,
            action.state,
            actor=Actor.OPERATOR,
            author=caller.author,
            message=message,
            data=data,
        )
    else:
        await move_transformations(
            conn,
            [(owner.transformation.transformation_id, owner.status)],
            action.state,
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
) -> Result:
    """Record `result` for an action of the list its owner is running (the author is the
    caller); a blocked owner with no Failed action left goes back to the unblocked state."""

    def admit(identity: Identity, target: tuple[ActionRecord, _ActionOwner]) -> None:
        action, owner = target
        # Authorised first: what the action is (its list, what it may be forced to) is told
        # only to a caller who may steer it.
        _authorise_action(caller, action, owner, sign_off=True)
        allowed = FORCEABLE.get(action.state, set())
        if result not in allowed:
            raise InvalidArgument(
                f"a {action.state} action is forced to one of "
                f"{', '.join(sorted(a.value for a in allowed))}, not {result}",
                field="result",
            )
        _require_list_running(action, owner)

    async def apply(conn: Transaction, target: tuple[ActionRecord, _ActionOwner]) -> Result:
        action, owner = target
        data = command_data(request_id, "", result=result.value)
        await actions_db.set_action_result(
            conn,
            action_id,
            result=result.value,
            message=message[:512] or None,
            author=caller.author,
            now=await db_now(conn),
        )
        await _leave_blocked(
            conn, action, owner, caller, f"action {action.action} forced {result.value}", data
        )
        return {**_details(action), "result": result.value}

    return await run_command(
        database,
        command_request(caller, request_id, message),
        lock=lambda conn: _lock_action_owner(conn, caller, action_id),
        authorise=admit,
        scope=_scope,
        apply=apply,
    )


async def reset_action(
    database: Database,
    caller: Caller,
    action_id: int,
    *,
    reason: str = "",
    request_id: str = "",
) -> Result:
    """Clear an action's result so that the runner runs it again (the author is recorded)."""

    def admit(identity: Identity, target: tuple[ActionRecord, _ActionOwner]) -> None:
        action, owner = target
        _authorise_action(caller, action, owner)
        _require_list_running(action, owner)

    async def apply(conn: Transaction, target: tuple[ActionRecord, _ActionOwner]) -> Result:
        action, owner = target
        data = command_data(request_id, reason)
        await actions_db.set_action_result(
            conn,
            action_id,
            result=None,
            message=reason[:512] or None,
            author=caller.author,
            now=await db_now(conn),
        )
        await _leave_blocked(conn, action, owner, caller, f"action {action.action} reset", data)
        return {**_details(action), "result": None}

    return await run_command(
        database,
        command_request(caller, request_id, reason),
        lock=lambda conn: _lock_action_owner(conn, caller, action_id),
        authorise=admit,
        scope=_scope,
        apply=apply,
    )
