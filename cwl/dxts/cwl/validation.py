"""Validation of a workgraph document: every problem docs/cwl.md lists, each with a path.

`validate` never stops at the first problem. It reports the document class (first, before any
loading problem: a CommandLineTool carrying `steps` is not a workgraph, which says more than CWL's
schema refusing the field), loading problems, bare steps, hint schema errors, the dataflow rules
(sources, orphans, cycles, driving inputs), plugin names and arguments (for each phase the member
runs in: a feeder whose member runs in the scout is validated as scouting too), and the warnings
for constructs whose meaning inside a transformation is not settled.

A document CWL's strict schema refuses is not loaded at all, so what can still be said of it is
read from the document as written (`written`): its class, and its steps whose inline process is an
ExpressionTool (the warning does not wait for the schema error to be fixed).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from dxts.core.config import ACTION_LISTS, DefinitionConfig, resolve_hints
from dxts.core.errors import InvalidArgument, NotFound
from dxts.core.plugins.points import Phase, PluginKind, Point
from dxts.cwl.analysis import (
    TRANSFORMATION,
    WORKGRAPH,
    WORKGRAPH_HINT_PATH,
    Analysis,
    analyse,
    expression_tool_warning,
)
from dxts.cwl.hints import check_hint
from dxts.cwl.loading import LoadedDocument
from dxts.cwl.plugins import PluginCatalogue
from dxts.cwl.problems import Kind, Problem, Severity, error, join, warning

# The fields only a Workflow has: a tool carrying them was meant to be one.
WORKFLOW_FIELDS = ("steps",)


@dataclass
class Validated:
    document: LoadedDocument | None
    analysis: Analysis | None
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(p.severity is Severity.ERROR for p in self.problems)


@dataclass(frozen=True)
class _Binding:
    kind: PluginKind
    name: Any
    args: Any
    path: str  # of the binding object
    name_field: str  # "name", "hook" or "action"
    phases: tuple[Phase, ...]
    point: Point | None


def validate(
    document: LoadedDocument | None,
    loading_problems: list[Problem],
    *,
    catalogue: PluginCatalogue,
    config: DefinitionConfig,
    vo: str = "",
    allow_unknown_plugins: bool = False,
    written: dict[str, Any] | None = None,
) -> Validated:
    """`written`: the main document as written, looked at when `document` could not be loaded."""
    if document is None:
        return Validated(None, None, _unloaded(written) + loading_problems)
    if document.process_class != "Workflow":
        wrong_class = _not_a_workflow(document.process_class, document.raw)
        return Validated(document, None, [wrong_class, *loading_problems])
    problems = list(loading_problems)
    if document.hint(WORKGRAPH) is None:
        problems.append(
            error(
                Kind.NOT_A_WORKGRAPH,
                "hints",
                "the Workflow has no dirac:Workgraph hint: add `dirac:Workgraph: {schema_version: "
                "'1.0', type: ...}` under hints (with `$namespaces: {dirac: "
                "https://diracgrid.org/cwl#}`) to submit it as a workgraph",
            )
        )
    schema_problems = _hint_schema(document)
    problems += schema_problems
    analysis = analyse(document)
    problems += analysis.problems
    if not analysis.has_cycle:
        problems += _plugins(
            analysis,
            catalogue,
            config,
            vo,
            allow_unknown_plugins=allow_unknown_plugins,
            malformed={p.path for p in schema_problems},
        )
    problems += policy_problems(analysis, config, vo)
    return Validated(document, analysis, problems)


def policy_problems(analysis: Analysis, config: DefinitionConfig, vo: str) -> list[Problem]:
    """What the installation's policy for `vo` refuses (`dxts.core.policy`): a requirement of a
    member over its cap (its resolved template, whichever layer set the value) or off an
    allow-list, and a sign-off naming a role it does not allow, each at its path."""
    policy = config.policy.for_vo(vo)
    problems = []
    hint = analysis.workgraph_hint
    approving = hint.get("approving")
    for index, binding in enumerate(approving if isinstance(approving, list) else []):
        args = binding.get("args") if isinstance(binding, dict) else None
        role = args.get("role") if isinstance(args, dict) else None
        why = policy.sign_off_problem(role) if isinstance(role, str) else None
        if why is not None:
            path = join(WORKGRAPH_HINT_PATH, "approving", index, "args", "role")
            problems.append(error(Kind.POLICY, path, why))
    for member in analysis.members.values():
        if member.step is None:
            continue
        template = resolve_hints(
            config, vo=vo, workgraph_hint=hint, transformation_hint=member.hint
        ).requirements_template
        for key, why in policy.requirement_problems(template):
            path = join(member.hint_path, "requirements_template", key)
            problems.append(error(Kind.POLICY, path, why))
    return problems


def _not_a_workflow(process_class: Any, written: dict[str, Any]) -> Problem:
    carried = [name for name in WORKFLOW_FIELDS if name in written]
    carrying = f" carrying the workflow field(s) {', '.join(carried)}" if carried else ""
    return error(
        Kind.NOT_A_WORKGRAPH,
        "class",
        f"a workgraph is a Workflow with a dirac:Workgraph hint; this document is a "
        f"{process_class}{carrying} (make it `class: Workflow`, or submit a tool as a user job)",
    )


def _unloaded(written: dict[str, Any] | None) -> list[Problem]:
    """What the document as written shows when CWL's schema refused it: not a Workflow at all
    (said first), or the steps whose inline process is an ExpressionTool."""
    if written is None:
        return []
    if written.get("class") != "Workflow":
        return [_not_a_workflow(written.get("class"), written)]
    steps = written.get("steps")
    if isinstance(steps, list):
        steps = {str(s.get("id", "")).lstrip("#"): s for s in steps if isinstance(s, dict)}
    return [
        expression_tool_warning(step_id)
        for step_id, step in (steps.items() if isinstance(steps, dict) else ())
        if isinstance(step, dict)
        and isinstance(step.get("run"), dict)
        and step["run"].get("class") == "ExpressionTool"
    ]


def _hint_schema(document: LoadedDocument) -> list[Problem]:
    problems: list[Problem] = []
    for hints in [document.hints, *(step.hints for step in document.steps)]:
        seen: set[str] = set()
        for hint in hints:
            if not hint.cls.startswith("dirac:"):
                continue
            if hint.cls in seen:
                problems.append(
                    error(Kind.HINT_SCHEMA, hint.path, f"{hint.cls} is given more than once")
                )
            seen.add(hint.cls)
            problems += check_hint(hint.cls, hint.body, hint.path)
    for step in document.steps:
        if not any(h.cls == TRANSFORMATION for h in step.hints):
            problems.append(
                error(
                    Kind.BARE_STEP,
                    join("steps", step.id, "hints"),
                    f"step {step.id} has no dirac:Transformation hint: every step of a workgraph "
                    "becomes a transformation; write `dirac:Transformation: {}` to take every "
                    "default",
                )
            )
    for workflow_input in document.inputs:
        if workflow_input.feeder is not None:
            path = join("inputs", workflow_input.id, "dirac:Feeder")
            problems += check_hint("dirac:Feeder", workflow_input.feeder, path)
    return problems


def _plugins(
    analysis: Analysis,
    catalogue: PluginCatalogue,
    config: DefinitionConfig,
    vo: str,
    *,
    allow_unknown_plugins: bool,
    malformed: set[str],
) -> list[Problem]:
    """Names and arguments of every binding the schema check found well formed."""
    problems: list[Problem] = []
    reported: set[tuple[str, str]] = set()
    for binding in _bindings(analysis, scouts=_workgraph_scouts(analysis, config, vo)):
        if not isinstance(binding.name, str) or any(
            path == binding.path or path.startswith(f"{binding.path}.") for path in malformed
        ):
            continue  # the schema check reported it
        name_path = join(binding.path, binding.name_field)
        try:
            catalogue.get(binding.kind, binding.name)
        except NotFound:
            message = (
                f"no {binding.kind.value} plugin named {binding.name!r} is installed (entry-point "
                f"group {binding.kind.group})"
            )
            problems.append(
                warning(Kind.UNKNOWN_PLUGIN, name_path, message + "; not checked offline")
                if allow_unknown_plugins
                else error(Kind.UNKNOWN_PLUGIN, name_path, message)
            )
            continue
        for phase in binding.phases:
            try:
                catalogue.validate_args(
                    binding.kind,
                    binding.name,
                    binding.args,
                    phase=phase,
                    point=binding.point,
                    name_field=binding.name_field,
                )
            except InvalidArgument as exc:
                for violation in exc.violations:
                    path = join(binding.path, violation.field or "args")
                    if (path, violation.description) in reported:
                        continue
                    reported.add((path, violation.description))
                    problems.append(
                        error(
                            Kind.PLUGIN_ARGS,
                            path,
                            f"{binding.kind.value} {binding.name}: {violation.description}",
                        )
                    )
    return problems


def _workgraph_scouts(analysis: Analysis, config: DefinitionConfig, vo: str) -> bool:
    approving = resolve_hints(config, vo=vo, workgraph_hint=analysis.workgraph_hint).approving
    return bool(approving) and any(m.initial_state == "Active" for m in analysis.members.values())


def _bindings(analysis: Analysis, *, scouts: bool) -> Iterator[_Binding]:
    active = (Phase.ACTIVE,)
    both = (Phase.SCOUTING, Phase.ACTIVE)
    hint = analysis.workgraph_hint
    yield from _hooks(hint.get("hooks"), join(WORKGRAPH_HINT_PATH, "hooks"), "workgraph", active)
    yield from _actions(
        hint.get("approving"), join(WORKGRAPH_HINT_PATH, "approving"), Point.APPROVING, active
    )
    scouting_feeders = set()
    for member in analysis.members.values():
        phases = both if scouts and member.initial_state == "Active" else active
        if member.source is not None and member.source.kind == "feeder" and phases == both:
            scouting_feeders.add(member.source.name)
        packer = member.hint.get("packer")
        if isinstance(packer, dict):
            yield _Binding(
                PluginKind.PACKER,
                packer.get("name"),
                packer.get("args"),
                join(member.hint_path, "packer"),
                "name",
                phases,
                Point.PACKER,
            )
        hooks = member.hint.get("hooks")
        yield from _hooks(hooks, join(member.hint_path, "hooks"), "transformation", phases)
        lists = member.hint.get("actions")
        for state in ACTION_LISTS:
            value = lists.get(state) if isinstance(lists, dict) else None
            yield from _actions(
                value, join(member.hint_path, "actions", state), Point(state), active
            )
    for input_id, feeder in analysis.feeders.items():
        yield _Binding(
            PluginKind.FEEDER,
            feeder.get("name"),
            feeder.get("args"),
            join("inputs", input_id, "dirac:Feeder"),
            "name",
            both if input_id in scouting_feeders else active,
            Point.FEEDER,
        )


def _hooks(
    value: Any,
    path: str,
    owner: Literal["workgraph", "transformation"],
    phases: tuple[Phase, ...],
) -> Iterator[_Binding]:
    for key, binding in value.items() if isinstance(value, dict) else ():
        if isinstance(binding, dict):
            try:
                point = Point.of_hook_binding(owner, key)
            except ValueError:
                continue  # the schema check reported the unknown hook
            yield _Binding(
                PluginKind.HOOK,
                binding.get("hook"),
                binding.get("args"),
                join(path, key),
                "hook",
                phases,
                point,
            )


def _actions(value: Any, path: str, point: Point, phases: tuple[Phase, ...]) -> Iterator[_Binding]:
    for index, binding in enumerate(value if isinstance(value, list) else []):
        if isinstance(binding, dict):
            yield _Binding(
                PluginKind.ACTION,
                binding.get("action"),
                binding.get("args"),
                join(path, index),
                "action",
                phases,
                point,
            )
