"""What the core shows a plugin: read-only views of the entities an extension point concerns.

The runners build these from rows (ids as `uuid.UUID`, JSON columns as dicts, never None) and
pass them by the parameter names of `Point.context`. They are snapshots: changing one changes
nothing, since plugins propose and only the core writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from dxts.core.adaptor.model import FailureClass
from dxts.core.states import (
    InputStatus,
    Kind,
    ParcelStatus,
    TransformationStatus,
    WorkgraphStatus,
)

# How many inputs of a transformation are in each status (the exact counters).
InputOverview = dict[InputStatus, int]


@dataclass(frozen=True, slots=True)
class InputRecord:
    """An input as the core holds it: what a packer is streamed and HandleFailedInput judges."""

    id: UUID
    lfn: str | None
    lfn_size: int | None
    descriptor: dict[str, Any] | None
    status: InputStatus = InputStatus.UNASSIGNED
    error_count: int = 0
    parent_id: UUID | None = None


@dataclass(frozen=True)
class Workgraph:
    id: UUID
    type: str
    status: WorkgraphStatus
    annotations: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Transformation:
    id: UUID
    type: str
    kind: Kind
    status: TransformationStatus
    feeder: str | None
    feeder_args: dict[str, Any]
    feeder_enabled: bool
    packer: str
    packer_args: dict[str, Any]
    workgraph_id: UUID | None = None
    annotations: dict[str, Any] = field(default_factory=dict)
    # The members it reads from (its Edge feeder's producer, the members it waits `after`),
    # where the core knows them: the definition service's lifecycle views fill it, a
    # feeder's or packer's view leaves it empty.
    upstream_ids: tuple[UUID, ...] = ()
    # Of those, the member whose output its Edge feeder reads (None: not fed by an Edge, or
    # not known in this view).
    producer_id: UUID | None = None


@dataclass(frozen=True)
class Parcel:
    """The parcel an input last ran in; `reason` is why it failed, as reported, if known.

    From the backend's outcome, when it reported one: `raw_status` (its own status string),
    `exit_code` (where it knows it), `message` (why it failed, in its words), `failure_class`
    (the failure taxonomy's class, the same from every adaptor) and `tool_message` (the
    payload's own error line). `requirements` are those the parcel was sent with (a compute
    parcel's, merged over the template)."""

    id: UUID
    kind: Kind
    status: ParcelStatus
    backend: str | None = None
    reason: str | None = None
    annotations: dict[str, Any] = field(default_factory=dict)
    raw_status: str | None = None
    exit_code: int | None = None
    message: str | None = None
    requirements: dict[str, Any] = field(default_factory=dict)
    failure_class: FailureClass | None = None
    tool_message: str | None = None
