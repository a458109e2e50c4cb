"""DefinitionService: requests to domain calls and results to replies, nothing else.

The RPCs are grouped by area (`servicer_workgraphs`, `servicer_transformations`,
`servicer_processes`, `servicer_files`) over one base (`servicer_common`: collaborators,
caller, request fields).
"""

from __future__ import annotations

from dxts.definition.edge.servicer_files import FileRpcs
from dxts.definition.edge.servicer_processes import ProcessRpcs
from dxts.definition.edge.servicer_transformations import TransformationRpcs
from dxts.definition.edge.servicer_workgraphs import WorkgraphRpcs
from dxts.v1 import definition_pb2_grpc


class DefinitionServicer(
    WorkgraphRpcs,
    TransformationRpcs,
    ProcessRpcs,
    FileRpcs,
    definition_pb2_grpc.DefinitionServiceServicer,
):
    """Every RPC of DefinitionService."""
