"""Every RPC of every contract refuses a request over its bounds before anything runs: for every
list, map and text field of every request (found from the contracts, so a new RPC or field is
covered the day it exists), one entry or character over the bound is INVALID_ARGUMENT naming
the field, answered to a caller without a token, and no handler sees it. Bytes that are no
message are INVALID_ARGUMENT with one log line and no traceback; a time out of range is
INVALID_ARGUMENT naming the field."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message

from dxts.core.errors import InvalidArgument
from dxts.core.grpc import DevKeys, GrpcServer, Service
from dxts.core.grpc.errors import domain_error
from dxts.core.kernel.authorisation import contract_methods
from dxts.core.kernel.bounds import MAX_MESSAGE, TIMESTAMP, limit_of
from dxts.core.settings import ServerSettings
from dxts.v1 import accounting_pb2, accounting_pb2_grpc, common_pb2, execution_pb2

METHODS = contract_methods()


def message_class(descriptor: Descriptor) -> type[Message]:
    return message_factory.GetMessageClass(descriptor)


class Everything:
    """Every contract's service, each method answering an empty response and noting the call."""

    def __init__(self) -> None:
        self.reached: list[str] = []

    def services(self) -> list[Service]:
        by_service: dict[str, dict[str, grpc.RpcMethodHandler]] = {}
        for method in METHODS.values():
            response = message_class(method.output_type)
            by_service.setdefault(method.containing_service.full_name, {})[method.name] = (
                grpc.unary_unary_rpc_method_handler(
                    self._answer(method.name, response),
                    request_deserializer=message_class(method.input_type).FromString,
                    response_serializer=response.SerializeToString,
                )
            )
        return [
            Service.generic(name, grpc.method_handlers_generic_handler(name, handlers))
            for name, handlers in by_service.items()
        ]

    def _answer(self, name: str, response: type[Message]) -> Any:
        async def answer(request: Message, context: Any) -> Message:
            self.reached.append(name)
            return response()

        return answer


@pytest.fixture(scope="module")
def everything() -> Everything:
    return Everything()


@pytest.fixture(scope="module")
async def address(
    everything: Everything, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    keys = DevKeys.load_or_create(tmp_path_factory.mktemp("keys"))
    server = GrpcServer(
        everything.services(),
        settings=ServerSettings(listen="127.0.0.1:0"),
        verifier=keys.verifier(),
    )
    async with server:
        yield server.address


def bounded_paths(descriptor: Descriptor, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(dotted path, limit) of every bounded field of a request, into its single messages."""
    for field in descriptor.fields:
        limit = limit_of(field)
        if limit is not None:
            yield prefix + field.name, limit
        elif field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type.full_name not in (
            TIMESTAMP,
        ):
            yield from bounded_paths(field.message_type, f"{prefix}{field.name}.")


def over(request: Message, path: str, limit: int) -> None:
    """Fill the field at `path` with one entry or character more than `limit`."""
    *parents, name = path.split(".")
    for parent in parents:
        request = getattr(request, parent)
    field = request.DESCRIPTOR.fields_by_name[name]
    value = getattr(request, name)
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        kind = entry.fields_by_name["value"].type
        for i in range(limit + 1):
            if kind == FieldDescriptor.TYPE_MESSAGE:
                value[f"k{i}"].SetInParent()
            else:
                value[f"k{i}"] = b"" if kind == FieldDescriptor.TYPE_BYTES else ""
    elif field.is_repeated:
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            for _ in range(limit + 1):
                value.add()
        elif field.type == FieldDescriptor.TYPE_STRING:
            value.extend(["x"] * (limit + 1))
        else:
            value.extend([0] * (limit + 1))
    elif field.type == FieldDescriptor.TYPE_BYTES:
        setattr(request, name, b"x" * (limit + 1))
    else:
        setattr(request, name, "x" * (limit + 1))


async def refusal(address: str, method: MethodDescriptor, request: Message) -> InvalidArgument:
    """The INVALID_ARGUMENT a call without a token gets (anything else fails the test)."""
    async with grpc.aio.insecure_channel(address) as ch:
        stub = ch.unary_unary(
            f"/{method.containing_service.full_name}/{method.name}",
            request_serializer=type(request).SerializeToString,
            response_deserializer=message_class(method.output_type).FromString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(request, timeout=30)
    error = domain_error(raised.value)
    assert isinstance(error, InvalidArgument), (raised.value.code(), raised.value.details())
    return error


@pytest.mark.parametrize("path", sorted(METHODS))
async def test_every_field_of_every_rpc_is_bounded_before_anything_runs(
    address: str, everything: Everything, path: str
) -> None:
    method = METHODS[path]
    fields = list(bounded_paths(method.input_type))
    assert fields or not method.input_type.fields, f"{path} has fields but none is bounded"
    for field, limit in fields:
        request = message_class(method.input_type)()
        over(request, field, limit)
        error = await refusal(address, method, request)
        assert [v.field for v in error.violations] == [field], error
        assert f"at most {limit}" in error.violations[0].description
    assert method.name not in everything.reached


async def test_a_request_at_its_bound_passes_on_to_the_authorisation_check(address: str) -> None:
    async with grpc.aio.insecure_channel(address) as ch:
        stub = accounting_pb2_grpc.AccountingServiceStub(ch)  # type: ignore[no-untyped-call]
        request = accounting_pb2.GetCountsRequest(transformation_ids=["x"] * 1000)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.GetCounts(request)
    assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_a_hundred_thousand_ids_are_refused_by_the_bound(address: str) -> None:
    request = accounting_pb2.GetCountsRequest(transformation_ids=["x" * 32] * 100_000)
    error = await refusal(address, METHODS["/dxts.v1.AccountingService/GetCounts"], request)
    assert error.violations[0].field == "transformation_ids"
    assert "at most 1000 entries, got 100000" in str(error)


async def test_a_time_out_of_range_is_invalid_argument(address: str) -> None:
    request = accounting_pb2.ListLogRequest()
    request.since.seconds = 2**62
    error = await refusal(address, METHODS["/dxts.v1.AccountingService/ListLog"], request)
    assert [v.field for v in error.violations] == ["since"]


async def test_bytes_that_are_no_message_are_a_client_error_logged_in_one_line(
    address: str, everything: Everything, caplog: pytest.LogCaptureFixture
) -> None:
    async with grpc.aio.insecure_channel(address) as ch:
        stub = ch.unary_unary(
            "/dxts.v1.DefinitionService/GetProcess",
            request_serializer=lambda raw: raw,
            response_deserializer=lambda raw: raw,
        )
        with caplog.at_level(logging.INFO), pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub(b"\xff\xff\xff\xff\x0f garbage", timeout=30)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "well-formed" in (raised.value.details() or "")
    about = [r for r in caplog.records if "GetProcess" in r.getMessage()]
    assert len(about) == 1 and about[0].exc_info is None and "\n" not in about[0].getMessage()
    assert not any(r.exc_info for r in caplog.records)
    assert "GetProcess" not in everything.reached


async def test_an_entry_of_a_list_is_named_by_its_index(address: str) -> None:
    request = execution_pb2.RecordOutcomesRequest(
        outcomes=[common_pb2.Outcome(), common_pb2.Outcome(message="x" * (MAX_MESSAGE + 1))]
    )
    error = await refusal(address, METHODS["/dxts.v1.ExecutionService/RecordOutcomes"], request)
    assert [v.field for v in error.violations] == ["outcomes[1].message"]


def test_a_process_document_may_be_as_large_as_a_bundles_file() -> None:
    """A compiled process carries what its bundle's file held (the conformance suite's EDAM
    ontology in `$schemas` is 2.6 MB): its JSON is bounded like a bundle's file, not like a
    small JSON argument, in the adaptor's payload and in the registry alike."""
    from dxts.core.kernel.bounds import MAX_DOCUMENT, check_request
    from dxts.v1 import backend_pb2, definition_pb2

    megabytes = "x" * (3 << 20)
    check_request(backend_pb2.ProcessDocument(document_json=megabytes))
    check_request(definition_pb2.Process(document_json=megabytes))
    with pytest.raises(InvalidArgument, match="document_json"):
        check_request(backend_pb2.ProcessDocument(document_json="x" * (MAX_DOCUMENT + 1)))
