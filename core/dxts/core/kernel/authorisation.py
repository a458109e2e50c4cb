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
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from enum import StrEnum
from typing import TYPE_CHECKING

from dxts.core.errors import PermissionDenied
from dxts.v1 import (
    accounting_pb2,
    accounting_pb2_grpc,
    backend_pb2,
    backend_pb2_grpc,
    definition_pb2,
    definition_pb2_grpc,
    dispatcher_pb2,
    dispatcher_pb2_grpc,
    execution_pb2,
    execution_pb2_grpc,
)

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

# Each contract's generated servicer: its methods name the RPCs (`DEFINITION.SubmitWorkgraph`).
DEFINITION = definition_pb2_grpc.DefinitionServiceServicer
EXECUTION = execution_pb2_grpc.ExecutionServiceServicer
ACCOUNTING = accounting_pb2_grpc.AccountingServiceServicer
DISPATCHER = dispatcher_pb2_grpc.DispatcherServiceServicer
BACKEND = backend_pb2_grpc.BackendAdaptorServiceServicer
SERVICERS = (DEFINITION, EXECUTION, ACCOUNTING, DISPATCHER, BACKEND)


def contract_methods() -> dict[str, MethodDescriptor]:
    """Every RPC of every contract, by full method name: what the table must cover (its tests
    check every one, with every kind of caller, on the table and against the real servers)."""
    files = (accounting_pb2, backend_pb2, definition_pb2, dispatcher_pb2, execution_pb2)
    return {
        method_path(method): method
        for module in files
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }


@functools.cache
def _servicer_methods() -> dict[object, MethodDescriptor]:
    """Each generated servicer's method (`DefinitionServiceServicer.StartWorkgraph`) → the
    contract's method it declares (the generator names a servicer after its service)."""
    servicers = {servicer.__name__: servicer for servicer in SERVICERS}
    return {
        getattr(servicers[f"{method.containing_service.name}Servicer"], method.name): method
        for method in contract_methods().values()
    }


def rpc(declared: Callable[..., object]) -> MethodDescriptor:
    """The contract's method a generated servicer's method declares: how code outside the
    contracts names an RPC (`rpc(DefinitionServiceServicer.StartWorkgraph)`), by an attribute
    that the type checker and the import check, never by a string that could be misspelt."""
    method = _servicer_methods().get(declared)
    if method is None:
        raise ValueError(f"{declared!r} is no method of a contract's servicer")
    return method


def method_path(method: MethodDescriptor) -> str:
    """The full name a call carries (`/dxts.v1.DefinitionService/StartWorkgraph`)."""
    return f"/{method.containing_service.full_name}/{method.name}"


def _rows(
    kinds: frozenset[CallerKind], *methods: Callable[..., object]
) -> dict[str, frozenset[str]]:
    return {method_path(rpc(method)): frozenset(kinds) for method in methods}


Rules = Mapping[str, frozenset[str]]

RULES: Rules = {
    # Definition: people steer (their VO, their own unless operator); no component does.
    **_rows(
        PEOPLE,
        DEFINITION.SubmitWorkgraph,
        DEFINITION.UpdateAnnotations,
        DEFINITION.StartWorkgraph,
        DEFINITION.ExtendScout,
        DEFINITION.DrainWorkgraph,
        DEFINITION.HaltWorkgraph,
        DEFINITION.CancelWorkgraph,
        DEFINITION.ReturnToActive,
        DEFINITION.PauseTransformation,
        DEFINITION.ResumeTransformation,
        DEFINITION.ForceAction,
        DEFINITION.ResetAction,
        DEFINITION.SetFeeder,
        DEFINITION.FlushTransformation,
        DEFINITION.TransitionTransformation,
        DEFINITION.PublishProcess,
        DEFINITION.SubmitJob,
    ),
    # People read; so do the other services (accounting asks with its caller's token, the
    # lifecycle and execution with their own).
    **_rows(
        PEOPLE_AND_SERVICES,
        DEFINITION.GetWorkgraph,
        DEFINITION.ListWorkgraphs,
        DEFINITION.ListTransformations,
        DEFINITION.ResolveProcess,
        DEFINITION.ListVersions,
        DEFINITION.ProcessLineage,
        DEFINITION.GetDrainStatus,
    ),
    # What execution works from, across every VO; people see their own VO's (feeder bookmarks:
    # `dxts feeder show`), the query being scoped by the caller's VO like every other read.
    **_rows(PEOPLE_AND_SERVICES, DEFINITION.ListActiveTransformations),
    # A process is what a parcel runs: the dispatcher hands it to the backend, and chooses the
    # backend by the transformation's VO and type.
    **_rows(
        PEOPLE_AND_SERVICES | {D},
        DEFINITION.GetProcess,
        DEFINITION.GetProcessTree,
        DEFINITION.GetTransformation,
    ),
    # A name a person typed (a handle, an id's prefix, WG/STEP), resolved in the caller's VO.
    **_rows(PEOPLE_AND_SERVICES, DEFINITION.ResolveName),
    # Whether a person's VO may use files: `dxts file` asks before it touches storage.
    **_rows(PEOPLE, DEFINITION.GetFileAccess),
    # Who the caller is: anyone with a token may ask about that token.
    **_rows(PEOPLE | COMPONENTS, DEFINITION.GetCaller),
    # Execution: people read and steer inputs and parcels of their VO; the lifecycle too.
    **_rows(
        PEOPLE_AND_SERVICES,
        EXECUTION.ListInputs,
        EXECUTION.GetInput,
        EXECUTION.ListParcels,
        EXECUTION.GetParcel,
        EXECUTION.ResolveParcelName,
        EXECUTION.GroupFailures,
        EXECUTION.CountParcelsOverTime,
        EXECUTION.Provenance,
        EXECUTION.ListDescendants,
        EXECUTION.ResetInputs,
        EXECUTION.WriteOffInputs,
        EXECUTION.DecideFailedInput,
        EXECUTION.CancelParcels,
        EXECUTION.Flush,
        EXECUTION.ResetFeeders,
        EXECUTION.GetUserParcel,
    ),
    # Housekeeping of the lifecycle, and definition's SubmitJob creating the parcel.
    **_rows(frozenset({S}), EXECUTION.CleanTransformation, EXECUTION.CreateUserParcel),
    # What backends did, forwarded by the dispatcher only.
    **_rows(frozenset({D}), EXECUTION.RecordOutcomes),
    # Accounting: reads scoped to the caller's VO; a rebuild by a VO operator (its VO) or the
    # installation's admin (any).
    **_rows(
        PEOPLE_AND_SERVICES,
        ACCOUNTING.GetCounts,
        ACCOUNTING.GetWorkgraphSummary,
        ACCOUNTING.GetStorageSummary,
        ACCOUNTING.ListLog,
    ),
    **_rows(frozenset({O, A}), ACCOUNTING.Rebuild),
    # The dispatcher: outcomes pushed by the adaptor that holds the parcels.
    **_rows(frozenset({B}), DISPATCHER.ReportOutcomes),
    **_rows(frozenset({O, A, S}), DISPATCHER.DispatcherStatus),
    # A parcel's job logs: people of its VO (checked where the parcel is loaded).
    **_rows(PEOPLE, DISPATCHER.GetParcelLogs),
    # Backend adaptors run whatever they are handed: the dispatcher only.
    **_rows(
        frozenset({D}),
        BACKEND.Describe,
        BACKEND.Submit,
        BACKEND.Poll,
        BACKEND.Cancel,
        BACKEND.GetLogs,
    ),
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
def serving(method: str | MethodDescriptor) -> Iterator[None]:
    """Within the block, `served_rpc()` is `method`'s name: a call's full name
    (`/package.Service/Method`, as the interceptor has it) or the contract's method (`rpc(…)`)
    a command run outside its own call answers as."""
    name = method.rsplit("/", 1)[-1] if isinstance(method, str) else method.name
    token = _served_rpc.set(name)
    try:
        yield
    finally:
        _served_rpc.reset(token)


def served_rpc() -> str:
    """The contract's name of the RPC being served (`Flush`): what a command that answers the
    call is named after (its log's event, the scope of its request ids), taken from the call
    rather than typed."""
    name = _served_rpc.get()
    if name is None:
        raise RuntimeError("no RPC is being served here: run the command within serving(rpc(…))")
    return name
