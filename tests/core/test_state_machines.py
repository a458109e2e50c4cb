"""The four state machines against their edges typed independently, exhaustively.

The expected edges are typed here a second time, as docs/architecture.md draws them, so a slip in
either copy fails the comparison; then every (from, to, actor) triple is checked: each listed
edge is allowed, every other one refused with an error naming the entity and both states.
"""

from __future__ import annotations

import itertools

import pytest

from dxts.core.errors import InvalidArgument, InvalidTransition
from dxts.core.state_machines import (
    INPUT,
    MACHINES,
    MEMBER_FAN_OUT,
    MEMBER_STATES,
    PARCEL,
    TRANSFORMATION,
    WORKGRAPH,
    Actor,
    StateMachine,
    member_state_compatible,
)
from dxts.core.states import InputStatus, ParcelStatus, TransformationStatus, WorkgraphStatus

OP, WG, CORE, HOOK = "operator", "workgraph", "core", "hook"
FEEDER, PACKER, DISP = "feeder", "packer", "dispatcher"


def expand(table: str) -> set[tuple[str | None, str, frozenset[str]]]:
    """Rows 'A,B > C : actor,actor' (source '*' = creation) into edges."""
    edges = set()
    for line in table.strip().splitlines():
        states, actors = line.split(":")
        sources, target = states.split(">")
        for source in sources.split(","):
            source = source.strip()
            edges.add(
                (
                    None if source == "*" else source,
                    target.strip(),
                    frozenset(a.strip() for a in actors.split(",")),
                )
            )
    return edges


EXPECTED = {
    "workgraph": expand(
        f"""
        * > New : {CORE}
        New > Scouting : {OP}
        New > Active : {OP}
        Scouting > Approving : {HOOK}, {OP}
        Approving > ApprovingBlocked : {CORE}
        ApprovingBlocked > Approving : {OP}
        Approving, ApprovingBlocked > Scouting : {OP}
        Approving > Active : {CORE}
        Active > Finalizing : {CORE}
        Finalizing > Active : {OP}
        Finalizing > Completed : {CORE}
        Completed > Archiving : {CORE}
        Archiving > Archived : {CORE}
        New, Scouting, Approving, ApprovingBlocked, Active, Finalizing > Cancelling : {OP}
        Cancelling > Cancelled : {CORE}
        """
    ),
    "transformation": expand(
        f"""
        * > New : {CORE}
        New > Active : {WG}
        New > Paused : {WG}
        New, Active, Paused, Finalizing, FinalizingBlocked, Finalized > Cancelling : {WG}
        Active > Paused : {OP}, {HOOK}
        Paused > Active : {OP}, {WG}
        Active, Paused > Finalizing : {WG}
        Finalizing > FinalizingBlocked : {CORE}
        FinalizingBlocked > Finalizing : {OP}
        Finalizing > Finalized : {CORE}
        Finalizing, FinalizingBlocked, Finalized > Active : {WG}
        Finalized > Completed : {WG}
        Completed > Archiving : {WG}
        Archiving > ArchivingBlocked : {CORE}
        ArchivingBlocked > Archiving : {OP}
        Archiving > Archived : {CORE}
        Cancelling > CancellingBlocked : {CORE}
        CancellingBlocked > Cancelling : {OP}
        Cancelling > Cancelled : {CORE}
        """
    ),
    "input": expand(
        f"""
        * > Unassigned : {FEEDER}, {CORE}, {HOOK}, {OP}
        * > Processed : {CORE}
        Unassigned > Assigned : {PACKER}
        Unassigned > Problematic : {PACKER}
        Assigned > Processed : {CORE}
        Assigned > Split : {CORE}
        Assigned > Failed : {CORE}
        Failed > Unassigned : {HOOK}, {OP}
        Failed > Split : {HOOK}, {OP}
        Failed > Problematic : {HOOK}
        Problematic > Unassigned : {OP}, {CORE}
        Problematic > NotProcessed : {OP}, {CORE}
        Unassigned > NotProcessed : {OP}, {CORE}
        Assigned > NotProcessed : {CORE}
        Failed > NotProcessed : {CORE}, {HOOK}, {OP}
        Assigned > Unassigned : {CORE}
        """
    ),
    "parcel": expand(
        f"""
        * > Unassigned : {CORE}
        * > Done : {CORE}
        Unassigned > Reserved : {DISP}
        Reserved > Assigned : {DISP}
        Reserved > Unassigned : {DISP}
        Reserved, Assigned > Completing : {CORE}
        Assigned > Failed : {CORE}
        Reserved > Failed : {CORE}
        Completing > Done : {CORE}
        Completing > PartiallyDone : {CORE}
        Completing > Cancelled : {CORE}
        Completing > Failed : {CORE}, {OP}
        Unassigned > Cancelled : {CORE}, {OP}
        """
    ),
}

STATE_ORDER = {
    "workgraph": [s.value for s in WorkgraphStatus],
    "transformation": [s.value for s in TransformationStatus],
    "input": [s.value for s in InputStatus],
    "parcel": [s.value for s in ParcelStatus],
}


@pytest.mark.parametrize("entity", sorted(MACHINES))
def test_edges_are_exactly_the_design_tables(entity: str) -> None:
    machine = MACHINES[entity]
    actual = {(e.source, e.target, frozenset(a.value for a in e.actors)) for e in machine.edges}
    assert actual == EXPECTED[entity]


@pytest.mark.parametrize("entity", sorted(MACHINES))
def test_states_in_enum_order(entity: str) -> None:
    assert list(MACHINES[entity].states) == STATE_ORDER[entity]


@pytest.mark.parametrize("entity", sorted(MACHINES))
def test_every_pair_and_actor_exhaustively(entity: str) -> None:
    machine: StateMachine = MACHINES[entity]
    allowed = {(s, t): actors for s, t, actors in EXPECTED[entity]}
    sources: list[str | None] = [None, *machine.states]
    checked = 0
    for source, target in itertools.product(sources, machine.states):
        for actor in Actor:
            expected = actor.value in allowed.get((source, target), frozenset())
            assert machine.allowed(source, target, actor) is expected, (source, target, actor)
            if expected:
                machine.check(source, target, actor)
            else:
                with pytest.raises(InvalidTransition) as refused:
                    machine.check(source, target, actor, identifier="x")
                message = str(refused.value)
                assert entity in message and target in message
                assert (source or "(new)") in message
                assert refused.value.current_state == (source or "(new)")
            checked += 1
        # Without an actor, any listed edge is allowed and nothing else.
        assert machine.allowed(source, target) is ((source, target) in allowed)
    assert checked == len(sources) * len(machine.states) * len(Actor)


def test_terminal_sets() -> None:
    assert WORKGRAPH.terminal == {"Archived", "Cancelled"}
    assert TRANSFORMATION.terminal == {"Archived", "Cancelled"}
    assert INPUT.terminal == {"Processed", "Split", "NotProcessed"}
    assert PARCEL.terminal == {"Done", "PartiallyDone", "Failed", "Cancelled"}
    for machine in MACHINES.values():
        for state in machine.terminal:
            assert machine.targets_of(state) == frozenset(), (machine.entity, state)
    # Problematic is not terminal: a quarantine holds the workgraph open.
    assert "Problematic" in INPUT.non_terminal


def test_standalone_transformation_takes_workgraph_edges_by_operator() -> None:
    assert not TRANSFORMATION.allowed("Active", "Finalizing", Actor.OPERATOR)
    assert TRANSFORMATION.allowed("Active", "Finalizing", Actor.OPERATOR, standalone=True)
    TRANSFORMATION.check("New", "Active", Actor.OPERATOR, standalone=True)
    # ...but never an edge that is the core's alone.
    assert not TRANSFORMATION.allowed("Finalizing", "Finalized", Actor.OPERATOR, standalone=True)
    # and only transformations have this.
    assert not WORKGRAPH.allowed("Active", "Finalizing", Actor.OPERATOR, standalone=True)


def test_member_state_compatibility_table() -> None:
    expected = {
        "New": {"New"},
        "Scouting": {"Active", "Paused", "New"},
        "Approving": {"Active", "Paused", "New"},
        "ApprovingBlocked": {"Active", "Paused", "New"},
        "Active": {"Active", "Paused", "New"},
        "Finalizing": {"Finalizing", "FinalizingBlocked", "Finalized"},
        "Completed": {"Completed"},
        "Archiving": {"Archiving", "ArchivingBlocked", "Archived"},
        "Archived": {"Archived"},
        "Cancelling": {"Cancelling", "CancellingBlocked", "Cancelled"},
        "Cancelled": {"Cancelled"},
    }
    assert {k.value: {s.value for s in v} for k, v in MEMBER_STATES.items()} == expected
    for workgraph_state, member_state in itertools.product(WORKGRAPH.states, TRANSFORMATION.states):
        assert member_state_compatible(workgraph_state, member_state) is (
            member_state in expected[workgraph_state]
        )


def test_member_fan_out_keeps_members_compatible() -> None:
    """Every workgraph edge has a fan-out; each move is a transformation edge the workgraph may
    take, and lands every admitted member in a state the new workgraph state admits."""
    workgraph_edges = {(e.source, e.target) for e in WORKGRAPH.edges if e.source is not None}
    assert set(MEMBER_FAN_OUT) == workgraph_edges
    for (source, target), fan_out in MEMBER_FAN_OUT.items():
        before = MEMBER_STATES[WorkgraphStatus(source)]
        after = MEMBER_STATES[WorkgraphStatus(target)]
        members = fan_out.requires if fan_out.requires is not None else before
        assert members <= before, (source, target)
        for member in members:
            assert member in fan_out.moves, (source, target, member)
            for destination in fan_out.moves[member]:
                assert destination in after, (source, target, member, destination)
                if destination != member:
                    assert TRANSFORMATION.allowed(member, destination, Actor.WORKGRAPH), (
                        source,
                        target,
                        member,
                        destination,
                    )


@pytest.mark.parametrize(
    "call",
    [
        lambda: WORKGRAPH.check("Bogus", "Active"),
        lambda: WORKGRAPH.check("New", "Nope"),
        lambda: INPUT.check("Unassigned", 3),  # type: ignore[arg-type]
        lambda: PARCEL.check("Unassigned", "Reserved", "dispatcher"),  # type: ignore[arg-type]
        lambda: member_state_compatible("Active", "Bogus"),
        lambda: PARCEL.sources_of("Nope"),
    ],
)
def test_bad_input_is_a_domain_error(call: object) -> None:
    with pytest.raises(InvalidArgument):
        call()  # type: ignore[operator]


def test_sources_of_builds_conditional_updates() -> None:
    assert INPUT.sources_of("NotProcessed") == {"Problematic", "Unassigned", "Assigned", "Failed"}
    assert INPUT.sources_of("NotProcessed", Actor.OPERATOR) == {
        "Problematic",
        "Unassigned",
        "Failed",
    }
    assert PARCEL.sources_of("Completing") == {"Reserved", "Assigned"}
