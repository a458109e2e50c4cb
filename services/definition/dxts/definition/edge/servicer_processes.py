"""DefinitionService's process store, registry and user-job RPCs, and GetCaller."""

from __future__ import annotations

from dxts.core.grpc.convert import from_json_text as _from_json_text
from dxts.core.grpc.paging import decode_page_token, encode_page_token, filters_fingerprint
from dxts.core.grpc.paging import page_size as _page_size
from dxts.core.identity import current_identity
from dxts.core.ids import hash_to_str, id_to_str
from dxts.definition.edge.mapping import bundle_from_pb, diagnostic_pb, process_pb, version_pb
from dxts.definition.edge.servicer_common import Context, ServicerBase, required_hash
from dxts.definition.logic import jobs, labels, processes
from dxts.v1 import definition_pb2


class ProcessRpcs(ServicerBase):
    """The process and user-job RPCs."""

    # -- processes -------------------------------------------------------------------------------

    async def GetProcess(
        self, request: definition_pb2.GetProcessRequest, context: Context
    ) -> definition_pb2.GetProcessResponse:
        view = await processes.get_process(
            self._database, self._viewer(), required_hash(request.process_id, "process_id")
        )
        return definition_pb2.GetProcessResponse(process=process_pb(view))

    async def GetProcessTree(
        self, request: definition_pb2.GetProcessTreeRequest, context: Context
    ) -> definition_pb2.GetProcessTreeResponse:
        root = required_hash(request.process_id, "process_id")
        tree = await processes.process_tree(self._database, self._viewer(), root)
        return definition_pb2.GetProcessTreeResponse(
            root_process_id=hash_to_str(root), processes=[process_pb(p) for p in tree]
        )

    async def PublishProcess(
        self, request: definition_pb2.PublishProcessRequest, context: Context
    ) -> definition_pb2.PublishProcessResponse:
        view = await processes.publish(
            self._database,
            self._viewer(),
            vo=request.vo,
            name=request.name,
            version=request.version,
            process_id=required_hash(request.process_id, "process_id"),
        )
        return definition_pb2.PublishProcessResponse(version=version_pb(view))

    async def ResolveProcess(
        self, request: definition_pb2.ResolveProcessRequest, context: Context
    ) -> definition_pb2.ResolveProcessResponse:
        view = await processes.resolve(
            self._database,
            self._viewer(),
            vo=request.vo,
            name=request.name,
            version=request.version,
        )
        return definition_pb2.ResolveProcessResponse(version=version_pb(view))

    async def ListVersions(
        self, request: definition_pb2.ListVersionsRequest, context: Context
    ) -> definition_pb2.ListVersionsResponse:
        fingerprint = filters_fingerprint(request.vo, request.name)
        position = decode_page_token(request.paging, filters=fingerprint)
        start = int((position or {}).get("offset", 0))
        size = _page_size(request.paging)
        found = await processes.versions(
            self._database, self._viewer(), vo=request.vo, name=request.name
        )
        page = found[start : start + size]
        more = start + size < len(found)
        return definition_pb2.ListVersionsResponse(
            versions=[version_pb(v) for v in page],
            next_page_token=encode_page_token({"offset": start + size}, filters=fingerprint)
            if more
            else "",
        )

    async def ProcessLineage(
        self, request: definition_pb2.ProcessLineageRequest, context: Context
    ) -> definition_pb2.ProcessLineageResponse:
        found = await processes.lineage(
            self._database, self._viewer(), required_hash(request.process_id, "process_id")
        )
        return definition_pb2.ProcessLineageResponse(
            process_id=hash_to_str(found.process_id),
            composes=[hash_to_str(p) for p in found.composes],
            composed_by=[hash_to_str(p) for p in found.composed_by],
            versions=[version_pb(v) for v in found.versions],
            transformation_ids=[id_to_str(t) for t in found.transformation_ids],
        )

    # -- user jobs -------------------------------------------------------------------------------

    async def SubmitJob(
        self, request: definition_pb2.SubmitJobRequest, context: Context
    ) -> definition_pb2.SubmitJobResponse:
        bundle = bundle_from_pb(request.bundle)
        inputs = _from_json_text(request.inputs_json, field="inputs_json")
        submitted = await jobs.submit_job(
            self._database,
            bundle,
            identity=current_identity(),
            execution=self._forward(context),
            inputs=inputs,
            labels=labels.check_labels(dict(request.labels)),
            config=self._config,
            request_id=request.request_id,
        )
        return definition_pb2.SubmitJobResponse(
            parcel_id=id_to_str(submitted.parcel_id),
            process_id=hash_to_str(submitted.process_id),
            warnings=[diagnostic_pb(p) for p in submitted.warnings],
        )

    # -- the caller ------------------------------------------------------------------------------

    async def GetCaller(
        self, request: definition_pb2.GetCallerRequest, context: Context
    ) -> definition_pb2.GetCallerResponse:
        caller = current_identity()
        return definition_pb2.GetCallerResponse(
            vo=caller.vo,
            sub=caller.sub,
            name=caller.name,
            group=caller.group,
            roles=sorted(caller.roles),
        )
