"""A hook's Operations applied: the core writes what a plugin proposed (docs/extensions.md).

One READ COMMITTED transaction per batch (a workgraph hook's dict, or one member's operation):
the workgraph row locked first (or the standalone transformation's), the owner still in a state
the hook runs in, then per target

* `feeder_args` — validated against the feeder for every phase it will still run in, stored,
  logged (`FeederArgs`, with the previous arguments);
* `feeder_enabled` — stored and logged (`FeederEnabled` / `FeederDisabled`); a halted workgraph's
  feeders stay off; a feeder enabled after it said NoMoreInputs is reset by execution first
  (`dxts.definition.logic.feeders.reset_exhausted`);
* `pause` — Active → Paused, taken by the hook (a state change with its log row);
* `flush` — on an Active member of a workgraph that is not halted: `flushed_at` recorded in the
  transformation's annotations (what PeriodicFlush reads), a `Flush` log row, and after the
  commit one packer invocation with flush=True asked of execution; a packer that fails there
  is logged by execution on the member (PackerFailed), and a flush execution did not run
  (unavailable, or its packer busy past the wait) here (FlushFailed): either is an attention
  item of the member;
* `remember` — the hook's memory, stored in the annotations (`HOOK_MEMORY`).

An operation on a target that is no longer running (New, Active or Paused) is dropped. A batch
with an invalid proposal writes nothing and raises InvalidArgument, which the sweep reports as
the plugin's failure.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from dxts.core.builtins.lifecycle_hooks import FLUSHED_AT
from dxts.core.db import Isolation, Transaction, db_now
from dxts.core.errors import DxtsError
from dxts.core.ids import id_to_str
from dxts.core.logs import LogEntry, log_transformations
from dxts.core.plugins import Operation
from dxts.core.plugins.points import Phase, PluginKind, Point
from dxts.core.plugins.proposals import HOOK_MEMORY
from dxts.core.state_machines import Actor
from dxts.core.states import TransformationStatus
from dxts.definition.logic.feeders import FEEDER_STATES, reset_exhausted
from dxts.definition.logic.lifecycle.engine import Engine, hook_author
from dxts.definition.logic.locked import lock_transformation, lock_workgraph
from dxts.definition.logic.moves import move_transformations
from dxts.definition.store import transformations as transformations_db
from dxts.definition.store.attention import FLUSH_FAILED

log = logging.getLogger(__name__)

T = TransformationStatus


@dataclass(frozen=True)
class _Target:
    status: str
    feeder: str | None
    feeder_args: Any
    feeder_enabled: bool
    annotations: dict[str, Any]


async def _targets(
    conn: Transaction,
    workgraph_id: bytes | None,
    ids: Collection[bytes],
    states: Collection[str],
) -> tuple[dict[bytes, _Target], bool] | None:
    """The targets, locked, and whether the workgraph is halted; None when the owner left the
    states the hook runs in."""
    if workgraph_id is not None:
        workgraph = await lock_workgraph(conn, workgraph_id)
        if workgraph.status not in states:
            return None
        members = {
            m.transformation_id: _Target(
                m.status, m.feeder, m.feeder_args, m.feeder_enabled, m.annotations
            )
            for m in workgraph.members
        }
        return members, workgraph.halted
    (transformation_id,) = ids
    alone = await lock_transformation(conn, transformation_id)
    if alone.status not in states:
        return None
    target = _Target(
        alone.status, alone.feeder, alone.feeder_args, alone.feeder_enabled, alone.annotations
    )
    return {transformation_id: target}, False


async def apply_operations(
    engine: Engine,
    operations: Mapping[bytes, Operation],
    *,
    hook: str,
    states: Collection[str],
    phases: Collection[Phase],
    workgraph_id: bytes | None,
) -> None:
    """Apply one batch in one transaction, then forward its flushes.

    `workgraph_id` None means a standalone transformation's own operation; `states` are the
    owner's states the hook runs in (the workgraph's, or the standalone transformation's)."""
    if not operations:
        return
    author = hook_author(hook)
    flushes: list[bytes] = []
    enabling = [tid for tid, operation in operations.items() if operation.feeder_enabled]
    exhausted = await reset_exhausted(
        engine.database, engine.control, enabling, request_id=str(uuid.uuid4())
    )

    async def work(conn: Transaction) -> None:
        flushes.clear()
        found = await _targets(conn, workgraph_id, list(operations), states)
        if found is None:
            return
        targets, halted = found
        now = await db_now(conn)
        entries = []
        for tid, operation in operations.items():
            target = targets.get(tid)
            if target is None or target.status not in FEEDER_STATES:
                continue
            if operation.feeder_args is not None:
                for phase in phases:
                    engine.registry.validate_args(
                        PluginKind.FEEDER,
                        target.feeder,
                        operation.feeder_args,
                        phase=phase,
                        point=Point.FEEDER,
                        name_field=f"result[{id_to_str(tid)}].feeder",
                        args_field=f"result[{id_to_str(tid)}].feeder_args",
                    )
                await transformations_db.set_feeder_args(conn, tid, operation.feeder_args, now)
                entries.append(
                    LogEntry(
                        tid,
                        "FeederArgs",
                        author,
                        data={"args": operation.feeder_args, "previous": target.feeder_args},
                    )
                )
            enable = operation.feeder_enabled
            was_on = target.feeder_enabled and tid not in exhausted
            if enable is not None and enable != was_on and not (enable and halted):
                await transformations_db.set_feeders_enabled(conn, [tid], enable, now)
                entries.append(
                    LogEntry(tid, "FeederEnabled" if enable else "FeederDisabled", author)
                )
            status = target.status
            if operation.pause and status == T.ACTIVE:
                await move_transformations(
                    conn,
                    [(tid, status)],
                    T.PAUSED,
                    actor=Actor.HOOK,
                    author=author,
                    message="paused by its hook",
                    standalone=workgraph_id is None,
                )
                status = T.PAUSED
            annotations = dict(target.annotations)
            if operation.remember is not None:
                annotations[HOOK_MEMORY] = operation.remember
            if operation.flush and status == T.ACTIVE and not halted:
                stamp = (now if now.tzinfo else now.replace(tzinfo=UTC)).isoformat()
                annotations[FLUSHED_AT] = stamp
                entries.append(LogEntry(tid, "Flush", author))
                flushes.append(tid)
            if annotations != target.annotations:
                await transformations_db.set_transformation_annotations(conn, tid, annotations, now)
        await log_transformations(conn, entries)

    await engine.database.run(work, isolation=Isolation.READ_COMMITTED)
    failed: list[LogEntry] = []
    for tid in flushes:
        try:
            flushed = await engine.control.flush(uuid.UUID(bytes=tid), request_id=str(uuid.uuid4()))
        except DxtsError as error:
            # The packer never ran (execution away, or busy past the wait): said on the member,
            # where its attention finds it (`logic.attention`), as a packer's failure would be.
            log.warning("flush of %s not forwarded: %s", id_to_str(tid), error)
            kind = type(error).__name__
            failed.append(
                LogEntry(
                    tid,
                    FLUSH_FAILED,
                    author,
                    message=str(error),
                    data={"error": kind, "flush": True},
                )
            )
            continue
        if flushed.failure:
            # Execution logged it on the member (PackerFailed, flush: true), which its attention
            # quotes (`logic.attention`): not logged twice.
            log.warning(
                "flush of %s by %s: its packer failed (%s): %s",
                id_to_str(tid),
                author,
                flushed.failure_class,
                flushed.failure,
            )
    if failed:
        await engine.database.run(
            lambda conn: log_transformations(conn, failed), isolation=Isolation.READ_COMMITTED
        )
