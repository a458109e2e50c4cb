"""The transformations execution works on, asked of the definition service, never read in SQL.

Transformations belong to the definition side and reads across sides go through the owner's
contract (ARCHITECTURE.md), so the sweeps take their work list from an `ActiveTransformations`:

* `active()` — every Active transformation with what the runners need (feeder, packer, their
  arguments, the bookmark, FeederEnabled, the scouting and halted flags, ProcessID, the
  requirements template, the declared outputs): `DefinitionService.ListActiveTransformations`,
  all pages, with execution's service token;
* `describe(id, token=...)` — one transformation as the caller sees it (its VO, owner and
  outputs): `GetTransformation` with the caller's own token, so that definition decides what
  the caller may see (NotFound otherwise), as for accounting's workgraph summaries.

`GrpcTransformations` is the production implementation; `InMemoryTransformations` the tests'
double. `ActiveSnapshot` keeps the last list for the lookups plugins' readers make between two
sweeps (which transformation produces an output).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

import grpc
import sqlalchemy as sa

from dxts.core.db import Database, Isolation
from dxts.core.errors import NotFound
from dxts.core.grpc.convert import enum_from_proto
from dxts.core.ids import hash_from_str, id_from_str, id_to_str
from dxts.core.plugins import Phase, Transformation
from dxts.core.schema.definition import transformations
from dxts.core.states import Kind, TransformationStatus
from dxts.v1 import common_pb2, definition_pb2, definition_pb2_grpc

PAGE_SIZE = 500


@dataclass(frozen=True)
class Output:
    """A declared output (TransformationOutputs row)."""

    output_id: bytes
    name: str
    intermediate: bool = False


@dataclass(frozen=True)
class ActiveTransformation:
    """One transformation as the execution sweeps see it."""

    id: bytes
    type: str
    kind: Kind
    packer: str
    status: TransformationStatus = TransformationStatus.ACTIVE
    vo: str = ""
    owner_sub: str = ""
    workgraph_id: bytes | None = None
    feeder: str | None = None
    feeder_args: dict[str, Any] = field(default_factory=dict)
    feeder_state: dict[str, Any] | None = None
    feeder_enabled: bool = True
    packer_args: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, Any] = field(default_factory=dict)
    hooks: dict[str, Any] = field(default_factory=dict)  # the Hooks column: name → binding
    scouting: bool = False
    halted: bool = False
    process_id: bytes | None = None
    requirements_template: dict[str, Any] | None = None
    outputs: tuple[Output, ...] = ()

    @property
    def phase(self) -> Phase:
        return Phase.SCOUTING if self.scouting else Phase.ACTIVE

    @property
    def feeds(self) -> bool:
        """Its feeder runs: Active, a feeder bound and enabled, the workgraph not halted."""
        return (
            self.status is TransformationStatus.ACTIVE
            and self.feeder is not None
            and self.feeder_enabled
            and not self.halted
        )

    @property
    def packs(self) -> bool:
        """Its packer runs: Active (not Paused) and the workgraph not halted."""
        return self.status is TransformationStatus.ACTIVE and not self.halted

    @property
    def feeder_active(self) -> bool:
        """What the packer is told: more input may come."""
        return self.feeder is not None and self.feeder_enabled and not self.halted

    def view(self) -> Transformation:
        """The read-only view a plugin receives."""
        return Transformation(
            id=UUID(bytes=self.id),
            type=self.type,
            kind=self.kind,
            status=self.status,
            feeder=self.feeder,
            feeder_args=dict(self.feeder_args),
            feeder_enabled=self.feeder_enabled,
            packer=self.packer,
            packer_args=dict(self.packer_args),
            workgraph_id=UUID(bytes=self.workgraph_id) if self.workgraph_id else None,
            annotations=dict(self.annotations),
        )


@dataclass(frozen=True)
class Description:
    """One transformation as a caller sees it (`describe`)."""

    id: bytes
    vo: str
    owner_sub: str
    status: TransformationStatus
    outputs: tuple[Output, ...] = ()


class ActiveTransformations(Protocol):
    async def active(self) -> list[ActiveTransformation]:
        """Every Active transformation, fresh from the definition side."""
        ...

    async def describe(self, transformation_id: bytes, *, token: str | None) -> Description:
        """The transformation as the caller whose `token` is forwarded sees it; NotFound when
        it does not exist or the caller may not see it."""
        ...


# ------------------------------------------------------------------------------------ gRPC


def _json_object(text: str, field_name: str) -> dict[str, Any]:
    value = json.loads(text) if text else None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{field_name} is not a JSON object")
    return value


def _outputs(items: Iterable[definition_pb2.TransformationOutput]) -> tuple[Output, ...]:
    return tuple(
        Output(id_from_str(o.transformation_output_id), o.name, o.intermediate) for o in items
    )


def from_proto(message: definition_pb2.Transformation) -> ActiveTransformation:
    """The record of one ListActiveTransformations entry."""
    state = json.loads(message.feeder_state_json) if message.feeder_state_json else None
    template = (
        json.loads(message.requirements_template_json)
        if message.requirements_template_json
        else None
    )
    return ActiveTransformation(
        id=id_from_str(message.transformation_id, field="transformation_id"),
        type=message.type,
        kind=enum_from_proto(Kind, message.kind, field="kind"),
        status=enum_from_proto(TransformationStatus, message.status, field="status"),
        vo=message.vo,
        owner_sub=message.owner_sub,
        workgraph_id=id_from_str(message.workgraph_id) if message.workgraph_id else None,
        feeder=message.feeder or None,
        feeder_args=_json_object(message.feeder_args_json, "feeder_args_json"),
        feeder_state=state if isinstance(state, dict) else None,
        feeder_enabled=message.feeder_enabled,
        packer=message.packer,
        packer_args=_json_object(message.packer_args_json, "packer_args_json"),
        annotations=_json_object(message.annotations_json, "annotations_json"),
        hooks=_json_object(message.hooks_json, "hooks_json"),
        scouting=message.scouting,
        halted=message.halted,
        process_id=hash_from_str(message.process_id) if message.process_id else None,
        requirements_template=template if isinstance(template, dict) else None,
        outputs=_outputs(message.outputs),
    )


class GrpcTransformations:
    """`ActiveTransformations` over DefinitionService, on a `dxts.core.grpc.channel` carrying
    execution's service token (`active`) or the caller's (`describe`)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = definition_pb2_grpc.DefinitionServiceStub(channel)

    async def active(self) -> list[ActiveTransformation]:
        found: list[ActiveTransformation] = []
        token = ""
        while True:
            reply = await self._stub.ListActiveTransformations(
                definition_pb2.ListActiveTransformationsRequest(
                    paging=common_pb2.Paging(page_size=PAGE_SIZE, page_token=token)
                )
            )
            found.extend(from_proto(message) for message in reply.transformations)
            token = reply.next_page_token
            if not token:
                return found

    async def describe(self, transformation_id: bytes, *, token: str | None) -> Description:
        metadata = (("authorization", f"Bearer {token}"),) if token else None
        reply = await self._stub.GetTransformation(
            definition_pb2.GetTransformationRequest(transformation_id=id_to_str(transformation_id)),
            metadata=metadata,
        )
        message = reply.transformation
        return Description(
            id=transformation_id,
            vo=message.vo,
            owner_sub=message.owner_sub,
            status=enum_from_proto(TransformationStatus, message.status, field="status"),
            outputs=_outputs(message.outputs),
        )


# ----------------------------------------------------------------------------- the double


class InMemoryTransformations:
    """The tests' definition service: records set by the test, every caller sees every one.

    With a `database`, the two columns execution itself writes (FeederState, and FeederEnabled
    cleared on NoMoreInputs) are read back from the Transformations rows on each `active()`,
    as the definition service would return them.
    """

    def __init__(
        self, records: Iterable[ActiveTransformation] = (), *, database: Database | None = None
    ) -> None:
        self.records = {record.id: record for record in records}
        self.database = database

    def put(self, record: ActiveTransformation) -> None:
        self.records[record.id] = record

    def update(self, transformation_id: bytes, **changes: Any) -> ActiveTransformation:
        record = dataclasses.replace(self.records[transformation_id], **changes)
        self.records[transformation_id] = record
        return record

    async def active(self) -> list[ActiveTransformation]:
        if self.database is not None:
            await self._read_back(self.database)
        return [
            record
            for record in self.records.values()
            if record.status is TransformationStatus.ACTIVE
        ]

    async def _read_back(self, database: Database) -> None:
        async with database.transaction(Isolation.READ_COMMITTED) as conn:
            rows = await conn.execute(
                sa.select(
                    transformations.c.TransformationID,
                    transformations.c.FeederState,
                    transformations.c.FeederEnabled,
                ).where(transformations.c.TransformationID.in_(list(self.records)))
            )
            for row in rows:
                self.update(
                    bytes(row.TransformationID),
                    feeder_state=row.FeederState,
                    feeder_enabled=bool(row.FeederEnabled),
                )

    async def describe(self, transformation_id: bytes, *, token: str | None) -> Description:
        record = self.records.get(transformation_id)
        if record is None:
            raise NotFound("transformation", id_to_str(transformation_id))
        return Description(record.id, record.vo, record.owner_sub, record.status, record.outputs)


# ------------------------------------------------------------------------------ snapshot


class ActiveSnapshot:
    """The last `active()` list, refreshed when older than `max_age_s`, indexed for lookups.

    The sweeps refresh it every round (`refresh`); the plugins' readers look up in it which
    transformation produces an output, between rounds.
    """

    def __init__(self, source: ActiveTransformations, *, max_age_s: float = 5.0) -> None:
        self.source = source
        self.max_age_s = max_age_s
        self._records: dict[bytes, ActiveTransformation] = {}
        self._producers: dict[bytes, bytes] = {}
        self._taken = -float("inf")
        self._lock = asyncio.Lock()

    async def refresh(self) -> list[ActiveTransformation]:
        async with self._lock:
            records = await self.source.active()
            self._records = {record.id: record for record in records}
            self._producers = {o.output_id: r.id for r in records for o in r.outputs}
            self._taken = time.monotonic()
            return records

    async def _current(self) -> None:
        if time.monotonic() - self._taken > self.max_age_s:
            await self.refresh()

    async def get(self, transformation_id: bytes) -> ActiveTransformation | None:
        await self._current()
        return self._records.get(transformation_id)

    async def producer_of(self, output_id: bytes) -> ActiveTransformation | None:
        """The Active transformation declaring `output_id`; None if none is Active."""
        await self._current()
        producer = self._producers.get(output_id)
        return self._records.get(producer) if producer is not None else None
