"""The accounting service's client of the definition service: workgraph members and the
transformations a caller may see, returned as `logic.members` types. Every call carries the
caller's own token: the definition service decides what that caller may see."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from dxts.accounting.logic.members import Member, WorkgraphMembers
from dxts.core.errors import NotFound, Unavailable
from dxts.core.grpc.convert import enum_from_proto
from dxts.core.ids import id_from_str, id_to_str
from dxts.core.kernel.bounds import MAX_ITEMS
from dxts.core.states import Kind, TransformationStatus, WorkgraphStatus
from dxts.v1 import common_pb2, definition_pb2, definition_pb2_grpc

PAGE_SIZE = 1000


def _bearer(token: str | None) -> tuple[tuple[str, str], ...] | None:
    return (("authorization", f"Bearer {token}"),) if token else None


class DefinitionMemberLister:
    """A MemberLister over `DefinitionService.GetWorkgraph`, `ListActiveTransformations` and
    `ListTransformations`, on a `dxts.core.grpc.channel` built without a token (each call
    carries the caller's)."""

    def __init__(self, channel: grpc.aio.Channel, address: str) -> None:
        self._stub = definition_pb2_grpc.DefinitionServiceStub(channel)
        self._address = address

    async def check_transformations(self, ids: Sequence[bytes], *, token: str | None) -> None:
        """One ListActiveTransformations per MAX_ITEMS ids, asked by id with the caller's token
        (definition scopes it by the caller's VO, as GetTransformation): one call for a page of
        a thousand members, not a thousand; NotFound names the first one left out."""
        wanted = [id_to_str(t) for t in dict.fromkeys(ids)]
        seen: set[str] = set()
        for start in range(0, len(wanted), MAX_ITEMS):
            page_token = ""
            while True:
                reply = await self._stub.ListActiveTransformations(
                    definition_pb2.ListActiveTransformationsRequest(
                        paging=common_pb2.Paging(page_size=PAGE_SIZE, page_token=page_token),
                        transformation_ids=wanted[start : start + MAX_ITEMS],
                    ),
                    metadata=_bearer(token),
                )
                seen.update(t.transformation_id for t in reply.transformations)
                page_token = reply.next_page_token
                if not page_token:
                    break
        missing = [t for t in wanted if t not in seen]
        if missing:
            raise NotFound("transformation", missing[0])

    async def transformations_of(self, vo: str, *, token: str | None) -> list[bytes]:
        found: list[bytes] = []
        page_token = ""
        while True:
            reply = await self._stub.ListTransformations(
                definition_pb2.ListTransformationsRequest(
                    paging=common_pb2.Paging(page_size=PAGE_SIZE, page_token=page_token), vo=vo
                ),
                metadata=_bearer(token),
            )
            found += [
                id_from_str(t.transformation_id, field="transformation_id")
                for t in reply.transformations
            ]
            page_token = reply.next_page_token
            if not page_token:
                return found

    async def workgraph(self, workgraph_id: bytes, *, token: str | None) -> WorkgraphMembers:
        try:
            reply = await self._stub.GetWorkgraph(
                definition_pb2.GetWorkgraphRequest(workgraph_id=id_to_str(workgraph_id)),
                metadata=_bearer(token),
            )
        except grpc.aio.AioRpcError as error:
            # What channel() leaves as an RpcError has no domain meaning for our caller except
            # "the definition service cannot answer" (UNIMPLEMENTED: an older release).
            if error.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise Unavailable(
                    f"the definition service at {self._address} does not serve GetWorkgraph"
                ) from error
            raise
        return WorkgraphMembers(
            workgraph_id,
            enum_from_proto(WorkgraphStatus, reply.workgraph.status, field="workgraph.status"),
            tuple(
                Member(
                    id_from_str(m.transformation_id, field=f"members[{i}].transformation_id"),
                    m.step,
                    enum_from_proto(Kind, m.kind, field=f"members[{i}].kind"),
                    enum_from_proto(TransformationStatus, m.status, field=f"members[{i}].status"),
                )
                for i, m in enumerate(reply.members)
            ),
        )
