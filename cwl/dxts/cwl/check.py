"""Loading, validation and compilation of a document with no database: `dxts validate`.

`check_document` is the pipeline submission runs, minus what needs the stores: references to
stored processes cannot be checked here and are reported as warnings. Submission shares its
first step (`validate_bundle`) and the list of stored references (`stored_references`), which it
resolves against the process store and the registry.
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml.error import YAMLError
from schema_salad.utils import yaml_no_ts

from dxts.core.config import DefinitionConfig
from dxts.core.deadlines import checkpoint
from dxts.cwl.compile import Plan, compile_plan
from dxts.cwl.endless import endless_feeders
from dxts.cwl.loading import (
    DEFAULT_GRAPH_ENTRY,
    Bundle,
    LoadedDocument,
    load_document,
    normalise_path,
    plain,
)
from dxts.cwl.plugins import PluginCatalogue
from dxts.cwl.positions import located
from dxts.cwl.problems import Kind, Problem, Severity, warning
from dxts.cwl.validation import Validated, validate


def validate_bundle(
    bundle: Bundle,
    catalogue: PluginCatalogue,
    config: DefinitionConfig,
    vo: str,
    allow_unknown_plugins: bool,
) -> Validated:
    main = bundle.main
    document, problems = load_document(bundle, config.document_limits)
    checkpoint("validating the document")
    return validate(
        document,
        problems,
        catalogue=catalogue,
        config=config,
        vo=vo,
        allow_unknown_plugins=allow_unknown_plugins,
        written=None if document is not None else _written(bundle, main),
    )


def _written(bundle: Bundle, main: str) -> dict[str, Any] | None:
    """The main document as written (a packed document's entry), for what validation can say of
    a document CWL's schema refused; None when it is not even a YAML mapping."""
    path, _, fragment = main.partition("#")
    try:
        text = bundle.read(normalise_path("", path, uri=False))
        written = plain(yaml_no_ts().load(text)) if text is not None else None
    except (ValueError, YAMLError):  # outside the bundle, or refused: loading said why
        return None
    if isinstance(written, dict) and isinstance(written.get("$graph"), list):
        wanted = fragment or DEFAULT_GRAPH_ENTRY
        entries = [e for e in written["$graph"] if isinstance(e, dict)]
        written = next((e for e in entries if str(e.get("id", "")).lstrip("#") == wanted), None)
    return written if isinstance(written, dict) else None


def stored_references(
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


def check_document(
    bundle: Bundle,
    *,
    catalogue: PluginCatalogue,
    config: DefinitionConfig | None = None,
    vo: str = "",
    sub: str = "",
    allow_unknown_plugins: bool = False,
) -> tuple[list[Problem], Plan | None]:
    """Validate and compile without a database: every problem, and the plan if there is no error;
    a workgraph that cannot end by itself is warned about here (`endless_feeders`)."""
    config = config or DefinitionConfig()
    checked = validate_bundle(bundle, catalogue, config, vo, allow_unknown_plugins)
    problems = list(checked.problems)
    if checked.analysis is not None and checked.ok:
        # Advice for whoever is writing the document (`dxts validate`), not a refusal: a
        # submission is not told again.
        problems += endless_feeders(checked.analysis)
    if checked.document is not None and checked.analysis is not None:
        for path, text, _, named in stored_references(checked.document):
            problems.append(
                warning(
                    Kind.UNRESOLVED_RUN,
                    path,
                    f"{text} names a stored process; it is checked against the store at "
                    "submission, not offline"
                    + (" (the plan shows no hash for what runs it)" if named else ""),
                )
            )
    problems = located(problems, bundle)
    if not checked.ok or checked.document is None or checked.analysis is None:
        return problems, None
    checkpoint("compiling the plan")
    plan = compile_plan(
        checked.document,
        checked.analysis,
        config=config,
        vo=vo,
        sub=sub,
        warnings=tuple(p for p in problems if p.severity is Severity.WARNING),
    )
    return problems, plan
