"""A command is named after the RPC it answers, taken from the call the server serves; a command
run outside its own call (the start a submission asks for, a test) answers as the contract's
method it names by the generated servicer's attribute, never by a string that could be misspelt
(a misspelt name would log under another event and never recognise a retry)."""

from __future__ import annotations

import pytest

from dxts.core.identity import Identity
from dxts.core.kernel.authorisation import method_path, rpc, served_rpc, serving
from dxts.core.kernel.commands import Request
from dxts.v1 import definition_pb2, execution_pb2_grpc
from dxts.v1.definition_pb2_grpc import DefinitionServiceServicer

ALICE = Identity(vo="lhcb", sub="alice")


def test_a_served_command_is_named_after_the_call() -> None:
    with serving("/dxts.v1.ExecutionService/WriteOffInputs"):
        assert served_rpc() == "WriteOffInputs"
        request = Request.served(ALICE, "r-1", "halt")
    assert (request.rpc, request.event, request.request_id) == ("WriteOffInputs",) * 2 + ("r-1",)


def test_outside_a_call_there_is_no_served_rpc() -> None:
    with pytest.raises(RuntimeError):
        served_rpc()


def test_a_command_run_outside_its_call_answers_as_the_method_it_names() -> None:
    start = rpc(DefinitionServiceServicer.StartWorkgraph)
    declared = definition_pb2.DESCRIPTOR.services_by_name["DefinitionService"]
    assert start is declared.methods_by_name["StartWorkgraph"]
    assert method_path(start) == "/dxts.v1.DefinitionService/StartWorkgraph"
    with serving(rpc(execution_pb2_grpc.ExecutionServiceServicer.CreateUserParcel)):
        with serving(start):
            assert Request.served(ALICE).event == "StartWorkgraph"
        assert served_rpc() == "CreateUserParcel"


def test_only_a_contract_servicer_method_names_an_rpc() -> None:
    class Lookalike:
        def StartWorkgraph(self) -> None: ...

    with pytest.raises(ValueError, match="StartWorkgraph"):
        rpc(Lookalike.StartWorkgraph)
