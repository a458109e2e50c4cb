"""DefinitionService's file-access RPC (`logic.file_access`)."""

from __future__ import annotations

from dxts.core.identity import current_identity
from dxts.core.lfn import FileNamespace
from dxts.definition.edge.servicer_common import Context, ServicerBase
from dxts.definition.logic.file_access import file_access
from dxts.v1 import definition_pb2


class FileRpcs(ServicerBase):
    """GetFileAccess: the verified caller's VO, and whether it may use the files named."""

    async def GetFileAccess(
        self, request: definition_pb2.GetFileAccessRequest, context: Context
    ) -> definition_pb2.GetFileAccessResponse:
        caller = current_identity()
        home = file_access(caller, FileNamespace(), list(request.lfns), write=request.write)
        return definition_pb2.GetFileAccessResponse(vo=caller.vo, home=home)
