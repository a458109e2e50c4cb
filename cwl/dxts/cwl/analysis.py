"""The workgraph as a graph of members: what feeds each pool, who is upstream of whom.

Members are the document's steps (compute) and its `data_management` declarations (data), in
document order. The analysis is shared by validation (which reports what is wrong with it) and
compilation (which turns it into rows), so both read the document the same way. It reads the
hints defensively: a field of the wrong type has already been reported by the schema check and
is treated as absent here, so one mistake is not reported three times.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from dxts.cwl.loading import LoadedDocument, Step
from dxts.cwl.problems import Kind, Problem, error, join, warning

WORKGRAPH = "dirac:Workgraph"
TRANSFORMATION = "dirac:Transformation"
WORKGRAPH_HINT_PATH = join("hints", WORKGRAPH)
INITIAL_STATES = ("Active", "Stopped", "Paused")
# The output a process marks as its status report (docs/cwl.md): consumed by dxts itself, when
# a parcel's outcome is recorded, so it is never an orphan.
STATUS_REPORT_OUTPUT = "status-report"


@dataclass(frozen=True)
class Source:
    """What fills a pool: a workflow input's catalogue feeder, or a step output (edge)."""

    kind: Literal["feeder", "edge"]
    name: str  # the workflow input id, or "step/output"


@dataclass
class Member:
    name: str
    kind: Literal["Compute", "Data"]
    path: str  # where it is declared: "steps.merge", "hints.dirac:Workgraph.data_management[1]"
    hint: dict[str, Any]  # its dirac:Transformation, or the declaration itself
    hint_path: str
    step: Step | None = None
    driving_input: str | None = None
    source: Source | None = None
    after: tuple[str, ...] = ()
    parents: set[str] = field(default_factory=set)
    initial_state: str = "Active"  # effective, after the position rule


@dataclass
class Analysis:
    workgraph_hint: dict[str, Any]
    members: dict[str, Member]
    feeders: dict[str, dict[str, Any]]  # workflow input id → its dirac:Feeder
    workflow_outputs: dict[str, tuple[str, ...]]  # id → its outputSource(s)
    problems: list[Problem] = field(default_factory=list)
    has_cycle: bool = False

    def step_outputs(self) -> set[str]:
        return {f"{m.name}/{o}" for m in self.members.values() if m.step for o in m.step.outputs}

    def declared_outputs(self) -> set[str]:
        return {s for sources in self.workflow_outputs.values() for s in sources}

    def ancestors(self, name: str) -> set[str]:
        seen: set[str] = set()
        stack = list(self.members[name].parents)
        while stack:
            current = stack.pop()
            if current not in seen and current in self.members:
                seen.add(current)
                stack.extend(self.members[current].parents)
        return seen


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


# What a step or a data-management declaration may be called (see `_add`).
MEMBER_NAME_LENGTH = 128
MEMBER_NAME = re.compile(rf"^[^/\x00-\x1f\x7f]{{1,{MEMBER_NAME_LENGTH}}}$")


def analyse(doc: LoadedDocument) -> Analysis:
    workgraph = doc.hint(WORKGRAPH)
    analysis = Analysis(
        workgraph_hint=_dict(workgraph.body if workgraph else None),
        members={},
        feeders={i.id: i.feeder for i in doc.inputs if isinstance(i.feeder, dict)},
        workflow_outputs={o.id: o.sources for o in doc.outputs},
    )
    for step in doc.steps:
        hint = step_hint(step)
        path = join("steps", step.id)
        member = Member(
            step.id, "Compute", path, _dict(hint), join(path, "hints", TRANSFORMATION), step=step
        )
        member.after = _strings(member.hint.get("after"))
        _add(analysis, member)
    declarations = analysis.workgraph_hint.get("data_management")
    for index, declaration in enumerate(declarations if isinstance(declarations, list) else []):
        declaration = _dict(declaration)
        path = join(WORKGRAPH_HINT_PATH, "data_management", index)
        name = declaration.get("id") if isinstance(declaration.get("id"), str) else None
        member = Member(name or f"data_management[{index}]", "Data", path, declaration, path)
        member.after = _strings(declaration.get("after"))
        _add(analysis, member)
    _sources(doc, analysis)
    _driving_inputs(analysis)
    _after(analysis)
    _cycles(analysis)
    if not analysis.has_cycle:
        _positions(analysis)
    _warnings(analysis)
    return analysis


def step_hint(step: Step) -> dict[str, Any] | None:
    hint = next((h for h in step.hints if h.cls == TRANSFORMATION), None)
    return None if hint is None else hint.body


def _add(analysis: Analysis, member: Member) -> None:
    if not MEMBER_NAME.match(member.name):
        # Left out of the analysis: sources (`step/output`) and handles (`WG/STEP`) could not
        # name it, and whatever consumes it is reported as an unknown source.
        analysis.problems.append(
            error(
                Kind.INVALID_NAME,
                join(member.path, "id") if member.kind == "Data" else member.path,
                f"{member.name!r} cannot name a member: a name is 1 to {MEMBER_NAME_LENGTH} "
                "characters without `/` (it separates a step from its output and a workgraph "
                "from its member) or control characters",
            )
        )
        return
    if member.name in analysis.members:
        analysis.problems.append(
            error(
                Kind.HINT_SCHEMA,
                join(member.path, "id") if member.kind == "Data" else member.path,
                f"{member.name!r} already names {analysis.members[member.name].path}: every "
                "step and data-management declaration needs a name of its own",
            )
        )
        return
    analysis.members[member.name] = member


def _sources(doc: LoadedDocument, analysis: Analysis) -> None:
    """unknown-source and orphan-output, and the dataflow parents of every member."""
    inputs = {i.id for i in doc.inputs}
    outputs = analysis.step_outputs()
    known = ", ".join(sorted(inputs | outputs)) or "nothing"
    consumed: set[str] = set()
    for member in analysis.members.values():
        for step_input in member.step.inputs if member.step else ():
            for source in step_input.sources:
                if source in inputs or source in outputs:
                    consumed.add(source)
                    if source in outputs:
                        member.parents.add(source.split("/", 1)[0])
                    continue
                analysis.problems.append(
                    error(
                        Kind.UNKNOWN_SOURCE,
                        join(member.path, "in", step_input.id),
                        f"source {source!r} is neither a workflow input nor a step output "
                        f"(known: {known})",
                    )
                )
    for output_id, sources in analysis.workflow_outputs.items():
        for source in sources:
            if source not in outputs and source not in inputs:
                analysis.problems.append(
                    error(
                        Kind.UNKNOWN_SOURCE,
                        join("outputs", output_id, "outputSource"),
                        f"outputSource {source!r} names no step output (known: "
                        f"{', '.join(sorted(outputs)) or 'none'})",
                    )
                )
    for member in analysis.members.values():
        if member.kind == "Data":
            consumed |= _data_source(analysis, member, inputs, outputs)
    target = _dict(analysis.workgraph_hint.get("target")).get("output")
    if isinstance(target, str) and target not in analysis.workflow_outputs:
        analysis.problems.append(
            error(
                Kind.UNKNOWN_SOURCE,
                join(WORKGRAPH_HINT_PATH, "target", "output"),
                f"target output {target!r} is not a workflow output (outputs: "
                f"{', '.join(analysis.workflow_outputs) or 'none'})",
            )
        )
    declared = analysis.declared_outputs()
    for member in analysis.members.values():
        for output in member.step.outputs if member.step else ():
            name = f"{member.name}/{output}"
            if output != STATUS_REPORT_OUTPUT and name not in consumed and name not in declared:
                analysis.problems.append(
                    error(
                        Kind.ORPHAN_OUTPUT,
                        join(member.path, "out", output),
                        f"step output {name} is consumed by no step or data-management "
                        "declaration and declared as no workflow output: its files would be "
                        "produced and never used; consume it, declare it, or drop it from `out`",
                    )
                )


def _data_source(
    analysis: Analysis, member: Member, inputs: set[str], outputs: set[str]
) -> set[str]:
    """What a declaration's `files` names; returns the step outputs it consumes."""
    files = member.hint.get("files")
    if not isinstance(files, str):
        return set()
    if files in outputs:
        member.source = Source("edge", files)
        member.parents.add(files.split("/", 1)[0])
        return {files}
    if files in analysis.workflow_outputs:
        sources = [s for s in analysis.workflow_outputs[files] if s in outputs]
        if len(sources) == 1:
            member.source = Source("edge", sources[0])
            member.parents.add(sources[0].split("/", 1)[0])
        return set(sources)
    if files in analysis.feeders:
        member.source = Source("feeder", files)
        return set()
    reason = (
        f"workflow input {files!r} has no dirac:Feeder, so nothing would feed this declaration"
        if files in inputs
        else f"files {files!r} names no step output (step/output), workflow output or fed "
        f"workflow input"
    )
    analysis.problems.append(error(Kind.UNKNOWN_SOURCE, join(member.path, "files"), reason))
    return set()


def _driving_inputs(analysis: Analysis) -> None:
    outputs = analysis.step_outputs()
    for member in analysis.members.values():
        if member.step is None:
            continue
        pools: dict[str, list[Source]] = {}
        for step_input in member.step.inputs:
            found = [
                Source("feeder", s) if s in analysis.feeders else Source("edge", s)
                for s in step_input.sources
                if s in analysis.feeders or s in outputs
            ]
            if found:
                pools[step_input.id] = found
        named = member.hint.get("driving_input")
        in_path = join(member.path, "in")
        if isinstance(named, str):
            if named not in pools:
                analysis.problems.append(
                    error(
                        Kind.DRIVING_INPUT,
                        join(member.hint_path, "driving_input"),
                        f"driving_input {named!r} "
                        + (
                            "is not an input of this step"
                            if named not in {i.id for i in member.step.inputs}
                            else "is sourced from neither a fed workflow input nor a step output"
                        )
                        + f"; inputs that drive a pool: {', '.join(pools) or 'none'}",
                    )
                )
                continue
            chosen = named
        elif not pools:
            analysis.problems.append(
                error(
                    Kind.NO_DRIVING_INPUT,
                    in_path,
                    f"no input of step {member.name} is fed by a dirac:Feeder or sourced from "
                    "another step's output, so nothing would ever feed it",
                )
            )
            continue
        elif len(pools) > 1:
            analysis.problems.append(
                error(
                    Kind.AMBIGUOUS_DRIVING_INPUT,
                    in_path,
                    f"inputs {', '.join(pools)} all drive a pool; name the pool with "
                    f"dirac:Transformation.driving_input (the others are joined by the packer)",
                )
            )
            continue
        else:
            chosen = next(iter(pools))
        if len(pools[chosen]) > 1:
            analysis.problems.append(
                error(
                    Kind.DRIVING_INPUT,
                    join(in_path, chosen),
                    f"driving input {chosen} merges {len(pools[chosen])} sources; a pool is fed by "
                    "exactly one feeder or step output",
                )
            )
            continue
        member.driving_input = chosen
        member.source = pools[chosen][0]


def _after(analysis: Analysis) -> None:
    for member in analysis.members.values():
        for index, name in enumerate(member.after):
            if name in analysis.members:
                member.parents.add(name)
            else:
                analysis.problems.append(
                    error(
                        Kind.UNKNOWN_SOURCE,
                        join(member.hint_path, "after", index),
                        f"after names {name!r}, which is no step or data-management declaration "
                        f"(members: {', '.join(analysis.members)})",
                    )
                )


def _cycles(analysis: Analysis) -> None:
    """Tarjan's strongly connected components over parents → member edges."""
    order = list(analysis.members)
    children: dict[str, list[str]] = {name: [] for name in order}
    for member in analysis.members.values():
        for parent in sorted(member.parents, key=order.index):
            children[parent].append(member.name)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for child in children[node]:
            if child not in index:
                connect(child)
                low[node] = min(low[node], low[child])
            elif child in on_stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1 or node in children[node]:
                components.append(sorted(component, key=order.index))

    for name in order:
        if name not in index:
            connect(name)
    for component in components:
        analysis.has_cycle = True
        first = analysis.members[component[0]]
        chain = " → ".join([*component, component[0]])
        analysis.problems.append(
            error(
                Kind.CYCLE,
                first.path,
                f"members {', '.join(component)} depend on each other through dataflow and "
                f"`after` ({chain}): none of them could ever start",
            )
        )


def _positions(analysis: Analysis) -> None:
    """The position rule: compute steps and their ancestors run in the scout, unless the
    member's `initial_state` says otherwise; everything else is held until approval."""
    scouting: set[str] = set()
    for member in analysis.members.values():
        if member.kind == "Compute":
            scouting.add(member.name)
            scouting |= analysis.ancestors(member.name)
    for member in analysis.members.values():
        declared = member.hint.get("initial_state")
        if declared in INITIAL_STATES:
            member.initial_state = declared
        else:
            member.initial_state = "Active" if member.name in scouting else "Stopped"


def _warnings(analysis: Analysis) -> None:
    for member in analysis.members.values():
        step = member.step
        if step is None:
            continue
        if step.process is not None and step.process.process_class == "ExpressionTool":
            analysis.problems.append(expression_tool_warning(step.id))
        if step.scatter:
            analysis.problems.append(
                warning(
                    Kind.SCATTER,
                    join(member.path, "scatter"),
                    f"step {step.id} scatters: dxts leaves the scatter to the CWL runner inside "
                    "each parcel; parcels are still made by the packer, one scatter per parcel",
                )
            )
        if step.when:
            analysis.problems.append(
                warning(
                    Kind.WHEN,
                    join(member.path, "when"),
                    f"step {step.id} has `when`: dxts leaves the condition to the CWL runner "
                    "inside each parcel; a skipped parcel produces no outputs and its inputs "
                    "are still reported processed by its status report",
                )
            )


def expression_tool_warning(step_id: str) -> Problem:
    return warning(
        Kind.EXPRESSION_TOOL,
        join("steps", step_id, "run"),
        f"step {step_id} is an ExpressionTool: dxts runs it as a compute transformation like any "
        "other (one job per parcel, its JavaScript evaluated by the CWL runner on the worker), "
        "not inline in the service",
    )
