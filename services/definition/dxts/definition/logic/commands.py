"""How an operator command of the definition service runs on the kernel's command protocol
(`dxts.core.kernel.commands.run_command`): lock → authorise → request-id check → apply → log,
in one READ COMMITTED transaction.

The lock is the workgraph's row (a member's command locks its workgraph first, then the member:
`logic.locked`), so every status change of one workgraph is serialised and a racing retry of
the same request waits for the original to commit, then finds its log row and answers the
recorded result without applying anything. `admit` runs after the rights check and before the
request-id check: the preconditions a retry must still meet (a halt of a workgraph that is no
longer Active is refused, retried or not).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from dxts.core.db import Database, Transaction
from dxts.core.identity import Identity
from dxts.core.kernel.commands import LogScope, Request, Result, run_command
from dxts.definition.logic.authorise import Caller, authorise
from dxts.definition.logic.locked import (
    LockedTransformation,
    LockedWorkgraph,
    lock_transformation,
    lock_workgraph,
)

Apply = Callable[[Transaction, LockedWorkgraph], Awaitable[Result]]
ApplyToTransformation = Callable[[Transaction, LockedTransformation], Awaitable[Result]]
Target = TypeVar("Target", LockedWorkgraph, LockedTransformation)


def command_request(caller: Caller, request_id: str, reason: str) -> Request:
    """The command answering the RPC being served, named after it (`Request.served`). Run
    outside its own call (the start a submission asks for), a command runs within the
    kernel's `serving(rpc(…))` of the RPC it answers as."""
    return Request.served(caller.identity, request_id, reason)


async def _steer(
    database: Database,
    request: Request,
    caller: Caller,
    scope: LogScope,
    lock: Callable[[Transaction], Awaitable[Target]],
    apply: Callable[[Transaction, Target], Awaitable[Result]],
    admit: Callable[[Target], None] | None,
) -> Result:
    kind = "workgraph" if scope.workgraph_id is not None else "transformation"

    def check(identity: Identity, target: Target) -> None:
        authorise(caller, target.vo, target.sub, kind, scope.key)
        if admit is not None:
            admit(target)

    return await run_command(
        database, request, lock=lock, authorise=check, scope=lambda _: scope, apply=apply
    )


async def workgraph_command(
    database: Database,
    caller: Caller,
    workgraph_id: bytes,
    apply: Apply,
    *,
    request_id: str,
    reason: str,
    admit: Callable[[LockedWorkgraph], None] | None = None,
) -> Result:
    """Run `apply` on the locked workgraph, once per request id (logged in its log)."""
    return await _steer(
        database,
        command_request(caller, request_id, reason),
        caller,
        LogScope(workgraph_id=workgraph_id),
        lambda conn: lock_workgraph(conn, workgraph_id),
        apply,
        admit,
    )


async def transformation_command(
    database: Database,
    caller: Caller,
    transformation_id: bytes,
    apply: ApplyToTransformation,
    *,
    request_id: str,
    reason: str,
    admit: Callable[[LockedTransformation], None] | None = None,
) -> Result:
    """Run `apply` on the locked transformation (its workgraph locked first when it is a
    member), once per request id (logged in the transformation's log)."""
    return await _steer(
        database,
        command_request(caller, request_id, reason),
        caller,
        LogScope(transformation_id=transformation_id),
        lambda conn: lock_transformation(conn, transformation_id),
        apply,
        admit,
    )
