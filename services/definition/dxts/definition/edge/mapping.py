"""Proto ↔ domain: the definition service's messages built from the logic's views, and the
request fields that need more than a scalar (a document bundle, a list of enum values).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from dxts.core.errors import FieldViolation, InvalidArgument
from dxts.core.grpc.convert import enum_to_proto, json_text, to_timestamp
from dxts.core.ids import canonical_json, hash_to_str, id_to_str
from dxts.core.states import (
    ActionResult,
    InputStatus,
    Kind,
    TransformationStatus,
    WorkgraphStatus,
)
from dxts.cwl.compile import Plan
from dxts.cwl.loading import Bundle
from dxts.cwl.problems import Problem
from dxts.definition.logic import processes, queries
from dxts.definition.logic.attention import Attention, Item
from dxts.v1 import common_pb2, definition_pb2

# A compiled initial state → the member's status once the workgraph starts (scouting or not).
STARTS_AS = {
    True: {"Active": "Active", "Paused": "Paused", "Stopped": "New"},
    False: {"Active": "Active", "Paused": "Paused", "Stopped": "Active"},
}


def _number(member: StrEnum) -> Any:
    """`enum_to_proto`, typed for the generated fields (whose ValueType is a NewType of int)."""
    return enum_to_proto(member)


def bundle_from_pb(message: common_pb2.DocumentBundle, field: str = "bundle") -> Bundle:
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
    if problems:
        raise InvalidArgument(problems)
    return Bundle.from_mapping(message.main_path, files)


def diagnostic_pb(problem: Problem) -> common_pb2.Diagnostic:
    return common_pb2.Diagnostic(
        path=problem.path, code=problem.kind.value, message=problem.message
    )


def attention_pb(item: Item) -> definition_pb2.Attention:
    found = definition_pb2.Attention(
        kind=item.kind,
        what=item.what,
        todo=item.todo,
        command=item.command,
        transformation_id=id_to_str(item.transformation_id) if item.transformation_id else "",
        step=item.step,
    )
    since = to_timestamp(item.since)
    if since is not None:
        found.since.CopyFrom(since)
    return found


def workgraph_pb(
    view: queries.WorkgraphView, attention: Attention | None = None
) -> definition_pb2.Workgraph:
    """The workgraph, with its attention items and how it ended when `attention` was read."""
    wid = view.workgraph_id
    return definition_pb2.Workgraph(
        attention=[attention_pb(i) for i in attention.workgraphs.get(wid, [])] if attention else [],
        ended_with=attention.ended_with.get(wid, "") if attention else "",
        started_at=to_timestamp(attention.started.get(wid)) if attention else None,
        input_counts=[
            common_pb2.StatusCount(input_status=_number(InputStatus(status)), count=count)
            for status, count in (attention.inputs.get(wid, {}) if attention else {}).items()
        ],
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
        handle=view.handle,
    )


def transformation_pb(
    view: queries.TransformationView, attention: Attention | None = None
) -> definition_pb2.Transformation:
    tid = view.transformation_id
    return definition_pb2.Transformation(
        attention=[attention_pb(i) for i in attention.members.get(tid, [])] if attention else [],
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
        handle=view.handle,
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
