"""Attention: what makes a workgraph or a member need a person now, computed when it is read
from the records (nothing is stored), each item explained: what, since when, what to do, and
the command to type.

A member needs attention when (in the order its items come)
* too many of its last parcels failed (`failure-rate`): more than `failure_rate` of its last
  `window` ended parcels (at least `min_ended` of them), quoting the latest failure's own words
  (the tool's line when its backend reported one, else the recorded reason);
* its backend lost parcels (`backend-lost`): a failed parcel of class `lost` (the backend no
  longer knew it);
* its backend refused its submissions (`backend-refused`): a failed parcel of class `refused`
  (the adaptor refused the whole Submit, over one of its bounds: every retry will be refused
  too until the document or the backend changes), quoting the adaptor's words;
* its packer failed in the last `packer_window_s` (`packer-failed`): a round's or a flush's
  invocation (a PeriodicFlush hook's included), quoting the newest failure's class and words
  from the PackerFailed row execution logged (or the FlushFailed row of a hook's flush
  execution did not run); a packer that keeps failing logs one each round;
* one of its lifecycle checks failed (`action-failed`): it is blocked until someone resets or
  signs off the check;
* it has Problematic inputs (`problematic-inputs`): they wait for a decision;
* a quota of the installation holds its feeder (`feeder-held`): no more inputs are made until
  an operator raises the quota or releases the feeder;
* it made no progress for `stall_s` (`no-progress`): Active, in an Active or Scouting
  workgraph (not held by a sign-off, not paused, not halted), with work still to do, and no
  parcel of it ended (nor its status changed) for that long.

A workgraph needs attention when one of its approving checks failed, or when one of its members
does (each member's items, named by step). A new rule is one more function in `_MEMBER_RULES`.

An ended workgraph that wrote inputs off or had failed parcels says so (`ended_with`), so that
"Completed" alone means a clean run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol

from dxts.core.adaptor.model import FailureClass
from dxts.core.counters import TRANSFORMATION, Entity
from dxts.core.db import Database, Isolation, Transaction, db_now
from dxts.core.ids import id_to_str
from dxts.core.state_machines import LIVE_INPUT_STATES, LIVE_PARCEL_STATES
from dxts.core.states import (
    ActionResult,
    InputStatus,
    ParcelStatus,
    TransformationStatus,
    WorkgraphStatus,
)
from dxts.definition.logic.queries import (
    ActionView,
    TransformationView,
    WorkgraphView,
    action_view,
    member_states,
)
from dxts.definition.store import actions as actions_db
from dxts.definition.store import workgraphs as workgraphs_db
from dxts.definition.store.attention import (
    ENDED,
    FLUSH_FAILED,
    EndedParcel,
    PackerFailures,
    last_ended_parcels,
    packer_failures,
    problematic_since,
)
from dxts.definition.store.feeder_states import FeederState, feeder_states_of

T, W = TransformationStatus, WorkgraphStatus
# Statuses after which a member or workgraph has nothing left to watch (only its checks).
ENDED_MEMBERS = frozenset({T.COMPLETED, T.FINALIZED, T.ARCHIVED, T.CANCELLED})
ENDED_WORKGRAPHS = frozenset({W.COMPLETED, W.ARCHIVING, W.ARCHIVED})
# A workgraph in one of these lets its Active members run: not waiting for a sign-off.
RUNNING_WORKGRAPHS = frozenset({W.ACTIVE, W.SCOUTING})
# A parcel its backend no longer knows: its failure class, or (recorded before the classes)
# the dispatcher's words (`forwarding._lost`).
LOST = FailureClass.LOST.value
LOST_PREFIX = "lost by the backend"
REFUSED = FailureClass.REFUSED.value
REASON_CHARS = 300  # of a failure's reason quoted in an item


@dataclass(frozen=True)
class AttentionRules:
    """The installation's thresholds (DefinitionSettings: `DXTS_DEFINITION_ATTENTION_*`)."""

    failure_rate: float = 0.25
    window: int = 20
    min_ended: int = 3
    stall_s: float = 1800.0
    packer_window_s: float = 1800.0


@dataclass(frozen=True)
class Item:
    kind: str
    what: str
    since: datetime | None
    todo: str
    command: str
    transformation_id: bytes | None = None
    step: str = ""


class Member(Protocol):
    """What the rules read of a member: a whole TransformationView (a member's own page) or a
    MemberState (a workgraph's members)."""

    @property
    def transformation_id(self) -> bytes: ...
    @property
    def workgraph_id(self) -> bytes | None: ...
    @property
    def status(self) -> str: ...
    @property
    def step(self) -> str: ...
    @property
    def halted(self) -> bool: ...
    @property
    def updated_at(self) -> datetime: ...


@dataclass(frozen=True)
class MemberFacts:
    """What the rules look at for one member, read from the records."""

    member: Member
    workgraph_status: str | None
    actions: Sequence[ActionView]
    inputs: Mapping[str, int]
    parcels: Mapping[str, int]
    last_ended: Sequence[EndedParcel]
    problematic_since: datetime | None
    now: datetime
    feeder: FeederState | None = None
    packer_failures: PackerFailures | None = None

    @property
    def name(self) -> str:
        return id_to_str(self.member.transformation_id)


@dataclass(frozen=True)
class Attention:
    """The items of every workgraph and member read, by id, and how ended workgraphs ended."""

    workgraphs: dict[bytes, list[Item]] = field(default_factory=dict)
    members: dict[bytes, list[Item]] = field(default_factory=dict)
    ended_with: dict[bytes, str] = field(default_factory=dict)
    # Per workgraph: when it was started (absent: not yet), and its members' inputs by status.
    started: dict[bytes, datetime] = field(default_factory=dict)
    inputs: dict[bytes, dict[str, int]] = field(default_factory=dict)
    # Per running member with enough ended parcels, the share of them that failed (metrics).
    failed_share: dict[bytes, float] = field(default_factory=dict)


def _failed_checks(actions: Iterable[ActionView], status: str) -> list[Item]:
    """The failed checks of the list its owner is running (`status` starts with the list's
    state: Approving, ApprovingBlocked): a result left from a list the owner has left (an
    extended scout back in Scouting) holds nothing until that list runs again."""
    return [
        Item(
            "action-failed",
            f"{a.state} check #{a.action_id} {a.action} failed: {a.message or 'no message'}",
            a.updated_at,
            f"fix what it names and run it again, or sign it off (dxts force {a.action_id} passed)",
            f"dxts reset {a.action_id}",
        )
        for a in actions
        if a.result == ActionResult.FAILED and status.startswith(a.state)
    ]


def _problematic(facts: MemberFacts) -> list[Item]:
    count = facts.inputs.get(InputStatus.PROBLEMATIC, 0)
    if not count:
        return []
    return [
        Item(
            "problematic-inputs",
            "1 Problematic input waits for a decision"
            if count == 1
            else f"{count} Problematic inputs wait for a decision",
            facts.problematic_since,
            "look at them, then reset them to try again or write them off "
            f"(dxts inputs reset / write-off {facts.name})",
            f"dxts inputs {facts.name} --status Problematic",
        )
    ]


def _feeder_held(facts: MemberFacts) -> list[Item]:
    feeder = facts.feeder
    if feeder is None or not feeder.held:
        return []
    return [
        Item(
            "feeder-held",
            f"its feeder is {' '.join(feeder.held.split())}",
            feeder.updated_at,
            "an operator raises the quota or releases the feeder "
            f"(dxts feeder enable {facts.name}); its parcels go on meanwhile",
            f"dxts why {facts.name}",
        )
    ]


def _quoted(reason: str) -> str:
    line = " ".join(reason.split())
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


def _failure_rate(facts: MemberFacts, rules: AttentionRules) -> list[Item]:
    ended = facts.last_ended[: rules.window]
    failed = [p for p in ended if p.status == ParcelStatus.FAILED]
    if len(ended) < rules.min_ended or len(failed) <= rules.failure_rate * len(ended):
        return []
    latest = failed[0]
    return [
        Item(
            "failure-rate",
            f"{len(failed)} of its last {len(ended)} parcels failed: "
            f"{_quoted(latest.reason) or 'no reason given'}",
            min((p.completed_at for p in failed if p.completed_at), default=None),
            "see the failures grouped by cause, fix it, then reset the inputs set aside",
            f"dxts errors {facts.name}",
        )
    ]


def _backend_lost(facts: MemberFacts) -> list[Item]:
    lost = [
        p
        for p in facts.last_ended
        if p.status == ParcelStatus.FAILED
        and (p.failure_class == LOST or p.reason.startswith(LOST_PREFIX))
    ]
    if not lost:
        return []
    backends = sorted({p.backend or "?" for p in lost})
    return [
        Item(
            "backend-lost",
            f"{len(lost)} of its last parcels were lost by {', '.join(backends)}: "
            f"{_quoted(lost[0].reason)}",
            min((p.completed_at for p in lost if p.completed_at), default=None),
            "check the backend adaptor (was it restarted, did it lose its store?)",
            f"dxts parcels {facts.name} --status Failed",
        )
    ]


def _backend_refused(facts: MemberFacts) -> list[Item]:
    refused = [
        p
        for p in facts.last_ended
        if p.status == ParcelStatus.FAILED and p.failure_class == REFUSED
    ]
    if not refused:
        return []
    backends = sorted({p.backend or "?" for p in refused})
    return [
        Item(
            "backend-refused",
            f"{len(refused)} of its last parcels were refused by {', '.join(backends)}: "
            f"{_quoted(refused[0].reason)}",
            min((p.completed_at for p in refused if p.completed_at), default=None),
            "the backend will refuse the same request again: change what it names (the "
            "document, its requirements) or the backend's bounds, then reset the inputs",
            f"dxts parcels {facts.name} --status Failed",
        )
    ]


def _packer_failed(facts: MemberFacts, rules: AttentionRules) -> list[Item]:
    failed = facts.packer_failures
    if failed is None:
        return []
    times = (
        f", {failed.count} times in the last {int(rules.packer_window_s // 60)} min"
        if failed.count > 1
        else ""
    )
    what = (
        "a flush of it was not run"
        if failed.event == FLUSH_FAILED
        else f"its packer failed{' on a flush' * failed.flush}"
    )
    return [
        Item(
            "packer-failed",
            f"{what} ({failed.error_class or '?'}){times}: "
            f"{_quoted(failed.message) or 'no message'}",
            failed.first,
            "fix what it names (the packer's arguments, its plugin, an input it refuses): its "
            f"next round runs it again (dxts flush {facts.name} runs it now)",
            f"dxts logs {facts.name} --newest-first",
        )
    ]


def _stalled(facts: MemberFacts, rules: AttentionRules) -> list[Item]:
    member = facts.member
    if (
        member.status != T.ACTIVE
        or facts.workgraph_status not in (None, *RUNNING_WORKGRAPHS)
        or member.halted
    ):
        return []
    waiting = any(facts.inputs.get(s, 0) for s in LIVE_INPUT_STATES if s != InputStatus.PROBLEMATIC)
    flying = any(facts.parcels.get(s, 0) for s in LIVE_PARCEL_STATES)
    if not (waiting or flying):
        return []
    ended = [p.completed_at for p in facts.last_ended if p.completed_at]
    last = max([member.updated_at, *ended])
    idle = facts.now - last
    if idle < timedelta(seconds=rules.stall_s):
        return []
    return [
        Item(
            "no-progress",
            f"no parcel of it has ended for {int(idle.total_seconds() // 60)} min, with work "
            "still to do",
            last,
            "see what holds it: its parcels in flight, its backend, the dispatcher",
            f"dxts parcels {facts.name} --status Assigned",
        )
    ]


# In the order a person reads them: what is failing and why first (the shifter's first
# question; it explains the Problematic inputs that follow), then what waits for a decision.
_MEMBER_RULES: tuple[Callable[[MemberFacts, AttentionRules], list[Item]], ...] = (
    _failure_rate,
    lambda facts, rules: _backend_lost(facts),
    lambda facts, rules: _backend_refused(facts),
    _packer_failed,
    lambda facts, rules: _failed_checks(facts.actions, facts.member.status),
    lambda facts, rules: _problematic(facts),
    lambda facts, rules: _feeder_held(facts),
    _stalled,
)


def member_items(facts: MemberFacts, rules: AttentionRules) -> list[Item]:
    """Every reason the member needs a person now, in the rules' order; an ended member only
    its failed checks."""
    if facts.member.status in ENDED_MEMBERS:
        return _failed_checks(facts.actions, facts.member.status)
    return [item for rule in _MEMBER_RULES for item in rule(facts, rules)]


def workgraph_items(
    status: str,
    own_actions: Iterable[ActionView],
    members: Sequence[Member],
    items: Mapping[bytes, list[Item]],
) -> list[Item]:
    """The workgraph's own failed checks, then its members' items, each naming its member."""
    found = _failed_checks(own_actions, status)
    for m in members:
        found.extend(
            replace(i, transformation_id=m.transformation_id, step=m.step)
            for i in items.get(m.transformation_id, [])
        )
    return found


def ended_with(status: str, inputs: Iterable[Mapping[str, int]], parcels_failed: int) -> str:
    """How an ended workgraph ended when not cleanly ("2 written off, 12 parcels failed")."""
    if status not in ENDED_WORKGRAPHS:
        return ""
    written_off = sum(counts.get(InputStatus.NOT_PROCESSED, 0) for counts in inputs)
    parts = [f"{written_off} written off"] if written_off else []
    if parcels_failed:
        parts.append(f"{parcels_failed} parcel{'s' * (parcels_failed != 1)} failed")
    return ", ".join(parts)


async def attention_of(
    database: Database,
    rules: AttentionRules,
    *,
    workgraphs: Sequence[WorkgraphView] = (),
    members: Sequence[TransformationView] = (),
) -> Attention:
    """The items of `workgraphs` and their members, and of `members`, read in one
    transaction: the counters (through the core), the actions, and the bounded reads of
    execution's rows (`store.attention`)."""

    async def work(conn: Transaction) -> Attention:
        known = {m.transformation_id for m in members}
        wanted = [t for w in workgraphs for t in w.transformation_ids if t not in known]
        everyone: list[Member] = [*members, *await member_states(conn, wanted)]
        return await _read(conn, rules, workgraphs, everyone)

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def _read(
    conn: Transaction,
    rules: AttentionRules,
    workgraphs: Sequence[WorkgraphView],
    members: Sequence[Member],
) -> Attention:
    now = await db_now(conn)
    ids = [m.transformation_id for m in members]
    inputs: dict[bytes, dict[str, int]] = {t: {} for t in ids}
    parcels: dict[bytes, dict[str, int]] = {t: {} for t in ids}
    if ids:
        for (tid, entity, status), values in (
            await TRANSFORMATION.read(conn, {"TransformationID": ids})
        ).items():
            if entity == Entity.INPUT.value:
                inputs[bytes(tid)][status] = values["Count"]
            elif entity == Entity.PARCEL.value:
                parcels[bytes(tid)][status] = values["Count"]
    live = [m.transformation_id for m in members if m.status not in ENDED_MEMBERS]
    # Only members whose counters say a parcel has ended: a list of a thousand workgraphs not
    # yet running reads (and builds a statement of) none.
    ended = await last_ended_parcels(
        conn, [t for t in live if any(parcels[t].get(s) for s in ENDED)], rules.window
    )
    problematic = [t for t in live if inputs[t].get(InputStatus.PROBLEMATIC)]
    since = await problematic_since(conn, problematic)
    feeders = await feeder_states_of(conn, live)
    packer = await packer_failures(conn, live, now - timedelta(seconds=rules.packer_window_s))
    actions: dict[bytes | None, list[ActionView]] = {}
    # Only failed checks are items (`_failed_checks`): a list of a thousand workgraphs reads
    # (and decodes) a few rows, not every member's every action.
    owned = await actions_db.actions_of(
        conn,
        transformation_ids=ids,
        workgraph_ids=[w.workgraph_id for w in workgraphs],
        results=[ActionResult.FAILED],
    )
    for row in owned:
        actions.setdefault(row.transformation_id or row.workgraph_id, []).append(action_view(row))
    statuses = {w.workgraph_id: w.status for w in workgraphs}
    unknown = {m.workgraph_id for m in members if m.workgraph_id} - set(statuses)
    if unknown:
        rows = await workgraphs_db.workgraph_rows(conn, ids=sorted(unknown))
        statuses.update((r.workgraph_id, r.status) for r in rows)
    found = Attention(
        started=await workgraphs_db.started_at(conn, [w.workgraph_id for w in workgraphs])
    )
    for m in members:
        tid = m.transformation_id
        facts = MemberFacts(
            m,
            statuses.get(m.workgraph_id) if m.workgraph_id else None,
            actions.get(tid, []),
            inputs[tid],
            parcels[tid],
            ended.get(tid, []),
            since.get(tid),
            now,
            feeders.get(tid),
            packer.get(tid),
        )
        found.members[tid] = member_items(facts, rules)
        window = facts.last_ended[: rules.window]
        if len(window) >= rules.min_ended:
            failed = sum(p.status == ParcelStatus.FAILED for p in window)
            found.failed_share[tid] = failed / len(window)
    by_workgraph: dict[bytes | None, list[Member]] = {}
    for m in members:
        by_workgraph.setdefault(m.workgraph_id, []).append(m)
    for wg in workgraphs:
        own = by_workgraph.get(wg.workgraph_id, [])
        found.workgraphs[wg.workgraph_id] = workgraph_items(
            wg.status, actions.get(wg.workgraph_id, []), own, found.members
        )
        summed: dict[str, int] = {}
        for m in own:
            for status, count in inputs[m.transformation_id].items():
                summed[status] = summed.get(status, 0) + count
        found.inputs[wg.workgraph_id] = summed
        found.ended_with[wg.workgraph_id] = ended_with(
            wg.status,
            (inputs[m.transformation_id] for m in own),
            sum(parcels[m.transformation_id].get(ParcelStatus.FAILED, 0) for m in own),
        )
    return found
