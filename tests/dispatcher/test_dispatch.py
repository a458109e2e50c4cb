"""Claim, submit, record and recover, against the null adaptor over real gRPC, on SQLite and
MariaDB: what reaches the adaptor, what is recorded, and that the counters stay exact."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa
from dispatch_support import (
    SCOPE,
    FakeDefinition,
    FakeExecution,
    Keys,
    assert_counters_exact,
    dispatcher,
    empty,
    identifiers,
    parcel_rows,
    parcels,
    serve,
    statuses,
    transformation,
)

from dxts.backends.null.logic.adaptor import NullAdaptor
from dxts.backends.null.settings import NullSettings
from dxts.core.adaptor.model import (
    ComputePayload,
    DataPayload,
    FailureClass,
    OutcomeResult,
    Payload,
    Submission,
    SubmitResult,
)
from dxts.core.config import DefinitionConfig, resolve_hints
from dxts.core.counters import StorageDelta
from dxts.core.db import Database, Isolation
from dxts.core.ids import content_hash, id_to_str
from dxts.core.schema import definition, execution
from dxts.core.states import Kind
from dxts.dispatcher.logic.policy import route_point

COMPUTE = {"name": "null", "address": "", "kind": "compute"}


@dataclass(frozen=True)
class Sent:
    """One Submit, as the adaptor received it."""

    payload: Payload
    parcels: list[Submission]


class RecordingNull(NullAdaptor):
    """The null adaptor, keeping every Submit request it was sent."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[Sent] = []

    async def submit(self, payload: Payload, parcels: Sequence[Submission]) -> list[SubmitResult]:
        self.requests.append(Sent(payload, list(parcels)))
        return await super().submit(payload, parcels)


class Killed(BaseException):
    """The dispatcher process dies here (nothing after this line of it runs)."""


async def drain(component: Any, kind: Kind = Kind.COMPUTE) -> int:
    total = 0
    while claimed := await component.dispatcher.dispatch_once(kind):
        total += claimed
    return total


async def test_parcels_are_claimed_submitted_and_recorded(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    produced = await parcels(database, 30, transformation_id=tid, inputs_per_parcel=2)
    users = await parcels(database, 5)
    adaptor, address = await null_adaptors(RecordingNull)
    definition_source = FakeDefinition(database)
    component = await dispatcher(
        database,
        [{**COMPUTE, "address": address}],
        keys,
        definition=definition_source,
        claim_batch=10,
    )

    assert await drain(component) == 35
    assert set((await statuses(database, produced + users)).values()) == {"Assigned"}
    recorded = await identifiers(database, "null")
    assert set(recorded) == set(produced + users)
    assert {id_to_str(i) for i in recorded.values()} == {
        j.identifier for j in adaptor.jobs.values()
    }
    assert adaptor.submits == Counter({id_to_str(p): 1 for p in produced + users})

    sent = {p.parcel_id: p for r in adaptor.requests for p in r.parcels}
    links = await _links(database)
    for parcel_id in produced:
        submission = sent[id_to_str(parcel_id)]
        assert sorted(submission.input_ids) == sorted(id_to_str(i) for i in links[parcel_id])
        assert submission.output_prefix == f"/lhcb/dxts/{id_to_str(tid)}/{id_to_str(parcel_id)}"
        assert submission.vo == "lhcb"
    for parcel_id in users:
        assert sent[id_to_str(parcel_id)].vo == "lhcb"
        assert not sent[id_to_str(parcel_id)].input_ids
        assert sent[id_to_str(parcel_id)].output_prefix == f"/lhcb/dxts/user/{id_to_str(parcel_id)}"

    # One sidecar per scope, recorded on every parcel and stored once; one materialisation.
    config = DefinitionConfig()
    expected = {
        "transformation": resolve_hints(
            config, vo=SCOPE[0], workgraph_hint={"type": SCOPE[1]}
        ).as_json(),
        "user": resolve_hints(
            config, vo="lhcb", workgraph_hint={"type": config.default_type}
        ).as_json(),
    }
    hints = await _sidecars(database, produced + users)
    assert {hints[p] for p in produced} == {content_hash(expected["transformation"])}
    assert {hints[p] for p in users} == {content_hash(expected["user"])}
    payloads = [r.payload for r in adaptor.requests]
    assert all(isinstance(p, ComputePayload) for p in payloads)
    assert {json.loads(p.resolved_hints_json)["type"] for p in payloads} == {
        SCOPE[1],
        config.default_type,
    }
    assert len({r.payload for r in adaptor.requests}) == 2
    assert sum(definition_source.tree_calls.values()) == 1
    assert definition_source.scope_calls == Counter({tid: 1})
    await assert_counters_exact(database)
    await component.stop()


async def _links(database: Database) -> dict[bytes, list[bytes]]:
    async def work(conn: Any) -> dict[bytes, list[bytes]]:
        found: dict[bytes, list[bytes]] = {}
        for row in await conn.execute(sa.select(execution.parcel_inputs)):
            found.setdefault(bytes(row.ParcelID), []).append(bytes(row.InputID))
        return found

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def _sidecars(database: Database, ids: list[bytes]) -> dict[bytes, bytes]:
    async def work(conn: Any) -> dict[bytes, bytes]:
        table = execution.compute_parcels
        rows = await conn.execute(
            sa.select(table.c.ParcelID, table.c.ResolvedHintsID)
            .join(
                definition.resolved_hints,
                definition.resolved_hints.c.ResolvedHintsID == table.c.ResolvedHintsID,
            )
            .where(table.c.ParcelID.in_(ids))
        )
        return {bytes(r[0]): bytes(r[1]) for r in rows}

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def test_data_parcels_carry_their_request_and_move_their_quantities(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database, Kind.DATA)
    request = {"Operations": [{"Type": "ReplicateAndRegister", "TargetSE": "B", "Files": []}]}
    ids = await parcels(
        database,
        7,
        transformation_id=tid,
        kind=Kind.DATA,
        request=request,
        deltas=[("B", StorageDelta(1, 100, 0, 0)), ("A", StorageDelta(0, 0, 1, 100))],
    )
    adaptor, address = await null_adaptors(RecordingNull, name="mover", kind="data")
    component = await dispatcher(
        database, [{"name": "mover", "address": address, "kind": "data", "adaptor": "null"}], keys
    )
    assert await drain(component, Kind.COMPUTE) == 0
    assert await drain(component, Kind.DATA) == 7
    assert set((await statuses(database, ids)).values()) == {"Assigned"}
    (sent,) = adaptor.requests
    assert isinstance(sent.payload, DataPayload)
    assert {json.dumps(json.loads(p.request_json), sort_keys=True) for p in sent.parcels} == {
        json.dumps(request, sort_keys=True)
    }
    # Whose files they may touch: the VO of their transformation (its scope).
    assert {p.vo for p in sent.parcels} == {SCOPE[0]}
    await assert_counters_exact(database)
    await component.stop()


def test_route_point_is_stable_and_spread() -> None:
    ids = [bytes([i]) * 16 for i in range(200)]
    points = [route_point(i) for i in ids]
    assert points == [route_point(i) for i in ids]
    assert all(0 <= p < 1 for p in points)
    assert 0.3 < sum(p < 0.5 for p in points) / len(points) < 0.7


async def test_the_packers_backend_is_kept_and_a_fraction_is_routed(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    free = await parcels(database, 60, transformation_id=tid)
    forced = await parcels(database, 5, transformation_id=tid, backend="second")
    first, first_address = await null_adaptors()
    second, second_address = await null_adaptors(name="second")
    component = await dispatcher(
        database,
        [
            {**COMPUTE, "address": first_address},
            {"name": "second", "address": second_address, "kind": "compute", "adaptor": "null"},
        ],
        keys,
        backend_policy={
            "compute": {"default": "null", "route": {"backend": "second", "fraction": 0.25}}
        },
    )
    assert await drain(component) == 65
    rows = await parcel_rows(database, free + forced)
    routed = {p for p in free if route_point(p) < 0.25}
    assert 0 < len(routed) < len(free)
    assert {p for p, r in rows.items() if r.Backend == "second"} == routed | set(forced)
    assert set(second.submits) == {id_to_str(p) for p in routed | set(forced)}
    assert set(first.submits) == {id_to_str(p) for p in set(free) - routed}
    await component.stop()


async def directions(database: Database, ids: Sequence[bytes]) -> dict[bytes, str]:
    table = execution.directed_parcels

    async def work(conn: Any) -> dict[bytes, str]:
        rows = await conn.execute(sa.select(table).where(table.c.ParcelID.in_(list(ids))))
        return {bytes(r.ParcelID): r.Backend for r in rows}

    return await database.run(work, isolation=Isolation.READ_COMMITTED)


async def test_a_direction_is_executions_row_and_outlives_a_refusal(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    """The dispatcher writes Parcels.Backend alone: a refused parcel goes back to Unassigned with
    the backend it was reserved for cleared, while the direction (execution's DirectedParcels
    row) stays and still holds it to its backend; a parcel directed to a backend this
    dispatcher lacks is never claimed."""
    await empty(database)
    tid = await transformation(database)
    directed = await parcels(database, 6, transformation_id=tid, backend="second")
    elsewhere = await parcels(database, 2, transformation_id=tid, backend="absent")
    first, first_address = await null_adaptors()
    second, second_address = await null_adaptors(name="second", capacity=2, delay_s=3600)
    component = await dispatcher(
        database,
        [
            {**COMPUTE, "address": first_address},
            {"name": "second", "address": second_address, "kind": "compute", "adaptor": "null"},
        ],
        keys,
        claim_batch=12,
        refusal_backoff_s=3600,
    )
    component.backends["second"].state.capacity = 0  # as if its limit were not known yet

    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 6
    rows = await parcel_rows(database, directed + elsewhere)
    assigned = {p for p in directed if rows[p].Status == "Assigned"}
    assert len(assigned) == 2 and {rows[p].Backend for p in assigned} == {"second"}
    assert {id_to_str(p) for p in assigned} <= set(second.submits)
    assert {(r.Status, r.Backend) for p, r in rows.items() if p not in assigned} == {
        ("Unassigned", None)
    }
    assert await directions(database, directed + elsewhere) == {
        **{p: "second" for p in directed},
        **{p: "absent" for p in elsewhere},
    }
    # "second" backs off after refusing: its parcels wait for it rather than go to "null".
    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 0
    assert not first.submits
    await assert_counters_exact(database)
    await component.stop()


async def test_refused_parcels_go_back_to_unassigned_and_capacity_bounds_the_claim(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 12, transformation_id=tid)
    adaptor, address = await null_adaptors(capacity=5, delay_s=3600)
    component = await dispatcher(
        database, [{**COMPUTE, "address": address}], keys, claim_batch=12, refusal_backoff_s=3600
    )
    backend = component.backends["null"]
    assert backend.state.capacity == 5
    backend.state.capacity = 0  # as if the dispatcher had not heard of the limit yet

    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 12
    rows = await parcel_rows(database, ids)
    assigned = {p for p, r in rows.items() if r.Status == "Assigned"}
    assert len(assigned) == 5
    assert {r.Status for p, r in rows.items() if p not in assigned} == {"Unassigned"}
    assert {r.Backend for p, r in rows.items() if p not in assigned} == {None}
    assert backend.state.refusals == 7
    await assert_counters_exact(database)

    # Backing off after refusals, then bounded by the declared capacity once it is known.
    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 0
    backend.state.backoff_until = 0
    await component.refresh()
    assert (backend.state.capacity, backend.state.in_flight) == (5, 5)
    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 0
    assert sum(adaptor.submits.values()) == 12
    await component.stop()


async def test_an_unreachable_adaptor_leaves_parcels_reserved_until_recovery(
    database: Database, keys: Keys
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 4, transformation_id=tid)
    adaptor = NullAdaptor(NullSettings())
    down = await serve(adaptor, keys)
    port = down.port
    await down.stop(grace=0)
    component = await dispatcher(
        database,
        [{**COMPUTE, "address": f"127.0.0.1:{port}"}],
        keys,
        lease_s=0.001,
        call_timeout_s=2,
    )
    assert not component.backends["null"].state.reachable
    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 4
    assert set((await statuses(database, ids)).values()) == {"Reserved"}
    assert await identifiers(database, "null") == {}

    adaptor = NullAdaptor(NullSettings())
    up = await serve(adaptor, keys, listen=f"127.0.0.1:{port}")
    try:
        for _ in range(100):  # until the channel has reconnected
            await component.refresh()
            if component.backends["null"].state.reachable:
                break
            await asyncio.sleep(0.1)
        assert await component.dispatcher.recover_once(Kind.COMPUTE) == 4
        assert set((await statuses(database, ids)).values()) == {"Assigned"}
        assert adaptor.submits == Counter({id_to_str(p): 1 for p in ids})
        await assert_counters_exact(database)
    finally:
        await up.stop(grace=0)
        await component.stop()


async def test_a_crash_between_submit_and_record_is_closed_by_recovery(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 6, transformation_id=tid)
    adaptor, address = await null_adaptors(delay_s=3600)
    crashing = await dispatcher(database, [{**COMPUTE, "address": address}], keys)
    backend = crashing.dispatcher.backends["null"]
    real_submit = backend.submit

    async def submit_then_die(*args: Any) -> Any:
        await real_submit(*args)
        raise Killed

    backend.submit = submit_then_die  # type: ignore[method-assign]
    with pytest.raises(Killed):
        await crashing.dispatcher.dispatch_once(Kind.COMPUTE)
    assert set((await statuses(database, ids)).values()) == {"Reserved"}
    assert await identifiers(database, "null") == {}
    first = {key: job.identifier for key, job in adaptor.jobs.items()}
    assert set(first) == {id_to_str(p) for p in ids}

    survivor = await dispatcher(database, [{**COMPUTE, "address": address}], keys, lease_s=0.001)
    assert await survivor.dispatcher.recover_once(Kind.COMPUTE) == 6
    assert set((await statuses(database, ids)).values()) == {"Assigned"}
    recorded = await identifiers(database, "null")
    assert {id_to_str(p): id_to_str(i) for p, i in recorded.items()} == first
    assert adaptor.submits == Counter({id_to_str(p): 2 for p in ids})
    assert adaptor.started == Counter({id_to_str(p): 1 for p in ids})
    await assert_counters_exact(database)
    await crashing.stop()
    await survivor.stop()


class DyingDefinition(FakeDefinition):
    async def transformation_scope(self, transformation_id: bytes) -> tuple[str, str]:
        raise Killed


async def test_a_crash_right_after_claiming_is_closed_by_recovery(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 6, transformation_id=tid)
    adaptor, address = await null_adaptors()
    crashing = await dispatcher(
        database, [{**COMPUTE, "address": address}], keys, definition=DyingDefinition(database)
    )
    with pytest.raises(Killed):
        await crashing.dispatcher.dispatch_once(Kind.COMPUTE)
    assert set((await statuses(database, ids)).values()) == {"Reserved"}
    assert not adaptor.submits

    survivor = await dispatcher(database, [{**COMPUTE, "address": address}], keys, lease_s=0.001)
    assert await survivor.dispatcher.recover_once(Kind.COMPUTE) == 6
    assert set((await statuses(database, ids)).values()) == {"Assigned"}
    assert adaptor.submits == Counter({id_to_str(p): 1 for p in ids})
    assert adaptor.started == Counter({id_to_str(p): 1 for p in ids})
    await assert_counters_exact(database)
    await crashing.stop()
    await survivor.stop()


async def test_recovery_leaves_fresh_reservations_alone(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    await parcels(database, 3, transformation_id=tid)
    adaptor, address = await null_adaptors()
    crashing = await dispatcher(
        database, [{**COMPUTE, "address": address}], keys, definition=DyingDefinition(database)
    )
    with pytest.raises(Killed):
        await crashing.dispatcher.dispatch_once(Kind.COMPUTE)
    patient = await dispatcher(database, [{**COMPUTE, "address": address}], keys, lease_s=3600)
    assert await patient.dispatcher.recover_once(Kind.COMPUTE) == 0
    assert not adaptor.submits
    await crashing.stop()
    await patient.stop()


class RefusingAdaptor(NullAdaptor):
    """An adaptor refusing every Submit as a whole, as one over its request bounds does."""

    async def submit(self, payload: Any, parcels: Sequence[Any]) -> list[Any]:
        from dxts.core.errors import InvalidArgument

        raise InvalidArgument("at most 1048576 characters (test)", field="document_json")


async def test_a_request_the_adaptor_refuses_whole_fails_its_parcels_in_its_words(
    database: Database, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    """The adaptor's INVALID_ARGUMENT on a whole Submit (the request is over one of its bounds,
    and would be refused on every retry) fails each parcel: a FAILED outcome of class `refused`
    in the adaptor's words goes to execution, the round goes on, and one log line says it."""
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 3, transformation_id=tid)
    server = await serve(RefusingAdaptor(NullSettings()), keys)
    sink = FakeExecution(database)
    component = await dispatcher(
        database, [{**COMPUTE, "address": f"127.0.0.1:{server.port}"}], keys, sink=sink
    )
    try:
        with caplog.at_level("ERROR", logger="dxts.dispatcher"):
            assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 3
        assert set((await statuses(database, ids)).values()) == {"Failed"}
        forwarded = sink.by_parcel()
        assert set(forwarded) == set(ids)
        for (outcome,) in forwarded.values():
            assert outcome.result is OutcomeResult.FAILED and outcome.identifier == ""
            assert outcome.backend == "null"
            assert outcome.failure is not None
            assert outcome.failure.failure_class is FailureClass.REFUSED
            assert "at most 1048576 characters (test)" in outcome.failure.tool_message
            assert outcome.message.startswith("null refused the submission: ")
        refused = [r for r in caplog.records if "refused the request of 3 parcels" in r.message]
        assert len(refused) == 1 and "1048576 characters" in refused[0].message
        assert refused[0].exc_info is None
        await assert_counters_exact(database)
    finally:
        await component.stop()
        await server.stop(grace=0)


async def test_a_refused_request_stays_reserved_while_execution_cannot_record_it(
    database: Database, keys: Keys
) -> None:
    """Execution away: nothing records the refusal, so the parcels wait Reserved for the
    recovery sweep, which submits them again (and, refused again, fails them then)."""
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 2, transformation_id=tid)
    server = await serve(RefusingAdaptor(NullSettings()), keys)
    sink = FakeExecution(database)
    sink.unavailable = True
    component = await dispatcher(
        database,
        [{**COMPUTE, "address": f"127.0.0.1:{server.port}"}],
        keys,
        sink=sink,
        lease_s=0.001,
    )
    try:
        assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 2
        assert set((await statuses(database, ids)).values()) == {"Reserved"}
        sink.unavailable = False
        await asyncio.sleep(0.05)  # past the lease
        assert await component.dispatcher.recover_once(Kind.COMPUTE) == 2
        assert set((await statuses(database, ids)).values()) == {"Failed"}
    finally:
        await component.stop()
        await server.stop(grace=0)
