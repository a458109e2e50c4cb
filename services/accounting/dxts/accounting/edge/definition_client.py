"""The accounting service's client of the definition service: workgraph members, returned as
`logic.members` types."""

from __future__ import annotations

import grpc

from dxts.accounting.logic.members import Member, WorkgraphMembers
from dxts.core.errors import Unavailable
from dxts.core.grpc.convert import enum_from_proto
from dxts.core.ids import id_from_str, id_to_str
from dxts.core.states import Kind, TransformationStatus, WorkgraphStatus
from dxts.v1 import definition_pb2, definition_pb2_grpc


class DefinitionMemberLister:
    """A MemberLister over `DefinitionService.GetWorkgraph`, on a `dxts.core.grpc.channel`
    built without a token (each call carries the caller's)."""

    def __init__(self, channel: grpc.aio.Channel, address: str) -> None:
        self._stub = definition_pb2_grpc.DefinitionServiceStub(channel)
        self._address = address

    async def workgraph(self, workgraph_id: bytes, *, token: str | None) -> WorkgraphMembers:
        metadata = (("authorization", f"Bearer {token}"),) if token else None
        try:
            reply = await self._stub.GetWorkgraph(
                definition_pb2.GetWorkgraphRequest(workgraph_id=id_to_str(workgraph_id)),
                metadata=metadata,
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
