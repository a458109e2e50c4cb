"""Who may call what: one row per RPC of every contract, checked before any handler runs.

A caller is of one or more kinds, from the roles its token carries (a component's token is that
component only, never also a user):

| kind | role claim | who |
|---|---|---|
| user | (any authenticated caller) | a person of a VO, through the CLI, the web view or the API |
| operator | `operator` | a VO's production manager: steers anything of that VO |
| admin | `admin` | the installation's administrator: every VO |
| dispatcher | `dispatcher` | the dispatcher: the only caller of backend adaptors |
| adaptor | `adaptor` | a backend adaptor: reports outcomes of the parcels it holds |
| service | `service` | dxts's other components (definition's lifecycle, execution, accounting) |

The table says which kinds may call each RPC at all. What a permitted caller may see or steer
(its own VO; its own workgraphs unless it is an operator; the parcels an adaptor holds) is the
service's object-level check, made inside the command or query where the object is loaded.
An RPC missing from the table is refused: a new RPC is closed until it has its row.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from enum import StrEnum
from typing import TYPE_CHECKING

from dxts.core.errors import PermissionDenied

if TYPE_CHECKING:  # the grpc package's interceptor imports this module
    from google.protobuf.descriptor import MethodDescriptor

    from dxts.core.identity import Identity


class CallerKind(StrEnum):
    USER = "user"
    OPERATOR = "operator"
    ADMIN = "admin"
    DISPATCHER = "dispatcher"
    ADAPTOR = "adaptor"
    SERVICE = "service"


# The kinds a role makes a caller; every person of a VO is also a user (`kinds_of`).
ROLE_KINDS: Mapping[str, CallerKind] = {
    "operator": CallerKind.OPERATOR,
    "admin": CallerKind.ADMIN,
    "dispatcher": CallerKind.DISPATCHER,
    "adaptor": CallerKind.ADAPTOR,
    "service": CallerKind.SERVICE,
}

U, O, A = CallerKind.USER, CallerKind.OPERATOR, CallerKind.ADMIN  # noqa: E741
D, B, S = CallerKind.DISPATCHER, CallerKind.ADAPTOR, CallerKind.SERVICE
PEOPLE = frozenset({U, O, A})
COMPONENTS = frozenset({D, B, S})
PEOPLE_AND_SERVICES = PEOPLE | {S}

DEFINITION = "/dxts.v1.DefinitionService/"
EXECUTION = "/dxts.v1.ExecutionService/"
ACCOUNTING = "/dxts.v1.AccountingService/"
DISPATCHER = "/dxts.v1.DispatcherService/"
BACKEND = "/dxts.v1.BackendAdaptorService/"


def _rows(prefix: str, kinds: frozenset[CallerKind], *names: str) -> dict[str, frozenset[str]]:
    return {prefix + name: frozenset(kinds) for name in names}


Rules = Mapping[str, frozenset[str]]

RULES: Rules = {
    # Definition: people steer (their VO, their own unless operator); no component does.
    **_rows(
        DEFINITION,
        PEOPLE,
        "SubmitWorkgraph",
        "UpdateAnnotations",
        "StartWorkgraph",
        "ExtendScout",
        "DrainWorkgraph",
        "HaltWorkgraph",
        "CancelWorkgraph",
        "ReturnToActive",
        "PauseTransformation",
        "ResumeTransformation",
        "ForceAction",
        "ResetAction",
        "SetFeeder",
        "FlushTransformation",
        "TransitionTransformation",
        "PublishProcess",
        "SubmitJob",
    ),
    # People read; so do the other services (accounting asks with its caller's token, the
    # lifecycle and execution with their own).
    **_rows(
        DEFINITION,
        PEOPLE_AND_SERVICES,
        "GetWorkgraph",
        "ListWorkgraphs",
        "ListTransformations",
        "ResolveProcess",
        "ListVersions",
        "ProcessLineage",
        "GetDrainStatus",
    ),
    # What execution works from, across every VO; people see their own VO's (feeder bookmarks:
    # `dxts feeder show`), the query being scoped by the caller's VO like every other read.
    **_rows(DEFINITION, PEOPLE_AND_SERVICES, "ListActiveTransformations"),
    # A process is what a parcel runs: the dispatcher hands it to the backend, and chooses the
    # backend by the transformation's VO and type.
    **_rows(
        DEFINITION, PEOPLE_AND_SERVICES | {D}, "GetProcess", "GetProcessTree", "GetTransformation"
    ),
    # Execution: people read and steer inputs and parcels of their VO; the lifecycle too.
    **_rows(
        EXECUTION,
        PEOPLE_AND_SERVICES,
        "ListInputs",
        "GetInput",
        "ListParcels",
        "GetParcel",
        "Provenance",
        "ListDescendants",
        "ResetInputs",
        "WriteOffInputs",
        "CancelParcels",
        "Flush",
        "ResetFeeders",
        "GetUserParcel",
    ),
    # Housekeeping of the lifecycle, and definition's SubmitJob creating the parcel.
    **_rows(EXECUTION, frozenset({S}), "CleanTransformation", "CreateUserParcel"),
    # What backends did, forwarded by the dispatcher only.
    **_rows(EXECUTION, frozenset({D}), "RecordOutcomes"),
    # Accounting: reads scoped to the caller's VO; a rebuild by a VO operator (its VO) or the
    # installation's admin (any).
    **_rows(
        ACCOUNTING,
        PEOPLE_AND_SERVICES,
        "GetCounts",
        "GetWorkgraphSummary",
        "GetStorageSummary",
        "ListLog",
    ),
    **_rows(ACCOUNTING, frozenset({O, A}), "Rebuild"),
    # The dispatcher: outcomes pushed by the adaptor that holds the parcels.
    **_rows(DISPATCHER, frozenset({B}), "ReportOutcomes"),
    **_rows(DISPATCHER, frozenset({O, A, S}), "DispatcherStatus"),
    # A parcel's job logs: people of its VO (checked where the parcel is loaded).
    **_rows(DISPATCHER, PEOPLE, "GetParcelLogs"),
    # Backend adaptors run whatever they are handed: the dispatcher only.
    **_rows(BACKEND, frozenset({D}), "Describe", "Submit", "Poll", "Cancel", "GetLogs"),
}


# An adaptor's token names the backend it serves in its subject: what it may report outcomes of.
ADAPTOR_SUBJECT_PREFIX = "dxts-backend-"


def adaptor_subject(backend: str) -> str:
    """The subject of the token an adaptor serving `backend` pushes its outcomes with."""
    return ADAPTOR_SUBJECT_PREFIX + backend


def backend_of(identity: Identity) -> str | None:
    """The backend an adaptor's token speaks for (None: not an adaptor's token)."""
    if not identity.has_role(CallerKind.ADAPTOR) or not identity.sub.startswith(
        ADAPTOR_SUBJECT_PREFIX
    ):
        return None
    return identity.sub.removeprefix(ADAPTOR_SUBJECT_PREFIX)


def contract_methods() -> dict[str, MethodDescriptor]:
    """Every RPC of every contract, by full method name: what the table must cover (its tests
    check every one, with every kind of caller, on the table and against the real servers)."""
    from dxts.v1 import (  # the contracts, only when asked for
        accounting_pb2,
        backend_pb2,
        definition_pb2,
        dispatcher_pb2,
        execution_pb2,
    )

    files = (accounting_pb2, backend_pb2, definition_pb2, dispatcher_pb2, execution_pb2)
    return {
        f"/{service.full_name}/{method.name}": method
        for module in files
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }


def kinds_of(identity: Identity) -> frozenset[CallerKind]:
    """The kinds a caller is, from its token's roles. A person of a VO is a user (an operator
    and an admin too); a component's token (dispatcher, adaptor, service) is that component
    only: whoever holds it cannot also act as a person of the components' VO."""
    kinds = {ROLE_KINDS[role] for role in identity.roles if role in ROLE_KINDS}
    if identity.vo and not kinds & COMPONENTS:
        kinds.add(CallerKind.USER)
    return frozenset(kinds)


def authorise_call(method: str, identity: Identity, *, extra_rules: Rules | None = None) -> None:
    """PermissionDenied unless the table (with `extra_rules`, rows for methods outside the
    contracts: the tests' probe services) lets `identity` call `method` (a full method name,
    `/package.Service/Method`)."""
    allowed = RULES.get(method)
    if allowed is None and extra_rules is not None:
        allowed = extra_rules.get(method)
    if allowed is None:
        raise PermissionDenied(f"{method} has no row in the authorisation table: refused")
    kinds = kinds_of(identity)
    if not kinds & allowed:
        raise PermissionDenied(
            f"{method.rsplit('/', 1)[-1]} may be called by {_listed(allowed)}; "
            f"{identity.sub} is {_listed(kinds) or 'none of these'}"
        )


def _listed(kinds: frozenset[str]) -> str:
    order = list(CallerKind)
    return ", ".join(sorted(kinds, key=lambda kind: order.index(CallerKind(kind))))


# The RPC whose call is being served, set around each handler by the server's interceptor.
_served_rpc: ContextVar[str | None] = ContextVar("dxts_served_rpc", default=None)


@contextmanager
def serving(method: str) -> Iterator[None]:
    """Within the block, `served_rpc()` is `method` (a full name, `/package.Service/Method`)."""
    token = _served_rpc.set(method.rsplit("/", 1)[-1])
    try:
        yield
    finally:
        _served_rpc.reset(token)


def served_rpc() -> str:
    """The contract's name of the RPC being served (`Flush`): what a command that answers the
    call is named after, taken from the call rather than typed."""
    name = _served_rpc.get()
    if name is None:
        raise RuntimeError("no RPC is being served here: name the command")
    return name


@functools.cache
def rpc_names() -> frozenset[str]:
    """The method name of every RPC of every contract."""
    return frozenset(method.rsplit("/", 1)[-1] for method in contract_methods())


def contract_rpc(name: str) -> str:
    """`name` (`Method` or `Service.Method`) when it names an RPC of the contracts, else
    ValueError: a command named by hand (one run outside the call it answers, or inside another
    call) must not be misspelt, or it logs under another event and never recognises a retry."""
    if name.rsplit(".", 1)[-1] not in rpc_names():
        raise ValueError(f"{name!r} names no RPC of the contracts")
    return name
