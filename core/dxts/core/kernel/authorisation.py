"""Who may call what: one row per RPC of every contract, checked before any handler runs.

A caller is of one or more kinds, from the roles its token carries:

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

from collections.abc import Mapping
from enum import StrEnum

from dxts.core.errors import PermissionDenied
from dxts.core.grpc.auth import Identity


class CallerKind(StrEnum):
    USER = "user"
    OPERATOR = "operator"
    ADMIN = "admin"
    DISPATCHER = "dispatcher"
    ADAPTOR = "adaptor"
    SERVICE = "service"


# The kinds a role makes a caller; every authenticated caller of a VO is also a user.
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
PEOPLE_AND_SERVICES = PEOPLE | {S}

DEFINITION = "/dxts.v1.DefinitionService/"
EXECUTION = "/dxts.v1.ExecutionService/"
ACCOUNTING = "/dxts.v1.AccountingService/"
DISPATCHER = "/dxts.v1.DispatcherService/"
BACKEND = "/dxts.v1.BackendAdaptorService/"


def _rows(prefix: str, kinds: frozenset[CallerKind], *names: str) -> dict[str, frozenset[str]]:
    return {prefix + name: frozenset(kinds) for name in names}


RULES: Mapping[str, frozenset[str]] = {
    # Definition: people steer and read (their VO, their own unless operator); the lifecycle
    # and execution read through the same RPCs as the service.
    **_rows(
        DEFINITION,
        PEOPLE_AND_SERVICES,
        "SubmitWorkgraph",
        "GetWorkgraph",
        "ListWorkgraphs",
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
        "GetTransformation",
        "ListTransformations",
        "PublishProcess",
        "ResolveProcess",
        "ListVersions",
        "ProcessLineage",
        "SubmitJob",
    ),
    # What execution works from, across every VO.
    **_rows(DEFINITION, frozenset({S}), "ListActiveTransformations"),
    # A process is what a parcel runs: the dispatcher hands it to the backend.
    **_rows(DEFINITION, PEOPLE_AND_SERVICES | {D}, "GetProcess", "GetProcessTree"),
    # Execution: people read and steer inputs and parcels of their VO; the lifecycle too.
    **_rows(
        EXECUTION,
        PEOPLE_AND_SERVICES,
        "ListInputs",
        "GetInput",
        "ListParcels",
        "GetParcel",
        "Provenance",
        "ResetInputs",
        "WriteOffInputs",
        "CancelParcels",
        "Flush",
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
    # Backend adaptors run whatever they are handed: the dispatcher only.
    **_rows(BACKEND, frozenset({D}), "Describe", "Submit", "Poll", "Cancel"),
}


def kinds_of(identity: Identity) -> frozenset[CallerKind]:
    """The kinds a caller is, from its token's roles."""
    kinds = {ROLE_KINDS[role] for role in identity.roles if role in ROLE_KINDS}
    if identity.vo:
        kinds.add(CallerKind.USER)
    return frozenset(kinds)


def authorise_call(method: str, identity: Identity) -> None:
    """PermissionDenied unless the table lets `identity` call `method` (a full method name,
    `/package.Service/Method`)."""
    allowed = RULES.get(method)
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
