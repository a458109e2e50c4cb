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

from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import Database
from dxts.core.grpc.auth import Identity
from dxts.core.kernel.commands import LogScope, Request, Result, run_command
from dxts.definition.logic.authorise import Caller, authorise
from dxts.definition.logic.locked import (
    LockedTransformation,
    LockedWorkgraph,
    lock_transformation,
    lock_workgraph,
)

Apply = Callable[[AsyncConnection, LockedWorkgraph], Awaitable[Result]]
ApplyToTransformation = Callable[[AsyncConnection, LockedTransformation], Awaitable[Result]]


def command_request(rpc: str, caller: Caller, request_id: str, reason: str) -> Request:
    return Request(rpc, caller.identity, request_id, reason)


async def workgraph_command(
    database: Database,
    caller: Caller,
    rpc: str,
    workgraph_id: bytes,
    apply: Apply,
    *,
    request_id: str,
    reason: str,
    admit: Callable[[LockedWorkgraph], None] | None = None,
) -> Result:
    """Run `apply` on the locked workgraph, once per request id (logged in its log)."""

    def check(identity: Identity, workgraph: LockedWorkgraph) -> None:
        authorise(caller, workgraph.vo, workgraph.sub, "workgraph", workgraph_id)
        if admit is not None:
            admit(workgraph)

    return await run_command(
        database,
        command_request(rpc, caller, request_id, reason),
        lock=lambda conn: lock_workgraph(conn, workgraph_id),
        authorise=check,
        scope=lambda _: LogScope(workgraph_id=workgraph_id),
        apply=apply,
    )


async def transformation_command(
    database: Database,
    caller: Caller,
    rpc: str,
    transformation_id: bytes,
    apply: ApplyToTransformation,
    *,
    request_id: str,
    reason: str,
    admit: Callable[[LockedTransformation], None] | None = None,
) -> Result:
    """Run `apply` on the locked transformation (its workgraph locked first when it is a
    member), once per request id (logged in the transformation's log)."""

    def check(identity: Identity, locked: LockedTransformation) -> None:
        authorise(caller, locked.vo, locked.sub, "transformation", transformation_id)
        if admit is not None:
            admit(locked)

    return await run_command(
        database,
        command_request(rpc, caller, request_id, reason),
        lock=lambda conn: lock_transformation(conn, transformation_id),
        authorise=check,
        scope=lambda _: LogScope(transformation_id=transformation_id),
        apply=apply,
    )
