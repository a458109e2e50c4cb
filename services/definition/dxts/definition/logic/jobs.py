"""User jobs: a CommandLineTool or Workflow becomes one user parcel.

The document needs nothing of dxts: a plain CWL process, as tested with cwltool, runs as it is
(every job default applies); a `dirac:Job` hint, when present, sets the requirements template
and the output sandbox.

The document is loaded from its bundle like a workgraph (nothing is fetched from anywhere), its
`dirac:` hints are checked against the schema, stored-process references are resolved, and
the process tree is stored content-addressed together with the job's requirements (the
configured defaults of the VO under the hint's `requirements_template`). That transaction
commits before execution is asked for the parcel, so the parcel's ProcessID always names a
stored process; the parcel belongs to the caller (VO and Sub from the token, never from the
request). The hint's `output_sandbox` and the labels travel in the parcel's annotations.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dxts.core import content_store as store
from dxts.core.config import DefinitionConfig, resolve_hints
from dxts.core.db import Database, Isolation, Transaction
from dxts.core.deadlines import checkpoint, in_abandonable_thread
from dxts.core.errors import InvalidArgument
from dxts.core.identity import Identity
from dxts.core.ids import content_hash
from dxts.cwl.analysis import WORKGRAPH
from dxts.cwl.compile import hash_processes, replace_runs
from dxts.cwl.hints import check_hint
from dxts.cwl.loading import Bundle, LoadedDocument, load_document
from dxts.cwl.problems import Kind, Problem, Severity, error, join, raise_for_errors
from dxts.definition.logic.execution import ExecutionClient, UserParcel
from dxts.definition.logic.submit import resolve_references

JOB = "dirac:Job"
JOB_CLASSES = ("CommandLineTool", "Workflow")


@dataclass(frozen=True)
class SubmittedJob:
    parcel_id: bytes
    process_id: bytes
    warnings: tuple[Problem, ...]


def check_job(document: LoadedDocument | None, problems: list[Problem]) -> list[Problem]:
    """Every problem of a job document (loading problems included)."""
    found = list(problems)
    if document is None:
        return found
    if document.process_class not in JOB_CLASSES:
        found.append(
            error(
                Kind.NOT_A_JOB,
                "class",
                f"a user job is a CommandLineTool or a Workflow; this document is a "
                f"{document.process_class}",
            )
        )
    workgraph = document.hint(WORKGRAPH)
    if workgraph is not None:
        found.append(
            error(
                Kind.NOT_A_JOB,
                workgraph.path,
                "this document is a workgraph: submit it with SubmitWorkgraph",
            )
        )
    for hint in document.hints:
        if hint.cls.startswith("dirac:") and hint.cls != WORKGRAPH:
            found += check_hint(hint.cls, hint.body, hint.path)
    return found


async def _store(
    conn: Transaction, document: LoadedDocument, vo: str, config: DefinitionConfig
) -> tuple[bytes, bytes | None, dict[str, Any]]:
    """Store the process tree and the requirements; (ProcessID, RequirementsID, job hint)."""
    resolved, problems = await resolve_references(conn, document, vo)
    raise_for_errors(problems)
    hashes, planned, references = hash_processes(document, resolved)
    sites = [(site, hashes[id(node)]) for site, node in document.run_sites]
    root = replace_runs(document.raw, sites)
    root_id = content_hash(root, field="process")
    children = {child for _, child in sites if child is not None}
    await store.put_processes(
        conn,
        [p.body for p in planned] + [root],
        [*references, *((root_id, child) for child in sorted(children))],
    )
    hint = document.hint(JOB)
    body = dict(hint.body) if hint is not None else {}
    template = resolve_hints(
        config, vo=vo, workgraph_hint=None, transformation_hint=body
    ).requirements_template
    requirements_id = (await store.put_requirements(conn, [template]))[0] if template else None
    return root_id, requirements_id, body


def _policy_problems(document: LoadedDocument, vo: str, config: DefinitionConfig) -> list[Problem]:
    """The job's requirements the installation's policy refuses (over a cap, off a list)."""
    hint = document.hint(JOB)
    body = dict(hint.body) if hint is not None else {}
    template = resolve_hints(
        config, vo=vo, workgraph_hint=None, transformation_hint=body
    ).requirements_template
    where = hint.path if hint is not None else "hints"
    return [
        error(Kind.POLICY, join(where, "requirements_template", key), why)
        for key, why in config.policy.for_vo(vo).requirement_problems(template)
    ]


async def submit_job(
    database: Database,
    bundle: Bundle,
    *,
    identity: Identity,
    execution: ExecutionClient,
    inputs: Any = None,
    labels: Mapping[str, str] | None = None,
    config: DefinitionConfig | None = None,
    request_id: str = "",
) -> SubmittedJob:
    """Validate and store a user job, then have execution create its parcel for the caller.

    Raises InvalidArgument listing every problem of the document (each with its kind).
    """
    config = config or DefinitionConfig()
    if inputs is None:
        inputs = {}
    if not isinstance(inputs, dict):
        raise InvalidArgument("the CWL input object is a JSON object", field="inputs_json")
    document, loading = await in_abandonable_thread(load_document, bundle, config.document_limits)
    checkpoint("storing the job")
    problems = check_job(document, loading)
    raise_for_errors(problems)
    assert document is not None
    raise_for_errors(_policy_problems(document, identity.vo, config))

    async def work(conn: Transaction) -> tuple[bytes, bytes | None, dict[str, Any]]:
        return await _store(conn, document, identity.vo, config)

    process_id, requirements_id, hint = await database.run(work, isolation=Isolation.READ_COMMITTED)
    sandbox = resolve_hints(
        config, vo=identity.vo, workgraph_hint=None, transformation_hint=hint
    ).output_sandbox
    annotations = {
        k: v
        for k, v in {
            "name": document.id or document.label,
            "labels": dict(labels or {}),
            "output_sandbox": sandbox,
        }.items()
        if v
    }
    parcel_id = await execution.create_user_parcel(
        UserParcel(identity.vo, identity.sub, process_id, requirements_id, inputs, annotations),
        request_id=request_id or str(uuid.uuid4()),
    )
    warnings = tuple(p for p in problems if p.severity is Severity.WARNING)
    return SubmittedJob(parcel_id, process_id, warnings)
