"""An operator's decision on one Failed input, taken in its HandleFailedInput hook's place.

The hook decides every Failed input of an Active member on its own; a person steps in when it
cannot (a member paused to look at its failures, a hook failing on an input) and decides as the
hook would: retry the input (on another backend, or asking more of its next parcel), write it
off, or split it into finer children, with a reason.

DecideFailedInput runs as the kernel's one-transaction command (`run_command`): the input's row
is locked, which serialises every decision on it (a retry of the same request waits, then
answers the result the first recorded in the transformation's log); the decision goes through
the hook's own path (`failed_inputs.apply_decisions`: the conditional UPDATE from Failed with its
journal, the children of a split, a retry's directive on the failed parcel), as the operator's;
the command's log row commits with it. Rights are checked by the edge before (definition says
who steers the transformation), as for execution's other commands. An input that is not Failed
(the hook or another person decided it first) is refused, naming its state.
"""

from __future__ import annotations

from dataclasses import dataclass

from dxts.core.db import Database, Transaction
from dxts.core.errors import FailedPrecondition, NotFound
from dxts.core.identity import Identity
from dxts.core.ids import id_from_str, id_to_str
from dxts.core.kernel.commands import LogScope, Request, Result, run_command
from dxts.core.plugins import Decision, RetryWith, SplitInto, ToUnassigned, WriteOff
from dxts.core.state_machines import Actor
from dxts.core.states import InputStatus
from dxts.execution.logic.failed_inputs import apply_decisions
from dxts.execution.records import FailedInput
from dxts.execution.store import failed_inputs as db

I = InputStatus  # noqa: E741 - the state table's name


@dataclass(frozen=True)
class Decided:
    """The input's status after the decision, and the split children it made."""

    status: InputStatus
    children: tuple[bytes, ...] = ()


def status_after(decision: Decision) -> InputStatus:
    """Where a decision takes a Failed input."""
    if isinstance(decision, ToUnassigned | RetryWith):
        return I.UNASSIGNED
    if isinstance(decision, WriteOff):
        return I.NOT_PROCESSED
    if isinstance(decision, SplitInto):
        return I.SPLIT
    return I.PROBLEMATIC


async def decide_failed_input(
    database: Database,
    request: Request,
    transformation_id: bytes,
    input_id: bytes,
    decision: Decision,
) -> Decided:
    """Apply an operator's decision to one Failed input, once per request id."""

    async def lock(conn: Transaction) -> tuple[str, FailedInput]:
        found = await db.lock_input(conn, transformation_id, input_id)
        if found is None:
            raise NotFound("input", id_to_str(input_id))
        return found

    def authorise(caller: Identity, target: tuple[str, FailedInput]) -> None:
        """Checked by the edge before the transaction (definition decides who steers)."""

    async def apply(conn: Transaction, target: tuple[str, FailedInput]) -> Result:
        status, row = target
        if status != I.FAILED:
            raise FailedPrecondition(
                f"input {id_to_str(input_id)} is {status}: only a Failed input is decided "
                "(a Problematic one is reset or written off)",
                current_state=status,
            )
        applied = await apply_decisions(
            conn, transformation_id, [(row, decision)], actor=Actor.OPERATOR
        )
        return {
            "input_id": id_to_str(input_id),
            "decision": type(decision).__name__,
            "status": status_after(decision).value,
            "children": [id_to_str(child) for child in applied.children],
        }

    result = await run_command(
        database,
        request,
        lock=lock,
        authorise=authorise,
        scope=lambda _: LogScope(transformation_id=transformation_id),
        apply=apply,
    )
    return Decided(
        InputStatus(result["status"]),
        tuple(id_from_str(child, field="children") for child in result.get("children") or ()),
    )
