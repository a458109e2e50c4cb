"""A parcel's page: what it is, where it ran and how it ended, and the end of its job's stdout
and stderr.

The parcel (a member's or a user job's) is GetParcel's, named by id or handle
(ResolveParcelName, as `dxts parcel` names it). The logs are asked of the backend that ran it
through the dispatcher (DispatcherService.GetParcelLogs, the call `dxts parcel ID --logs`
makes): the dispatcher checks the parcel is of the person's VO and asks the adaptor for no more
than its cap. The page shows the last LOG_TAIL_BYTES of each stream and links to the full
logs (up to the adaptors' cap). When the logs cannot be had — the parcel has not reached a
backend, the dispatcher cannot reach the adaptor, the web was not told where the dispatcher is
— the page says so in the dispatcher's own words, and shows everything else.

Its history is what the records hold: created (the parcel id is a UUIDv7, minted when the
packer made it), finished on the backend (the outcome's `finished_at`), completed (its
`completed_at`) and its last change (`updated_at`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dxts.core.adaptor.mapping import failure_class_from_proto
from dxts.core.adaptor.model import MAX_LOG_BYTES
from dxts.core.errors import DxtsError, NotFound, PermissionDenied
from dxts.v1 import common_pb2, definition_pb2, dispatcher_pb2, execution_pb2
from dxts.web import names
from dxts.web.services import UserClients

LOG_TAIL_BYTES = 16 * 1024
FULL_LOG_BYTES = MAX_LOG_BYTES


@dataclass
class Logs:
    stdout: str = ""
    stderr: str = ""
    sandbox: str = ""
    truncated: bool = False
    # Why there are none to show, in the dispatcher's words (empty: they are shown).
    missing: str = ""


@dataclass
class ParcelPage:
    got: execution_pb2.GetParcelResponse
    parcel_id: str
    handle: str
    status: str
    member: definition_pb2.Transformation | None
    history: list[tuple[str, datetime]]
    failure: str  # "application-error (exit code 3) [site]: the tool's line"; empty: none
    usage: dict[str, str]
    requirements: dict[str, Any]
    logs: Logs
    inputs: list[tuple[execution_pb2.Input, str]] = field(default_factory=list)

    @property
    def ended(self) -> bool:
        return self.status in names.ENDED_PARCELS

    @property
    def in_flight(self) -> bool:
        return self.status in names.IN_FLIGHT_PARCELS


def failure_text(outcome: common_pb2.Outcome) -> str:
    """The class, the exit code, the site and the tool's own words (as `dxts parcel` prints)."""
    if not outcome.HasField("failure"):
        return ""
    failure = outcome.failure
    said = failure_class_from_proto(failure.failure_class).value
    if outcome.HasField("exit_code"):
        said += f" (exit code {outcome.exit_code})"
    if failure.site:
        said += f" [{failure.site}]"
    where = " at ".join(part for part in (failure.lfn, failure.storage_element) if part)
    words = failure.tool_message or where or outcome.message
    return f"{said}: {words}" if words else said


def usage_of(outcome: common_pb2.Outcome) -> dict[str, str]:
    if not outcome.HasField("usage"):
        return {}
    usage = outcome.usage
    found = {}
    if usage.HasField("cpu_seconds"):
        found["CPU"] = f"{usage.cpu_seconds:,.1f} s"
    if usage.HasField("wall_seconds"):
        found["wall time"] = f"{usage.wall_seconds:,.1f} s"
    if usage.HasField("max_memory_bytes"):
        found["peak memory"] = names.size(usage.max_memory_bytes)
    return found


async def resolve(clients: UserClients, name: str) -> str:
    """The parcel id a name (id or handle, `p-10293`) stands for."""
    found = await clients.execution.ResolveParcelName(
        execution_pb2.ResolveParcelNameRequest(name=name)
    )
    return str(found.parcel_id)


async def job_logs(clients: UserClients, parcel_id: str, max_bytes: int) -> Logs:
    """The end of the job's streams, or why they cannot be shown (the dispatcher's words)."""
    if clients.dispatcher is None:
        return Logs(
            missing="the web view was not told where the dispatcher is "
            "(DXTS_DISPATCHER_ADDRESS): dxts parcel ID --logs shows them"
        )
    try:
        got = await clients.dispatcher.GetParcelLogs(
            dispatcher_pb2.GetParcelLogsRequest(parcel_id=parcel_id, max_bytes=max_bytes)
        )
    except (NotFound, PermissionDenied):
        raise
    except DxtsError as error:
        # Unauthenticated too: the page's own calls (GetParcel) took the user's token a moment
        # ago, so a refusal here is the dispatcher's (its own call to definition), not a
        # reason to sign the user out.
        return Logs(missing=str(error))
    logs = got.logs
    return Logs(logs.stdout, logs.stderr, logs.sandbox, logs.truncated)


def _requirements(got: execution_pb2.GetParcelResponse) -> dict[str, Any]:
    """What the parcel asked for: its compute facet's parameters and ids."""
    if got.WhichOneof("facet") != "compute":
        return {}
    compute = got.compute
    found: dict[str, Any] = {
        "process": f"sha256-{compute.process_id[:16]}…" if compute.process_id else "",
        "requirements": f"sha256-{compute.requirements_id[:16]}…"
        if compute.requirements_id
        else "",
    }
    return {k: v for k, v in found.items() if v}


async def parcel_page(clients: UserClients, name: str, now: datetime) -> ParcelPage:
    parcel_id = await resolve(clients, name)
    got = await clients.execution.GetParcel(execution_pb2.GetParcelRequest(parcel_id=parcel_id))
    parcel = got.parcel
    status = names.named_parcel_status(parcel.status)
    member = None
    if parcel.transformation_id:
        member = (
            await clients.definition.GetTransformation(
                definition_pb2.GetTransformationRequest(transformation_id=parcel.transformation_id)
            )
        ).transformation
    reached = bool(parcel.backend) and status not in ("Unassigned", "Reserved")
    logs = (
        await job_logs(clients, parcel_id, LOG_TAIL_BYTES)
        if reached
        else Logs(missing=f"it has not reached a backend yet (it is {status})")
    )
    history = [
        (what, moment)
        for what, moment in (
            ("created", names.created_at(parcel_id)),
            ("finished on the backend", names.when(got.outcome.finished_at)),
            ("completed", names.when(parcel.completed_at)),
            ("last change", names.when(parcel.updated_at)),
        )
        if moment is not None
    ]
    history.sort(key=lambda entry: entry[1])
    return ParcelPage(
        got=got,
        parcel_id=parcel_id,
        handle=parcel.handle or parcel_id,
        status=status,
        member=member,
        history=history,
        failure=failure_text(got.outcome) if got.HasField("outcome") else "",
        usage=usage_of(got.outcome) if got.HasField("outcome") else {},
        requirements=_requirements(got),
        logs=logs,
        inputs=[(i, names.named_input_status(i.status)) for i in got.inputs],
    )


def parameters(got: execution_pb2.GetParcelResponse) -> str:
    """The CWL input object it ran with, indented (empty for a data parcel)."""
    if got.WhichOneof("facet") != "compute" or not got.compute.parameters_json:
        return ""
    try:
        return json.dumps(json.loads(got.compute.parameters_json), indent=2)[:4000]
    except ValueError:
        return got.compute.parameters_json[:4000]
