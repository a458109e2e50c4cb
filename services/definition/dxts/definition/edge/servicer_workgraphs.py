"""DefinitionService's workgraph RPCs: submission, reads, labels and the operator commands on a
workgraph.
"""

from __future__ import annotations

from dxts.core.errors import InvalidArgument
from dxts.core.grpc.convert import from_json_text as _from_json_text
from dxts.core.grpc.convert import json_text
from dxts.core.grpc.paging import filters_fingerprint
from dxts.core.grpc.paging import page_size as _page_size
from dxts.core.grpc.requests import Problems, next_page_token, page_after, required_id
from dxts.core.identity import current_identity
from dxts.core.ids import id_to_str
from dxts.core.kernel.authorisation import rpc, serving
from dxts.core.states import WorkgraphStatus
from dxts.definition.edge.mapping import (
    action_pb,
    bundle_from_pb,
    diagnostic_pb,
    plan_pb,
    transformation_pb,
    workgraph_pb,
)
from dxts.definition.edge.servicer_common import Context, ServicerBase
from dxts.definition.logic import labels, queries, workgraph_commands
from dxts.definition.logic.drain_status import drain_status
from dxts.definition.logic.submit import start_if_asked, submit_workgraph
from dxts.v1 import definition_pb2, definition_pb2_grpc


class WorkgraphRpcs(ServicerBase):
    """The workgraph RPCs."""

    # -- workgraphs ------------------------------------------------------------------------------

    async def SubmitWorkgraph(
        self, request: definition_pb2.SubmitWorkgraphRequest, context: Context
    ) -> definition_pb2.SubmitWorkgraphResponse:
        bundle = bundle_from_pb(request.bundle)
        given = labels.check_labels(dict(request.labels))
        identity = current_identity()
        submitted = await submit_workgraph(
            self._database,
            bundle,
            vo=identity.vo,
            sub=identity.sub,
            catalogue=self._catalogue,
            config=self._config,
            labels=given,
            dry_run=request.dry_run,
            request_id=request.request_id,
            locks=self._locks,
            author=identity.display_name,
            read_only_ses=self._settings.read_only_ses,
        )
        with serving(rpc(definition_pb2_grpc.DefinitionServiceServicer.StartWorkgraph)):
            await start_if_asked(self._database, self._caller(), submitted)
        return definition_pb2.SubmitWorkgraphResponse(
            workgraph_id="" if request.dry_run else id_to_str(submitted.workgraph_id),
            plan=plan_pb(submitted.plan, request.dry_run),
            warnings=[diagnostic_pb(p) for p in submitted.warnings],
            scouts=submitted.plan.scouts,
        )

    async def GetWorkgraph(
        self, request: definition_pb2.GetWorkgraphRequest, context: Context
    ) -> definition_pb2.GetWorkgraphResponse:
        workgraph_id = required_id(request.workgraph_id, "workgraph_id")
        detail = await queries.get_workgraph(self._database, self._viewer(), workgraph_id)
        attention = await self._attention(workgraphs=[detail.workgraph], members=detail.members)
        return definition_pb2.GetWorkgraphResponse(
            workgraph=workgraph_pb(detail.workgraph, attention),
            members=[transformation_pb(m, attention) for m in detail.members],
            actions=[action_pb(a) for a in detail.actions],
            stripped_spec_json=json_text(detail.stripped_spec),
        )

    async def GetDrainStatus(
        self, request: definition_pb2.GetDrainStatusRequest, context: Context
    ) -> definition_pb2.GetDrainStatusResponse:
        workgraph_id = required_id(request.workgraph_id, "workgraph_id")
        found = await drain_status(self._database, self._viewer(), workgraph_id)
        return definition_pb2.GetDrainStatusResponse(
            workgraph_id=id_to_str(found.workgraph_id),
            status=found.status,
            drained=found.drained,
            reasons=found.reasons,
            members=[
                definition_pb2.MemberDrainStatus(
                    transformation_id=id_to_str(m.transformation_id),
                    step=m.step,
                    status=m.status,
                    drained=m.drained,
                    reasons=[
                        definition_pb2.DrainReason(
                            kind=r.kind, message=r.message, state=r.state, count=r.count
                        )
                        for r in m.reasons
                    ],
                )
                for m in found.members
            ],
        )

    async def ListWorkgraphs(
        self, request: definition_pb2.ListWorkgraphsRequest, context: Context
    ) -> definition_pb2.ListWorkgraphsResponse:
        problems = Problems()
        statuses = problems.enums(WorkgraphStatus, request.statuses, "statuses")
        problems.raise_if_any()
        filters = queries.WorkgraphFilters(
            statuses=statuses,
            type=request.type,
            vo=request.vo,
            owner_sub=request.owner_sub,
            labels=labels.check_labels(dict(request.labels)),
        )
        fingerprint = filters_fingerprint(
            filters.statuses, filters.type, filters.vo, filters.owner_sub, filters.labels
        )
        after = page_after(request.paging, fingerprint)
        page = await queries.list_workgraphs(
            self._database,
            self._viewer(),
            filters,
            limit=_page_size(request.paging),
            after=after,
        )
        attention = await self._attention(workgraphs=page.items)
        return definition_pb2.ListWorkgraphsResponse(
            workgraphs=[workgraph_pb(w, attention) for w in page.items],
            next_page_token=next_page_token(page.last, fingerprint),
        )

    async def UpdateAnnotations(
        self, request: definition_pb2.UpdateAnnotationsRequest, context: Context
    ) -> definition_pb2.UpdateAnnotationsResponse:
        target = request.WhichOneof("target")
        if target is None:
            raise InvalidArgument("workgraph_id or transformation_id is required", field="target")
        owner = required_id(getattr(request, target), target)
        patch = _from_json_text(request.merge_patch_json, field="merge_patch_json")
        annotations = await labels.update_labels(
            self._database,
            self._caller(),
            patch,
            workgraph_id=owner if target == "workgraph_id" else None,
            transformation_id=owner if target == "transformation_id" else None,
            request_id=request.request_id,
        )
        return definition_pb2.UpdateAnnotationsResponse(annotations_json=json_text(annotations))

    # -- operator transitions --------------------------------------------------------------------

    async def StartWorkgraph(
        self, request: definition_pb2.StartWorkgraphRequest, context: Context
    ) -> definition_pb2.StartWorkgraphResponse:
        workgraph_id = required_id(request.workgraph_id, "workgraph_id")
        left = await workgraph_commands.start(
            self._database,
            self._caller(),
            workgraph_id,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.StartWorkgraphResponse(
            workgraph=await self._workgraph(workgraph_id, left)
        )

    async def ExtendScout(
        self, request: definition_pb2.ExtendScoutRequest, context: Context
    ) -> definition_pb2.ExtendScoutResponse:
        problems = Problems()
        workgraph_id = problems.id(request.workgraph_id, "workgraph_id")
        feeder_args = {}
        for key, text in request.feeder_args_json.items():
            field = f"feeder_args_json[{key}]"
            tid = problems.id(key, field)
            try:
                args = _from_json_text(text, field=field)
            except InvalidArgument as error:
                problems.violations.extend(error.violations)
                continue
            if tid is not None:
                feeder_args[tid] = args
        problems.raise_if_any()
        assert workgraph_id is not None
        left = await workgraph_commands.extend_scout(
            self._database,
            self._caller(),
            workgraph_id,
            catalogue=self._catalogue,
            execution=self._forward(context),
            feeder_args=feeder_args,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.ExtendScoutResponse(
            workgraph=await self._workgraph(workgraph_id, left)
        )

    async def DrainWorkgraph(
        self, request: definition_pb2.DrainWorkgraphRequest, context: Context
    ) -> definition_pb2.DrainWorkgraphResponse:
        workgraph_id = required_id(request.workgraph_id, "workgraph_id")
        left = await workgraph_commands.drain(
            self._database,
            self._caller(),
            workgraph_id,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.DrainWorkgraphResponse(
            workgraph=await self._workgraph(workgraph_id, left)
        )

    async def HaltWorkgraph(
        self, request: definition_pb2.HaltWorkgraphRequest, context: Context
    ) -> definition_pb2.HaltWorkgraphResponse:
        workgraph_id = required_id(request.workgraph_id, "workgraph_id")
        left = await workgraph_commands.halt(
            self._database,
            self._caller(),
            workgraph_id,
            execution=self._forward(context),
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.HaltWorkgraphResponse(
            workgraph=await self._workgraph(workgraph_id, left)
        )

    async def CancelWorkgraph(
        self, request: definition_pb2.CancelWorkgraphRequest, context: Context
    ) -> definition_pb2.CancelWorkgraphResponse:
        workgraph_id = required_id(request.workgraph_id, "workgraph_id")
        left = await workgraph_commands.cancel(
            self._database,
            self._caller(),
            workgraph_id,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.CancelWorkgraphResponse(
            workgraph=await self._workgraph(workgraph_id, left)
        )

    async def ReturnToActive(
        self, request: definition_pb2.ReturnToActiveRequest, context: Context
    ) -> definition_pb2.ReturnToActiveResponse:
        workgraph_id = required_id(request.workgraph_id, "workgraph_id")
        left = await workgraph_commands.return_to_active(
            self._database,
            self._caller(),
            workgraph_id,
            execution=self._forward(context),
            clear_bookmarks=request.clear_bookmarks,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.ReturnToActiveResponse(
            workgraph=await self._workgraph(workgraph_id, left)
        )
