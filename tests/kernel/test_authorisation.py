"""The authorisation table covers every RPC of every contract and decides by caller kind."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pool

from dxts.core.errors import PermissionDenied
from dxts.core.identity import Identity
from dxts.core.kernel.authorisation import (
    RULES,
    CallerKind,
    authorise_call,
    contract_methods,
    kinds_of,
)

CONTRACT_FILES = [
    "dxts/v1/accounting.proto",
    "dxts/v1/backend.proto",
    "dxts/v1/definition.proto",
    "dxts/v1/dispatcher.proto",
    "dxts/v1/execution.proto",
]


def every_rpc() -> list[str]:
    """Every method of every service the contracts declare, as full method names."""
    contract_methods()  # imports every contract, registering it in the pool
    pool = descriptor_pool.Default()
    methods = []
    for name in CONTRACT_FILES:
        for service in pool.FindFileByName(name).services_by_name.values():
            methods += [f"/{service.full_name}/{method.name}" for method in service.methods]
    return sorted(methods)


def test_the_kernel_lists_every_rpc_of_the_contracts() -> None:
    assert sorted(contract_methods()) == every_rpc()


ROLE_OF = {
    CallerKind.USER: (),
    CallerKind.OPERATOR: ("operator",),
    CallerKind.ADMIN: ("admin",),
    CallerKind.DISPATCHER: ("dispatcher",),
    CallerKind.ADAPTOR: ("adaptor",),
    CallerKind.SERVICE: ("service",),
}


def caller(kind: CallerKind) -> Identity:
    # A person's role adds its kind to "user"; a component's token is that component only.
    return Identity(vo="lhcb", sub=f"a-{kind}", roles=frozenset(ROLE_OF[kind]))


def test_every_rpc_of_the_contracts_has_a_row() -> None:
    rpcs = every_rpc()
    assert len(rpcs) > 40
    missing = sorted(set(rpcs) - set(RULES))
    assert not missing, f"RPCs without a row in the authorisation table: {missing}"
    stale = sorted(set(RULES) - set(rpcs))
    assert not stale, f"rows for RPCs the contracts no longer have: {stale}"


@pytest.mark.parametrize("method", every_rpc())
@pytest.mark.parametrize("kind", list(CallerKind))
def test_every_rpc_with_every_kind_of_caller(method: str, kind: CallerKind) -> None:
    identity = caller(kind)
    allowed = bool(kinds_of(identity) & RULES[method])
    if allowed:
        authorise_call(method, identity)
    else:
        with pytest.raises(PermissionDenied, match="may be called by"):
            authorise_call(method, identity)


@pytest.mark.parametrize(
    "method",
    [m for m in every_rpc() if m.startswith("/dxts.v1.BackendAdaptorService/")],
)
def test_adaptors_accept_the_dispatcher_only(method: str) -> None:
    assert RULES[method] == {CallerKind.DISPATCHER}
    for kind in CallerKind:
        if kind is not CallerKind.DISPATCHER:
            with pytest.raises(PermissionDenied):
                authorise_call(method, caller(kind))


def test_outcomes_come_from_adaptors_and_are_recorded_from_the_dispatcher() -> None:
    assert RULES["/dxts.v1.DispatcherService/ReportOutcomes"] == {CallerKind.ADAPTOR}
    assert RULES["/dxts.v1.ExecutionService/RecordOutcomes"] == {CallerKind.DISPATCHER}


def test_an_rpc_without_a_row_is_refused() -> None:
    with pytest.raises(PermissionDenied, match="no row in the authorisation table"):
        authorise_call("/dxts.v1.DefinitionService/Unheard", caller(CallerKind.ADMIN))


@pytest.mark.parametrize("role", ["dispatcher", "adaptor", "service"])
def test_a_components_token_is_no_persons(role: str) -> None:
    component = Identity(vo="dxts", sub=f"dxts-{role}", roles=frozenset({role}))
    assert kinds_of(component) == {CallerKind(role)}
    for steering in ("SubmitWorkgraph", "StartWorkgraph", "CancelWorkgraph", "SubmitJob"):
        with pytest.raises(PermissionDenied):
            authorise_call(f"/dxts.v1.DefinitionService/{steering}", component)
    person = Identity(vo="lhcb", sub="olga", roles=frozenset({"operator", "admin"}))
    assert kinds_of(person) == {CallerKind.USER, CallerKind.OPERATOR, CallerKind.ADMIN}
