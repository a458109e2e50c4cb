"""What a member's (transformation's) page shows, gathered from the contracts.

Counts are exact (GetCounts). Everything drawn from single parcels and inputs is read in
bounded pages, so a member of a million inputs costs a page as much as one of ten:

* the parcels in flight (ListParcels by status, first page);
* the ended parcels (ListParcels by status, up to SAMPLE_PAGES pages): their measured CPU,
  wall time and peak memory (the `usage` annotation execution records from each outcome) and
  their outcome messages;
* the failures grouped by class, backend, site and normalised message (GroupFailures, the call
  `dxts errors` makes: the same rows);
* the settled inputs (ListInputs by status, up to SAMPLE_PAGES pages each): processed and
  failed against the time they settled (their `updated_at`).

ListParcels and ListInputs answer in creation order with no way to start at the newest, so
past SAMPLE_PAGES pages what is shown is a sample of the oldest, and the page says so next to
the exact counts.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dxts.v1 import accounting_pb2, common_pb2, definition_pb2, execution_pb2
from dxts.web import errors, names
from dxts.web.names import ENDED_PARCELS, IN_FLIGHT_PARCELS
from dxts.web.plots import Histogram, Plot, RatePlot, cumulative, failure_rate, histogram, spans
from dxts.web.services import UserClients

PAGE = 250
SAMPLE_PAGES = 1
RECENT = 12
OVER_TIME_SPANS = 48  # the parcels-over-time plot: spans from the first parcel to the end
LOG_ENTRIES = 40
EXAMPLES_PER_REASON = 3
FAILURES_BUDGET_S = 3.0  # as the workgraph page's panel
WAITING_SHOWN = 100
# The usage annotation (cpu_hours, wall_hours, memory_gb) → what a histogram shows.
MEASURES = (
    ("cpu_hours", "CPU", "s", 1 / 3600),
    ("wall_hours", "Wall time", "s", 1 / 3600),
    ("memory_gb", "Peak memory", "MB", 1 / 1000),
)
PROCESSED = ("Processed",)
FAILED = ("Failed", "Problematic")


def _numbers(enum: Any, prefix: str, statuses: Sequence[str]) -> list[Any]:
    wanted = {s.lower() for s in statuses}
    return [v for k, v in enum.items() if k.removeprefix(prefix).replace("_", "").lower() in wanted]


def parcel_statuses(*statuses: str) -> list[Any]:
    return _numbers(common_pb2.ParcelStatus, "PARCEL_STATUS_", statuses)


def input_statuses(*statuses: str) -> list[Any]:
    return _numbers(common_pb2.InputStatus, "INPUT_STATUS_", statuses)


@dataclass
class ParcelRow:
    parcel: execution_pb2.Parcel
    status: str
    identifier: str = ""
    message: str = ""
    outputs: list[str] = field(default_factory=list)


@dataclass
class MemberPage:
    transformation: definition_pb2.Transformation
    status: str
    actions: list[definition_pb2.Action]
    inputs: dict[str, int]
    parcels: dict[str, int]
    in_flight: list[ParcelRow]
    recent: list[ParcelRow]
    failures: list[errors.ErrorGroup]
    usage: list[Histogram]
    progress: Plot | None
    log: list[accounting_pb2.LogEntry]
    # Its parcels in flight, done and failed in OVER_TIME_SPANS spans (CountParcelsOverTime).
    parcels_over_time: Plot | None
    # From the same counts: failed / (done + failed) of the parcels that ended in each span.
    failure_rate: RatePlot | None
    sampled_parcels: int
    sampled_inputs: int
    # Inputs waiting for a person (Problematic) or failed and to be retried, first page.
    waiting: list[tuple[execution_pb2.Input, str]] = field(default_factory=list)
    failures_missing: str = ""  # why its failures are not shown (the errors page has them)

    @property
    def problematic(self) -> int:
        return self.inputs.get("Problematic", 0)

    @property
    def ended_parcels(self) -> int:
        return sum(self.parcels.get(s, 0) for s in ENDED_PARCELS)

    @property
    def settled_inputs(self) -> int:
        return sum(self.inputs.get(s, 0) for s in (*PROCESSED, *FAILED))


async def _pages(call: Any, request: Any, pages: int) -> list[Any]:
    """Up to `pages` pages of a List RPC, concatenated."""
    items: list[Any] = []
    for _ in range(pages):
        reply = await call(request)
        items += list(getattr(reply, "parcels", None) or getattr(reply, "inputs", None) or [])
        if not reply.next_page_token:
            break
        request.paging.page_token = reply.next_page_token
    return items


def _annotations(parcel: execution_pb2.Parcel) -> dict[str, Any]:
    try:
        found = json.loads(parcel.annotations_json or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


async def _failures_within(
    clients: UserClients, transformation_id: str
) -> execution_pb2.GroupFailuresResponse | str:
    """Its failures grouped (with each group over time), or why they are not shown: the
    panel gets FAILURES_BUDGET_S and never takes the page down (the errors page has them)."""
    request = execution_pb2.GroupFailuresRequest(
        transformation_ids=[transformation_id],
        examples=EXAMPLES_PER_REASON,
        buckets=errors.SPANS,
    )
    try:
        return await asyncio.wait_for(clients.execution.GroupFailures(request), FAILURES_BUDGET_S)
    except TimeoutError:
        return f"grouping its failures took longer than {FAILURES_BUDGET_S:g} s"


def usage_histograms(ended: Sequence[execution_pb2.Parcel]) -> list[Histogram]:
    """CPU, wall time and peak memory of the ended parcels, failed ones counted apart."""
    found = []
    failed = common_pb2.PARCEL_STATUS_FAILED
    measured = [
        ("failed" if p.status == failed else "succeeded", _annotations(p).get("usage") or {})
        for p in ended
    ]
    for key, title, unit, scale in MEASURES:
        values: dict[str, list[float]] = {"succeeded": [], "failed": []}
        for kind, usage in measured:
            if isinstance(usage, dict) and key in usage:
                values[kind].append(float(usage[key]))
        drawn = histogram(title, unit, values, scale=scale)
        if drawn is not None:
            found.append(drawn)
    return found


def parcel_row(parcel: execution_pb2.Parcel) -> ParcelRow:
    """A parcel as listed, with what its recorded outcome says (`Annotations.outcome`: the
    backend identifier, message and output files); in flight, only its backend. Read from
    the list rather than one GetParcel each, which costs a round trip and an authorisation
    per parcel."""
    outcome = _annotations(parcel).get("outcome")
    outcome = outcome if isinstance(outcome, dict) else {}
    outputs = outcome.get("outputs")
    return ParcelRow(
        parcel=parcel,
        status=names.named_parcel_status(parcel.status),
        identifier=str(outcome.get("identifier") or ""),
        message=str(outcome.get("message") or ""),
        outputs=[
            str(f["lfn"])
            for f in (outputs if isinstance(outputs, list) else [])
            if isinstance(f, dict) and f.get("lfn")
        ],
    )


def _parcels_over_time(found: execution_pb2.CountParcelsOverTimeResponse) -> Plot | None:
    start, end = names.when(found.span_from), names.when(found.span_to)
    if start is None or end is None:
        return None
    series = {"in-flight": found.in_flight, "done": found.done, "failed": found.failed}
    return spans({name: list(values) for name, values in series.items()}, start, end)


def _failure_rate(found: execution_pb2.CountParcelsOverTimeResponse) -> RatePlot | None:
    start, end = names.when(found.span_from), names.when(found.span_to)
    if start is None or end is None:
        return None
    return failure_rate(list(found.done), list(found.failed), start, end)


async def member_page(clients: UserClients, transformation_id: str, now: datetime) -> MemberPage:
    got = await clients.definition.GetTransformation(
        definition_pb2.GetTransformationRequest(transformation_id=transformation_id)
    )
    ids = [transformation_id]

    def parcels_in(*statuses: str) -> execution_pb2.ListParcelsRequest:
        return execution_pb2.ListParcelsRequest(
            transformation_id=transformation_id,
            statuses=parcel_statuses(*statuses),
            paging=common_pb2.Paging(page_size=PAGE),
        )

    def inputs_in(*statuses: str) -> execution_pb2.ListInputsRequest:
        return execution_pb2.ListInputsRequest(
            transformation_id=transformation_id,
            statuses=input_statuses(*statuses),
            paging=common_pb2.Paging(page_size=PAGE),
        )

    ex = clients.execution
    (
        input_counts,
        parcel_counts,
        log,
        flying,
        ended,
        failed,
        processed_inputs,
        failed_inputs,
        first_input,
        over_time,
    ) = await asyncio.gather(
        clients.accounting.GetCounts(
            accounting_pb2.GetCountsRequest(transformation_ids=ids, entity=common_pb2.ENTITY_INPUT)
        ),
        clients.accounting.GetCounts(
            accounting_pb2.GetCountsRequest(transformation_ids=ids, entity=common_pb2.ENTITY_PARCEL)
        ),
        clients.accounting.ListLog(
            accounting_pb2.ListLogRequest(
                transformation_id=transformation_id,
                newest_first=True,
                paging=common_pb2.Paging(page_size=LOG_ENTRIES),
            )
        ),
        _pages(ex.ListParcels, parcels_in(*IN_FLIGHT_PARCELS), 1),
        _pages(ex.ListParcels, parcels_in(*ENDED_PARCELS), SAMPLE_PAGES),
        _failures_within(clients, transformation_id),
        _pages(ex.ListInputs, inputs_in(*PROCESSED), SAMPLE_PAGES),
        _pages(ex.ListInputs, inputs_in(*FAILED), SAMPLE_PAGES),
        ex.ListInputs(
            execution_pb2.ListInputsRequest(
                transformation_id=transformation_id, paging=common_pb2.Paging(page_size=1)
            )
        ),
        ex.CountParcelsOverTime(
            execution_pb2.CountParcelsOverTimeRequest(
                transformation_id=transformation_id, buckets=OVER_TIME_SPANS
            )
        ),
    )
    flying = flying[: RECENT // 2]
    times = {
        "processed": [t for i in processed_inputs if (t := names.when(i.updated_at))],
        "failed": [t for i in failed_inputs if (t := names.when(i.updated_at))],
    }
    transformation = got.transformation
    status = names.transformation_status(transformation.status)
    # From its first input (a UUIDv7: when it was fed) to its end once finished, else now.
    began = names.created_at(first_input.inputs[0].input_id) if first_input.inputs else None
    settled = [t for series in times.values() for t in series]
    ended_at = max(settled) if status in names.FINISHED and settled else None
    return MemberPage(
        transformation=transformation,
        status=status,
        actions=list(got.actions),
        inputs=names.counts(input_counts.counts[0].counts),
        parcels=names.counts(parcel_counts.counts[0].counts),
        in_flight=[parcel_row(p) for p in flying],
        recent=[parcel_row(p) for p in ended[len(flying) - RECENT :]][::-1],
        failures=[] if isinstance(failed, str) else [errors.group_of(g, {}) for g in failed.groups],
        failures_missing=failed if isinstance(failed, str) else "",
        usage=usage_histograms(ended),
        progress=cumulative(times, now, start=began, end=ended_at),
        log=list(log.entries),
        parcels_over_time=_parcels_over_time(over_time),
        failure_rate=_failure_rate(over_time),
        sampled_parcels=len(ended),
        sampled_inputs=len(processed_inputs) + len(failed_inputs),
        waiting=sorted(
            ((i, names.named_input_status(i.status)) for i in failed_inputs[:WAITING_SHOWN]),
            key=lambda pair: pair[1] != "Problematic",
        ),
    )
