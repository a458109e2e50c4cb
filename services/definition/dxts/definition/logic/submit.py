"""Submitting a workgraph: load, validate, resolve references, compile, insert — one transaction.

Loading and validation are pure (and run off the event loop in a thread the call can abandon:
cwl-utils parsing is CPU work, stopped at its next checkpoint once the caller's deadline passes);
resolving `proc:` references against the store and the registry, compiling and inserting
happen in one READ COMMITTED transaction, so a workgraph and all its members exist entirely or
not at all. A dry run does the same reads and returns the plan without writing.

`dxts.cwl.check.check_document` is the same pipeline with no database, for `dxts validate`:
stored references cannot be checked there and are reported as warnings.

Idempotency. A submission with a `request_id` (not a dry run) records it in its WorkgraphLog
creation row's Data, with the digest of what was submitted (`submission_digest`: the files
loading read and the labels) and the member name → TransformationID map. A later submission by
the same caller (VO and Sub) with that request id answers the original workgraph instead of
creating one: the document is compiled again onto the recorded ids (the outputs' ids are read
back from TransformationOutputs), and nothing is written. The same request id with another
digest is refused (FAILED_PRECONDITION), changing nothing.

`start: auto` (dirac:Workgraph). A document asking for it is started in the request that submits
it (`start_if_asked`): once the submission has committed, the start command runs as an operator's
start would, through the kernel's command protocol, as the submitter. Its request id is fixed
(`AUTO_START_REQUEST`): the scope of a command's request id is the workgraph's log, so a retry of
the submission (same request id, answered the original workgraph) retries the start as well, and
the start is applied once. A submission without a request id that fails between the two steps
leaves its workgraph New, to be started by hand.

The search window: the caller's `REQUEST_LOOKBACK` newest workgraphs minted within the last
`REQUEST_WINDOW_S` (the (VO, Sub) index of Ownership ends with the time-ordered OwnershipID, so
this is one bounded backward index scan, whatever the size of the tables), then their creation
log rows. A request id older than that, or followed by more submissions of the same caller,
is no longer recognised and creates a new workgraph.

Check and create run as the kernel's creating command (`run_creating_command`): serialised per
(caller, request id) by a named lock (`submission_lock`) held from before the transaction
begins until after it commits, so that a concurrent duplicate waits (at most
`REQUEST_LOCK_WAIT_S`, then ABORTED, to be retried) and then finds the committed original.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from dxts.core import content_store as store
from dxts.core.config import DefinitionConfig
from dxts.core.db import Database, Transaction
from dxts.core.deadlines import checkpoint, in_abandonable_thread
from dxts.core.errors import FailedPrecondition, InvalidArgument
from dxts.core.identity import Identity
from dxts.core.ids import id_from_str, id_to_str
from dxts.core.kernel.commands import REQUEST_LOOKBACK, Request, request_lock, run_creating_command
from dxts.core.locks import Lock, LockManager
from dxts.core.logs import LogEntry, log_transformations, log_workgraphs
from dxts.core.states import TransformationStatus, WorkgraphStatus
from dxts.cwl.check import stored_references, validate_bundle
from dxts.cwl.compile import IdsMismatch, Plan, PlanIds, compile_plan
from dxts.cwl.loading import Bundle, LoadedDocument
from dxts.cwl.plugins import PluginCatalogue
from dxts.cwl.positions import located
from dxts.cwl.problems import Kind, Problem, Severity, error, raise_for_errors
from dxts.definition.logic import processes, workgraph_commands
from dxts.definition.logic.authorise import Caller
from dxts.definition.logic.quotas import check_active_workgraphs
from dxts.definition.logic.read_only import read_only_problems
from dxts.definition.store import registry as registry_db
from dxts.definition.store import transformations as transformations_db
from dxts.definition.store import workgraphs as workgraphs_db

AUTHOR_LENGTH = 64
REQUEST_ID_MAX = 128
# The window a repeated request id is recognised in (see the module docstring): as far back as
# every command looks for an earlier request (`REQUEST_LOOKBACK`), within a day.
REQUEST_WINDOW_S = 24 * 3600
# How long a duplicate waits for the submission holding its request id to commit.
REQUEST_LOCK_WAIT_S = 20.0
# The request id of the start a `start: auto` submission runs (in the new workgraph's log).
AUTO_START_REQUEST = "submission:start-auto"

T = TypeVar("T")


@dataclass(frozen=True)
class Submitted:
    plan: Plan
    dry_run: bool
    # True when the request id was already applied: `plan` is the original's, nothing written.
    repeated: bool = False

    @property
    def workgraph_id(self) -> bytes:
        return self.plan.workgraph_id

    @property
    def warnings(self) -> tuple[Problem, ...]:
        return self.plan.warnings


async def resolve_references(
    conn: Transaction, document: LoadedDocument, vo: str
) -> tuple[dict[str, bytes], list[Problem]]:
    """Registry names → hashes (once, now), and a problem for every reference naming nothing
    the VO may run: a hash is another VO's process as much as an absent one."""
    references = stored_references(document)
    stored = await processes.owned_by(conn, vo, [h for _, _, h, _ in references if h])
    names = await registry_db.registry_lookup(conn, vo, [n for _, _, _, n in references if n])
    resolved: dict[str, bytes] = {}
    problems = []
    for path, text, process_id, named in references:
        if process_id is not None and process_id not in stored:
            problems.append(
                error(
                    Kind.UNRESOLVED_RUN,
                    path,
                    f"{text} is not in the process store of VO {vo!r} (references are resolved "
                    "against dxts's own store only): store the process first, or submit it in "
                    "the bundle",
                )
            )
        elif named is not None:
            if named in names:
                resolved[text] = names[named]
            else:
                problems.append(
                    error(
                        Kind.UNRESOLVED_RUN,
                        path,
                        f"{named[0]}@{named[1]} is not published in the process registry of VO "
                        f"{vo!r}",
                    )
                )
    return resolved, problems


def submission_digest(bundle: Bundle, labels: Mapping[str, str] | None) -> str:
    """What a request id stands for: the bundle as loaded (`Bundle.digest`) and the labels."""
    text = json.dumps({"bundle": bundle.digest(), "labels": dict(labels or {})}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def submission_lock(vo: str, sub: str, request_id: str) -> Lock:
    """The named lock serialising the submissions of one caller's request id."""
    return request_lock(_request(vo, sub, request_id))


def _request(vo: str, sub: str, request_id: str) -> Request:
    return Request.served(Identity(vo=vo, sub=sub), request_id)


def _earliest_id(window_s: float) -> bytes:
    """The smallest UUIDv7 minted `window_s` ago: its first 48 bits are the Unix time in ms."""
    millis = max(0, int((time.time() - window_s) * 1000))
    return millis.to_bytes(6, "big") + bytes(10)


def _refused(request_id: str, why: str) -> FailedPrecondition:
    return FailedPrecondition(
        f"request_id {request_id!r} was already used for a submission {why}: a request_id names "
        "one submission (its retries send the same document and labels); use a new request_id "
        "for a new submission"
    )


async def recorded_submission(
    conn: Transaction, vo: str, sub: str, request_id: str, digest: str
) -> PlanIds | None:
    """The ids of the caller's workgraph created for `request_id` (within the window), if any.

    Raises FailedPrecondition when that request id was used for something other than `digest`.
    """
    found = await workgraphs_db.submissions_with_request(
        conn,
        vo,
        sub,
        request_id,
        since_id=_earliest_id(REQUEST_WINDOW_S),
        lookback=REQUEST_LOOKBACK,
    )
    if not found:
        return None
    workgraph_id, ownership_id, data = found[0]
    original = id_to_str(bytes(workgraph_id))
    if not isinstance(data, dict) or data.get("request_digest") != digest:
        raise _refused(request_id, f"with another document or other labels (workgraph {original})")
    try:
        members = {str(name): id_from_str(tid) for name, tid in data["members"].items()}
    except (AttributeError, KeyError, TypeError, InvalidArgument) as error:
        raise _refused(request_id, f"whose record is unreadable (workgraph {original})") from error
    names = {tid: name for name, tid in members.items()}
    outputs = {
        f"{names[row.transformation_id]}/{row.name}": row.transformation_output_id
        for row in await transformations_db.outputs_of(conn, members.values())
    }
    return PlanIds(bytes(workgraph_id), bytes(ownership_id), members, outputs)


async def submit_workgraph(
    database: Database,
    bundle: Bundle,
    *,
    vo: str,
    sub: str,
    catalogue: PluginCatalogue,
    config: DefinitionConfig | None = None,
    labels: Mapping[str, str] | None = None,
    dry_run: bool = False,
    allow_unknown_plugins: bool = False,
    request_id: str = "",
    locks: LockManager | None = None,
    author: str = "",
    read_only_ses: Collection[str] = (),
) -> Submitted:
    """Validate, compile and (unless `dry_run`) create the workgraph and all its members; a
    data member writing to or removing from one of `read_only_ses` is refused (read_only.py).

    With a `request_id` (ignored by a dry run), a repeat of a submission this caller already
    made answers that one (`Submitted.repeated`) and writes nothing; see the module docstring.
    `locks` serialises repeats (a LockManager of `database`; one is opened for the call if
    none is given). `author` is the name the logs show (a DiracX user's name), else `sub`.

    Raises InvalidArgument listing every error (each a DocumentViolation with its kind), and
    FailedPrecondition for a request id already used for another document or other labels.
    """
    if len(request_id) > REQUEST_ID_MAX:
        raise InvalidArgument(f"at most {REQUEST_ID_MAX} characters", field="request_id")
    key = "" if dry_run else request_id
    config = config or DefinitionConfig()
    checked = await in_abandonable_thread(
        validate_bundle, bundle, catalogue, config, vo, allow_unknown_plugins
    )
    raise_for_errors(located(checked.problems, bundle))
    checkpoint("resolving references and compiling")
    document, analysis = checked.document, checked.analysis
    assert document is not None and analysis is not None
    raise_for_errors(located(read_only_problems(analysis, read_only_ses), bundle))
    warnings = tuple(p for p in checked.problems if p.severity is Severity.WARNING)
    digest = submission_digest(bundle, labels) if key else ""

    async def work(conn: Transaction) -> tuple[Plan, bool]:
        ids = await recorded_submission(conn, vo, sub, key, digest) if key else None
        resolved, problems = await resolve_references(conn, document, vo)
        raise_for_errors(located(problems, bundle))
        try:
            plan = compile_plan(
                document,
                analysis,
                config=config,
                vo=vo,
                sub=sub,
                labels=labels,
                resolved=resolved,
                warnings=warnings,
                ids=ids,
            )
        except IdsMismatch as error:
            raise _refused(key, f"that no longer compiles onto its record ({error})") from error
        if not dry_run and ids is None:
            await check_active_workgraphs(conn, config.policy, vo, sub, starting=False)
            await insert_plan(conn, plan, request_id=key, digest=digest, author=author)
        return plan, ids is not None

    plan, repeated = await run_creating_command(
        database, locks, _request(vo, sub, key), work, wait_s=REQUEST_LOCK_WAIT_S
    )
    return Submitted(plan, dry_run, repeated)


async def start_if_asked(database: Database, caller: Caller, submitted: Submitted) -> str | None:
    """Start a workgraph submitted with `start: auto` (see the module docstring); its status
    after the start, None when the document did not ask (or the submission was a dry run).
    Run within `serving` of StartWorkgraph: the start is that command, as an operator's is."""
    if submitted.dry_run or not submitted.plan.starts:
        return None
    result = await workgraph_commands.start(
        database,
        caller,
        submitted.workgraph_id,
        reason="start: auto",
        request_id=AUTO_START_REQUEST,
    )
    return str(result["status"])


async def insert_plan(
    conn: Transaction, plan: Plan, *, request_id: str = "", digest: str = "", author: str = ""
) -> None:
    """Every row of a plan, in the caller's transaction: one INSERT per table.

    A `request_id` is recorded in the workgraph's creation log row, with `digest` and the
    member ids, for `recorded_submission` to answer its repeats.
    """
    await store.put_processes(conn, [p.body for p in plan.processes], plan.references)
    await store.put_requirements(
        conn, [m.requirements_template for m in plan.members if m.requirements_template]
    )
    action_rows = [
        {
            "WorkgraphID": plan.workgraph_id,
            "State": a.state,
            "Position": a.position,
            "Action": a.action,
            "Args": a.args,
        }
        for a in plan.approving
    ] + [
        {
            "TransformationID": m.transformation_id,
            "State": a.state,
            "Position": a.position,
            "Action": a.action,
            "Args": a.args,
        }
        for m in plan.members
        for a in m.actions
    ]
    await workgraphs_db.insert_workgraph(
        conn,
        workgraph={
            "WorkgraphID": plan.workgraph_id,
            "Type": plan.type,
            "Status": WorkgraphStatus.NEW.value,
            "StrippedSpec": plan.stripped_spec,
            "Annotations": plan.annotations or None,
            "Hooks": plan.hooks,
        },
        ownership_row={
            "OwnershipID": plan.ownership_id,
            "VO": plan.vo,
            "Sub": plan.sub,
            "WorkgraphID": plan.workgraph_id,
        },
        members=[
            {
                "TransformationID": m.transformation_id,
                "OwnershipID": plan.ownership_id,
                "ExecutingIdentity": m.executing_identity,
                "Type": m.type,
                "Kind": m.kind,
                "Status": TransformationStatus.NEW.value,
                "Feeder": m.feeder,
                "FeederArgs": m.feeder_args,
                "FeederEnabled": True,
                "Packer": m.packer,
                "PackerArgs": m.packer_args,
                "Annotations": m.annotations,
                "Hooks": m.hooks,
            }
            for m in plan.members
        ],
        compute=[
            {
                "TransformationID": m.transformation_id,
                "ProcessID": m.process_id,
                "RequirementsTemplateID": m.requirements_template_id,
            }
            for m in plan.members
            if m.kind == "Compute"
        ],
        outputs=[
            {
                "TransformationOutputID": o.output_id,
                "TransformationID": m.transformation_id,
                "Name": o.name,
                "Intermediate": o.intermediate,
            }
            for m in plan.members
            for o in m.outputs
        ],
        action_rows=action_rows,
    )
    author = (author or plan.sub)[:AUTHOR_LENGTH] or "definition"
    created = {"vo": plan.vo, "workgraph": id_to_str(plan.workgraph_id)}
    submission: dict[str, Any] = dict(created)
    if request_id:
        submission |= {
            "request_id": request_id,
            "request_digest": digest,
            "members": {m.name: id_to_str(m.transformation_id) for m in plan.members},
        }
    await log_workgraphs(
        conn,
        [
            LogEntry(
                plan.workgraph_id,
                "StateChange",
                author,
                None,
                WorkgraphStatus.NEW.value,
                "submitted",
                submission,
            )
        ],
    )
    await log_transformations(
        conn,
        [
            LogEntry(
                m.transformation_id,
                "StateChange",
                author,
                None,
                TransformationStatus.NEW.value,
                f"created as member {m.name}",
                created,
            )
            for m in plan.members
        ],
    )
