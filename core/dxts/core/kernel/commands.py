"""The one protocol every mutating RPC follows: lock → authorise → request-id check → apply → log.

A command names the RPC it serves, who asks, and an optional request id. Run by `run_command`,
all five steps happen in one transaction:

1. `lock(conn)` loads the command's target and locks it (`SELECT … FOR UPDATE` on the row that
   serialises every change of it), raising NotFound when there is none;
2. `authorise(caller, target)` raises NotFound (another VO: existence is not leaked) or
   PermissionDenied; the RPC's row in the authorisation table was checked before the handler
   ran;
3. if the request id is already recorded in the target's log (`scope(target)`), the recorded
   result is answered and nothing is applied — the lock of step 1 makes a racing retry wait for
   the original to commit, so it finds the record;
4. `apply(conn, target)` makes the change and returns its result (a JSON object);
5. one log row records the command — event = the RPC's name, author, the reason as message, and
   `{"command", "request_id", "result"}` as data — in the same transaction as the change.

Commands that create their target (a submission, a job's parcel) have no row to lock nor log to
search before they run: `run_creating_command` serialises the caller's retries on a named lock
of (caller, RPC, request id), held until the creating transaction has committed, and the
transaction itself looks for what an earlier try of the same request created (recorded on the
created rows) before creating anything.

Commands that must run as several bounded transactions (writing off a million inputs) use
`run_serialised_command`: a named lock on the scope takes the place of the row lock, so two
retries of the same request still apply once; the log row is written after the last batch,
and a crash in between leaves a command that a retry completes (each batch is conditional, so
what already moved is not moved again).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.db import Database, Isolation
from dxts.core.errors import Aborted, InvalidArgument
from dxts.core.identity import Identity
from dxts.core.kernel.authorisation import served_rpc
from dxts.core.locks import Lock, LockKind, LockManager
from dxts.core.logs import LogEntry, log_transformations, log_workgraphs
from dxts.core.schema.accounting import transformation_log, workgraph_log

T = TypeVar("T")
Result = dict[str, Any]

AUTHOR_LENGTH = 64
EVENT_LENGTH = 32
REQUEST_ID_LENGTH = 128
# The one look-back rule for finding an earlier request: how many of the newest entries of a
# scope's log (or of a caller's submissions) are searched for a request id. A retry follows its
# original closely.
REQUEST_LOOKBACK = 200
# How long a serialised command waits for another command on the same scope.
SERIALISED_WAIT_S = 120.0
# How long a creating command waits for a retry of the same request that is being applied.
CREATING_WAIT_S = 20.0


@dataclass(frozen=True)
class Request:
    """Who asks for which command (`rpc`: the contract's method name), with an optional
    request id that makes a retry safe, and the reason the caller gave."""

    rpc: str
    caller: Identity
    request_id: str = ""
    reason: str = ""

    def __post_init__(self) -> None:
        if len(self.request_id) > REQUEST_ID_LENGTH:
            raise InvalidArgument(
                f"at most {REQUEST_ID_LENGTH} characters, got {len(self.request_id)}",
                field="request_id",
            )

    @classmethod
    def served(cls, caller: Identity, request_id: str = "", reason: str = "") -> Request:
        """The command answering the RPC being served, named after it."""
        return cls(served_rpc(), caller, request_id, reason)

    @property
    def author(self) -> str:
        return self.caller.display_name[:AUTHOR_LENGTH] or "dxts"

    @property
    def event(self) -> str:
        """The log's EventType of this command: the RPC's own name."""
        return self.rpc.rsplit(".", 1)[-1].rsplit("/", 1)[-1][:EVENT_LENGTH]


@dataclass(frozen=True)
class LogScope:
    """Whose log records a command: exactly one workgraph or one transformation."""

    workgraph_id: bytes | None = None
    transformation_id: bytes | None = None

    def __post_init__(self) -> None:
        if (self.workgraph_id is None) == (self.transformation_id is None):
            raise ValueError("a log scope is one workgraph or one transformation")

    @property
    def key(self) -> bytes:
        return self.workgraph_id or self.transformation_id or b""


async def recorded_result(
    conn: AsyncConnection, scope: LogScope, request: Request
) -> Result | None:
    """The result recorded for the request's id by the same command in `scope`'s recent log, if
    any. Another command may carry the same id on the same target — definition's
    FlushTransformation logs its request id on the transformation, then forwards it to
    execution's Flush — and is no retry of this one."""
    request_id = request.request_id
    if not request_id:
        return None
    table, column = (
        (workgraph_log, "WorkgraphID")
        if scope.workgraph_id is not None
        else (transformation_log, "TransformationID")
    )
    rows = await conn.execute(
        sa.select(table.c.Data)
        .where(table.c[column] == scope.key)
        .order_by(table.c.LogID.desc())
        .limit(REQUEST_LOOKBACK)
    )
    for (data,) in rows:
        if (
            isinstance(data, dict)
            and data.get("command") == request.rpc
            and data.get("request_id") == request_id
        ):
            result = data.get("result")
            return result if isinstance(result, dict) else {}
    return None


async def record(conn: AsyncConnection, request: Request, scope: LogScope, result: Result) -> None:
    """The command's log row (step 5), in the caller's transaction."""
    data: Result = {"command": request.rpc, "result": result}
    if request.request_id:
        data["request_id"] = request.request_id
    entry = LogEntry(
        scope.key, request.event, request.author, message=request.reason or None, data=data
    )
    if scope.workgraph_id is not None:
        await log_workgraphs(conn, [entry])
    else:
        await log_transformations(conn, [entry])


async def run_command(
    database: Database,
    request: Request,
    *,
    lock: Callable[[AsyncConnection], Awaitable[T]],
    authorise: Callable[[Identity, T], None],
    scope: Callable[[T], LogScope],
    apply: Callable[[AsyncConnection, T], Awaitable[Result]],
    isolation: Isolation = Isolation.READ_COMMITTED,
) -> Result:
    """Run one command in one transaction (see the module docstring); its result, or the
    result recorded for the same request id."""

    async def transaction(conn: AsyncConnection) -> Result:
        target = await lock(conn)
        authorise(request.caller, target)
        where = scope(target)
        recorded = await recorded_result(conn, where, request)
        if recorded is not None:
            return recorded
        result = await apply(conn, target)
        await record(conn, request, where, result)
        return result

    return await database.run(transaction, isolation=isolation)


async def run_serialised_command(
    database: Database,
    locks: LockManager,
    request: Request,
    *,
    scope: LogScope,
    apply: Callable[[], Awaitable[Result]],
    authorise: Callable[[], Awaitable[None]] | None = None,
    wait_s: float = SERIALISED_WAIT_S,
) -> Result:
    """Run a command that applies in several transactions, once per request id: under a named
    lock on `scope`, check the log, apply, then record. `authorise` runs first, under the
    lock, and raises to refuse."""
    guard = Lock(LockKind.COMMAND, scope.key)
    async with locks.try_hold(guard, wait=wait_s) as held:
        if not held:
            raise Aborted(
                f"another command on {request.event}'s target is still running after "
                f"{wait_s:.0f} s; retry the request"
            )
        if authorise is not None:
            await authorise()
        rc = Isolation.READ_COMMITTED
        recorded = await database.run(
            functools.partial(recorded_result, scope=scope, request=request),
            isolation=rc,
        )
        if recorded is not None:
            return recorded
        result = await apply()
        await database.run(
            functools.partial(record, request=request, scope=scope, result=result), isolation=rc
        )
        return result


def request_lock(request: Request) -> Lock:
    """The named lock that serialises the tries of one caller's request id for one RPC."""
    caller = request.caller
    key = json.dumps([caller.vo, caller.sub, request.event, request.request_id])
    return Lock(LockKind.REQUEST, key)


async def run_creating_command(
    database: Database,
    locks: LockManager | None,
    request: Request,
    create: Callable[[AsyncConnection], Awaitable[T]],
    *,
    isolation: Isolation = Isolation.READ_COMMITTED,
    wait_s: float = CREATING_WAIT_S,
) -> T:
    """Run `create(conn)` — which answers what an earlier try of `request` created, or creates
    it — as one transaction; with a request id, under the request's named lock, held until the
    commit so that a racing retry then finds the committed rows. Without `locks` a manager is
    opened for the call."""
    if not request.request_id:
        return await database.run(create, isolation=isolation)
    manager = locks if locks is not None else LockManager(database)
    try:
        async with manager.try_hold(request_lock(request), wait=wait_s) as held:
            if not held:
                raise Aborted(
                    f"a {request.event} with request_id {request.request_id!r} is still being "
                    "applied; retry it with the same request_id"
                )
            return await database.run(create, isolation=isolation)
    finally:
        if locks is None:
            await manager.dispose()
