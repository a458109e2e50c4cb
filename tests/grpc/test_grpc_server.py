"""The server: port 0, health (database-aware, NOT_SERVING once a stop begins), reflection,
generated servicers, and the metrics endpoint (SIGTERM is the shell's: test_component_shell)."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator

import grpc
import pytest
from google.protobuf.wrappers_pb2 import StringValue
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_probe import PROBE, PROBE_RULES, Probe, unary
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from dxts.core import errors
from dxts.core.db import Database
from dxts.core.grpc import DevKeys, GrpcServer, Service, channel, start_metrics_server
from dxts.core.settings import ServerSettings
from dxts.v1 import dispatcher_pb2, dispatcher_pb2_grpc

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
DISPATCHER = "dxts.v1.DispatcherService"


class Dispatcher(dispatcher_pb2_grpc.DispatcherServiceServicer):
    """A generated servicer, registered the way every service registers its own."""

    async def DispatcherStatus(
        self, request: dispatcher_pb2.DispatcherStatusRequest, context: object
    ) -> dispatcher_pb2.DispatcherStatusResponse:
        return dispatcher_pb2.DispatcherStatusResponse(
            backends=[dispatcher_pb2.BackendStatus(backend="null", in_flight=3)]
        )


def dispatcher_service() -> Service:
    return Service.of(
        dispatcher_pb2.DESCRIPTOR.services_by_name["DispatcherService"],
        dispatcher_pb2_grpc.add_DispatcherServiceServicer_to_server,
        Dispatcher(),
    )


def new_server(dev_keys: DevKeys, database: Database | None = None) -> GrpcServer:
    return GrpcServer(
        [Probe().service(), dispatcher_service()],
        settings=ServerSettings(listen="127.0.0.1:0", shutdown_grace_s=5),
        verifier=dev_keys.verifier(),
        extra_rules=PROBE_RULES,
        database=database,
        health_interval_s=0.02,
    )


async def check(address: str, service: str = "") -> int:
    async with grpc.aio.insecure_channel(address) as ch:
        reply = await health_pb2_grpc.HealthStub(ch).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=10
        )
    return reply.status


async def watch(address: str, service: str = "") -> AsyncIterator[int]:
    """Every status change the server reports, as it happens (no polling, no sleeps)."""
    async with grpc.aio.insecure_channel(address) as ch:
        stream = health_pb2_grpc.HealthStub(ch).Watch(
            health_pb2.HealthCheckRequest(service=service), timeout=30
        )
        async for reply in stream:
            yield reply.status


async def test_it_binds_a_free_port_and_serves_generated_servicers(
    dev_keys: DevKeys, token: str
) -> None:
    async with new_server(dev_keys) as server:
        assert server.port > 0
        assert server.address == f"127.0.0.1:{server.port}"
        async with channel(server.address, token=token) as ch:
            reply = await dispatcher_pb2_grpc.DispatcherServiceStub(ch).DispatcherStatus(
                dispatcher_pb2.DispatcherStatusRequest()
            )
        assert [(b.backend, b.in_flight) for b in reply.backends] == [("null", 3)]


async def test_health_reports_every_service_serving(dev_keys: DevKeys) -> None:
    async with new_server(dev_keys) as server:
        for name in ("", PROBE, DISPATCHER):
            assert await check(server.address, name) == SERVING
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await check(server.address, "dxts.v1.NoSuchService")
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_health_turns_not_serving_as_soon_as_a_stop_begins(
    dev_keys: DevKeys, token: str
) -> None:
    server = new_server(dev_keys)
    await server.start()
    statuses = watch(server.address, DISPATCHER)
    assert await anext(statuses) == SERVING
    stopping = asyncio.create_task(server.stop(grace=5))
    assert await anext(statuses) == NOT_SERVING
    await statuses.aclose()
    await stopping
    async with channel(server.address, token=token, default_timeout=2) as ch:
        with pytest.raises(errors.Unavailable):
            await unary(ch, "WhoAmI")(StringValue())


async def test_reflection_lists_every_service(dev_keys: DevKeys) -> None:
    async with new_server(dev_keys) as server, grpc.aio.insecure_channel(server.address) as ch:
        stub = reflection_pb2_grpc.ServerReflectionStub(ch)
        requests = [
            reflection_pb2.ServerReflectionRequest(list_services=""),
            reflection_pb2.ServerReflectionRequest(file_containing_symbol=DISPATCHER),
        ]
        replies = [reply async for reply in stub.ServerReflectionInfo(iter(requests), timeout=10)]
    listed = {service.name for service in replies[0].list_services_response.service}
    assert listed == {
        PROBE,
        DISPATCHER,
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    }
    assert replies[1].file_descriptor_response.file_descriptor_proto  # the contract itself


@pytest.fixture(scope="module")
async def started_database(db_url: str) -> AsyncIterator[Database]:
    database = Database(db_url)
    await database.start()
    yield database
    await database.dispose()


async def test_health_follows_the_database(dev_keys: DevKeys, started_database: Database) -> None:
    async with new_server(dev_keys, started_database) as server:
        statuses = watch(server.address, PROBE)
        assert await anext(statuses) == SERVING
        await started_database.dispose()  # the database goes away...
        assert await anext(statuses) == NOT_SERVING
        assert await check(server.address) == NOT_SERVING
        await started_database.start()  # ...and comes back
        assert await anext(statuses) == SERVING
        await statuses.aclose()


async def test_an_unreachable_database_is_not_serving_from_the_start(dev_keys: DevKeys) -> None:
    unreachable = Database("mysql+asyncmy://root@127.0.0.1:1/dxts")
    async with new_server(dev_keys, unreachable) as server:
        assert await check(server.address) == NOT_SERVING
        assert await check(server.address, DISPATCHER) == NOT_SERVING


async def test_metrics_are_served_over_http(client: grpc.aio.Channel) -> None:
    await unary(client, "WhoAmI")(StringValue())
    metrics = start_metrics_server(0, address="127.0.0.1")
    assert metrics is not None
    try:
        url = f"http://127.0.0.1:{metrics.port}/metrics"
        body = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).read())
    finally:
        metrics.close()
    text = body.decode()
    assert 'dxts_grpc_server_handled_total{code="OK",method="/dxts.test.Probe/WhoAmI"}' in text
    assert "dxts_grpc_server_handling_seconds_bucket" in text
    assert start_metrics_server(None) is None
