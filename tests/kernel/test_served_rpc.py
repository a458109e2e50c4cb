"""A command is named after the RPC it answers, taken from the call the server serves, and a
name typed by hand (a command run outside its own call) is checked against the contracts: a
misspelt one would log under another event and never recognise a retry."""

from __future__ import annotations

import pytest

from dxts.core.identity import Identity
from dxts.core.kernel.authorisation import contract_rpc, served_rpc, serving
from dxts.core.kernel.commands import Request

ALICE = Identity(vo="lhcb", sub="alice")


def test_a_served_command_is_named_after_the_call() -> None:
    with serving("/dxts.v1.ExecutionService/WriteOffInputs"):
        assert served_rpc() == "WriteOffInputs"
        request = Request.served(ALICE, "r-1", "halt")
    assert (request.rpc, request.event, request.request_id) == ("WriteOffInputs",) * 2 + ("r-1",)


def test_outside_a_call_there_is_no_served_rpc() -> None:
    with pytest.raises(RuntimeError):
        served_rpc()


def test_a_name_typed_by_hand_must_name_a_contract_rpc() -> None:
    assert contract_rpc("DefinitionService.SubmitWorkgraph") == "DefinitionService.SubmitWorkgraph"
    assert contract_rpc("StartWorkgraph") == "StartWorkgraph"
    with pytest.raises(ValueError, match="StartWorkgrpah"):
        contract_rpc("StartWorkgrpah")
