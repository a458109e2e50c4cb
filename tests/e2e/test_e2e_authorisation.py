"""Who may call what, against the real servers: every RPC of every contract called with a token
of every kind of caller (the same matrix as tests/kernel/test_authorisation.py) answers
PERMISSION_DENIED from the table exactly where the table says so; and what a permitted caller
reads of accounting is its own VO's, what it rebuilds its VO's unless it is an admin."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from e2e_world import VO, Submitted, World, running, seeds, step, workgraph
from google.protobuf import message_factory

from dxts.core.counters import journal_inputs
from dxts.core.db import Database, Isolation
from dxts.core.errors import NotFound
from dxts.core.grpc import DevKeys, channel
from dxts.core.identity import Identity
from dxts.core.ids import id_to_str
from dxts.core.kernel.authorisation import (
    RULES,
    CallerKind,
    adaptor_subject,
    contract_methods,
    kinds_of,
)
from dxts.core.kernel.bounds import limit_of
from dxts.v1 import accounting_pb2, accounting_pb2_grpc, common_pb2

# Which running component serves each contract's service.
SERVED_BY = {
    "dxts.v1.DefinitionService": "definition",
    "dxts.v1.ExecutionService": "execution",
    "dxts.v1.AccountingService": "accounting",
    "dxts.v1.DispatcherService": "dispatcher",
    "dxts.v1.BackendAdaptorService": "null",
}
REFUSED_BY_THE_TABLE = "may be called by"


@pytest.fixture(scope="module")
async def world(
    database: Database, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[World]:
    directory: Path = tmp_path_factory.mktemp("authorisation")
    async with running(database, directory) as started:
        yield started


def caller(kind: CallerKind, vo: str = VO) -> Identity:
    """A caller of one kind (an adaptor's subject names the backend it serves)."""
    if kind is CallerKind.USER:
        return Identity(vo, f"a-user-of-{vo}")
    sub = adaptor_subject("null") if kind is CallerKind.ADAPTOR else f"a-{kind}-of-{vo}"
    return Identity(vo, sub, frozenset({kind.value}))


def token_of(world: World, kind: CallerKind, vo: str = VO) -> str:
    identity = caller(kind, vo)
    return DevKeys.load_or_create(world.data_dir).issue(vo, identity.sub, identity.roles)


async def call(world: World, method: str, token: str) -> grpc.StatusCode | tuple[Any, str]:
    """`method` called with an empty request: OK, or the status code and details."""
    descriptor = contract_methods()[method]
    request = message_factory.GetMessageClass(descriptor.input_type)
    response = message_factory.GetMessageClass(descriptor.output_type)
    address = world.stack.address(SERVED_BY[descriptor.containing_service.full_name])
    async with grpc.aio.insecure_channel(address) as ch:
        stub = ch.unary_unary(
            method,
            request_serializer=request.SerializeToString,
            response_deserializer=response.FromString,
        )
        try:
            await stub(request(), metadata=[("authorization", f"Bearer {token}")], timeout=30)
        except grpc.aio.AioRpcError as error:
            return error.code(), error.details() or ""
    return grpc.StatusCode.OK


@pytest.mark.parametrize("kind", list(CallerKind))
async def test_every_rpc_refuses_exactly_the_callers_the_table_refuses(
    world: World, kind: CallerKind
) -> None:
    token, kinds = token_of(world, kind), kinds_of(caller(kind))
    wrong = []
    for method in sorted(contract_methods()):
        allowed = bool(kinds & RULES[method])
        answer = await call(world, method, token)
        refused = (
            isinstance(answer, tuple)
            and answer[0] == grpc.StatusCode.PERMISSION_DENIED
            and REFUSED_BY_THE_TABLE in answer[1]
        )
        if allowed == refused:
            wrong.append(f"{method}: {'allowed' if allowed else 'refused'} but got {answer}")
    assert not wrong, "\n".join(wrong)


# -- what a permitted caller sees of accounting -------------------------------------------------


@pytest.fixture(scope="module")
async def submitted(world: World) -> Submitted:
    return await world.submit(
        workgraph({"seeds": seeds(2)}, {"Sim": step("seeds")}, {"sims": "Sim/out"})
    )


@contextlib.asynccontextmanager
async def accounting(world: World, kind: CallerKind, vo: str = VO) -> AsyncIterator[Any]:
    """An AccountingService client of one kind of caller of `vo`."""
    async with channel(world.stack.address("accounting"), token=token_of(world, kind, vo)) as ch:
        yield accounting_pb2_grpc.AccountingServiceStub(ch)  # type: ignore[no-untyped-call]


async def test_accounting_reads_are_the_callers_vo_only(world: World, submitted: Submitted) -> None:
    sim = id_to_str(submitted.tid("Sim"))
    counts = accounting_pb2.GetCountsRequest(
        transformation_ids=[sim], entity=common_pb2.ENTITY_INPUT
    )
    log = accounting_pb2.ListLogRequest(workgraph_id=submitted.workgraph_id)
    member_log = accounting_pb2.ListLogRequest(transformation_id=sim)
    summary = accounting_pb2.GetWorkgraphSummaryRequest(workgraph_id=submitted.workgraph_id)
    storage = accounting_pb2.GetStorageSummaryRequest(transformation_ids=[sim])

    async with accounting(world, CallerKind.USER) as own:
        assert (await own.GetCounts(counts)).counts[0].transformation_id == sim
        assert (await own.ListLog(log)).entries  # the submission, at least
        assert (await own.GetWorkgraphSummary(summary)).members
        await own.GetStorageSummary(storage)
        await own.ListLog(member_log)

    for kind in (CallerKind.USER, CallerKind.OPERATOR):
        async with accounting(world, kind, vo="belle") as stranger:
            everything = await stranger.GetStorageSummary(accounting_pb2.GetStorageSummaryRequest())
            assert sim not in {u.transformation_id for u in everything.usage}
            for rpc, request in (
                ("GetCounts", counts),
                ("ListLog", log),
                ("ListLog", member_log),
                ("GetWorkgraphSummary", summary),
                ("GetStorageSummary", storage),
            ):
                with pytest.raises(NotFound):
                    await getattr(stranger, rpc)(request)


async def corrupt(world: World, transformation_id: bytes) -> None:
    """A count with no input behind it, for a rebuild to find."""
    async with world.database.transaction(Isolation.READ_COMMITTED) as conn:
        await journal_inputs(conn, {(transformation_id, None, "Processed"): 3})


def corrected(reply: Any) -> set[str]:
    return {c.transformation_id for c in reply.corrections}


async def test_a_rebuild_is_the_operators_vo_or_an_admins_every_vo(
    world: World, submitted: Submitted
) -> None:
    sim = submitted.tid("Sim")
    everything = accounting_pb2.RebuildRequest(all_transformations=True)
    named = accounting_pb2.RebuildRequest(transformation_ids=[id_to_str(sim)])

    await corrupt(world, sim)
    async with accounting(world, CallerKind.OPERATOR, vo="belle") as stranger:
        assert corrected(await stranger.Rebuild(everything)) == set()
        with pytest.raises(NotFound):
            await stranger.Rebuild(named)
    async with accounting(world, CallerKind.OPERATOR) as operator:
        reply = await operator.Rebuild(everything)
    assert corrected(reply) == {id_to_str(sim)}
    assert [json.loads(c.key_and_delta_json)["CountDelta"] for c in reply.corrections] == [-3]

    await corrupt(world, sim)
    async with accounting(world, CallerKind.ADMIN, vo="belle") as admin:
        assert corrected(await admin.Rebuild(everything)) == {id_to_str(sim)}


# -- bounds, on the real servers -----------------------------------------------------------------


def over_the_bound(descriptor: Any) -> tuple[Any, str] | None:
    """A request of `descriptor`'s type with its first list or text field one over its bound,
    and that field's name (None: a request without such a field)."""
    request = message_factory.GetMessageClass(descriptor)()
    for field in descriptor.fields:
        limit = limit_of(field)
        if limit is None or field.message_type is not None:
            continue
        if field.is_repeated:
            getattr(request, field.name).extend(
                ["x"] * (limit + 1) if field.type == field.TYPE_STRING else [0] * (limit + 1)
            )
        else:
            setattr(request, field.name, "x" * (limit + 1))
        return request, field.name
    return None


async def test_every_rpc_of_every_component_refuses_a_request_over_its_bound(
    world: World,
) -> None:
    token = token_of(world, CallerKind.ADMIN)
    wrong = []
    for method, descriptor in sorted(contract_methods().items()):
        built = over_the_bound(descriptor.input_type)
        if built is None:
            continue
        request, field = built
        address = world.stack.address(SERVED_BY[descriptor.containing_service.full_name])
        async with grpc.aio.insecure_channel(address) as ch:
            stub = ch.unary_unary(method, request_serializer=type(request).SerializeToString)
            try:
                await stub(request, metadata=[("authorization", f"Bearer {token}")], timeout=30)
                wrong.append(f"{method}: accepted")
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.INVALID_ARGUMENT or field not in (
                    error.details() or ""
                ):
                    wrong.append(f"{method}: {error.code()} {error.details()}")
    assert not wrong, "\n".join(wrong)
