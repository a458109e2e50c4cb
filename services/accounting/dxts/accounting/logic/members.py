"""Who the members of a workgraph are: asked of the definition service, never read in SQL.

Workgraphs, Ownership and Transformations belong to the definition side, and reads across
sides go through the owner's gRPC contract (ARCHITECTURE.md), so the workgraph summary takes
its member list from a `MemberLister`. The one used in production
(`edge.definition_client.DefinitionMemberLister`) calls `DefinitionService.GetWorkgraph`
(which answers the workgraph's status and every member's step, kind and status in one call)
with the caller's own bearer token: the definition service decides what the caller may see,
and accounting needs no credentials of its own. Tests pass a double.
"""

from __future__ import annotations

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


class NoMemberLister:
    """Stands in when no definition service address is configured."""

    async def workgraph(self, workgraph_id: bytes, *, token: str | None) -> WorkgraphMembers:
        raise Unavailable(
            "workgraph summaries need the definition service: set DXTS_DEFINITION_ADDRESS"
        )
