"""DefinitionService's transformation and action RPCs: the operator commands on one
transformation, forcing and resetting actions, and the reads (the execution sweeps' included).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from dxts.core.errors import InvalidArgument
from dxts.core.grpc.convert import enum_from_proto
from dxts.core.grpc.convert import from_json_text as _from_json_text
from dxts.core.grpc.paging import filters_fingerprint
from dxts.core.grpc.paging import page_size as _page_size
from dxts.core.grpc.requests import (
    Problems,
    next_page_token,
    optional_id,
    page_after,
    required_id,
)
from dxts.core.ids import id_to_str
from dxts.core.states import ActionResult, Kind, TransformationStatus
from dxts.definition.edge.mapping import action_pb, transformation_pb
from dxts.definition.edge.servicer_common import Context, ServicerBase
from dxts.definition.logic import actions, names, queries, transformation_commands
from dxts.definition.logic.feeders import UNSET
from dxts.v1 import definition_pb2


class TransformationRpcs(ServicerBase):
    """The transformation and action RPCs."""

    async def PauseTransformation(
        self, request: definition_pb2.PauseTransformationRequest, context: Context
    ) -> definition_pb2.PauseTransformationResponse:
        tid = required_id(request.transformation_id, "transformation_id")
        left = await transformation_commands.pause(
            self._database,
            self._caller(),
            tid,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.PauseTransformationResponse(
            transformation=await self._transformation(tid, left)
        )

    async def ResumeTransformation(
        self, request: definition_pb2.ResumeTransformationRequest, context: Context
    ) -> definition_pb2.ResumeTransformationResponse:
        tid = required_id(request.transformation_id, "transformation_id")
        left = await transformation_commands.resume(
            self._database,
            self._caller(),
            tid,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.ResumeTransformationResponse(
            transformation=await self._transformation(tid, left)
        )

    async def TransitionTransformation(
        self, request: definition_pb2.TransitionTransformationRequest, context: Context
    ) -> definition_pb2.TransitionTransformationResponse:
        problems = Problems()
        tid = problems.id(request.transformation_id, "transformation_id")
        try:
            target = enum_from_proto(TransformationStatus, request.target, field="target")
        except InvalidArgument as error:
            problems.violations.extend(error.violations)
        problems.raise_if_any()
        assert tid is not None
        left = await transformation_commands.transition_transformation(
            self._database,
            self._caller(),
            tid,
            target,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.TransitionTransformationResponse(
            transformation=await self._transformation(tid, left)
        )

    async def ForceAction(
        self, request: definition_pb2.ForceActionRequest, context: Context
    ) -> definition_pb2.ForceActionResponse:
        result = enum_from_proto(ActionResult, request.result, field="result")
        done = await actions.force_action(
            self._database,
            self._caller(),
            request.action_id,
            result,
            message=request.message,
            request_id=request.request_id,
        )
        action = await queries.get_action(self._database, self._viewer(), request.action_id)
        return definition_pb2.ForceActionResponse(action=action_pb(_as_left(action, done)))

    async def ResetAction(
        self, request: definition_pb2.ResetActionRequest, context: Context
    ) -> definition_pb2.ResetActionResponse:
        done = await actions.reset_action(
            self._database,
            self._caller(),
            request.action_id,
            reason=request.reason,
            request_id=request.request_id,
        )
        action = await queries.get_action(self._database, self._viewer(), request.action_id)
        return definition_pb2.ResetActionResponse(action=action_pb(_as_left(action, done)))

    async def SetFeeder(
        self, request: definition_pb2.SetFeederRequest, context: Context
    ) -> definition_pb2.SetFeederResponse:
        tid = required_id(request.transformation_id, "transformation_id")
        args = (
            _from_json_text(request.feeder_args_json, field="feeder_args_json")
            if request.feeder_args_json
            else UNSET
        )
        left = await transformation_commands.set_feeder(
            self._database,
            self._caller(),
            tid,
            catalogue=self._catalogue,
            execution=self._forward(context),
            enabled=request.enabled if request.HasField("enabled") else None,
            args=args,
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.SetFeederResponse(
            transformation=await self._transformation(tid, left)
        )

    async def FlushTransformation(
        self, request: definition_pb2.FlushTransformationRequest, context: Context
    ) -> definition_pb2.FlushTransformationResponse:
        tid = required_id(request.transformation_id, "transformation_id")
        flushed = await transformation_commands.flush(
            self._database,
            self._caller(),
            tid,
            execution=self._forward(context),
            reason=request.reason,
            request_id=request.request_id,
        )
        return definition_pb2.FlushTransformationResponse(
            inputs_offered=flushed.offered,
            parcels_created=flushed.parcels,
            inputs_assigned=flushed.assigned,
            inputs_problematic=flushed.problematic,
            inputs_delayed=flushed.delayed,
            failure=flushed.failure,
            failure_class=flushed.failure_class,
        )

    # -- transformations -------------------------------------------------------------------------

    async def GetTransformation(
        self, request: definition_pb2.GetTransformationRequest, context: Context
    ) -> definition_pb2.GetTransformationResponse:
        tid = required_id(request.transformation_id, "transformation_id")
        detail = await queries.get_transformation(self._database, self._viewer(), tid)
        attention = await self._attention(members=[detail.transformation])
        return definition_pb2.GetTransformationResponse(
            transformation=transformation_pb(detail.transformation, attention),
            actions=[action_pb(a) for a in detail.actions],
        )

    async def ResolveName(
        self, request: definition_pb2.ResolveNameRequest, context: Context
    ) -> definition_pb2.ResolveNameResponse:
        found = await names.resolve(self._database, self._viewer(), request.name)
        return definition_pb2.ResolveNameResponse(
            kind=found.kind,
            id=id_to_str(found.id),
            handle=found.handle,
            workgraph_id=id_to_str(found.workgraph_id) if found.workgraph_id else "",
        )

    async def ListTransformations(
        self, request: definition_pb2.ListTransformationsRequest, context: Context
    ) -> definition_pb2.ListTransformationsResponse:
        workgraph_id = optional_id(request.workgraph_id, "workgraph_id")
        problems = Problems()
        statuses = problems.enums(TransformationStatus, request.statuses, "statuses")
        problems.raise_if_any()
        filters = queries.TransformationFilters(
            workgraph_id=workgraph_id,
            statuses=statuses,
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
            after=page_after(request.paging, fingerprint),
        )
        attention = None if request.without_attention else await self._attention(members=page.items)
        return definition_pb2.ListTransformationsResponse(
            transformations=[transformation_pb(t, attention) for t in page.items],
            next_page_token=next_page_token(page.last, fingerprint),
        )

    async def ListActiveTransformations(
        self, request: definition_pb2.ListActiveTransformationsRequest, context: Context
    ) -> definition_pb2.ListActiveTransformationsResponse:
        problems = Problems()
        kinds = problems.enums(Kind, request.kinds, "kinds")
        ids = problems.ids(request.transformation_ids, "transformation_ids")
        problems.raise_if_any()
        fingerprint = filters_fingerprint("active", kinds, sorted(ids))
        page = await queries.list_transformations(
            self._database,
            self._viewer(),
            queries.TransformationFilters(kinds=kinds, ids=tuple(ids)),
            limit=_page_size(request.paging),
            after=page_after(request.paging, fingerprint),
            active_only=True,
        )
        return definition_pb2.ListActiveTransformationsResponse(
            transformations=[transformation_pb(t) for t in page.items],
            next_page_token=next_page_token(page.last, fingerprint),
        )


def _as_left(action: queries.ActionView, done: Mapping[str, Any]) -> queries.ActionView:
    """The action with the result the command gave it: read back after the command, a reset
    action may already have run again (and failed again) in the lifecycle's sweep."""
    if "result" not in done:  # a request recorded before results were
        return action
    return dataclasses.replace(action, result=done["result"])
