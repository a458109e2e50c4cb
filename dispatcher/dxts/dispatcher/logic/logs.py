"""A parcel's job logs, for a person asking why it failed (`DispatcherService.GetParcelLogs`):
the dispatcher is the one component that knows which backend holds a parcel under which
identifier, and the only caller the adaptors answer, so it asks the adaptor on the person's
behalf — after checking the parcel is of the person's VO, as execution does for GetParcel.
It asks for no more than the adaptors' cap (`MAX_LOG_BYTES`), whatever the person asked, and
when the adaptor does not answer the person hears so with a reference to the dispatcher's log,
never the transport's own words (addresses, internal errors). A job its backend has forgotten
is a refusal saying so, not the parcel's NotFound."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from dxts.core.adaptor.model import MAX_LOG_BYTES, JobLogs
from dxts.core.db import Database, Isolation
from dxts.core.errors import FailedPrecondition, NotFound, Unavailable
from dxts.core.identity import Identity
from dxts.core.ids import id_to_str
from dxts.core.kernel.authorisation import CallerKind
from dxts.dispatcher.logic.backends import Backend, BackendUnreachable
from dxts.dispatcher.logic.payloads import DefinitionSource
from dxts.dispatcher.store.identifiers import parcel_place

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ParcelLogs:
    backend: str
    identifier: str
    logs: JobLogs


async def parcel_logs(
    database: Database,
    backends: Mapping[str, Backend],
    definition: DefinitionSource,
    caller: Identity,
    parcel_id: bytes,
    max_bytes: int,
) -> ParcelLogs:
    adaptors = {name: backend.adaptor for name, backend in backends.items()}
    place = await database.run(
        lambda conn: parcel_place(conn, parcel_id, adaptors), isolation=Isolation.READ_COMMITTED
    )
    shown = id_to_str(parcel_id)
    if place is None:
        raise NotFound("parcel", shown)
    if place.transformation_id is not None:
        vo, _ = await definition.transformation_scope(place.transformation_id)
    else:
        vo = place.user_vo or ""
    if not (caller.has_role(CallerKind.ADMIN) or caller.vo == vo):
        raise NotFound("parcel", shown)
    if place.backend is None:
        raise FailedPrecondition(
            f"parcel {shown} has not reached a backend (it is {place.status})",
            current_state=place.status,
        )
    backend = backends.get(place.backend)
    if backend is None or place.identifier is None:
        raise FailedPrecondition(
            f"parcel {shown} ran on backend {place.backend}, which this dispatcher does not "
            "drive (or before its identifier was recorded)",
            current_state=place.status,
        )
    identifier = id_to_str(place.identifier)
    try:
        logs = await backend.logs(identifier, min(max_bytes, MAX_LOG_BYTES))
    except BackendUnreachable as error:
        reference = uuid.uuid4()
        log.warning("logs of parcel %s (reference %s): %s", shown, reference, error)
        raise Unavailable(
            f"backend {place.backend} did not give the logs of parcel {shown}; the "
            f"dispatcher's log says why (reference {reference})"
        ) from None
    except NotFound:
        # The parcel is found and the caller's; its backend has forgotten the job (a batch
        # system forgets old jobs): not the parcel's NotFound, which would hide the parcel.
        raise FailedPrecondition(
            f"backend {place.backend} no longer knows job {identifier} of parcel {shown}, "
            "nor its logs",
            current_state=place.status,
        ) from None
    return ParcelLogs(place.backend, identifier, logs)
