"""The HandleFailedInput sweep: every Failed input of a transformation meets its hook.

The hook bound in the transformation's Hooks column (`{"HandleFailedInput": {"hook": name,
"args": {...}}}`, default `RetryUntilMaxErrors`) is called for each Failed input with the
input, its last parcel and the transformation, and its decision is applied by the core, one
transaction per batch: ToUnassigned → Unassigned; ToProblematic → Problematic; SplitInto → the
children inserted Unassigned (carrying the parent's ErrorCount) and the parent Split, together;
RetryWith → Unassigned, with what it asks of the next parcel (raised requirements, another
backend) kept on the failed parcel's annotations (`retry_with`), where the packing core reads
it; WriteOff → NotProcessed, its reason logged (`InputWrittenOff`).

* A decision's `note` (why it was taken: the retry rule that fired, say) is logged with it: one
  `FailedInputDecided` row per decision and note in each batch, naming the inputs (the first 20)
  and how many.

* The reason of a Problematic input is kept as an `InputProblematic` row of the
  TransformationLog (message: the reason, data: the input id): the Inputs table has no column
  for it, and a quarantine is rare enough for the log that survives cleaning.
* A hook that raises or decides something invalid leaves its input Failed for the next sweep;
  the failures of one pass are recorded as one `HookFailed` log row and counted.
* Once the workgraph is halted, Failed inputs are written off (NotProcessed) instead of handled.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from dxts.core.adaptor.codec import failure_from_json
from dxts.core.db import Database, Isolation, Transaction, db_now
from dxts.core.errors import DxtsError
from dxts.core.ids import id_to_str
from dxts.core.logs import LogEntry, log_transformations
from dxts.core.plugins import (
    Decision,
    InputRecord,
    Parcel,
    Point,
    Registry,
    RetryWith,
    SplitInto,
    ToProblematic,
    ToUnassigned,
    WriteOff,
)
from dxts.core.state_machines import Actor
from dxts.core.states import InputStatus, Kind, ParcelStatus
from dxts.execution.logic import operations
from dxts.execution.logic.parcel_annotations import OUTCOME, REASON
from dxts.execution.logic.splits import child_row
from dxts.execution.logic.transformations import ActiveTransformation
from dxts.execution.metrics import FAILED_INPUTS_DECIDED, PLUGIN_FAILURES
from dxts.execution.records import FailedInput
from dxts.execution.store import failed_inputs as db
from dxts.execution.store import splits as rows
from dxts.execution.store.common import move_inputs

log = logging.getLogger(__name__)

RC = Isolation.READ_COMMITTED
DEFAULT_HOOK = "RetryUntilMaxErrors"
BATCH = 500
LOGGED_INPUTS = 20  # input ids a FailedInputDecided row names
AUTHOR = "execution"
I = InputStatus  # noqa: E741 - the state table's name


@dataclass
class Handled:
    """What one pass over a transformation's Failed inputs did."""

    decided: Counter[str] = field(default_factory=Counter)  # by decision
    written_off: int = 0
    hook_failures: int = 0


def binding(transformation: ActiveTransformation) -> tuple[str, Any]:
    """The HandleFailedInput hook bound to the transformation, and its args."""
    bound = transformation.hooks.get(Point.HANDLE_FAILED_INPUT) or {}
    return bound.get("hook") or DEFAULT_HOOK, bound.get("args")


def _record(row: FailedInput) -> InputRecord:
    return InputRecord(
        id=UUID(bytes=row.input_id),
        lfn=row.lfn,
        lfn_size=row.lfn_size,
        descriptor=row.descriptor,
        status=I.FAILED,
        error_count=row.error_count,
        parent_id=UUID(bytes=row.parent_input_id) if row.parent_input_id else None,
    )


def _parcel(row: FailedInput) -> Parcel | None:
    if row.last_parcel_id is None or row.parcel_status is None or row.parcel_kind is None:
        return None
    annotations = row.annotations if isinstance(row.annotations, dict) else {}
    reason = annotations.get(REASON)
    outcome = annotations.get(OUTCOME)
    outcome = outcome if isinstance(outcome, dict) else {}
    exit_code = outcome.get("exit_code")
    failure = outcome.get("failure")
    failure = failure_from_json(failure) if isinstance(failure, dict) else None
    return Parcel(
        id=UUID(bytes=row.last_parcel_id),
        kind=Kind(row.parcel_kind),
        status=ParcelStatus(row.parcel_status),
        backend=row.backend,
        reason=reason if isinstance(reason, str) else None,
        annotations=annotations,
        raw_status=outcome.get("backend_status") or None,
        exit_code=exit_code if isinstance(exit_code, int) else None,
        message=outcome.get("message") or None,
        requirements=row.requirements if isinstance(row.requirements, dict) else {},
        failure_class=failure.failure_class if failure else None,
        tool_message=(failure.tool_message or None) if failure else None,
    )


async def handle_failed_inputs(
    database: Database,
    registry: Registry,
    transformation: ActiveTransformation,
    *,
    batch: int = BATCH,
) -> Handled:
    """Decide every input of the transformation that is Failed now (one pass)."""
    handled = Handled()
    tid = transformation.id
    if transformation.halted:
        handled.written_off = await operations.write_off_inputs(
            database, tid, statuses=[I.FAILED], batch=batch
        )
        return handled
    name, args = binding(transformation)
    view = transformation.view()
    failures: list[str] = []
    after: bytes | None = None
    while True:
        page = await database.run(
            functools.partial(db.failed_page, transformation_id=tid, after=after, limit=batch),
            isolation=RC,
        )
        if not page:
            break
        after = page[-1].input_id
        decisions: list[tuple[FailedInput, Decision]] = []
        for row in page:
            try:
                decision = await registry.call(
                    Point.HANDLE_FAILED_INPUT,
                    name,
                    args,
                    phase=transformation.phase,
                    transformation=view,
                    input=_record(row),
                    parcel=_parcel(row),
                )
            except DxtsError as error:
                failures.append(f"{id_to_str(row.input_id)}: {error}")
                continue
            decisions.append((row, decision))
        applied = await database.run(
            functools.partial(apply_decisions, transformation_id=tid, decisions=decisions),
            isolation=RC,
        )
        handled.decided.update(applied.decided)
        if len(page) < batch:
            break
    for decision, count in handled.decided.items():
        FAILED_INPUTS_DECIDED.labels(decision).inc(count)
    if failures:
        handled.hook_failures = len(failures)
        PLUGIN_FAILURES.labels(Point.HANDLE_FAILED_INPUT.value, name).inc(len(failures))
        log.warning(
            "HandleFailedInput %s failed for %d inputs of %s; first: %s",
            name,
            len(failures),
            id_to_str(tid),
            failures[0],
        )
        await database.run(lambda conn: _log_failures(conn, tid, name, failures), isolation=RC)
    return handled


@dataclass
class Applied:
    """What applying a batch of decisions did: counts by decision, the split children made."""

    decided: Counter[str] = field(default_factory=Counter)
    children: list[bytes] = field(default_factory=list)


async def apply_decisions(
    conn: Transaction,
    transformation_id: bytes,
    decisions: list[tuple[FailedInput, Decision]],
    *,
    actor: Actor = Actor.HOOK,
) -> Applied:
    """Apply the decisions on the inputs still Failed (locked first), as the hook's or, in its
    place, an operator's (`actor`, which the log rows name as `by`)."""
    still = await db.lock_failed(conn, transformation_id, [row.input_id for row, _ in decisions])
    now = await db_now(conn)
    by_target: dict[str, list[bytes]] = defaultdict(list)
    reasons: list[LogEntry] = []
    children: list[dict[str, Any]] = []
    skipped = 0
    existing = await rows.existing_hashes(
        conn,
        transformation_id,
        [c.input_hash for _, d in decisions if isinstance(d, SplitInto) for c in d.children],
    )
    applied = Applied()
    directives: dict[bytes, dict[str, Any]] = {}  # failed ParcelID → its annotations, directed
    noted: dict[tuple[str, str], list[bytes]] = defaultdict(list)
    for row, decision in decisions:
        input_id = row.input_id
        if input_id not in still:
            continue
        applied.decided[type(decision).__name__] += 1
        if decision.note:
            noted[(type(decision).__name__, decision.note)].append(input_id)
        if isinstance(decision, ToUnassigned):
            by_target[I.UNASSIGNED].append(input_id)
        elif isinstance(decision, RetryWith):
            by_target[I.UNASSIGNED].append(input_id)
            if row.last_parcel_id is not None:
                parcel_id = row.last_parcel_id
                annotations = directives.get(parcel_id)
                if annotations is None:
                    annotations = dict(row.annotations) if isinstance(row.annotations, dict) else {}
                annotations[db.RETRY_WITH] = merge_directives(
                    annotations.get(db.RETRY_WITH), directive(decision)
                )
                directives[parcel_id] = annotations
        elif isinstance(decision, WriteOff):
            by_target[I.NOT_PROCESSED].append(input_id)
            reasons.append(
                LogEntry(
                    transformation_id,
                    "InputWrittenOff",
                    AUTHOR,
                    message=decision.reason,
                    data={"input_id": id_to_str(input_id), "by": actor.value},
                )
            )
        elif isinstance(decision, ToProblematic):
            by_target[I.PROBLEMATIC].append(input_id)
            reasons.append(
                LogEntry(
                    transformation_id,
                    "InputProblematic",
                    AUTHOR,
                    message=decision.reason,
                    data={"input_id": id_to_str(input_id), "by": actor.value},
                )
            )
        else:
            by_target[I.SPLIT].append(input_id)
            for child in decision.children:
                if child.input_hash in existing:
                    skipped += 1
                    continue
                existing.add(child.input_hash)
                children.append(child_row(transformation_id, input_id, still[input_id], child, now))
    if skipped:
        reasons.append(
            LogEntry(
                transformation_id,
                "SplitChildExists",
                AUTHOR,
                message=f"{skipped} split child(ren) already in the transformation: not inserted",
            )
        )
    await rows.insert_inputs(conn, children)
    applied.children = [child["InputID"] for child in children]
    for target, ids in by_target.items():
        await move_inputs(
            conn, transformation_id, ids, source=I.FAILED, target=target, actor=actor, now=now
        )
    await db.annotate_parcels(conn, directives)
    reasons.extend(
        LogEntry(
            transformation_id,
            "FailedInputDecided",
            AUTHOR,
            message=note,
            data={
                "decision": kind,
                "by": actor.value,
                "count": len(ids),
                "inputs": [id_to_str(input_id) for input_id in ids[:LOGGED_INPUTS]],
            },
        )
        for (kind, note), ids in noted.items()
    )
    await log_transformations(conn, reasons)
    return applied


def directive(decision: RetryWith) -> dict[str, Any]:
    """What a RetryWith asks of the next parcel, as kept on the failed one."""
    kept: dict[str, Any] = {}
    if decision.requirements:
        kept["requirements"] = decision.requirements
    if decision.backend is not None:
        kept["backend"] = decision.backend
    return kept


def merge_directives(first: Any, second: dict[str, Any]) -> dict[str, Any]:
    """Two directives as one: the larger of two numbers a requirement is raised to, the second's
    value otherwise (inputs packed together ask their parcel for the most any of them needs)."""
    if not isinstance(first, dict):
        return dict(second)
    requirements = dict(first.get("requirements") or {})
    for key, value in (second.get("requirements") or {}).items():
        before = requirements.get(key)
        numbers = all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in (before, value)
        )
        requirements[key] = max(before, value) if numbers else value
    merged = {**first, **second}
    if requirements:
        merged["requirements"] = requirements
    return merged


async def _log_failures(
    conn: Transaction, transformation_id: bytes, name: str, failures: list[str]
) -> None:
    await log_transformations(
        conn,
        [
            LogEntry(
                transformation_id,
                "HookFailed",
                AUTHOR,
                message=f"HandleFailedInput {name} failed for {len(failures)} input(s); first: "
                f"{failures[0]}",
                data={"hook": name, "failures": failures[:20]},
            )
        ],
    )
