"""The definition service as execution asks it: `ActiveTransformations` over gRPC.

* `active()` — `DefinitionService.ListActiveTransformations`, all pages, with execution's
  service token; `listed(ids)` the same call asked by id;
* `describe(id, token=...)` — `GetTransformation` with the caller's own token, so that
  definition decides what the caller may see (NotFound otherwise); `describe_many` the same
  for many ids, as `ListActiveTransformations` asked by id with the caller's token (one call
  per MAX_ITEMS ids: definition scopes it by the caller's VO as it does GetTransformation).

Both answer the domain records of `dxts.execution.logic.transformations`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from typing import Any

import grpc

from dxts.core.errors import NotFound
from dxts.core.grpc.convert import enum_from_proto
from dxts.core.ids import hash_from_str, id_from_str, id_to_str
from dxts.core.kernel.bounds import MAX_ITEMS
from dxts.core.states import Kind, TransformationStatus
from dxts.execution.logic.transformations import ActiveTransformation, Description, Output
from dxts.v1 import common_pb2, definition_pb2, definition_pb2_grpc

PAGE_SIZE = 500


def _bearer(token: str | None) -> tuple[tuple[str, str], ...] | None:
    return (("authorization", f"Bearer {token}"),) if token else None


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
        return await self._list(())

    async def listed(self, transformation_ids: Collection[bytes]) -> list[ActiveTransformation]:
        if not transformation_ids:  # no ids asks for every Active one
            return []
        ids = [id_to_str(tid) for tid in sorted(transformation_ids)]
        found: list[ActiveTransformation] = []
        for start in range(0, len(ids), MAX_ITEMS):  # as many ids as a request may carry
            found.extend(await self._list(ids[start : start + MAX_ITEMS]))
        return found

    async def _list(
        self, ids: Collection[str], caller_token: str | None = None
    ) -> list[ActiveTransformation]:
        found: list[ActiveTransformation] = []
        token = ""
        while True:
            reply = await self._stub.ListActiveTransformations(
                definition_pb2.ListActiveTransformationsRequest(
                    paging=common_pb2.Paging(page_size=PAGE_SIZE, page_token=token),
                    transformation_ids=ids,
                ),
                metadata=_bearer(caller_token),
            )
            found.extend(from_proto(message) for message in reply.transformations)
            token = reply.next_page_token
            if not token:
                return found

    async def describe_many(
        self, transformation_ids: Collection[bytes], *, token: str | None
    ) -> list[Description]:
        ids = [id_to_str(tid) for tid in dict.fromkeys(transformation_ids)]
        seen: dict[bytes, ActiveTransformation] = {}
        for start in range(0, len(ids), MAX_ITEMS):
            for record in await self._list(ids[start : start + MAX_ITEMS], token):
                seen[record.id] = record
        missing = [tid for tid in dict.fromkeys(transformation_ids) if tid not in seen]
        if missing:
            raise NotFound("transformation", id_to_str(missing[0]))
        return [
            Description(r.id, r.vo, r.owner_sub, r.status)
            for r in (seen[tid] for tid in dict.fromkeys(transformation_ids))
        ]

    async def describe(self, transformation_id: bytes, *, token: str | None) -> Description:
        """By ListActiveTransformations, not GetTransformation: the same VO scoping, without
        the attention items and actions a person's GetTransformation reads (every execution
        read of a member page asks this once)."""
        (found,) = await self.describe_many([transformation_id], token=token)
        return found
