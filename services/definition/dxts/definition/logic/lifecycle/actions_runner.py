"""The action runner: one owner's action list, run in order (docs/extensions.md).

It takes the lowest position with no result (NULL, or Pending from an earlier sweep), runs the
action with no transaction open, then in one READ COMMITTED transaction — owner locked (the
workgraph row first), owner still in the list's state — records the result with ONE UPDATE
(result, message, time; only if the row still holds what the runner saw, since an operator may
have forced or reset it meanwhile), writes an `ActionRun` log row, and:

* Passed / Done: applies the action's updated requirements (merged key by key over each
  member's template, a null removing a key, held to the installation's policy for the owner's
  VO: a value over a `cap` limit lowered to it, stored content-addressed and pointed at by
  ComputeTransformations.RequirementsTemplateID); if it was the last, the owner leaves the
  state (`finish`) in the same transaction; otherwise the runner goes on to the next action.
  Requirements over a `refuse` limit or outside an allow-list are not applied: the action is
  recorded Failed, its message naming the limit, and the owner blocks as on any failure;
* Pending: stops; the action runs again on a later sweep;
* Failed: the owner moves to the state's blocked counterpart in the same transaction.

An operator forcing a Failed action (or resetting it) and leaving the blocked state brings the
owner back here, and the runner continues from the lowest position with no result. An action
that raises is reported by the engine and changes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dxts.core import content_store
from dxts.core.db import Isolation, Transaction, db_now
from dxts.core.errors import InvalidArgument
from dxts.core.ids import hash_to_str, id_to_str
from dxts.core.logs import LogEntry, log_transformations, log_workgraphs
from dxts.core.plugins import ActionResult
from dxts.core.policy import Policy
from dxts.core.state_machines import BLOCKED_COUNTERPART, Actor
from dxts.core.states import ActionResult as Result
from dxts.definition.logic.lifecycle.engine import Engine, Owner
from dxts.definition.logic.lifecycle.views import AUTHOR
from dxts.definition.logic.locked import LockedWorkgraph, lock_transformation, lock_workgraph
from dxts.definition.logic.moves import move_transformations, move_workgraph
from dxts.definition.store import actions as actions_db
from dxts.definition.store import transformations as transformations_db
from dxts.definition.store.actions import ActionRecord

ACTION_RUN = "ActionRun"
MAX_STEPS = 100  # actions recorded in one run (a list is a handful; this only bounds a loop)
# Results that let the list go on.
GOOD = frozenset({Result.PASSED, Result.DONE})


class Progress(StrEnum):
    FINISHED = "finished"  # every action passed: the owner left the state
    PENDING = "pending"  # an action is still at work: run again on a later sweep
    BLOCKED = "blocked"  # an action failed: the owner is in the blocked state
    STOPPED = "stopped"  # the owner left the state meanwhile, or an action raised


@dataclass(frozen=True)
class ListOwner:
    """One owner's list: the workgraph's (transformation_id None) or a transformation's."""

    state: str
    workgraph_id: bytes | None
    transformation_id: bytes | None = None

    @property
    def owner(self) -> Owner:
        if self.transformation_id is not None:
            return Owner(transformation_id=self.transformation_id)
        return Owner(workgraph_id=self.workgraph_id)


Invoke = Callable[[ActionRecord], Awaitable[ActionResult | None]]
"""Runs one action (an Actions row); None when it failed (already reported)."""
Finish = Callable[[Transaction, "Locked"], Awaitable[None]]
"""Moves the owner out of the state once every action passed, in the caller's transaction."""


@dataclass(frozen=True)
class Locked:
    """The locked owner: its status, its workgraph (None for a standalone transformation)."""

    status: str
    workgraph: LockedWorkgraph | None
    standalone: bool
    vo: str


async def _lock(conn: Transaction, owner: ListOwner) -> Locked:
    if owner.transformation_id is None:
        assert owner.workgraph_id is not None
        workgraph = await lock_workgraph(conn, owner.workgraph_id)
        return Locked(workgraph.status, workgraph, False, workgraph.vo)
    locked = await lock_transformation(conn, owner.transformation_id)
    return Locked(locked.status, locked.workgraph, locked.standalone, locked.vo)


async def _rows(
    engine: Engine, owner: ListOwner, conn: Transaction | None = None
) -> list[ActionRecord]:
    async def read(c: Transaction) -> list[ActionRecord]:
        if owner.transformation_id is None:
            return await actions_db.list_actions(c, owner.state, workgraph_id=owner.workgraph_id)
        return await actions_db.list_actions(
            c, owner.state, transformation_ids=[owner.transformation_id]
        )

    if conn is not None:
        return await read(conn)
    async with engine.database.transaction(Isolation.READ_COMMITTED) as fresh:
        return await read(fresh)


async def _block(conn: Transaction, owner: ListOwner, locked: Locked, why: str) -> None:
    blocked = BLOCKED_COUNTERPART[owner.state]
    if owner.transformation_id is None:
        assert locked.workgraph is not None
        await move_workgraph(
            conn, locked.workgraph, blocked, actor=Actor.CORE, author=AUTHOR, message=why
        )
    else:
        await move_transformations(
            conn,
            [(owner.transformation_id, owner.state)],
            blocked,
            actor=Actor.CORE,
            author=AUTHOR,
            message=why,
            standalone=locked.standalone,
        )


async def _log(
    conn: Transaction, owner: ListOwner, row: ActionRecord, result: ActionResult
) -> None:
    data = {
        "action_id": row.action_id,
        "action": row.action,
        "state": row.state,
        "position": row.position,
        "result": result.result.value,
    }
    message = result.message or None
    if owner.transformation_id is not None:
        entry = LogEntry(owner.transformation_id, ACTION_RUN, AUTHOR, message=message, data=data)
        await log_transformations(conn, [entry])
    else:
        assert owner.workgraph_id is not None
        entry = LogEntry(owner.workgraph_id, ACTION_RUN, AUTHOR, message=message, data=data)
        await log_workgraphs(conn, [entry])


def _allowed_targets(owner: ListOwner, locked: Locked) -> set[bytes]:
    if locked.workgraph is not None:
        return {m.transformation_id for m in locked.workgraph.members}
    return {owner.transformation_id} if owner.transformation_id is not None else set()


async def apply_requirements(
    conn: Transaction,
    targets: set[bytes],
    updated: Mapping[uuid.UUID, dict[str, Any]],
    *,
    action: str,
    derivations: Mapping[uuid.UUID, dict[str, Any]] | None = None,
    policy: Policy | None = None,
) -> None:
    """Merge each update over the member's template, within `policy` (the owner's VO's: values
    over a `cap` limit lowered), and point the member at the stored result; the member's log
    says which action wrote it, from what when the action said, and what the policy lowered."""
    policy = policy or Policy()
    merged_templates = await _merged(conn, targets, updated, action)
    entries = []
    derived = {key.bytes: value for key, value in (derivations or {}).items()}
    for tid, merged in merged_templates.items():
        held = policy.capped(merged)
        (template_id,) = await content_store.put_requirements(conn, [held])
        await transformations_db.set_template(conn, tid, template_id)
        data: dict[str, Any] = {"requirements_id": hash_to_str(template_id), "requirements": held}
        if tid in derived:
            data["derived"] = derived[tid]
        lowered = {key: merged[key] for key in held if held[key] != merged[key]}
        message = f"requirements template updated by {action}"
        if lowered:
            data["capped_by_policy"] = lowered
            message += (
                " (lowered to the installation's policy: "
                + ", ".join(f"{key} {merged[key]:g} → {held[key]:g}" for key in sorted(lowered))
                + ")"
            )
        entries.append(LogEntry(tid, "Requirements", AUTHOR, message=message, data=data))
    await log_transformations(conn, entries)


async def _merged(
    conn: Transaction, targets: set[bytes], updated: Mapping[uuid.UUID, dict[str, Any]], action: str
) -> dict[bytes, dict[str, Any]]:
    """Each update merged over its member's template (a null removing a key); InvalidArgument
    for a member the action may not touch."""
    wanted = {key.bytes: value for key, value in updated.items()}
    templates = await transformations_db.templates(conn, [t for t in wanted if t in targets])
    for tid in wanted:
        if tid not in templates:
            raise InvalidArgument(
                f"{action} proposed requirements for {id_to_str(tid)}, which is not a compute "
                "member of this workgraph",
                field=f"updated_requirements[{id_to_str(tid)}]",
            )
    return {
        tid: {k: v for k, v in {**templates[tid], **update}.items() if v is not None}
        for tid, update in wanted.items()
    }


async def over_policy(
    conn: Transaction,
    targets: set[bytes],
    updated: Mapping[uuid.UUID, dict[str, Any]],
    action: str,
    policy: Policy,
) -> str | None:
    """Why the updated requirements cannot be applied under `policy` (a value over a `refuse`
    limit, a name off an allow-list), naming each member and limit; None when they can."""
    problems = [
        f"{id_to_str(tid)}: {why}"
        for tid, merged in (await _merged(conn, targets, updated, action)).items()
        for _, why in policy.requirement_problems(merged)
    ]
    if not problems:
        return None
    return f"{action} proposed requirements over the installation's policy: " + "; ".join(problems)


async def _settle(
    engine: Engine,
    owner: ListOwner,
    finish: Finish,
    *,
    failed: Any,
    following: Any,
    result: ActionResult | None,
) -> Progress | None:
    """One transaction: record `result` for `following` and take what follows from it, or (no
    result) block on a Failed row or finish. None: read the list again and go on."""

    async def work(conn: Transaction) -> Progress | None:
        locked = await _lock(conn, owner)
        if locked.status != owner.state:
            return Progress.STOPPED
        if result is None:
            if failed is not None:  # a Failed result left in a running list
                await _block(conn, owner, locked, f"action {failed.action} is Failed")
                return Progress.BLOCKED
            await finish(conn, locked)
            return Progress.FINISHED
        policy = engine.policy.for_vo(locked.vo)
        targets = _allowed_targets(owner, locked)
        verdict = result
        if result.result in GOOD and result.updated_requirements:
            refused = await over_policy(
                conn, targets, result.updated_requirements, following.action, policy
            )
            if refused is not None:  # not applied: the action failed, naming the limit
                verdict = ActionResult.failed(refused)
        recorded = await actions_db.record_result(
            conn,
            following.action_id,
            seen=following.result,
            result=verdict.result,
            message=verdict.message or None,
            now=await db_now(conn),
        )
        if not recorded:
            return None  # forced or reset meanwhile
        await _log(conn, owner, following, verdict)
        if verdict.result is Result.FAILED:
            await _block(conn, owner, locked, f"action {following.action} failed")
            return Progress.BLOCKED
        if verdict.result is Result.PENDING:
            return Progress.PENDING
        if verdict.updated_requirements:
            await apply_requirements(
                conn,
                targets,
                verdict.updated_requirements,
                action=following.action,
                derivations=verdict.derivations,
                policy=policy,
            )
        if all(r.result in GOOD for r in await _rows(engine, owner, conn)):
            await finish(conn, locked)
            return Progress.FINISHED
        return None

    try:
        return await engine.database.run(work, isolation=Isolation.READ_COMMITTED)
    except InvalidArgument as error:  # the action proposed requirements it may not
        await engine.report(owner.owner, f"{owner.state} {following.action}", error)
        return Progress.STOPPED


async def run_list(engine: Engine, owner: ListOwner, invoke: Invoke, finish: Finish) -> Progress:
    """Run the owner's list from the lowest position without a result until it finishes, waits,
    blocks, or cannot go on."""
    for _ in range(MAX_STEPS):
        rows = await _rows(engine, owner)
        failed = next((r for r in rows if r.result == Result.FAILED), None)
        following = next((r for r in rows if r.result in (None, Result.PENDING)), None)
        result = None
        if failed is None and following is not None:
            result = await invoke(following)
            if result is None:
                return Progress.STOPPED
        progress = await _settle(
            engine, owner, finish, failed=failed, following=following, result=result
        )
        if progress is not None:
            return progress
    return Progress.STOPPED
