"""Domain errors → status codes with details, and back into the same domain errors."""

from __future__ import annotations

import asyncio
import logging

import grpc
import pytest
from google.protobuf.wrappers_pb2 import StringValue
from google.rpc import error_details_pb2
from grpc_probe import ERRORS, unary
from grpc_status import rpc_status
from prometheus_client import REGISTRY

from dxts.core import errors
from dxts.core.grpc import GrpcServer, domain_error

CODES = {
    "invalid_argument": grpc.StatusCode.INVALID_ARGUMENT,
    "not_found": grpc.StatusCode.NOT_FOUND,
    "invalid_transition": grpc.StatusCode.FAILED_PRECONDITION,
    "failed_precondition": grpc.StatusCode.FAILED_PRECONDITION,
    "permission_denied": grpc.StatusCode.PERMISSION_DENIED,
    "unauthenticated": grpc.StatusCode.UNAUTHENTICATED,
    "aborted": grpc.StatusCode.ABORTED,
    "unavailable": grpc.StatusCode.UNAVAILABLE,
    "already_exists": grpc.StatusCode.ALREADY_EXISTS,
    "bug": grpc.StatusCode.INTERNAL,
}
DOMAIN = [name for name in CODES if name != "bug"]


async def raw_failure(raw_client: grpc.aio.Channel, token: str, name: str) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await unary(raw_client, "Raise")(
            StringValue(value=name), metadata=[("authorization", f"Bearer {token}")], timeout=10
        )
    return caught.value


@pytest.mark.parametrize("name", list(CODES))
async def test_each_error_maps_to_its_code(
    raw_client: grpc.aio.Channel, token: str, name: str
) -> None:
    failure = await raw_failure(raw_client, token, name)
    assert failure.code() == CODES[name]


@pytest.mark.parametrize("name", DOMAIN)
async def test_the_client_gets_the_same_domain_error_back(
    client: grpc.aio.Channel, name: str
) -> None:
    original = ERRORS[name]()
    with pytest.raises(errors.DxtsError) as caught:
        await unary(client, "Raise")(StringValue(value=name))
    assert type(caught.value) is type(original)
    assert str(caught.value) == str(original)
    assert isinstance(caught.value.__cause__, grpc.aio.AioRpcError)


async def test_field_violations_travel_as_bad_request(
    client: grpc.aio.Channel, raw_client: grpc.aio.Channel, token: str
) -> None:
    failure = await raw_failure(raw_client, token, "invalid_argument")
    status = rpc_status.from_call(failure)
    assert status is not None
    bad_request = error_details_pb2.BadRequest()
    assert any(detail.Unpack(bad_request) for detail in status.details)
    assert [(v.field, v.description) for v in bad_request.field_violations] == [
        ("steps.merge.in.input-data", "unknown source 'nowhere'"),
        ("hints.dirac:Transformation.packer", "not registered"),
    ]
    with pytest.raises(errors.InvalidArgument) as caught:
        await unary(client, "Raise")(StringValue(value="invalid_argument"))
    assert caught.value.violations == ERRORS["invalid_argument"]().violations


async def test_a_refused_transition_names_the_current_state(
    client: grpc.aio.Channel, raw_client: grpc.aio.Channel, token: str
) -> None:
    failure = await raw_failure(raw_client, token, "invalid_transition")
    assert "is Completed" in (failure.details() or "")
    status = rpc_status.from_call(failure)
    assert status is not None
    info, precondition = error_details_pb2.ErrorInfo(), error_details_pb2.PreconditionFailure()
    assert any(detail.Unpack(info) for detail in status.details)
    assert any(detail.Unpack(precondition) for detail in status.details)
    assert info.reason == "INVALID_TRANSITION"
    assert info.metadata["current_state"] == "Completed"
    assert precondition.violations[0].type == "STATE"

    with pytest.raises(errors.InvalidTransition) as caught:
        await unary(client, "Raise")(StringValue(value="invalid_transition"))
    refused = caught.value
    assert (refused.entity, refused.current, refused.attempted, refused.actor) == (
        "workgraph",
        "Completed",
        "Active",
        "operator",
    )
    assert refused.current_state == "Completed"
    assert refused.identifier == "0190f1c2-7a4b-7c3d-8e9f-0123456789ab"


async def test_failed_precondition_keeps_the_current_state(client: grpc.aio.Channel) -> None:
    with pytest.raises(errors.FailedPrecondition) as caught:
        await unary(client, "Raise")(StringValue(value="failed_precondition"))
    assert type(caught.value) is errors.FailedPrecondition
    assert caught.value.current_state == "Active"


async def test_not_found_keeps_kind_and_identifier(client: grpc.aio.Channel) -> None:
    with pytest.raises(errors.NotFound) as caught:
        await unary(client, "Raise")(StringValue(value="not_found"))
    assert caught.value.kind == "workgraph"
    assert caught.value.identifier == "0190f1c2-7a4b-7c3d-8e9f-0123456789ab"


async def test_an_unexpected_exception_is_internal_and_leaks_nothing(
    client: grpc.aio.Channel, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.ERROR, logger="dxts.core.grpc.errors"),
        pytest.raises(grpc.aio.AioRpcError) as caught,
    ):
        await unary(client, "Raise")(StringValue(value="bug"))
    failure = caught.value
    assert failure.code() == grpc.StatusCode.INTERNAL
    message = failure.details() or ""
    assert "secret" not in message and "/srv" not in message and "RuntimeError" not in message
    reference = message.split("reference ")[1].rstrip(")")
    logged = [record for record in caplog.records if reference in record.getMessage()]
    assert len(logged) == 1
    assert logged[0].exc_info is not None
    assert "secret internals" in str(logged[0].exc_info[1])


async def test_a_status_the_handler_chose_itself_passes_through(
    client: grpc.aio.Channel, server: GrpcServer
) -> None:
    method = "/dxts.test.Probe/Abort"
    before = counted(method, "RESOURCE_EXHAUSTED")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await unary(client, "Abort")(StringValue())
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert caught.value.details() == "slow down"
    # grpc sends a status the handler chose as the handler aborts, before the interceptor that
    # counts it has run: on a loaded machine the caller can see it first.
    for _ in range(500):
        if counted(method, "RESOURCE_EXHAUSTED") > before:
            break
        await asyncio.sleep(0.01)
    assert counted(method, "RESOURCE_EXHAUSTED") == before + 1


def counted(method: str, code: str) -> float:
    value = REGISTRY.get_sample_value(
        "dxts_grpc_server_handled_total", {"method": method, "code": code}
    )
    return value or 0.0


async def test_rpcs_are_counted_by_method_and_code(client: grpc.aio.Channel) -> None:
    method = "/dxts.test.Probe/Raise"
    before = {code: counted(method, code) for code in ("NOT_FOUND", "INTERNAL", "ABORTED")}
    for name in ("not_found", "not_found", "bug"):
        with pytest.raises((errors.DxtsError, grpc.aio.AioRpcError)):
            await unary(client, "Raise")(StringValue(value=name))
    assert counted(method, "NOT_FOUND") == before["NOT_FOUND"] + 2
    assert counted(method, "INTERNAL") == before["INTERNAL"] + 1
    assert counted(method, "ABORTED") == before["ABORTED"]
    ok_before = counted("/dxts.test.Probe/WhoAmI", "OK")
    await unary(client, "WhoAmI")(StringValue())
    assert counted("/dxts.test.Probe/WhoAmI", "OK") == ok_before + 1


def test_codes_without_a_domain_meaning_stay_rpc_errors() -> None:
    failure = grpc.aio.AioRpcError(
        grpc.StatusCode.DEADLINE_EXCEEDED, grpc.aio.Metadata(), grpc.aio.Metadata(), "too slow"
    )
    assert domain_error(failure) is failure


def test_a_status_without_details_still_maps_by_code() -> None:
    """A non-dxts server (or a proxy) answers with a bare code: the class comes from it."""
    failure = grpc.aio.AioRpcError(
        grpc.StatusCode.INVALID_ARGUMENT, grpc.aio.Metadata(), grpc.aio.Metadata(), "bad page"
    )
    converted = domain_error(failure)
    assert isinstance(converted, errors.InvalidArgument)
    assert str(converted) == "bad page"
    assert converted.violations == [errors.FieldViolation("", "bad page")]
