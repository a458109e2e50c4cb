"""The operator commands on one transformation: an edge of its state machine (pause, resume,
leave a blocked state; a standalone transformation's workgraph edges), its feeder, a flush —
each one kernel command (`logic.commands.transformation_command`).
"""

from __future__ import annotations

import uuid
from typing import Any

from dxts.core.db import Database, Transaction, db_now
from dxts.core.errors import FailedPrecondition
from dxts.core.ids import id_to_str
from dxts.core.kernel.commands import Result
from dxts.core.logs import LogEntry, log_transformations
from dxts.core.plugins.protocols.lifecycle import Flushed
from dxts.core.state_machines import (
    BLOCKED_COUNTERPART,
    TRANSFORMATION,
    Actor,
    member_state_compatible,
)
from dxts.core.states import TransformationStatus
from dxts.cwl.plugins import PluginCatalogue
from dxts.definition.logic.authorise import Caller, command_data
from dxts.definition.logic.commands import transformation_command
from dxts.definition.logic.execution import ExecutionClient
from dxts.definition.logic.feeders import (
    FEEDER_STATES,
    UNSET,
    check_feeder_args,
    feeder_phases,
    reset_exhausted,
)
from dxts.definition.logic.locked import LockedTransformation
from dxts.definition.logic.moves import move_transformations
from dxts.definition.store import actions as actions_db
from dxts.definition.store import transformations as transformations_db

T = TransformationStatus
UNBLOCKED = {blocked: state for state, blocked in BLOCKED_COUNTERPART.items()}


async def _unblock_guard(
    conn: Transaction,
    state: str,
    *,
    workgraph_id: bytes | None = None,
    transformation_id: bytes | None = None,
) -> None:
    """Leaving a blocked state while one of its actions still says Failed would block again."""
    failed = await actions_db.failed_actions(
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
) -> Result:
    """One operator edge: pause, resume, leave a blocked state; for a standalone
    transformation also its workgraph's edges (start, cancel, back to Active)."""

    async def apply(conn: Transaction, locked: LockedTransformation) -> Result:
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
            data=command_data(request_id, reason),
            standalone=locked.standalone,
        )

        return {"status": target, "feeder_enabled": locked.feeder_enabled}

    return await transformation_command(
        database, caller, transformation_id, apply, request_id=request_id, reason=reason
    )


async def pause(
    database: Database,
    caller: Caller,
    transformation_id: bytes,
    *,
    reason: str = "",
    request_id: str = "",
) -> Result:
    return await transition_transformation(
        database,
        caller,
        transformation_id,
        T.PAUSED,
        reason=reason,
        request_id=request_id,
    )


async def resume(
    database: Database,
    caller: Caller,
    transformation_id: bytes,
    *,
    reason: str = "",
    request_id: str = "",
) -> Result:
    return await transition_transformation(
        database,
        caller,
        transformation_id,
        T.ACTIVE,
        reason=reason,
        request_id=request_id,
    )


async def set_feeder(
    database: Database,
    caller: Caller,
    transformation_id: bytes,
    *,
    catalogue: PluginCatalogue,
    execution: ExecutionClient,
    enabled: bool | None = None,
    args: Any = UNSET,
    reason: str = "",
    request_id: str = "",
) -> Result:
    """Enable or disable a feeder, or give it new arguments (checked by the plugin's model for
    every phase it will still run in), while the transformation runs (New, Active, Paused).
    Enabling a feeder that said NoMoreInputs asks execution to reset it first."""
    exhausted: set[bytes] = set()
    if enabled:
        exhausted = await reset_exhausted(
            database, execution, [transformation_id], request_id=f"{request_id}:reset-feeder"
        )

    async def apply(conn: Transaction, locked: LockedTransformation) -> Result:
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
            check_feeder_args(
                catalogue, locked.feeder, args, feeder_phases(workgraph), "feeder_args_json"
            )
        data = command_data(request_id, reason)
        now = await db_now(conn)
        entries = []
        if args is not UNSET:
            await transformations_db.set_feeder_args(conn, transformation_id, args, now)
            entries.append(
                LogEntry(
                    transformation_id,
                    "FeederArgs",
                    caller.author,
                    message=reason or None,
                    data={**data, "args": args, "previous": locked.feeder_args},
                )
            )
        was_on = locked.feeder_enabled and transformation_id not in exhausted
        if enabled is not None and enabled != was_on:
            await transformations_db.set_feeders_enabled(conn, [transformation_id], enabled, now)
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
        return {
            "changed": [entry.event_type for entry in entries],
            "status": locked.status,
            "feeder_enabled": locked.feeder_enabled if enabled is None else enabled,
        }

    return await transformation_command(
        database,
        caller,
        transformation_id,
        apply,
        request_id=request_id,
        reason=reason,
    )


async def flush(
    database: Database,
    caller: Caller,
    transformation_id: bytes,
    *,
    execution: ExecutionClient,
    reason: str = "",
    request_id: str = "",
) -> Flushed:
    """Ask for one packer invocation with flush=True on an Active transformation; what it did,
    a packer's failure included (its words and class), for the caller to see."""
    request_id = request_id or str(uuid.uuid4())

    def admit(locked: LockedTransformation) -> None:
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

    async def apply(conn: Transaction, locked: LockedTransformation) -> Result:
        return {}

    await transformation_command(
        database,
        caller,
        transformation_id,
        apply,
        request_id=request_id,
        reason=reason,
        admit=admit,
    )
    return await execution.flush(transformation_id, request_id=request_id)
