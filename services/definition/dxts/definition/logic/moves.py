"""The transition primitives: one workgraph transition with its member fan-out, and a batch
of transformation transitions, each in the caller's transaction.

Operator commands call them with `Actor.OPERATOR`, the lifecycle engine with `Actor.CORE` or
`Actor.HOOK`. A transition is a conditional UPDATE whose row count is the truth (a row that left
its source state meanwhile aborts the transaction), the reset of the entered state's action
results, and the log rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from dxts.core.db import Transaction, db_now
from dxts.core.errors import Aborted, FailedPrecondition
from dxts.core.ids import id_to_str
from dxts.core.logs import STATE_CHANGE, LogEntry, log_transformations, log_workgraphs
from dxts.core.state_machines import (
    BLOCKED_COUNTERPART,
    MEMBER_FAN_OUT,
    TRANSFORMATION,
    WORKGRAPH,
    Actor,
)
from dxts.definition.logic.locked import LockedWorkgraph, Member
from dxts.definition.store import actions as actions_db
from dxts.definition.store import transformations as transformations_db
from dxts.definition.store import workgraphs as workgraphs_db


async def move_workgraph(
    conn: Transaction,
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
    if await workgraphs_db.set_workgraph_status(conn, wid, source, target, now) != 1:
        current = await workgraphs_db.workgraph_status(conn, wid)
        WORKGRAPH.check(current, target, actor, identifier=id_to_str(wid))
        raise Aborted(f"workgraph {id_to_str(wid)} changed while moving it; retry")
    if BLOCKED_COUNTERPART.get(target) != source:
        await actions_db.reset_actions(conn, state=target, now=now, workgraph_id=wid)
    await log_workgraphs(conn, [LogEntry(wid, STATE_CHANGE, author, source, target, message, data)])
    grouped: dict[tuple[str, str], list[bytes]] = defaultdict(list)
    for member, chosen in moves:
        grouped[(member.status, chosen)].append(member.transformation_id)
    await _apply_moves(conn, grouped, author=author, message=message, data=data, now=now)


async def move_transformations(
    conn: Transaction,
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
    conn: Transaction,
    grouped: Mapping[tuple[str, str], list[bytes]],
    *,
    author: str,
    message: str | None,
    data: dict[str, Any] | None,
    now: Any,
) -> None:
    entries = []
    for (source, target), ids in grouped.items():
        moved = await transformations_db.set_transformations_status(conn, ids, source, target, now)
        if moved != len(ids):
            raise Aborted(
                f"{len(ids) - moved} of {len(ids)} transformations left {source} while moving "
                f"them to {target}; retry"
            )
        if BLOCKED_COUNTERPART.get(target) != source:
            await actions_db.reset_actions(conn, state=target, now=now, transformation_ids=ids)
        entries += [LogEntry(t, STATE_CHANGE, author, source, target, message, data) for t in ids]
    await log_transformations(conn, entries)
