"""The four state machines as data (docs/architecture.md): workgraph, transformation, input, parcel.

Each machine lists its states in the schema's ENUM order, the states an entity may be created
in, every allowed edge with who may take it, and its terminal set. `StateMachine.check` is the
one place a transition is validated; it raises `InvalidTransition` naming the entity, the current
state and the attempted one. The core applies transitions (a conditional UPDATE whose row count
is the truth); plugins and operators only ask for them.

Deliberate additions to the machines as designed: HandleFailedInput may write a Failed input off
(WriteOff: Failed → NotProcessed), which a retry rule that knows the failure is permanent ("no
such file") does rather than leave it Problematic for an operator to write off. And a
workgraph may be cancelled from Finalizing, whose members can be Finalizing, FinalizingBlocked
or Finalized, so those last two also go to Cancelling when the workgraph does (the table lists
only New, Active, Paused and Finalizing, which would leave a cancelled workgraph with members
that cannot follow it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from dxts.core.errors import InvalidArgument, InvalidTransition
from dxts.core.states import (
    InputStatus,
    ParcelStatus,
    TransformationStatus,
    WorkgraphStatus,
    values,
)


class Actor(StrEnum):
    """Who takes a transition."""

    OPERATOR = "operator"  # a person, through the CLI or the API
    WORKGRAPH = "workgraph"  # fan-out of a workgraph transition to its members
    CORE = "core"  # a sweep of the owning component (drain guard, action runner, recording)
    HOOK = "hook"  # a hook's proposal, applied by the core
    FEEDER = "feeder"  # a feeder's proposal, applied by execution
    PACKER = "packer"  # a packer's proposal, applied by execution
    DISPATCHER = "dispatcher"  # the dispatcher (claims, submissions)


@dataclass(frozen=True)
class Edge:
    """One allowed transition; `source` None means creation."""

    source: str | None
    target: str
    actors: frozenset[Actor]
    when: str


@dataclass(frozen=True)
class StateMachine:
    entity: str
    states: tuple[str, ...]
    edges: tuple[Edge, ...]
    terminal: frozenset[str]
    # For transformations: a standalone one takes the workgraph's edges itself, by operator.
    operator_takes_workgraph_edges_when_standalone: bool = False
    _index: Mapping[tuple[str | None, str], Edge] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[tuple[str | None, str], Edge] = {}
        for edge in self.edges:
            for state in (edge.source, edge.target):
                if state is not None and state not in self.states:
                    raise ValueError(f"{self.entity}: {state!r} is not a state")
            if (edge.source, edge.target) in index:
                raise ValueError(f"{self.entity}: duplicate edge {edge.source}->{edge.target}")
            index[(edge.source, edge.target)] = edge
        object.__setattr__(self, "_index", index)

    @property
    def non_terminal(self) -> frozenset[str]:
        return frozenset(self.states) - self.terminal

    def _validate_state(self, state: object, role: str) -> str:
        if not isinstance(state, str) or state not in self.states:
            raise InvalidArgument(
                f"{state!r} is not a {self.entity} state (one of {', '.join(self.states)})",
                field=role,
            )
        return state

    def edge(self, source: str | None, target: str) -> Edge | None:
        """The edge from `source` to `target`, if the machine has one."""
        return self._index.get((source, target))

    def allowed(
        self,
        source: str | None,
        target: str,
        actor: Actor | None = None,
        *,
        standalone: bool = False,
    ) -> bool:
        edge = self.edge(source, target)
        if edge is None:
            return False
        if actor is None or actor in edge.actors:
            return True
        return (
            standalone
            and self.operator_takes_workgraph_edges_when_standalone
            and actor is Actor.OPERATOR
            and Actor.WORKGRAPH in edge.actors
        )

    def check(
        self,
        source: str | None,
        target: str,
        actor: Actor | None = None,
        *,
        identifier: object = None,
        standalone: bool = False,
    ) -> Edge:
        """Validate one transition; raise `InvalidTransition` if the machine refuses it."""
        if source is not None:
            self._validate_state(source, "from")
        self._validate_state(target, "to")
        if actor is not None and not isinstance(actor, Actor):
            raise InvalidArgument(f"{actor!r} is not an Actor", field="actor")
        if not self.allowed(source, target, actor, standalone=standalone):
            raise InvalidTransition(
                self.entity,
                "(new)" if source is None else source,
                target,
                actor=actor.value if actor else None,
                identifier=identifier,
            )
        edge = self.edge(source, target)
        assert edge is not None
        return edge

    def sources_of(self, target: str, actor: Actor | None = None) -> frozenset[str]:
        """Every state from which `target` may be entered (by `actor`): the WHERE of an UPDATE."""
        self._validate_state(target, "to")
        return frozenset(
            edge.source
            for edge in self.edges
            if edge.target == target
            and edge.source is not None
            and (actor is None or actor in edge.actors)
        )

    def targets_of(self, source: str) -> frozenset[str]:
        self._validate_state(source, "from")
        return frozenset(edge.target for edge in self.edges if edge.source == source)


def _edges(
    rows: Iterable[tuple[Iterable[str | None] | str | None, str, Iterable[Actor] | Actor, str]],
) -> tuple[Edge, ...]:
    """Expand table rows whose source cell lists several states into one edge each."""
    edges: list[Edge] = []
    for sources, target, actors, when in rows:
        source_list = [sources] if sources is None or isinstance(sources, str) else list(sources)
        actor_set = frozenset([actors] if isinstance(actors, Actor) else actors)
        edges.extend(Edge(source, target, actor_set, when) for source in source_list)
    return tuple(edges)


W = WorkgraphStatus
T = TransformationStatus
I = InputStatus  # noqa: E741 - mirrors the table's columns
P = ParcelStatus
OP, WG, CORE, HOOK = Actor.OPERATOR, Actor.WORKGRAPH, Actor.CORE, Actor.HOOK

WORKGRAPH = StateMachine(
    entity="workgraph",
    states=values(WorkgraphStatus),
    edges=_edges(
        [
            (None, W.NEW, CORE, "submitted and compiled"),
            (W.NEW, W.SCOUTING, OP, "start, when a member scouts and there is an approving list"),
            (W.NEW, W.ACTIVE, OP, "start otherwise"),
            (W.SCOUTING, W.APPROVING, (HOOK, OP), "ScoutingToApproving accepts, or operator"),
            (W.APPROVING, W.APPROVING_BLOCKED, CORE, "an approving action fails"),
            (W.APPROVING_BLOCKED, W.APPROVING, OP, "after forcing or resetting the action"),
            ((W.APPROVING, W.APPROVING_BLOCKED), W.SCOUTING, OP, "operator extends the scout"),
            (W.APPROVING, W.ACTIVE, CORE, "every approving action passed"),
            (W.ACTIVE, W.FINALIZING, CORE, "every member drained"),
            (W.FINALIZING, W.ACTIVE, OP, "after a failed finalisation"),
            (W.FINALIZING, W.COMPLETED, CORE, "last member Finalized"),
            (W.COMPLETED, W.ARCHIVING, CORE, "after the configured delay"),
            (W.ARCHIVING, W.ARCHIVED, CORE, "last member Archived"),
            (
                (W.NEW, W.SCOUTING, W.APPROVING, W.APPROVING_BLOCKED, W.ACTIVE, W.FINALIZING),
                W.CANCELLING,
                OP,
                "operator cancels",
            ),
            (W.CANCELLING, W.CANCELLED, CORE, "last member Cancelled"),
        ]
    ),
    terminal=frozenset({W.ARCHIVED, W.CANCELLED}),
)

TRANSFORMATION = StateMachine(
    entity="transformation",
    states=values(TransformationStatus),
    edges=_edges(
        [
            (None, T.NEW, CORE, "created with its workgraph (or standalone)"),
            (T.NEW, T.ACTIVE, WG, "workgraph started, or approved for a held member"),
            (T.NEW, T.PAUSED, WG, "workgraph started, member held (initial_state Paused)"),
            (
                (T.NEW, T.ACTIVE, T.PAUSED, T.FINALIZING, T.FINALIZING_BLOCKED, T.FINALIZED),
                T.CANCELLING,
                WG,
                "workgraph to Cancelling",
            ),
            (T.ACTIVE, T.PAUSED, (OP, HOOK), "operator or a hook operation"),
            (T.PAUSED, T.ACTIVE, (OP, WG), "operator or workgraph"),
            ((T.ACTIVE, T.PAUSED), T.FINALIZING, WG, "workgraph to Finalizing"),
            (T.FINALIZING, T.FINALIZING_BLOCKED, CORE, "a finalizing action fails"),
            (T.FINALIZING_BLOCKED, T.FINALIZING, OP, "operator"),
            (T.FINALIZING, T.FINALIZED, CORE, "every finalizing action passed"),
            (
                (T.FINALIZING, T.FINALIZING_BLOCKED, T.FINALIZED),
                T.ACTIVE,
                WG,
                "workgraph back to Active",
            ),
            (T.FINALIZED, T.COMPLETED, WG, "workgraph to Completed"),
            (T.COMPLETED, T.ARCHIVING, WG, "workgraph to Archiving"),
            (T.ARCHIVING, T.ARCHIVING_BLOCKED, CORE, "an archiving action fails"),
            (T.ARCHIVING_BLOCKED, T.ARCHIVING, OP, "operator"),
            (T.ARCHIVING, T.ARCHIVED, CORE, "every archiving action done"),
            (T.CANCELLING, T.CANCELLING_BLOCKED, CORE, "a cleaning action fails"),
            (T.CANCELLING_BLOCKED, T.CANCELLING, OP, "operator"),
            (T.CANCELLING, T.CANCELLED, CORE, "every cleaning action done"),
        ]
    ),
    terminal=frozenset({T.ARCHIVED, T.CANCELLED}),
    operator_takes_workgraph_edges_when_standalone=True,
)

INPUT = StateMachine(
    entity="input",
    states=values(InputStatus),
    edges=_edges(
        [
            (None, I.UNASSIGNED, (Actor.FEEDER, CORE, HOOK, OP), "fed, or a split child to redo"),
            (None, I.PROCESSED, CORE, "recovery split child claimed by a born-Done parcel"),
            (I.UNASSIGNED, I.ASSIGNED, Actor.PACKER, "packed into a parcel"),
            (I.UNASSIGNED, I.PROBLEMATIC, Actor.PACKER, "packer says BadInput"),
            (I.ASSIGNED, I.PROCESSED, CORE, "parcel reports SUCCESS"),
            (I.ASSIGNED, I.SPLIT, CORE, "parcel reports SPLIT"),
            (I.ASSIGNED, I.FAILED, CORE, "parcel reports FAILURE, or the parcel Failed"),
            # An operator may decide a Failed input in the hook's place (DecideFailedInput).
            (I.FAILED, I.UNASSIGNED, (HOOK, OP), "HandleFailedInput: ToUnassigned, RetryWith"),
            (I.FAILED, I.SPLIT, (HOOK, OP), "HandleFailedInput: SplitInto"),
            (I.FAILED, I.PROBLEMATIC, HOOK, "HandleFailedInput: ToProblematic"),
            (
                I.PROBLEMATIC,
                I.UNASSIGNED,
                (OP, CORE),
                "operator reset (ErrorCount to 0); core: the `after` consumer processed it since",
            ),
            (
                I.PROBLEMATIC,
                I.NOT_PROCESSED,
                (OP, CORE),
                "operator write-off; core: the `after` consumer wrote it off",
            ),
            (I.UNASSIGNED, I.NOT_PROCESSED, (OP, CORE), "write-off, close, cancellation, halt"),
            (I.ASSIGNED, I.NOT_PROCESSED, CORE, "its parcel reached Cancelled"),
            (I.FAILED, I.NOT_PROCESSED, (CORE, HOOK, OP), "halt, or HandleFailedInput: WriteOff"),
            (I.ASSIGNED, I.UNASSIGNED, CORE, "parcel reports NOT_TRIED"),
        ]
    ),
    terminal=frozenset({I.PROCESSED, I.SPLIT, I.NOT_PROCESSED}),
)

PARCEL = StateMachine(
    entity="parcel",
    states=values(ParcelStatus),
    edges=_edges(
        [
            (None, P.UNASSIGNED, CORE, "packer, or user job submission"),
            (None, P.DONE, CORE, "recovery parcel (directed to 'recovery'), never submitted"),
            (P.UNASSIGNED, P.RESERVED, Actor.DISPATCHER, "dispatcher claims"),
            (P.RESERVED, P.ASSIGNED, Actor.DISPATCHER, "backend accepted"),
            (P.RESERVED, P.UNASSIGNED, Actor.DISPATCHER, "submission refused"),
            ((P.RESERVED, P.ASSIGNED), P.COMPLETING, CORE, "finished, or cancellation requested"),
            (P.ASSIGNED, P.FAILED, CORE, "backend reports failure"),
            (P.RESERVED, P.FAILED, CORE, "backend refused the whole submission"),
            (P.COMPLETING, P.DONE, CORE, "outcome recorded, every input succeeded"),
            (P.COMPLETING, P.PARTIALLY_DONE, CORE, "outcome recorded, some inputs succeeded"),
            (P.COMPLETING, P.CANCELLED, CORE, "backend confirms cancellation"),
            (P.COMPLETING, P.FAILED, (CORE, OP), "failed outcome, or a stuck parcel forced"),
            (P.UNASSIGNED, P.CANCELLED, (CORE, OP), "cancelled before submission"),
        ]
    ),
    terminal=frozenset({P.DONE, P.PARTIALLY_DONE, P.FAILED, P.CANCELLED}),
)

MACHINES: dict[str, StateMachine] = {
    machine.entity: machine for machine in (WORKGRAPH, TRANSFORMATION, INPUT, PARCEL)
}

# Which member states each workgraph state admits.
MEMBER_STATES: dict[WorkgraphStatus, frozenset[TransformationStatus]] = {
    W.NEW: frozenset({T.NEW}),
    **{
        state: frozenset({T.ACTIVE, T.PAUSED, T.NEW})
        for state in (W.SCOUTING, W.APPROVING, W.APPROVING_BLOCKED, W.ACTIVE)
    },
    W.FINALIZING: frozenset({T.FINALIZING, T.FINALIZING_BLOCKED, T.FINALIZED}),
    W.COMPLETED: frozenset({T.COMPLETED}),
    W.ARCHIVING: frozenset({T.ARCHIVING, T.ARCHIVING_BLOCKED, T.ARCHIVED}),
    W.ARCHIVED: frozenset({T.ARCHIVED}),
    W.CANCELLING: frozenset({T.CANCELLING, T.CANCELLING_BLOCKED, T.CANCELLED}),
    W.CANCELLED: frozenset({T.CANCELLED}),
}


@dataclass(frozen=True)
class FanOut:
    """What a workgraph transition does to its members, in the same transaction.

    `moves` maps a member's current state to the states it may go to (the position rule and
    `initial_state` choose among them at start; a state mapping to itself stays put);
    `requires` is the member states every member must already be in for the workgraph to move.
    """

    moves: Mapping[str, frozenset[str]]
    requires: frozenset[str] | None = None


_START = FanOut({T.NEW: frozenset({T.ACTIVE, T.PAUSED, T.NEW})})
_TO_CANCELLING = FanOut(
    {
        state: frozenset({T.CANCELLING})
        for state in (T.NEW, T.ACTIVE, T.PAUSED, T.FINALIZING, T.FINALIZING_BLOCKED, T.FINALIZED)
    }
)
_STAY_RUNNING = FanOut({state: frozenset({state}) for state in (T.NEW, T.ACTIVE, T.PAUSED)})

MEMBER_FAN_OUT: dict[tuple[str, str], FanOut] = {
    (W.NEW, W.SCOUTING): _START,
    (W.NEW, W.ACTIVE): _START,
    (W.SCOUTING, W.APPROVING): _STAY_RUNNING,
    (W.APPROVING, W.APPROVING_BLOCKED): _STAY_RUNNING,
    (W.APPROVING_BLOCKED, W.APPROVING): _STAY_RUNNING,
    (W.APPROVING, W.SCOUTING): _STAY_RUNNING,
    (W.APPROVING_BLOCKED, W.SCOUTING): _STAY_RUNNING,
    # Approval starts the members held until approval; Paused ones wait for an operator.
    (W.APPROVING, W.ACTIVE): FanOut(
        {
            T.NEW: frozenset({T.ACTIVE}),
            T.ACTIVE: frozenset({T.ACTIVE}),
            T.PAUSED: frozenset({T.PAUSED}),
        }
    ),
    (W.ACTIVE, W.FINALIZING): FanOut(
        {T.ACTIVE: frozenset({T.FINALIZING}), T.PAUSED: frozenset({T.FINALIZING})},
        requires=frozenset({T.ACTIVE, T.PAUSED}),
    ),
    (W.FINALIZING, W.ACTIVE): FanOut(
        {
            state: frozenset({T.ACTIVE})
            for state in (T.FINALIZING, T.FINALIZING_BLOCKED, T.FINALIZED)
        }
    ),
    (W.FINALIZING, W.COMPLETED): FanOut(
        {T.FINALIZED: frozenset({T.COMPLETED})}, requires=frozenset({T.FINALIZED})
    ),
    (W.COMPLETED, W.ARCHIVING): FanOut({T.COMPLETED: frozenset({T.ARCHIVING})}),
    (W.ARCHIVING, W.ARCHIVED): FanOut(
        {T.ARCHIVED: frozenset({T.ARCHIVED})}, requires=frozenset({T.ARCHIVED})
    ),
    **{
        (state, W.CANCELLING): _TO_CANCELLING
        for state in (W.NEW, W.SCOUTING, W.APPROVING, W.APPROVING_BLOCKED, W.ACTIVE, W.FINALIZING)
    },
    (W.CANCELLING, W.CANCELLED): FanOut(
        {T.CANCELLED: frozenset({T.CANCELLED})}, requires=frozenset({T.CANCELLED})
    ),
}

# The state whose action list runs, and the blocked state a Failed action moves its owner to.
BLOCKED_COUNTERPART: dict[str, str] = {
    W.APPROVING: W.APPROVING_BLOCKED,
    T.FINALIZING: T.FINALIZING_BLOCKED,
    T.ARCHIVING: T.ARCHIVING_BLOCKED,
    T.CANCELLING: T.CANCELLING_BLOCKED,
}

# Inputs that hold a member open: anything not terminal (Problematic included: a quarantine
# waits for an operator). Parcels likewise.
LIVE_INPUT_STATES = INPUT.non_terminal
LIVE_PARCEL_STATES = PARCEL.non_terminal


def member_state_compatible(workgraph_status: str, member_status: str) -> bool:
    """Whether a member may be in `member_status` while its workgraph is in `workgraph_status`."""
    WORKGRAPH._validate_state(workgraph_status, "workgraph_status")
    TRANSFORMATION._validate_state(member_status, "member_status")
    return member_status in MEMBER_STATES[WorkgraphStatus(workgraph_status)]
