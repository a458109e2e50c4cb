"""Submitting a workgraph: load, validate, resolve references, compile, insert — one transaction.

Loading and validation are pure (and run off the event loop: cwl-utils parsing is CPU work);
resolving `proc:` references against the store and the registry, compiling and inserting
happen in one READ COMMITTED transaction, so a workgraph and all its members exist entirely or
not at all. A dry run does the same reads and returns the plan without writing.

`check_document` is the same pipeline with no database, for `dxts validate`: stored references
cannot be checked there and are reported as warnings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core import content_store as store
from dxts.core.config import DefinitionConfig
from dxts.core.db import Database, Isolation
from dxts.core.ids import id_to_str
from dxts.core.logs import LogEntry, log_transformations, log_workgraphs
from dxts.core.states import TransformationStatus, WorkgraphStatus
from dxts.definition import db
from dxts.definition.compile import Plan, compile_plan
from dxts.definition.loading import Bundle, LoadedDocument, load_document
from dxts.definition.plugins import PluginCatalogue
from dxts.definition.problems import (
    Kind,
    Problem,
    Severity,
    error,
    raise_for_errors,
    warning,
)
from dxts.definition.validation import Validated, validate

AUTHOR_LENGTH = 64


@dataclass(frozen=True)
class Submitted:
    plan: Plan
    dry_run: bool

    @property
    def workgraph_id(self) -> bytes:
        return self.plan.workgraph_id

    @property
    def warnings(self) -> tuple[Problem, ...]:
        return self.plan.warnings


def _validate(
    bundle: Bundle,
    catalogue: PluginCatalogue,
    config: DefinitionConfig,
    vo: str,
    allow_unknown_plugins: bool,
) -> Validated:
    document, problems = load_document(bundle)
    return validate(
        document,
        problems,
        catalogue=catalogue,
        config=config,
        vo=vo,
        allow_unknown_plugins=allow_unknown_plugins,
    )


def _references(
    document: LoadedDocument,
) -> list[tuple[str, str, bytes | None, tuple[str, str] | None]]:
    """(document path, text, hash, (name, version)) of every stored-process reference."""
    found = []
    for node in document.processes():
        ref = node.reference
        if ref is not None:
            named = (ref.name, ref.version) if ref.name and ref.version else None
            found.append((node.location, ref.text, ref.process_id, named))
    return found


async def resolve_references(
    conn: AsyncConnection, document: LoadedDocument, vo: str
) -> tuple[dict[str, bytes], list[Problem]]:
    """Registry names → hashes (once, now), and a problem for every reference naming nothing."""
    references = _references(document)
    stored = await db.existing_processes(conn, [h for _, _, h, _ in references if h])
    names = await db.registry_lookup(conn, vo, [n for _, _, _, n in references if n])
    resolved: dict[str, bytes] = {}
    problems = []
    for path, text, process_id, named in references:
        if process_id is not None and process_id not in stored:
            problems.append(
                error(
                    Kind.UNRESOLVED_RUN,
                    path,
                    f"{text} is not in the process store (references are resolved against "
                    "dxts's own store only): store the process first, or submit it in the bundle",
                )
            )
        elif named is not None:
            if named in names:
                resolved[text] = names[named]
            else:
                problems.append(
                    error(
                        Kind.UNRESOLVED_RUN,
                        path,
                        f"{named[0]}@{named[1]} is not published in the process registry of VO "
                        f"{vo!r}",
                    )
                )
    return resolved, problems


def check_document(
    bundle: Bundle,
    *,
    catalogue: PluginCatalogue,
    config: DefinitionConfig | None = None,
    vo: str = "",
    sub: str = "",
    allow_unknown_plugins: bool = False,
) -> tuple[list[Problem], Plan | None]:
    """Validate and compile without a database: every problem, and the plan if there is no error."""
    config = config or DefinitionConfig()
    checked = _validate(bundle, catalogue, config, vo, allow_unknown_plugins)
    problems = list(checked.problems)
    if checked.document is not None and checked.analysis is not None:
        for path, text, _, named in _references(checked.document):
            problems.append(
                warning(
                    Kind.UNRESOLVED_RUN,
                    path,
                    f"{text} names a stored process; it is checked against the store at "
                    "submission, not offline"
                    + (" (the plan shows no hash for what runs it)" if named else ""),
                )
            )
    if not checked.ok or checked.document is None or checked.analysis is None:
        return problems, None
    plan = compile_plan(
        checked.document,
        checked.analysis,
        config=config,
        vo=vo,
        sub=sub,
        warnings=tuple(p for p in problems if p.severity is Severity.WARNING),
    )
    return problems, plan


async def submit_workgraph(
    database: Database,
    bundle: Bundle,
    *,
    vo: str,
    sub: str,
    catalogue: PluginCatalogue,
    config: DefinitionConfig | None = None,
    labels: Mapping[str, str] | None = None,
    dry_run: bool = False,
    allow_unknown_plugins: bool = False,
) -> Submitted:
    """Validate, compile and (unless `dry_run`) create the workgraph and all its members.

    Raises InvalidArgument listing every error (each a DocumentViolation with its kind).
    """
    config = config or DefinitionConfig()
    checked = await asyncio.to_thread(
        _validate, bundle, catalogue, config, vo, allow_unknown_plugins
    )
    raise_for_errors(checked.problems)
    document, analysis = checked.document, checked.analysis
    assert document is not None and analysis is not None
    warnings = tuple(p for p in checked.problems if p.severity is Severity.WARNING)

    async def work(conn: AsyncConnection) -> Plan:
        resolved, problems = await resolve_references(conn, document, vo)
        raise_for_errors(problems)
        plan = compile_plan(
            document,
            analysis,
            config=config,
            vo=vo,
            sub=sub,
            labels=labels,
            resolved=resolved,
            warnings=warnings,
        )
        if not dry_run:
            await insert_plan(conn, plan)
        return plan

    isolation = Isolation.READ_COMMITTED
    plan = await database.run(work, isolation=isolation)
    return Submitted(plan, dry_run)


async def insert_plan(conn: AsyncConnection, plan: Plan) -> None:
    """Every row of a plan, in the caller's transaction: one INSERT per table."""
    await store.put_processes(conn, [p.body for p in plan.processes], plan.references)
    await store.put_requirements(
        conn, [m.requirements_template for m in plan.members if m.requirements_template]
    )
    action_rows = [
        {
            "WorkgraphID": plan.workgraph_id,
            "State": a.state,
            "Position": a.position,
            "Action": a.action,
            "Args": a.args,
        }
        for a in plan.approving
    ] + [
        {
            "TransformationID": m.transformation_id,
            "State": a.state,
            "Position": a.position,
            "Action": a.action,
            "Args": a.args,
        }
        for m in plan.members
        for a in m.actions
    ]
    await db.insert_workgraph(
        conn,
        workgraph={
            "WorkgraphID": plan.workgraph_id,
            "Type": plan.type,
            "Status": WorkgraphStatus.NEW.value,
            "StrippedSpec": plan.stripped_spec,
            "Annotations": plan.annotations or None,
            "Hooks": plan.hooks,
        },
        ownership_row={
            "OwnershipID": plan.ownership_id,
            "VO": plan.vo,
            "Sub": plan.sub,
            "WorkgraphID": plan.workgraph_id,
        },
        members=[
            {
                "TransformationID": m.transformation_id,
                "OwnershipID": plan.ownership_id,
                "ExecutingIdentity": m.executing_identity,
                "Type": m.type,
                "Kind": m.kind,
                "Status": TransformationStatus.NEW.value,
                "Feeder": m.feeder,
                "FeederArgs": m.feeder_args,
                "FeederEnabled": True,
                "Packer": m.packer,
                "PackerArgs": m.packer_args,
                "Annotations": m.annotations,
                "Hooks": m.hooks,
            }
            for m in plan.members
        ],
        compute=[
            {
                "TransformationID": m.transformation_id,
                "ProcessID": m.process_id,
                "RequirementsTemplateID": m.requirements_template_id,
            }
            for m in plan.members
            if m.kind == "Compute"
        ],
        outputs=[
            {
                "TransformationOutputID": o.output_id,
                "TransformationID": m.transformation_id,
                "Name": o.name,
                "Intermediate": o.intermediate,
            }
            for m in plan.members
            for o in m.outputs
        ],
        action_rows=action_rows,
    )
    author = plan.sub[:AUTHOR_LENGTH] or "definition"
    created = {"vo": plan.vo, "workgraph": id_to_str(plan.workgraph_id)}
    await log_workgraphs(
        conn,
        [
            LogEntry(
                plan.workgraph_id,
                "StateChange",
                author,
                None,
                WorkgraphStatus.NEW.value,
                "submitted",
                created,
            )
        ],
    )
    await log_transformations(
        conn,
        [
            LogEntry(
                m.transformation_id,
                "StateChange",
                author,
                None,
                TransformationStatus.NEW.value,
                f"created as member {m.name}",
                created,
            )
            for m in plan.members
        ],
    )
