"""The workgraph sweep: periodic, one task per workgraph under its named lock.

Each round (run by the kernel's `SweepRunner`: at once again after a round that moved
something, backing off up to `interval_s` while nothing moves) lists the workgraphs with work
(Scouting, Approving, Active, Finalizing, Completed, Archiving, Cancelling) and the standalone
transformations (Active, Finalizing, Archiving, Cancelling), and runs up to `concurrency` of
them at a time. Each runs under `Lock(LockKind.LIFECYCLE, id)`, skipped rather than waited for when
another replica holds it; a workgraph that changes state is handled again at once in its new
state (Accept → the approving list → Active ...), up to a few steps per round.

By state:

* Scouting — the ScoutingToApproving hook (the workgraph's binding, else the configured
  default): Accept → Approving (taken by the hook); operations → applied.
* Approving — the workgraph's action list; all passed → Active, starting the members held until
  approval (MEMBER_FAN_OUT), a failure → ApprovingBlocked.
* Active — unless halted (a halted workgraph's hooks are stopped): the workgraph's Active hook
  and its operations; then each Active member's Active hook, concurrently, each operation
  applied as it returns (after the workgraph's, which therefore comes first); then the drain
  guard → Finalizing.
* Finalizing, Archiving, Cancelling — each member's list once every member it depends on (its
  Edge producer, its `after` members) has finished its own: upstream first, independent members
  together, a blocked member holding back its downstream; all finished → Completed, Archived,
  Cancelled.
* Completed — Archiving once the workgraph has been Completed for `archive_delay_s`.

A standalone transformation gets its Active hook while Active and its lists in Finalizing,
Archiving and Cancelling; every other edge it takes by operator (docs/architecture.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from dxts.core.db import Isolation, Transaction, db_now
from dxts.core.errors import DxtsError
from dxts.core.kernel.sweeps import KeyedSweep
from dxts.core.locks import LockKind, LockManager
from dxts.core.plugins import Accept, ActionResult
from dxts.core.plugins.points import Phase, Point
from dxts.core.state_machines import Actor
from dxts.core.states import TransformationStatus, WorkgraphStatus
from dxts.definition.logic import queries
from dxts.definition.logic.lifecycle.actions_runner import ListOwner, Locked, Progress, run_list
from dxts.definition.logic.lifecycle.drain import drain_guard
from dxts.definition.logic.lifecycle.engine import Engine, Owner, binding, hook_author
from dxts.definition.logic.lifecycle.operations import apply_operations
from dxts.definition.logic.lifecycle.views import (
    AUTHOR,
    SERVICE,
    as_uuid,
    read_workgraph,
    transformation_view,
    upstream,
    workgraph_view,
)
from dxts.definition.logic.locked import lock_workgraph
from dxts.definition.logic.moves import move_transformations, move_workgraph
from dxts.definition.logic.queries import TransformationView, WorkgraphDetail
from dxts.definition.store import sweep as sweep_db

log = logging.getLogger(__name__)

W, T = WorkgraphStatus, TransformationStatus
STEPS = 6  # states one workgraph may go through in one sweep
ACTION_POINTS = {
    "Approving": Point.APPROVING,
    "Finalizing": Point.FINALIZING,
    "Archiving": Point.ARCHIVING,
    "Cancelling": Point.CLEANING,
}
# Workgraph state → (the members' list state, a member's state once its list is done, the
# workgraph's state once every member's is).
MEMBER_LISTS = {
    W.FINALIZING: (T.FINALIZING, T.FINALIZED, W.COMPLETED),
    W.ARCHIVING: (T.ARCHIVING, T.ARCHIVED, W.ARCHIVED),
    W.CANCELLING: (T.CANCELLING, T.CANCELLED, W.CANCELLED),
}
STANDALONE_DONE = {T.FINALIZING: T.FINALIZED, T.ARCHIVING: T.ARCHIVED, T.CANCELLING: T.CANCELLED}


def ready(
    statuses: Mapping[bytes, str], depends: Mapping[bytes, set[bytes]], running: str, done: str
) -> list[bytes]:
    """Members whose list may run now: in the list's state, every upstream member done."""
    return [
        tid
        for tid, status in statuses.items()
        if status == running
        and all(statuses.get(up) == done for up in depends.get(tid, ()) if up in statuses)
    ]


# An owner of a lifecycle (a workgraph or a standalone transformation) and how to move it.
Owned = tuple[Callable[[bytes], Awaitable[int]], bytes]


async def _moves(owned: Owned) -> int:
    moves, owner = owned
    return await moves(owner)


class LifecycleSweep:
    def __init__(self, engine: Engine, locks: LockManager) -> None:
        self.engine = engine
        self.locks = locks
        self.running = 0  # owners under way at the last round: their members move meanwhile
        # Every owner under its lifecycle lock, `concurrency` at a time; one that fails is
        # logged and retried by the next round.
        self.owners: KeyedSweep[Owned] = KeyedSweep(
            LockKind.LIFECYCLE, locks, engine.settings.concurrency, key=lambda owned: owned[1]
        )

    def pending(self) -> bool:
        """Whether the last round saw an owner under way: its members' progress (execution's,
        accounting's) can let it move at any moment, so the runner keeps idle waits short."""
        return self.running > 0

    # -- running --------------------------------------------------------------------------------

    async def sweep_once(self) -> int:
        """One round over every owner with work; how many states the owners went through (0:
        nothing moved, so the runner backs off)."""
        async with self.engine.database.transaction(Isolation.READ_COMMITTED) as conn:
            workgraphs, standalone, self.running = await sweep_db.sweepable(conn)
        owners = [
            *((self._workgraph_moves, w) for w in workgraphs),
            *((self._standalone_moves, t) for t in standalone),
        ]
        return sum(await self.owners.run(owners, _moves))

    # -- a workgraph ----------------------------------------------------------------------------

    async def sweep_workgraph(self, workgraph_id: bytes) -> bool:
        """Handle one workgraph until it stops changing state; False if another holder had it."""
        return bool(await self.owners.run([(self._workgraph_moves, workgraph_id)], _moves))

    async def _workgraph_moves(self, workgraph_id: bytes) -> int:
        """How many states the workgraph went through (its lifecycle lock held)."""
        moves = 0
        for _ in range(STEPS):
            detail = await read_workgraph(self.engine.database, workgraph_id)
            status = detail.workgraph.status
            if status in MEMBER_LISTS:
                moved = await self._member_lists(detail)
            else:
                handler = self._handlers.get(status)
                moved = handler is not None and await handler(self, detail)
            if not moved:
                break
            moves += 1
        return moves

    async def _overviews(self, members: tuple[TransformationView, ...]) -> dict[Any, Any]:
        return await self.engine.counts.inputs([as_uuid(m.transformation_id) for m in members])

    async def _scouting(self, detail: WorkgraphDetail) -> bool:
        workgraph = detail.workgraph
        bound = binding(workgraph.hooks, "ScoutingToApproving")
        if bound is None and self.engine.settings.default_scouting_hook:
            bound = (self.engine.settings.default_scouting_hook, None)
        if bound is None:
            return False
        name, args = bound
        owner = Owner(workgraph_id=workgraph.workgraph_id)
        try:
            overviews = await self._overviews(detail.members)
        except DxtsError as error:
            await self.engine.report(owner, "counts", error)
            return False
        ok, result = await self.engine.call(
            owner,
            Point.SCOUTING_TO_APPROVING,
            name,
            args,
            phase=Phase.SCOUTING,
            workgraph=workgraph_view(detail),
            transformations=[transformation_view(m) for m in detail.members],
            input_overviews=overviews,
        )
        if not ok:
            return False
        if isinstance(result, Accept):
            return await self._accept(workgraph.workgraph_id, name, result.reason)
        await self._apply(
            owner,
            {key.bytes: op for key, op in result.items()},
            hook=name,
            states=(W.SCOUTING,),
            phases=(Phase.SCOUTING, Phase.ACTIVE),
            workgraph_id=workgraph.workgraph_id,
        )
        return False

    async def _accept(self, workgraph_id: bytes, hook: str, reason: str) -> bool:
        async def work(conn: Transaction) -> bool:
            locked = await lock_workgraph(conn, workgraph_id)
            if locked.status != W.SCOUTING:
                return False
            await move_workgraph(
                conn,
                locked,
                W.APPROVING,
                actor=Actor.HOOK,
                author=hook_author(hook),
                message=f"scout accepted: {reason}" if reason else "scout accepted",
            )
            return True

        return await self.engine.database.run(work, isolation=Isolation.READ_COMMITTED)

    async def _apply(self, owner: Owner, operations: Mapping[bytes, Any], **how: Any) -> None:
        try:
            await apply_operations(self.engine, operations, **how)
        except DxtsError as error:  # an invalid proposal: nothing of the batch was written
            await self.engine.report(owner, f"operations of {how['hook']}", error)

    async def _approving(self, detail: WorkgraphDetail) -> bool:
        workgraph = detail.workgraph
        owner = ListOwner("Approving", workgraph.workgraph_id)
        view = workgraph_view(detail)
        members = [transformation_view(m) for m in detail.members]

        async def invoke(row: Any) -> ActionResult | None:
            try:
                overviews = await self._overviews(detail.members)
            except DxtsError as error:
                await self.engine.report(owner.owner, "counts", error)
                return None
            ok, result = await self.engine.call(
                owner.owner,
                Point.APPROVING,
                row.action,
                row.args,
                phase=Phase.ACTIVE,
                workgraph=view,
                transformations=members,
                input_overviews=overviews,
            )
            return result if ok else None

        async def approve(conn: Transaction, locked: Locked) -> None:
            assert locked.workgraph is not None
            await move_workgraph(
                conn,
                locked.workgraph,
                W.ACTIVE,
                actor=Actor.CORE,
                author=AUTHOR,
                message="every approving action passed",
            )

        progress = await run_list(self.engine, owner, invoke, approve)
        return progress in (Progress.FINISHED, Progress.BLOCKED)

    async def _active(self, detail: WorkgraphDetail) -> bool:
        workgraph = detail.workgraph
        owner = Owner(workgraph_id=workgraph.workgraph_id)
        if not workgraph.halted:
            try:
                await self._active_hooks(detail)
            except DxtsError as error:
                await self.engine.report(owner, "counts", error)
            detail = await read_workgraph(self.engine.database, workgraph.workgraph_id)
        try:
            return await drain_guard(self.engine, detail)
        except DxtsError as error:
            await self.engine.report(owner, "drain guard", error)
            return False

    async def _active_hooks(self, detail: WorkgraphDetail) -> None:
        """The workgraph's Active hook and its operations, then every member's, concurrently."""
        workgraph = detail.workgraph
        wid = workgraph.workgraph_id
        bound = binding(workgraph.hooks, "Active")
        if bound is None and not any(
            m.status == T.ACTIVE and binding(m.hooks, "Active") for m in detail.members
        ):
            return
        overviews = await self._overviews(detail.members)
        if bound is not None:
            name, args = bound
            ok, result = await self.engine.call(
                Owner(workgraph_id=wid),
                Point.WORKGRAPH_ACTIVE,
                name,
                args,
                phase=Phase.ACTIVE,
                workgraph=workgraph_view(detail),
                transformations=[transformation_view(m) for m in detail.members],
                input_overviews=overviews,
            )
            if ok and result:
                await self._apply(
                    Owner(workgraph_id=wid),
                    {key.bytes: op for key, op in result.items()},
                    hook=name,
                    states=(W.ACTIVE,),
                    phases=(Phase.ACTIVE,),
                    workgraph_id=wid,
                )
                detail = await read_workgraph(self.engine.database, wid)
        await asyncio.gather(
            *(
                self._member_hook(m, overviews.get(as_uuid(m.transformation_id), {}), wid)
                for m in detail.members
                if m.status == T.ACTIVE
            )
        )

    async def _member_hook(
        self, member: TransformationView, overview: Any, workgraph_id: bytes | None
    ) -> None:
        bound = binding(member.hooks, "Active")
        if bound is None:
            return
        name, args = bound
        owner = Owner(transformation_id=member.transformation_id)
        ok, operation = await self.engine.call(
            owner,
            Point.TRANSFORMATION_ACTIVE,
            name,
            args,
            phase=Phase.ACTIVE,
            transformation=transformation_view(member),
            input_overview=overview,
        )
        if ok and operation is not None:
            await self._apply(
                owner,
                {member.transformation_id: operation},
                hook=name,
                states=(W.ACTIVE,) if workgraph_id is not None else (T.ACTIVE,),
                phases=(Phase.ACTIVE,),
                workgraph_id=workgraph_id,
            )

    async def _completed(self, detail: WorkgraphDetail) -> bool:
        workgraph = detail.workgraph

        async def work(conn: Transaction) -> bool:
            locked = await lock_workgraph(conn, workgraph.workgraph_id)
            now = await db_now(conn)
            since = workgraph.updated_at
            elapsed = (_aware(now) - _aware(since)).total_seconds()
            if locked.status != W.COMPLETED or elapsed < self.engine.settings.archive_delay_s:
                return False
            await move_workgraph(
                conn,
                locked,
                W.ARCHIVING,
                actor=Actor.CORE,
                author=AUTHOR,
                message="archive delay elapsed",
            )
            return True

        return await self.engine.database.run(work, isolation=Isolation.READ_COMMITTED)

    async def _member_lists(self, detail: WorkgraphDetail) -> bool:
        """Run the members' lists upstream first; the workgraph moves on once all are done."""
        wid, state = detail.workgraph.workgraph_id, detail.workgraph.status
        running, done, after = MEMBER_LISTS[WorkgraphStatus(state)]
        depends = upstream(detail.members)
        tried: set[bytes] = set()  # a member whose list waits runs again on a later sweep
        while True:
            members = {m.transformation_id: m for m in detail.members}
            statuses = {tid: m.status for tid, m in members.items()}
            runnable = [t for t in ready(statuses, depends, running, done) if t not in tried]
            if not runnable:
                break
            tried.update(runnable)
            results = await asyncio.gather(
                *(self._member_list(members[tid], running, done, wid) for tid in runnable)
            )
            detail = await read_workgraph(self.engine.database, wid)
            if detail.workgraph.status != state:
                return True
            if Progress.FINISHED not in results:
                break
        if any(m.status != done for m in detail.members):
            return False

        async def work(conn: Transaction) -> bool:
            locked = await lock_workgraph(conn, wid)
            if locked.status != state:
                return False
            await move_workgraph(
                conn,
                locked,
                after,
                actor=Actor.CORE,
                author=AUTHOR,
                message=f"every member {done}",
            )
            return True

        return await self.engine.database.run(work, isolation=Isolation.READ_COMMITTED)

    async def _member_list(
        self, member: TransformationView, running: str, done: str, workgraph_id: bytes | None
    ) -> Progress:
        tid = member.transformation_id
        owner = ListOwner(running, workgraph_id, tid)
        view = transformation_view(member)

        async def invoke(row: Any) -> ActionResult | None:
            try:
                overview = (await self.engine.counts.inputs([view.id])).get(view.id, {})
            except DxtsError as error:
                await self.engine.report(owner.owner, "counts", error)
                return None
            ok, result = await self.engine.call(
                owner.owner,
                ACTION_POINTS[running],
                row.action,
                row.args,
                phase=Phase.ACTIVE,
                transformation=view,
                input_overview=overview,
            )
            return result if ok else None

        async def finish(conn: Transaction, locked: Locked) -> None:
            await move_transformations(
                conn,
                [(tid, running)],
                done,
                actor=Actor.CORE,
                author=AUTHOR,
                message=f"every {running} action done",
                standalone=locked.standalone,
            )

        return await run_list(self.engine, owner, invoke, finish)

    _handlers: dict[str, Callable[[LifecycleSweep, WorkgraphDetail], Awaitable[bool]]] = {
        W.SCOUTING: _scouting,
        W.APPROVING: _approving,
        W.ACTIVE: _active,
        W.COMPLETED: _completed,
    }

    # -- a standalone transformation ------------------------------------------------------------

    async def sweep_standalone(self, transformation_id: bytes) -> bool:
        """Run a standalone transformation's hook or list; False if another holder had it."""
        return bool(await self.owners.run([(self._standalone_moves, transformation_id)], _moves))

    async def _standalone_moves(self, transformation_id: bytes) -> int:
        """1 when the transformation left its list's state, else 0 (its lifecycle lock held)."""
        found = await queries.get_transformation(self.engine.database, SERVICE, transformation_id)
        member = found.transformation
        if member.workgraph_id is not None:
            return 0
        if member.status == T.ACTIVE:
            try:
                overview = await self.engine.counts.inputs([as_uuid(transformation_id)])
            except DxtsError as error:
                await self.engine.report(
                    Owner(transformation_id=transformation_id), "counts", error
                )
                return 0
            await self._member_hook(member, overview.get(as_uuid(transformation_id), {}), None)
        elif member.status in STANDALONE_DONE:
            progress = await self._member_list(
                member,
                member.status,
                STANDALONE_DONE[TransformationStatus(member.status)],
                None,
            )
            return int(progress in (Progress.FINISHED, Progress.BLOCKED))
        return 0


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)
