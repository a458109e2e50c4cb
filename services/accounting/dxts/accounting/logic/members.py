"""Who the members of a workgraph are, and which transformations a caller may read: asked of
the definition service, never read in SQL.

Workgraphs, Ownership and Transformations belong to the definition side, and reads across
sides go through the owner's gRPC contract (docs/architecture.md), so the workgraph summary takes
its member list from a `MemberLister`. The one used in production
(`edge.definition_client.DefinitionMemberLister`) calls `DefinitionService.GetWorkgraph`
(which answers the workgraph's status and every member's step, kind and status in one call)
with the caller's own bearer token: the definition service decides what the caller may see,
and accounting needs no credentials of its own. The same holds for a caller's transformations
(`check_transformations`, `transformations_of`), which scope the counts, the storage summary,
the logs and a VO operator's rebuild to the caller's VO (`logic.visibility`). Tests pass a
double.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from dxts.core.errors import Unavailable
from dxts.core.states import Kind, TransformationStatus, WorkgraphStatus


@dataclass(frozen=True)
class Member:
    transformation_id: bytes
    step: str
    kind: Kind
    status: TransformationStatus


@dataclass(frozen=True)
class WorkgraphMembers:
    workgraph_id: bytes
    status: WorkgraphStatus
    members: tuple[Member, ...]


class MemberLister(Protocol):
    async def workgraph(self, workgraph_id: bytes, *, token: str | None) -> WorkgraphMembers:
        """The workgraph's status and members; NotFound when it does not exist (for the
        caller whose `token` is forwarded)."""
        ...

    async def check_transformations(self, ids: Sequence[bytes], *, token: str | None) -> None:
        """NotFound unless the caller whose `token` is forwarded may see every one of `ids`."""
        ...

    async def transformations_of(self, vo: str, *, token: str | None) -> list[bytes]:
        """Every transformation of `vo` the caller whose `token` is forwarded may see."""
        ...


class NoMemberLister:
    """Stands in when no definition service address is configured."""

    async def workgraph(self, workgraph_id: bytes, *, token: str | None) -> WorkgraphMembers:
        raise Unavailable(
            "workgraph summaries need the definition service: set DXTS_DEFINITION_ADDRESS"
        )

    async def check_transformations(self, ids: Sequence[bytes], *, token: str | None) -> None:
        raise Unavailable(
            "who may read a transformation is the definition service's to say: set "
            "DXTS_DEFINITION_ADDRESS"
        )

    async def transformations_of(self, vo: str, *, token: str | None) -> list[bytes]:
        await self.check_transformations([], token=token)
        return []
