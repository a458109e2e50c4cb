"""Compilation: a validated document into a plan, every row it becomes, before any is written.

Pure apart from minting ids (the `mint` argument, or the `ids` of a plan created before, for
answering a repeated submission): the same document, configuration and resolved references give
the same plan. The plan is what a dry run returns, what `dxts
validate --plan` prints, and what `submit` inserts in one transaction.

Choices of this compiler's own (docs/cwl.md, "What a workgraph compiles into"):

* Processes are hashed over the body *as written* (plain data, JCS, SHA-256) with each nested
  `run` replaced by `proc:sha256-<hex>` of the child, and, for an inline or packed-graph body, the
  enclosing document's `cwlVersion` and used `$namespaces` made explicit so that every stored
  process is a CWL document on its own.
* A member's name, labels, effective initial state (after the position rule), its `after`
  members (as TransformationIDs) and, for a data member, what it does
  (operation/files/destination/storage) are kept in Transformations.Annotations: the schema has
  no column for them and the lifecycle and the data packer read them from there.
* The edge feeder is `Edge` with FeederArgs `{"transformation_output_id": "<uuid>"}`.
* A member's Type is the workgraph's Type.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dxts.core.config import ACTION_LISTS, DefinitionConfig, ResolvedHints, resolve_hints
from dxts.core.ids import content_hash, id_to_str, new_ids
from dxts.core.plugins.points import Point
from dxts.cwl.analysis import Analysis, Member
from dxts.cwl.loading import LoadedDocument, ProcessNode, reference_for
from dxts.cwl.problems import Problem

EDGE_FEEDER = "Edge"
EDGE_ARGUMENT = "transformation_output_id"
APPROVING = "Approving"


@dataclass(frozen=True)
class PlannedProcess:
    process_id: bytes
    body: dict[str, Any]
    children: tuple[bytes, ...]
    location: str


@dataclass(frozen=True)
class PlannedAction:
    state: str
    position: int
    action: str
    args: dict[str, Any] | None


@dataclass(frozen=True)
class PlannedOutput:
    output_id: bytes
    name: str
    intermediate: bool


@dataclass(frozen=True)
class PlannedMember:
    transformation_id: bytes
    name: str
    kind: str  # "Compute" | "Data"
    type: str
    feeder: str | None
    feeder_args: dict[str, Any] | None
    feeds_from: str | None  # "step/output" for an edge, the workflow input for a feeder
    packer: str
    packer_args: dict[str, Any] | None
    hooks: dict[str, Any] | None
    executing_identity: str | None
    process_id: bytes | None  # compute only; None offline for an unresolved registry name
    requirements_template: dict[str, Any] | None
    outputs: tuple[PlannedOutput, ...]
    actions: tuple[PlannedAction, ...]
    after: tuple[str, ...]
    upstream: tuple[str, ...]  # every member this one depends on (dataflow and after)
    initial_state: str  # Active (runs in the scout) | Stopped (held until approval) | Paused
    scouts: bool
    annotations: dict[str, Any]

    @property
    def requirements_template_id(self) -> bytes | None:
        return (
            None if self.requirements_template is None else content_hash(self.requirements_template)
        )


@dataclass(frozen=True)
class Plan:
    workgraph_id: bytes
    ownership_id: bytes
    vo: str
    sub: str
    type: str
    stripped_spec: dict[str, Any]
    annotations: dict[str, Any]
    hooks: dict[str, Any] | None
    approving: tuple[PlannedAction, ...]
    members: tuple[PlannedMember, ...]
    processes: tuple[PlannedProcess, ...]  # children before parents
    references: tuple[tuple[bytes, bytes], ...]  # (parent, child) ProcessReferences rows
    scouts: bool
    warnings: tuple[Problem, ...] = field(default=())
    # `start: auto` of dirac:Workgraph: the submission starts the workgraph in the same request.
    starts: bool = False

    def member(self, name: str) -> PlannedMember:
        return next(m for m in self.members if m.name == name)

    def as_json(self) -> dict[str, Any]:
        """The plan as JSON: ids as UUID strings, hashes as hex (what `--plan` prints)."""
        return {
            "workgraph_id": id_to_str(self.workgraph_id),
            "type": self.type,
            "vo": self.vo,
            "scouts": self.scouts,
            "starts": self.starts,
            "annotations": self.annotations,
            "hooks": self.hooks,
            "approving": [_action_json(a) for a in self.approving],
            "members": [_member_json(m) for m in self.members],
            "processes": [
                {
                    "process_id": p.process_id.hex(),
                    "from": p.location,
                    "references": [c.hex() for c in p.children],
                }
                for p in self.processes
            ],
            "warnings": [p.line() for p in self.warnings],
        }


def _action_json(action: PlannedAction) -> dict[str, Any]:
    return {
        "state": action.state,
        "position": action.position,
        "action": action.action,
        "args": action.args,
    }


def _member_json(member: PlannedMember) -> dict[str, Any]:
    return {
        "name": member.name,
        "transformation_id": id_to_str(member.transformation_id),
        "kind": member.kind,
        "initial_state": member.initial_state,
        "scouts": member.scouts,
        "feeder": member.feeder,
        "feeder_args": member.feeder_args,
        "feeds_from": member.feeds_from,
        "packer": member.packer,
        "packer_args": member.packer_args,
        "hooks": member.hooks,
        "process_id": member.process_id.hex() if member.process_id else None,
        "requirements_template": member.requirements_template,
        "outputs": [
            {"name": o.name, "id": id_to_str(o.output_id), "intermediate": o.intermediate}
            for o in member.outputs
        ],
        "actions": [_action_json(a) for a in member.actions],
        "upstream": list(member.upstream),
        "after": list(member.after),
    }


def hash_processes(
    document: LoadedDocument, resolved: Mapping[str, bytes]
) -> tuple[dict[int, bytes | None], list[PlannedProcess], list[tuple[bytes, bytes]]]:
    """Every process node's hash, bottom-up; the bodies to store and their references.

    `resolved` maps a registry reference's text to its hash. A node whose hash cannot be known
    (an unresolved name, offline) is None, and so is every node above it.
    """
    hashes: dict[int, bytes | None] = {}
    planned: list[PlannedProcess] = []
    references: set[tuple[bytes, bytes]] = set()
    for node in document.processes():
        hashes[id(node)] = _hash(node, hashes, resolved, planned, references)
    return hashes, planned, sorted(references)


def _hash(
    node: ProcessNode,
    hashes: dict[int, bytes | None],
    resolved: Mapping[str, bytes],
    planned: list[PlannedProcess],
    references: set[tuple[bytes, bytes]],
) -> bytes | None:
    if node.reference is not None:
        return node.reference.process_id or resolved.get(node.reference.text)
    assert node.body is not None
    children = [hashes[id(child)] for _, child in node.runs]
    if any(child is None for child in children):
        return None
    body = replace_runs(
        node.body, [(site, c) for (site, _), c in zip(node.runs, children, strict=True)]
    )
    process_id = content_hash(body, field=node.location)
    kids = tuple(dict.fromkeys(c for c in children if c is not None))
    if all(p.process_id != process_id for p in planned):
        planned.append(PlannedProcess(process_id, body, kids, node.location))
    references.update((process_id, child) for child in kids)
    return process_id


def replace_runs(
    body: dict[str, Any], sites: list[tuple[tuple[str | int, ...], bytes | None]]
) -> dict[str, Any]:
    """A copy of `body` with each run site holding its child's `proc:sha256-…` reference."""
    out = copy.deepcopy(body)
    for site, child in sites:
        target: Any = out
        for key in site[:-1]:
            target = target[key]
        target[site[-1]] = reference_for(child) if child is not None else target[site[-1]]
    return out


def _actions(lists: Mapping[str, list[dict[str, Any]]]) -> tuple[PlannedAction, ...]:
    return tuple(
        PlannedAction(Point(name).state, position, binding["action"], binding.get("args"))
        for name in ACTION_LISTS
        for position, binding in enumerate(lists.get(name, []), start=1)
    )


def _annotations(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v not in (None, [], {})}


@dataclass(frozen=True)
class PlanIds:
    """The ids of a plan that was already created, to compile the same document onto them
    (answering a repeated submission) instead of minting new ones."""

    workgraph_id: bytes
    ownership_id: bytes
    transformations: Mapping[str, bytes]  # member name → TransformationID
    outputs: Mapping[str, bytes]  # "member/output" → TransformationOutputID


class IdsMismatch(Exception):
    """`PlanIds` lack an id the document needs (it is not the document they were minted for)."""


def _known(ids: PlanIds, what: str, key: str) -> bytes:
    found = (ids.transformations if what == "member" else ids.outputs).get(key)
    if found is None:
        raise IdsMismatch(f"no recorded id for {what} {key!r}")
    return found


def compile_plan(
    document: LoadedDocument,
    analysis: Analysis,
    *,
    config: DefinitionConfig,
    vo: str,
    sub: str,
    labels: Mapping[str, str] | None = None,
    resolved: Mapping[str, bytes] | None = None,
    warnings: tuple[Problem, ...] = (),
    mint: Callable[[int], list[bytes]] = new_ids,
    ids: PlanIds | None = None,
) -> Plan:
    """The plan for a document that validated without errors: with new ids, or with `ids`
    (raising IdsMismatch if they do not cover every member and output)."""
    hashes, processes, references = hash_processes(document, resolved or {})
    members = list(analysis.members.values())
    outputs_count = sum(len(m.step.outputs) for m in members if m.step)
    if ids is None:
        minted = iter(mint(2 + len(members) + outputs_count))

        def new(what: str, key: str) -> bytes:
            return next(minted)

        workgraph_id, ownership_id = next(minted), next(minted)
    else:
        known = ids

        def new(what: str, key: str) -> bytes:
            return _known(known, what, key)

        workgraph_id, ownership_id = ids.workgraph_id, ids.ownership_id
    transformation_ids = {m.name: new("member", m.name) for m in members}
    if ids is not None and len(ids.transformations) != len(members):
        raise IdsMismatch(f"{len(ids.transformations)} recorded members, {len(members)} planned")
    declared = analysis.declared_outputs()
    output_ids: dict[str, bytes] = {}
    planned_outputs: dict[str, tuple[PlannedOutput, ...]] = {}
    for member in members:
        if member.step is None:
            continue
        outs = []
        for name in member.step.outputs:
            output_ids[f"{member.name}/{name}"] = new("output", f"{member.name}/{name}")
            outs.append(
                PlannedOutput(
                    output_ids[f"{member.name}/{name}"],
                    name,
                    f"{member.name}/{name}" not in declared,
                )
            )
        planned_outputs[member.name] = tuple(outs)
    if ids is not None and len(ids.outputs) != len(output_ids):
        raise IdsMismatch(f"{len(ids.outputs)} recorded outputs, {len(output_ids)} planned")

    workgraph = resolve_hints(config, vo=vo, workgraph_hint=analysis.workgraph_hint)
    scouts = bool(workgraph.approving) and any(m.initial_state == "Active" for m in members)
    planned_members = tuple(
        _member(
            member,
            resolve_hints(
                config,
                vo=vo,
                workgraph_hint=analysis.workgraph_hint,
                transformation_hint=member.hint,
            ),
            analysis=analysis,
            transformation_ids=transformation_ids,
            output_ids=output_ids,
            outputs=planned_outputs.get(member.name, ()),
            process_id=hashes.get(id(member.step.process))
            if member.step and member.step.process
            else None,
            scouts=scouts,
        )
        for member in members
    )
    stripped = replace_runs(
        document.raw, [(site, hashes.get(id(node))) for site, node in document.run_sites]
    )
    return Plan(
        workgraph_id=workgraph_id,
        ownership_id=ownership_id,
        vo=vo,
        sub=sub,
        type=workgraph.type,
        stripped_spec=stripped,
        annotations=_annotations(
            {
                "id": document.id,
                "label": document.label,
                "doc": document.doc,
                "labels": dict(labels or {}),
            }
        ),
        hooks=workgraph.workgraph_hooks or None,
        approving=tuple(
            PlannedAction(APPROVING, position, binding["action"], binding.get("args"))
            for position, binding in enumerate(workgraph.approving, start=1)
        ),
        members=planned_members,
        processes=tuple(processes),
        references=tuple(references),
        scouts=scouts,
        warnings=warnings,
        starts=analysis.workgraph_hint.get("start") == "auto",
    )


def _member(
    member: Member,
    resolved: ResolvedHints,
    *,
    analysis: Analysis,
    transformation_ids: Mapping[str, bytes],
    output_ids: Mapping[str, bytes],
    outputs: tuple[PlannedOutput, ...],
    process_id: bytes | None,
    scouts: bool,
) -> PlannedMember:
    source = member.source
    assert source is not None, f"{member.name} validated without a source"
    if source.kind == "edge":
        feeder: str = EDGE_FEEDER
        feeder_args: dict[str, Any] = {EDGE_ARGUMENT: id_to_str(output_ids[source.name])}
    else:
        declared = analysis.feeders[source.name]
        feeder, feeder_args = declared["name"], dict(declared.get("args") or {})
    step = member.step
    data = None
    if member.kind == "Data":
        data = _annotations(
            {k: member.hint.get(k) for k in ("operation", "files", "destination", "storage")}
        )
    order = list(analysis.members)
    return PlannedMember(
        transformation_id=transformation_ids[member.name],
        name=member.name,
        kind=member.kind,
        type=resolved.type,
        feeder=feeder,
        feeder_args=feeder_args,
        feeds_from=source.name,
        packer=resolved.packer["name"],
        packer_args=resolved.packer.get("args"),
        hooks=resolved.hooks or None,
        executing_identity=resolved.executing_identity,
        process_id=process_id,
        requirements_template=(resolved.requirements_template or None) if step else None,
        outputs=outputs,
        actions=_actions(resolved.actions),
        after=member.after,
        upstream=tuple(sorted(member.parents, key=order.index)),
        initial_state=member.initial_state,
        scouts=scouts and member.initial_state == "Active",
        annotations=_annotations(
            {
                "id": member.name,
                "label": step.label if step else None,
                "doc": step.doc if step else None,
                "initial_state": member.initial_state,
                "after": [id_to_str(transformation_ids[name]) for name in member.after],
                "data_management": data,
                # The step input the pool feeds: the packers put each parcel's inputs there in
                # the CWL input object (the others are joined, or constant).
                "driving_input": member.driving_input if step else None,
                # The step's other inputs sourced from one step output each, by input: the
                # output they join (ByPartner finds its partner output here by input name).
                "joined": _joined(member, output_ids),
            }
        ),
    )


def _joined(member: Member, output_ids: Mapping[str, bytes]) -> dict[str, str]:
    """Step input → TransformationOutputID of the output it joins (the driving input aside)."""
    if member.step is None:
        return {}
    return {
        step_input.id: id_to_str(output_ids[step_input.sources[0]])
        for step_input in member.step.inputs
        if step_input.id != member.driving_input
        and len(step_input.sources) == 1
        and step_input.sources[0] in output_ids
    }
