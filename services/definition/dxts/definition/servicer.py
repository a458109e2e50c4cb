"""DefinitionService: requests to domain calls and results to replies, nothing else.

Every malformed field is reported at once (INVALID_ARGUMENT with one field violation per
problem); domain errors raised below become status codes in the one interceptor. The caller is
the token's identity; calls forwarded to execution carry the caller's own token.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import grpc

from dxts.core.config import DefinitionConfig
from dxts.core.db import Database
from dxts.core.errors import FieldViolation, InvalidArgument, Unauthenticated
from dxts.core.grpc import current_identity
from dxts.core.grpc.auth import bearer_token
from dxts.core.grpc.convert import enum_from_proto, enum_to_proto, json_text, to_timestamp
from dxts.core.grpc.convert import from_json_text as _from_json_text
from dxts.core.grpc.paging import decode_page_token, encode_page_token, filters_fingerprint
from dxts.core.grpc.paging import page_size as _page_size
from dxts.core.ids import canonical_json, hash_from_str, hash_to_str, id_from_str, id_to_str
from dxts.core.locks import LockManager
from dxts.core.states import ActionResult, Kind, TransformationStatus, WorkgraphStatus
from dxts.cwl.compile import Plan
from dxts.cwl.loading import Bundle
from dxts.cwl.plugins import PluginCatalogue
from dxts.cwl.problems import Problem
from dxts.definition import jobs, labels, processes, queries, transitions
from dxts.definition.execution_client import ExecutionClient, ExecutionFactory
from dxts.definition.settings import DefinitionSettings
from dxts.definition.submit import submit_workgraph
from dxts.definition.transitions import UNSET, Caller
from dxts.v1 import common_pb2, definition_pb2, definition_pb2_grpc

Context = grpc.aio.ServicerContext[Any, Any]
# A compiled initial state → the member's status once the workgraph starts (scouting or not).
STARTS_AS = {
    True: {"Active": "Active", "Paused": "Paused", "Stopped": "New"},
    False: {"Active": "Active", "Paused": "Paused", "Stopped": "Active"},
}


def _number(member: StrEnum) -> Any:
    """`enum_to_proto`, typed for the generated fields (whose ValueType is a NewType of int)."""
    return enum_to_proto(member)


def _raise_if(problems: list[FieldViolation]) -> None:
    if problems:
        raise InvalidArgument(problems)


def _id(text: str, field: str, problems: list[FieldViolation], *, required: bool = True) -> bytes:
    if not text:
        if required:
            problems.append(FieldViolation(field, "required"))
        return b""
    try:
        return id_from_str(text, field=field)
    except InvalidArgument as error:
        problems.extend(error.violations)
        return b""


def _required_id(text: str, field: str) -> bytes:
    problems: list[FieldViolation] = []
    value = _id(text, field, problems)
    _raise_if(problems)
    return value


def _hash(text: str, field: str) -> bytes:
    if not text:
        raise InvalidArgument("required", field=field)
    return hash_from_str(text, field=field)


def _enums(enum: type[StrEnum], numbers: Sequence[int], field: str) -> list[str]:
    return [enum_from_proto(enum, n, field=f"{field}[{i}]").value for i, n in enumerate(numbers)]


def _bundle(message: common_pb2.DocumentBundle, field: str = "bundle") -> Bundle:
    problems: list[FieldViolation] = []
    files = {}
    for path, content in message.files.items():
        try:
            files[path] = content.decode("utf-8")
        except UnicodeDecodeError:
            problems.append(FieldViolation(f"{field}.files[{path}]", "not UTF-8 text"))
    if not message.main_path:
        problems.append(FieldViolation(f"{field}.main_path", "required"))
    elif message.main_path.partition("#")[0] not in files:
        problems.append(
            FieldViolation(f"{field}.main_path", f"{message.main_path!r} is not among the files")
        )
    _raise_if(problems)
    return Bundle.from_mapping(message.main_path, files)


def _diagnostic(problem: Problem) -> common_pb2.Diagnostic:
    return common_pb2.Diagnostic(
        path=problem.path, code=problem.kind.value, message=problem.message
    )


def workgraph_pb(view: queries.WorkgraphView) -> definition_pb2.Workgraph:
    return definition_pb2.Workgraph(
        workgraph_id=id_to_str(view.workgraph_id),
        type=view.type,
        status=_number(WorkgraphStatus(view.status)),
        vo=view.vo,
        owner_sub=view.sub,
        annotations_json=json_text(view.annotations),
        hooks_json=json_text(view.hooks),
        transformation_ids=[id_to_str(t) for t in view.transformation_ids],
        updated_at=to_timestamp(view.updated_at),
        halted=view.halted,
    )


def transformation_pb(view: queries.TransformationView) -> definition_pb2.Transformation:
    return definition_pb2.Transformation(
        transformation_id=id_to_str(view.transformation_id),
        workgraph_id=id_to_str(view.workgraph_id) if view.workgraph_id else "",
        step=view.step,
        type=view.type,
        kind=_number(Kind(view.kind)),
        status=_number(TransformationStatus(view.status)),
        vo=view.vo,
        owner_sub=view.sub,
        executing_identity=view.executing_identity or "",
        feeder=view.feeder or "",
        feeder_args_json=json_text(view.feeder_args),
        feeder_state_json=json_text(view.feeder_state),
        feeder_enabled=view.feeder_enabled,
        packer=view.packer,
        packer_args_json=json_text(view.packer_args),
        annotations_json=json_text(view.annotations),
        hooks_json=json_text(view.hooks),
        process_id=hash_to_str(view.process_id) if view.process_id else "",
        requirements_template_id=hash_to_str(view.requirements_template_id)
        if view.requirements_template_id
        else "",
        outputs=[
            definition_pb2.TransformationOutput(
                transformation_output_id=id_to_str(o.output_id),
                name=o.name,
                intermediate=o.intermediate,
            )
            for o in view.outputs
        ],
        upstream_transformation_ids=[id_to_str(t) for t in view.upstream_ids],
        scouting=view.scouting,
        updated_at=to_timestamp(view.updated_at),
        halted=view.halted,
        requirements_template_json=json_text(view.requirements_template),
    )


def action_pb(view: queries.ActionView) -> definition_pb2.Action:
    return definition_pb2.Action(
        action_id=view.action_id,
        workgraph_id=id_to_str(view.workgraph_id) if view.workgraph_id else "",
        transformation_id=id_to_str(view.transformation_id) if view.transformation_id else "",
        state=view.state,
        position=view.position,
        action=view.action,
        args_json=json_text(view.args),
        result=_number(ActionResult(view.result))
        if view.result
        else common_pb2.ACTION_RESULT_UNSPECIFIED,
        message=view.message or "",
        author=view.author or "",
        updated_at=to_timestamp(view.updated_at),
    )


def process_pb(view: processes.ProcessView) -> definition_pb2.Process:
    return definition_pb2.Process(
        process_id=hash_to_str(view.process_id),
        document_json=canonical_json(view.body).decode(),
        child_process_ids=[hash_to_str(c) for c in view.children],
        created_at=to_timestamp(view.created_at),
    )


def version_pb(view: processes.VersionView) -> definition_pb2.ProcessVersion:
    return definition_pb2.ProcessVersion(
        vo=view.vo,
        name=view.name,
        version=view.version,
        process_id=hash_to_str(view.process_id),
        author=view.author,
        created_at=to_timestamp(view.created_at),
    )


def plan_pb(plan: Plan, dry_run: bool) -> list[definition_pb2.PlannedTransformation]:
    return [
        definition_pb2.PlannedTransformation(
            transformation_id="" if dry_run else id_to_str(m.transformation_id),
            step=m.name,
            kind=_number(Kind(m.kind)),
            type=m.type,
            feeder=m.feeder or "",
            packer=m.packer,
            process_id=hash_to_str(m.process_id) if m.process_id else "",
            initial_status=_number(TransformationStatus(STARTS_AS[plan.scouts][m.initial_state])),
            upstream_steps=list(m.upstream),
        )
        for m in plan.members
    ]


class DefinitionServicer(definition_pb2_grpc.DefinitionServiceServicer):
    def __init__(
        self,
        database: Database,
        *,
        settings: DefinitionSettings,
        catalogue: PluginCatalogue,
        config: DefinitionConfig,
        execution: ExecutionFactory,
        locks: LockManager | None = None,
    ) -> None:
        self._database = database
        self._locks = locks
        self._settings = settings
        self._catalogue = catalogue
        self._config = config
        self._execution = execution

    # -- who is asking ---------------------------------------------------------------------------

    def _caller(self) -> Caller:
        return Caller(current_identity(), self._settings.operator_role)

    def _viewer(self) -> queries.Viewer:
        return queries.Viewer(current_identity(), self._settings.service_role)

    def _forward(self, context: Context) -> ExecutionClient:
        try:
            token: str | None = bearer_token(context.invocation_metadata())
        except Unauthenticated:
            token = None
        return self._execution(token)

    async def _workgraph(self, workgraph_id: bytes) -> definition_pb2.Workgraph:
        detail = await queries.get_workgraph(self._database, self._viewer(), workgraph_id)
        return workgraph_pb(detail.workgraph)

    async def _transformation(self, transformation_id: bytes) -> definition_pb2.Transformation:
        detail = await queries.get_transformation(self._database, self._viewer(), transformation_id)
        return transformation_pb(detail.transformation)

    # -- workgraphs ------------------------------------------------------------------------------

    async def SubmitWorkgraph(
        self, request: definition_pb2.SubmitWorkgraphRequest, context: Context
    ) -> definition_pb2.SubmitWorkgraphResponse:
        bundle = _bundle(request.bundle)
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
        )
        return definition_pb2.SubmitWorkgraphResponse(
            workgraph_id="" if request.dry_run else id_to_str(submitted.workgraph_id),
            plan=plan_pb(submitted.plan, request.dry_run),
            warnings=[_diagnostic(p) for p in submitted.warnings],
            scouts=submitted.plan.scouts,
        )

    async def GetWorkgraph(
        self, request: definition_pb2.GetWorkgraphRequest, context: Context
    ) -> definition_pb2.GetWorkgraphResponse:
        workgraph_id = _required_id(request.workgraph_id, "workgraph_id")
        detail = await queries.get_workgraph(self._database, self._viewer(), workgraph_id)
        return definition_pb2.GetWorkgraphResponse(
            workgraph=workgraph_pb(detail.workgraph),
            members=[transformation_pb(m) for m in detail.members],
            actions=[action_pb(a) for a in detail.actions],
            stripped_spec_json=json_text(detail.stripped_spec),
        )

    async def ListWorkgraphs(
        self, request: definition_pb2.ListWorkgraphsRequest, context: Context
    ) -> definition_pb2.ListWorkgraphsResponse:
        filters = queries.WorkgraphFilters(
            statuses=_enums(WorkgraphStatus, request.statuses, "statuses"),
            type=request.type,
            vo=request.vo,
            owner_sub=request.owner_sub,
            labels=labels.check_labels(dict(request.labels)),
        )
        fingerprint = filters_fingerprint(
            filters.statuses, filters.type, filters.vo, filters.owner_sub, filters.labels
        )
        after = _after(request.paging, fingerprint)
        page = await queries.list_workgraphs(
            self._database,
            self._viewer(),
            filters,
            limit=_page_size(request.paging),
            after=after,
        )
        return definition_pb2.ListWorkgraphsResponse(
            workgraphs=[workgraph_pb(w) for w in page.items],
            next_page_token=_next(page.last, fingerprint),
        )

    async def UpdateAnnotations(
        self, request: definition_pb2.UpdateAnnotationsRequest, context: Context
    ) -> definition_pb2.UpdateAnnotationsResponse:
        target = request.WhichOneof("target")
        if target is None:
            raise InvalidArgument("workgraph_id or transformation_id is required", field="target")
        owner = _required_id(getattr(request, target), target)
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
        workgraph_id = _required_id(request.workgraph_id, "workgraph_id")
        await transitions.start(
            self._database,
            self._caller(),
            workgraph_id,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.StartWorkgraphResponse(workgraph=await self._workgraph(workgraph_id))

    async def ExtendScout(
        self, request: definition_pb2.ExtendScoutRequest, context: Context
    ) -> definition_pb2.ExtendScoutResponse:
        problems: list[FieldViolation] = []
        workgraph_id = _id(request.workgraph_id, "workgraph_id", problems)
        feeder_args = {}
        for key, text in request.feeder_args_json.items():
            field = f"feeder_args_json[{key}]"
            tid = _id(key, field, problems)
            try:
                feeder_args[tid] = _from_json_text(text, field=field)
            except InvalidArgument as error:
                problems.extend(error.violations)
        _raise_if(problems)
        await transitions.extend_scout(
            self._database,
            self._caller(),
            workgraph_id,
            catalogue=self._catalogue,
            feeder_args=feeder_args,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.ExtendScoutResponse(workgraph=await self._workgraph(workgraph_id))

    async def DrainWorkgraph(
        self, request: definition_pb2.DrainWorkgraphRequest, context: Context
    ) -> definition_pb2.DrainWorkgraphResponse:
        workgraph_id = _required_id(request.workgraph_id, "workgraph_id")
        await transitions.drain(
            self._database,
            self._caller(),
            workgraph_id,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.DrainWorkgraphResponse(workgraph=await self._workgraph(workgraph_id))

    async def HaltWorkgraph(
        self, request: definition_pb2.HaltWorkgraphRequest, context: Context
    ) -> definition_pb2.HaltWorkgraphResponse:
        workgraph_id = _required_id(request.workgraph_id, "workgraph_id")
        await transitions.halt(
            self._database,
            self._caller(),
            workgraph_id,
            execution=self._forward(context),
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.HaltWorkgraphResponse(workgraph=await self._workgraph(workgraph_id))

    async def CancelWorkgraph(
        self, request: definition_pb2.CancelWorkgraphRequest, context: Context
    ) -> definition_pb2.CancelWorkgraphResponse:
        workgraph_id = _required_id(request.workgraph_id, "workgraph_id")
        await transitions.cancel(
            self._database,
            self._caller(),
            workgraph_id,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.CancelWorkgraphResponse(workgraph=await self._workgraph(workgraph_id))

    async def ReturnToActive(
        self, request: definition_pb2.ReturnToActiveRequest, context: Context
    ) -> definition_pb2.ReturnToActiveResponse:
        workgraph_id = _required_id(request.workgraph_id, "workgraph_id")
        await transitions.return_to_active(
            self._database,
            self._caller(),
            workgraph_id,
            clear_bookmarks=request.clear_bookmarks,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.ReturnToActiveResponse(workgraph=await self._workgraph(workgraph_id))

    async def PauseTransformation(
        self, request: definition_pb2.PauseTransformationRequest, context: Context
    ) -> definition_pb2.PauseTransformationResponse:
        tid = _required_id(request.transformation_id, "transformation_id")
        await transitions.pause(
            self._database,
            self._caller(),
            tid,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.PauseTransformationResponse(
            transformation=await self._transformation(tid)
        )

    async def ResumeTransformation(
        self, request: definition_pb2.ResumeTransformationRequest, context: Context
    ) -> definition_pb2.ResumeTransformationResponse:
        tid = _required_id(request.transformation_id, "transformation_id")
        await transitions.resume(
            self._database,
            self._caller(),
            tid,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.ResumeTransformationResponse(
            transformation=await self._transformation(tid)
        )

    async def TransitionTransformation(
        self, request: definition_pb2.TransitionTransformationRequest, context: Context
    ) -> definition_pb2.TransitionTransformationResponse:
        problems: list[FieldViolation] = []
        tid = _id(request.transformation_id, "transformation_id", problems)
        try:
            target = enum_from_proto(TransformationStatus, request.target, field="target")
        except InvalidArgument as error:
            problems.extend(error.violations)
        _raise_if(problems)
        await transitions.transition_transformation(
            self._database,
            self._caller(),
            tid,
            target,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.TransitionTransformationResponse(
            transformation=await self._transformation(tid)
        )

    async def ForceAction(
        self, request: definition_pb2.ForceActionRequest, context: Context
    ) -> definition_pb2.ForceActionResponse:
        result = enum_from_proto(ActionResult, request.result, field="result")
        await transitions.force_action(
            self._database,
            self._caller(),
            request.action_id,
            result,
            message=request.message,
            request_id=request.request_id,
        )
        action = await queries.get_action(self._database, self._viewer(), request.action_id)
        return definition_pb2.ForceActionResponse(action=action_pb(action))

    async def ResetAction(
        self, request: definition_pb2.ResetActionRequest, context: Context
    ) -> definition_pb2.ResetActionResponse:
        await transitions.reset_action(
            self._database,
            self._caller(),
            request.action_id,
            reason=request.reason,
            request_id=request.request_id,
        )
        action = await queries.get_action(self._database, self._viewer(), request.action_id)
        return definition_pb2.ResetActionResponse(action=action_pb(action))

    async def SetFeeder(
        self, request: definition_pb2.SetFeederRequest, context: Context
    ) -> definition_pb2.SetFeederResponse:
        tid = _required_id(request.transformation_id, "transformation_id")
        args = (
            _from_json_text(request.feeder_args_json, field="feeder_args_json")
            if request.feeder_args_json
            else UNSET
        )
        await transitions.set_feeder(
            self._database,
            self._caller(),
            tid,
            catalogue=self._catalogue,
            enabled=request.enabled if request.HasField("enabled") else None,
            args=args,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.SetFeederResponse(transformation=await self._transformation(tid))

    async def FlushTransformation(
        self, request: definition_pb2.FlushTransformationRequest, context: Context
    ) -> definition_pb2.FlushTransformationResponse:
        tid = _required_id(request.transformation_id, "transformation_id")
        await transitions.flush(
            self._database,
            self._caller(),
            tid,
            execution=self._forward(context),
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.FlushTransformationResponse()

    # -- transformations -------------------------------------------------------------------------

    async def GetTransformation(
        self, request: definition_pb2.GetTransformationRequest, context: Context
    ) -> definition_pb2.GetTransformationResponse:
        tid = _required_id(request.transformation_id, "transformation_id")
        detail = await queries.get_transformation(self._database, self._viewer(), tid)
        return definition_pb2.GetTransformationResponse(
            transformation=transformation_pb(detail.transformation),
            actions=[action_pb(a) for a in detail.actions],
        )

    async def ListTransformations(
        self, request: definition_pb2.ListTransformationsRequest, context: Context
    ) -> definition_pb2.ListTransformationsResponse:
        problems: list[FieldViolation] = []
        workgraph_id = _id(request.workgraph_id, "workgraph_id", problems, required=False)
        _raise_if(problems)
        filters = queries.TransformationFilters(
            workgraph_id=workgraph_id or None,
            statuses=_enums(TransformationStatus, request.statuses, "statuses"),
            kinds=[enum_from_proto(Kind, request.kind, field="kind").value] if request.kind else [],
            type=request.type,
            vo=request.vo,
            owner_sub=request.owner_sub,
        )
        fingerprint = filters_fingerprint(
            request.workgraph_id,
            filters.statuses,
            filters.kinds,
            filters.type,
            filters.vo,
            filters.owner_sub,
        )
        page = await queries.list_transformations(
            self._database,
            self._viewer(),
            filters,
            limit=_page_size(request.paging),
            after=_after(request.paging, fingerprint),
        )
        return definition_pb2.ListTransformationsResponse(
            transformations=[transformation_pb(t) for t in page.items],
            next_page_token=_next(page.last, fingerprint),
        )

    async def ListActiveTransformations(
        self, request: definition_pb2.ListActiveTransformationsRequest, context: Context
    ) -> definition_pb2.ListActiveTransformationsResponse:
        kinds = _enums(Kind, request.kinds, "kinds")
        fingerprint = filters_fingerprint("active", kinds)
        page = await queries.list_transformations(
            self._database,
            self._viewer(),
            queries.TransformationFilters(kinds=kinds),
            limit=_page_size(request.paging),
            after=_after(request.paging, fingerprint),
            active_only=True,
        )
        return definition_pb2.ListActiveTransformationsResponse(
            transformations=[transformation_pb(t) for t in page.items],
            next_page_token=_next(page.last, fingerprint),
        )

    # -- processes -------------------------------------------------------------------------------

    async def GetProcess(
        self, request: definition_pb2.GetProcessRequest, context: Context
    ) -> definition_pb2.GetProcessResponse:
        view = await processes.get_process(self._database, _hash(request.process_id, "process_id"))
        return definition_pb2.GetProcessResponse(process=process_pb(view))

    async def GetProcessTree(
        self, request: definition_pb2.GetProcessTreeRequest, context: Context
    ) -> definition_pb2.GetProcessTreeResponse:
        root = _hash(request.process_id, "process_id")
        tree = await processes.process_tree(self._database, root)
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
            process_id=_hash(request.process_id, "process_id"),
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
            self._database, self._viewer(), _hash(request.process_id, "process_id")
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
        bundle = _bundle(request.bundle)
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
            warnings=[_diagnostic(p) for p in submitted.warnings],
        )


def _after(paging: common_pb2.Paging, fingerprint: str) -> bytes | None:
    position = decode_page_token(paging, filters=fingerprint)
    if position is None:
        return None
    text = position.get("after")
    if not isinstance(text, str):
        raise InvalidArgument("not a page token this server issued", field="paging.page_token")
    return id_from_str(text, field="paging.page_token")


def _next(last: bytes | None, fingerprint: str) -> str:
    return (
        "" if last is None else encode_page_token({"after": id_to_str(last)}, filters=fingerprint)
    )
