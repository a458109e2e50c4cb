"""Loading a submitted CWL v1.2 document, and every process it runs, from a bundle.

A submission is a *bundle*: the main document plus the files it references (a mapping of
relative path to text, or a directory). Nothing is ever fetched from a host a document names:
the fetcher handed to cwl-utils serves the bundle and refuses everything else, and a `run` that
climbs out of the bundle (`../x.cwl`, an absolute path, a URL) is a problem, not a read.

A step's `run` may be

* an inline process (kept inline while loading; stored as a process of its own when compiled),
* a path relative to the document that names it, optionally with a `#fragment` selecting an
  entry of a packed `$graph` document (`tools.cwl#merge`; `#merge` inside a packed document),
* a reference to a stored process, which is this module's syntax:
  `proc:sha256-<64 lowercase hex>` names a process by content hash, and `proc:<name>@<version>`
  names a ProcessRegistry entry of the submitter's VO, resolved once, at submission, to a hash.
  Stored processes and StrippedSpec always carry the hash form, so a stored document can be
  submitted again unchanged.

Every file is read through `Bundle.read` (`dxts.cwl.bundle`) within the installation's
`DocumentLimits`, before any YAML loader builds it, and the loader looks at the deadline between
files and while it parses (`checkpoint`).

cwl-utils parses and checks every document (map and list forms, `$namespaces`, `$import`); this
module only pairs the typed objects it returns with the plain data as written, because the plain
data is what is hashed and stored (the typed objects' own serialisation mints random blank-node
ids, so it cannot be hashed).
"""

from __future__ import annotations

import copy
import posixpath
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import cwl_utils.parser.cwl_v1_2 as cwl
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarbool import ScalarBoolean
from schema_salad.exceptions import ValidationException
from schema_salad.fetcher import Fetcher
from schema_salad.utils import yaml_no_ts

from dxts.core.adaptor.model import SCHEMAS_FIELD
from dxts.core.config import DocumentLimits
from dxts.core.deadlines import checkpoint
from dxts.core.errors import DxtsError
from dxts.cwl.bundle import Bundle as Bundle
from dxts.cwl.bundle import BundleEscape as BundleEscape
from dxts.cwl.bundle import normalise_path as normalise_path
from dxts.cwl.bundle import refusal
from dxts.cwl.limits import AbandonableText, DocumentRefused, yaml_problem
from dxts.cwl.problems import Kind, Problem, error, join

CWL_VERSION = "v1.2"
DIRAC_NAMESPACE = "https://diracgrid.org/cwl#"
FEEDER_FIELD = DIRAC_NAMESPACE + "Feeder"
BUNDLE_ROOT = "file:///dxts-bundle/"
DEFAULT_GRAPH_ENTRY = "main"

_REFERENCE = re.compile(
    r"^proc:(?:sha256-(?P<hex>[0-9a-f]{64})"
    r"|(?P<name>[A-Za-z0-9][A-Za-z0-9._/-]*)@(?P<version>[A-Za-z0-9][A-Za-z0-9._+-]*))$"
)


@dataclass(frozen=True)
class ProcessReference:
    """`proc:sha256-<hex>` (process_id set) or `proc:<name>@<version>` (name, version set)."""

    text: str
    process_id: bytes | None = None
    name: str | None = None
    version: str | None = None


def parse_reference(text: str) -> ProcessReference | None:
    """The reference `text` spells, None if it is not a `proc:` reference at all.

    Raises ValueError for a `proc:` string of neither form.
    """
    if not text.startswith("proc:"):
        return None
    match = _REFERENCE.match(text)
    if match is None:
        raise ValueError(
            f"{text!r} is not a process reference: write proc:sha256-<64 lowercase hex digits> "
            "or proc:<name>@<version>"
        )
    if match["hex"]:
        return ProcessReference(text, process_id=bytes.fromhex(match["hex"]))
    return ProcessReference(text, name=match["name"], version=match["version"])


def reference_for(process_id: bytes) -> str:
    """The canonical reference to a stored process: what stored bodies and StrippedSpec carry."""
    return f"proc:sha256-{process_id.hex()}"


@dataclass(eq=False)
class ProcessNode:
    """One process of a step's tree: a body loaded from the submission, or a stored reference.

    `runs` pairs each `run` site inside `body` (a key path into it) with the child it names;
    compilation replaces each site by the child's reference and hashes bottom-up.
    """

    location: str
    body: dict[str, Any] | None = None
    process_class: str | None = None
    reference: ProcessReference | None = None
    runs: list[tuple[tuple[str | int, ...], ProcessNode]] = field(default_factory=list)


@dataclass(frozen=True)
class WorkflowInput:
    id: str
    feeder: Any  # the dirac:Feeder extension field as written, None without one


@dataclass(frozen=True)
class StepInput:
    id: str
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Hint:
    cls: str  # normalised: "dirac:Transformation" for any spelling of the dirac namespace
    body: dict[str, Any]  # without its `class`
    path: str  # where it is in the document, e.g. "steps.merge.hints.dirac:Transformation"


@dataclass(frozen=True)
class Step:
    id: str
    label: str | None
    doc: str | None
    inputs: tuple[StepInput, ...]
    outputs: tuple[str, ...]
    hints: tuple[Hint, ...]
    scatter: bool
    when: bool
    process: ProcessNode | None


@dataclass(frozen=True)
class WorkflowOutput:
    id: str
    sources: tuple[str, ...]


@dataclass
class LoadedDocument:
    """The top-level document: its typed structure with local ids, and the plain data."""

    raw: dict[str, Any]
    process_class: str
    id: str | None
    label: str | None
    doc: str | None
    hints: tuple[Hint, ...]
    inputs: tuple[WorkflowInput, ...]
    steps: tuple[Step, ...]
    outputs: tuple[WorkflowOutput, ...]
    run_sites: list[tuple[tuple[str | int, ...], ProcessNode]]

    def hint(self, cls: str) -> Hint | None:
        return next((h for h in self.hints if h.cls == cls), None)

    def processes(self) -> Iterator[ProcessNode]:
        """Every distinct process node, children before parents."""
        seen: set[int] = set()

        def visit(node: ProcessNode) -> Iterator[ProcessNode]:
            if id(node) in seen:
                return
            seen.add(id(node))
            for _, child in node.runs:
                yield from visit(child)
            yield node

        for _, node in self.run_sites:
            yield from visit(node)


class _BundleFetcher(Fetcher):
    """Serves `$import`/`$include` from the bundle; refuses every other location."""

    schemes = ["file", "proc"]

    def __init__(self, bundle: Bundle, serve: Callable[[str], str | None]) -> None:
        self.bundle = bundle
        self._serve = serve
        self.refused: DocumentRefused | None = None  # why the last refused fetch was refused

    def _path(self, url: str) -> str:
        if not url.startswith(BUNDLE_ROOT):
            raise ValidationException(f"{url} is outside the submitted bundle; dxts never fetches")
        return urlsplit(url).path.removeprefix(urlsplit(BUNDLE_ROOT).path)

    def fetch_text(self, url: str, content_types: list[str] | None = None) -> str:
        try:
            text = self._serve(self._path(url))
        except DocumentRefused as refused:
            self.refused = refused
            raise ValidationException(str(refused)) from None
        if text is None:
            raise ValidationException(f"{url.removeprefix(BUNDLE_ROOT)} is not in the bundle")
        return text

    def check_exists(self, url: str) -> bool:
        return url.startswith(BUNDLE_ROOT) and self.bundle.has(self._path(url))

    def urljoin(self, base_url: str, url: str) -> str:
        if urlsplit(url).scheme:
            return url
        base = urlsplit(base_url).path.removeprefix(urlsplit(BUNDLE_ROOT).path)
        path, _, fragment = url.partition("#")
        try:
            target = normalise_path(base, path) if path else base
        except BundleEscape:
            return url  # reported by the loader, which resolves `run` itself; never read
        return f"{BUNDLE_ROOT}{target}" + (f"#{fragment}" if fragment else "")


UPGRADABLE_VERSIONS = ("v1.0", "v1.1")
_RUN_MARK = "#dxts-upgrade"  # the upgrader leaves a `run` with a fragment alone


def upgraded(raw: dict[str, Any]) -> dict[str, Any]:
    """A CWL v1.0 or v1.1 document as CWL v1.2, by the upstream upgrader (cwl-upgrader), which
    also makes the older versions' defaults explicit (a v1.0 tool gets network access and deep
    listings); any other document as it is. Each `run` file of the bundle is upgraded when it
    is loaded, so the upgrader is kept from reading them itself (it would read them from disk).
    Raises ValueError when the upgrader cannot read the document."""
    if raw.get("cwlVersion") not in UPGRADABLE_VERSIONS:
        return raw
    from cwlupgrader.main import upgrade_document  # a large import, for old documents only

    with tempfile.TemporaryDirectory() as scratch:
        try:
            document = upgrade_document(_commented(_mark_runs(raw, True)), scratch, "v1.2")
        except Exception as failure:  # the upgrader's own error for a malformed document
            raise ValueError(f"cwl-upgrader cannot upgrade it: {failure}") from None
    return _mark_runs(plain(document), False)


def _mark_runs(value: Any, mark: bool) -> Any:
    if isinstance(value, list):
        return [_mark_runs(item, mark) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: _mark_runs(item, mark) for key, item in value.items()}
    run = out.get("run")
    if isinstance(run, str) and mark and "#" not in run:
        out["run"] = run + _RUN_MARK
    elif isinstance(run, str) and not mark:
        out["run"] = run.removesuffix(_RUN_MARK)
    return out


def _commented(value: Any) -> Any:
    """Plain data as ruamel's containers, which the upgrader matches on."""
    if isinstance(value, dict):
        return CommentedMap((key, _commented(item)) for key, item in value.items())
    if isinstance(value, list):
        return CommentedSeq(_commented(item) for item in value)
    return value


def _bundle_path(base_file: str, reference: str) -> str | None:
    """The bundle path a relative reference in `base_file` names; None for a URL, an absolute
    path, an expression or a path out of the bundle (none of which the bundle can give)."""
    name = reference.partition("#")[0]
    if not name or "$(" in name or "${" in name or urlsplit(name).scheme:
        return None
    try:  # a colon written escaped (`A%3AB`) is part of the name once unescaped
        return normalise_path(base_file, unquote(name), uri=False)
    except BundleEscape:
        return None


def _listing(tree: dict[str, Any]) -> list[dict[str, Any]]:
    """A Directory literal's listing of the tree {name: text or sub-tree}."""
    return [
        {"class": "File", "basename": name, "contents": item}
        if isinstance(item, str)
        else {"class": "Directory", "basename": name, "listing": _listing(item)}
        for name, item in sorted(tree.items())
    ]


def plain(value: Any) -> Any:
    """ruamel's commented containers and scalars as plain dicts, lists, strings and numbers
    (what is hashed and stored): the canonical JSON takes its fast path, which writes a long
    past 2**53 exactly, only for JSON's own types."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, ScalarBoolean):
        return bool(value)
    for kind in (str, int, float):
        if isinstance(value, kind) and type(value) is not kind and type(value) is not bool:
            return kind(value)
    return value


def _imports(value: Any) -> Iterator[str]:
    """Every `$import` reference in plain data (its depth is within the limits)."""
    if isinstance(value, dict):
        reference = value.get("$import")
        if isinstance(reference, str):
            yield reference
        for item in value.values():
            yield from _imports(item)
    elif isinstance(value, list):
        for item in value:
            yield from _imports(item)


def _fragment(uri: str) -> str:
    return uri.partition("#")[2]


def _local(uri: str, scope: str) -> str:
    """A document-local id: the fragment, without the enclosing process's own fragment."""
    frag = _fragment(uri) or uri.rsplit("/", 1)[-1]
    return frag.removeprefix(scope + "/") if scope else frag


def _as_tuple(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def _raw_entries(raw: Any, key: str, id_field: str = "id") -> dict[str, tuple[str | int, Any]]:
    """A map-or-list field (`steps`, `inputs`...) as id → (key in the field, entry)."""
    value = raw.get(key) if isinstance(raw, dict) else None
    out: dict[str, tuple[str | int, Any]] = {}
    if isinstance(value, dict):
        for name, entry in value.items():
            out[name] = (name, entry)
    elif isinstance(value, list):
        for index, entry in enumerate(value):
            if isinstance(entry, dict) and isinstance(entry.get(id_field), str):
                out[entry[id_field].lstrip("#").rsplit("/", 1)[-1]] = (index, entry)
    return out


def _uses_prefix(value: Any, prefixes: set[str]) -> bool:
    if isinstance(value, dict):
        return any(
            (isinstance(k, str) and k.split(":", 1)[0] in prefixes and ":" in k)
            or (k == "class" and isinstance(v, str) and v.split(":", 1)[0] in prefixes)
            or _uses_prefix(v, prefixes)
            for k, v in value.items()
        )
    if isinstance(value, list):
        return any(_uses_prefix(v, prefixes) for v in value)
    return False


def standalone(body: dict[str, Any], parent: dict[str, Any]) -> dict[str, Any]:
    """An inline or graph-entry body made a document of its own: the parent's cwlVersion, and
    its `$namespaces` when the body uses one of their prefixes."""
    out = dict(body)
    if "cwlVersion" not in out and "cwlVersion" in parent:
        out["cwlVersion"] = parent["cwlVersion"]
    namespaces = parent.get("$namespaces")
    if (
        "$namespaces" not in out
        and isinstance(namespaces, dict)
        and _uses_prefix(body, set(namespaces))
    ):
        out["$namespaces"] = namespaces
        for key in ("$schemas", SCHEMAS_FIELD):  # the ontologies the prefixes are read in
            if key in parent and key not in out:
                out[key] = parent[key]
    return out


class _Loader:
    def __init__(self, bundle: Bundle, limits: DocumentLimits) -> None:
        self.bundle = bundle
        self.limits = limits
        self.fetcher = _BundleFetcher(bundle, self.serve)
        self.problems: list[Problem] = []
        self._nodes_loaded = 0
        self._parsed_files: dict[str, Any] = {}
        self._missing: set[str] = set()  # paths the bundle does not have
        self._texts: dict[str, Any] = {}
        self._nodes: dict[tuple[str, str], ProcessNode] = {}
        self._stack: list[tuple[str, str]] = []

    # -- reading -----------------------------------------------------------------------------

    def serve(self, path: str) -> str | None:
        """The text of `path` for a YAML loader (ours or cwl-utils'), within the limits."""
        checkpoint(f"reading {path}")
        return self.bundle.read(path, self.limits)

    def _parsed(self, path: str) -> Any:
        """The plain data of `path` (None if the bundle has no such file), parsed once.

        Raises DocumentRefused and YAMLError."""
        if path not in self._parsed_files:
            text = self.serve(path)
            if text is None:
                self._missing.add(path)
                self._parsed_files[path] = None
            else:
                loaded = yaml_no_ts().load(AbandonableText(text, path))
                checkpoint(f"reading {path}")
                self._parsed_files[path] = plain(loaded)
        return self._parsed_files[path]

    def _expanded(self, path: str, visiting: frozenset[str] = frozenset()) -> int:
        """The nodes of `path` once every `$import` in it is replaced by the file it names, as
        cwl-utils builds it: a file imported a thousand times counts a thousand times."""
        total = self.bundle.nodes(path)
        for reference in _imports(self._parsed(path)):
            try:
                target = normalise_path(path, reference.partition("#")[0])
            except BundleEscape:
                continue  # refused by the fetcher when cwl-utils gets to it
            if target in visiting or target == path:
                continue
            try:
                if self._parsed(target) is not None:
                    total += self._expanded(target, visiting | {path})
            except YAMLError:
                continue  # reported by cwl-utils, which reads it too
            if total > self.limits.max_bundle_nodes:
                break
        return total

    def _count(self, path: str) -> None:
        """Add the file's expanded nodes to the bundle's; refuse past `max_bundle_nodes`."""
        self._nodes_loaded += self._expanded(path)
        if self._nodes_loaded > self.limits.max_bundle_nodes:
            raise DocumentRefused(
                path,
                f"the bundle's files add up to {self._nodes_loaded} nodes ($imports expanded), "
                f"more than the limit document_limits.max_bundle_nodes = "
                f"{self.limits.max_bundle_nodes}",
                limit="max_bundle_nodes",
            )

    def _raw_file(self, path: str, where: str) -> Any:
        if path in self._texts:
            return self._texts[path]
        raw = None
        try:
            raw = self._parsed(path)
            if path in self._missing:
                self.problems.append(
                    error(Kind.UNRESOLVED_RUN, where, f"{path} is not in the submitted bundle")
                )
            else:
                self._count(path)
                if not isinstance(raw, dict):
                    what = "is empty" if raw is None else "is not a CWL document (not a mapping)"
                    self.problems.append(error(Kind.INVALID_CWL, where, f"{path}: {what}"))
                    raw = None
                else:
                    raw = upgraded(self._standing_alone(raw, path, frozenset({path})))
                    raw = self._with_schemas(raw, path)
        except DocumentRefused as refused:
            self.problems.append(refusal(refused, where))
            raw = None
        except YAMLError as exc:
            self.problems.append(error(Kind.INVALID_CWL, where, f"{path}: {yaml_problem(exc)}"))
            raw = None
        except ValueError as exc:  # an old document the upgrader cannot read
            at = join(where, "cwlVersion") if path == self.bundle.main else where
            self.problems.append(error(Kind.INVALID_CWL, at, f"{path}: {exc}"))
            raw = None
        self._texts[path] = raw
        return raw

    def _standing_alone(self, value: Any, path: str, visiting: frozenset[str]) -> Any:
        """`value`, read from the bundle file `path`, with every file it names taken in, so
        that it means the same wherever it is stored and run: an `$include` becomes the text
        it names, an `$import` the data it names (itself standing alone), and a File or
        Directory at a relative `location` (a default, an InitialWorkDir entry) a literal of
        the same name and contents. A name the bundle does not have is left as written (the
        runner reports it as it would have beside the original), and so is a file that is
        not UTF-8 text, which a literal cannot hold."""
        if isinstance(value, list):
            return [self._standing_alone(item, path, visiting) for item in value]
        if not isinstance(value, dict):
            return value
        if set(value) == {"$include"} and isinstance(value["$include"], str):
            target = _bundle_path(path, value["$include"])
            text = self._data(target) if target else None
            return value if text is None else text
        if set(value) == {"$import"} and isinstance(value["$import"], str):
            target = _bundle_path(path, value["$import"])
            if target is None or target in visiting or self.serve(target) is None:
                return value
            return self._standing_alone(self._parsed(target), target, visiting | {target})
        out = {key: self._standing_alone(item, path, visiting) for key, item in value.items()}
        if value.get("class") in ("File", "Directory"):
            reference = value.get("location", value.get("path"))
            target = _bundle_path(path, reference) if isinstance(reference, str) else None
            literal = self._literal(value["class"], target) if target else None
            if literal is not None:
                for key in ("location", "path"):
                    out.pop(key, None)
                out.setdefault("basename", posixpath.basename(target or ""))
                out.update(literal)
        return out

    def _with_schemas(self, raw: dict[str, Any], path: str) -> dict[str, Any]:
        """`raw` carrying the text of each ontology its `$schemas` names that the bundle has
        (in SCHEMAS_FIELD, by the name as written), so that formats are checked against them
        wherever it runs; a name the bundle lacks is left to the runner, as written."""
        names = raw.get("$schemas")
        texts = {}
        for name in [names] if isinstance(names, str) else names or []:
            target = _bundle_path(path, name) if isinstance(name, str) else None
            text = self._data(target) if target else None
            if text is not None:
                texts[name] = text
        return {**raw, SCHEMAS_FIELD: texts} if texts else raw

    def _literal(self, cls: str, target: str) -> dict[str, Any] | None:
        """The contents of a File (`contents`) or Directory (`listing`) at the bundle path
        `target`, or None when the bundle cannot give them."""
        if cls == "File":
            text = self._data(target)
            return None if text is None else {"contents": text}
        files = self.bundle.listing(target)
        if not files:
            return None
        root: dict[str, Any] = {}
        for file in files:
            text = self._data(file)
            if text is None:
                return None
            *folders, name = posixpath.relpath(file, target).split("/")
            node = root
            for folder in folders:
                node = node.setdefault(folder, {})
            node[name] = text
        return {"listing": _listing(root)}

    def _data(self, path: str) -> str | None:
        """A data file's text (None: not in the bundle, or not UTF-8)."""
        checkpoint(f"reading {path}")
        try:
            return self.bundle.read_data(path, self.limits)
        except DocumentRefused as refused:
            if refused.limit:
                raise
            return None

    def _entry(self, path: str, fragment: str, where: str) -> dict[str, Any] | None:
        """The document `path#fragment` names, standalone (a `$graph` entry gets the header)."""
        raw = self._raw_file(path, where)
        if raw is None:
            return None
        if raw.get("cwlVersion") != CWL_VERSION:
            self.problems.append(
                error(
                    Kind.INVALID_CWL,
                    join(where, "cwlVersion") if path == self.bundle.main else where,
                    f"{path}: cwlVersion is {raw.get('cwlVersion')!r}; dxts runs CWL {CWL_VERSION}",
                )
            )
            return None
        if "$graph" not in raw:
            if fragment and raw.get("id", "").lstrip("#") != fragment:
                self.problems.append(
                    error(Kind.UNRESOLVED_RUN, where, f"{path} has no process #{fragment}")
                )
                return None
            return raw
        wanted = fragment or DEFAULT_GRAPH_ENTRY
        for entry in raw["$graph"] if isinstance(raw["$graph"], list) else []:
            if isinstance(entry, dict) and str(entry.get("id", "")).lstrip("#") == wanted:
                header = {k: v for k, v in raw.items() if k != "$graph"}
                return standalone(entry, header)
        self.problems.append(
            error(Kind.UNRESOLVED_RUN, where, f"the packed document {path} has no #{wanted} entry")
        )
        return None

    def _typed(self, raw: dict[str, Any], path: str, where: str) -> Any:
        checkpoint(f"loading {path}")
        uri = BUNDLE_ROOT + path
        options = cwl.LoadingOptions(fetcher=self.fetcher, fileuri=uri, no_link_check=True)
        self.fetcher.refused = None
        try:
            return cwl.load_document_by_yaml(copy.deepcopy(raw), uri, options)
        except ValidationException as exc:
            if self.fetcher.refused is not None:
                self.problems.append(refusal(self.fetcher.refused, where))
                return None
            message = str(exc).replace(BUNDLE_ROOT, "")
            self.problems.append(error(Kind.INVALID_CWL, where, f"{path}: {message}"))
            return None
        except DxtsError:
            raise  # the deadline, from a checkpoint inside a fetch
        except Exception as exc:
            # cwl-utils trips over some malformed documents (a `$namespaces` prefix bound to
            # null is a TypeError): still the document's fault, never an internal error.
            self.problems.append(
                error(
                    Kind.INVALID_CWL,
                    where,
                    f"{path}: not CWL cwl-utils can read ({type(exc).__name__}: {exc})",
                )
            )
            return None

    # -- processes ---------------------------------------------------------------------------

    def main(self) -> tuple[dict[str, Any], Any] | None:
        refused = self.bundle.problems(self.limits)
        if refused:
            self.problems.extend(refused)
            return None
        path, _, fragment = self.bundle.main.partition("#")
        try:
            path = normalise_path("", path, uri=False)
        except BundleEscape as exc:
            self.problems.append(error(Kind.UNRESOLVED_RUN, "", str(exc)))
            return None
        self.bundle.main = path
        raw = self._entry(path, fragment, "")
        if raw is None:
            return None
        typed = self._typed(raw, path, "")
        return None if typed is None else (raw, typed)

    def node(
        self, typed: Any, body: dict[str, Any], path: str, location: str, where: str
    ) -> ProcessNode:
        node = ProcessNode(location, body=body, process_class=getattr(typed, "class_", None))
        node.runs = self.run_sites(typed, body, path, where)
        return node

    def run_sites(
        self, typed: Any, body: dict[str, Any], path: str, where: str
    ) -> list[tuple[tuple[str | int, ...], ProcessNode]]:
        if getattr(typed, "class_", None) != "Workflow":
            return []
        raw_steps = _raw_entries(body, "steps")
        sites: list[tuple[tuple[str | int, ...], ProcessNode]] = []
        for step in typed.steps or []:
            # An inline process has a blank-node id, so scope by the step id's last part.
            step_id = _fragment(step.id).rsplit("/", 1)[-1]
            if step_id not in raw_steps:
                continue
            key, raw_step = raw_steps[step_id]
            step_where = join(where, "steps", step_id, "run")
            child = self.run(step.run, raw_step.get("run"), body, path, step_where)
            if child is not None:
                sites.append((("steps", key, "run"), child))
        return sites

    def run(
        self, typed_run: Any, raw_run: Any, parent: dict[str, Any], path: str, where: str
    ) -> ProcessNode | None:
        if isinstance(raw_run, dict):
            body = standalone(raw_run, parent)
            return self.node(typed_run, body, path, f"{path}#{where}", where)
        if not isinstance(raw_run, str):
            self.problems.append(
                error(Kind.INVALID_CWL, where, "run must be a process or a string")
            )
            return None
        try:
            reference = parse_reference(raw_run)
        except ValueError as exc:
            self.problems.append(error(Kind.UNRESOLVED_RUN, where, str(exc)))
            return None
        if reference is not None:
            return ProcessNode(where, reference=reference)
        target, _, fragment = raw_run.partition("#")
        try:
            target = normalise_path(path, target) if target else path
        except BundleEscape as exc:
            self.problems.append(
                error(Kind.UNRESOLVED_RUN, where, f"{exc}: dxts reads only the submitted bundle")
            )
            return None
        return self.file(target, fragment, where)

    def file(self, path: str, fragment: str, where: str) -> ProcessNode | None:
        key = (path, fragment)
        if key in self._nodes:
            return self._nodes[key]
        location = f"{path}#{fragment}" if fragment else path
        if key in self._stack:
            chain = " → ".join(f"{p}#{f}" if f else p for p, f in [*self._stack, key])
            self.problems.append(
                error(Kind.UNRESOLVED_RUN, where, f"processes run each other: {chain}")
            )
            return None
        raw = self._entry(path, fragment, where)
        typed = None if raw is None else self._typed(raw, path, where)
        if raw is None or typed is None:
            return None
        self._stack.append(key)
        try:
            node = self.node(typed, raw, path, location, where)
        finally:
            self._stack.pop()
        self._nodes[key] = node
        return node


def _namespaces(raw: dict[str, Any]) -> dict[str, str]:
    value = raw.get("$namespaces")
    return {k: v for k, v in value.items() if isinstance(v, str)} if isinstance(value, dict) else {}


def normalise_class(cls: str, namespaces: Mapping[str, str]) -> str:
    """Any spelling of a dirac class (`dirac:X`, `d:X` with d bound to the namespace, or the
    full URI) as `dirac:X`; other classes unchanged."""
    prefix, sep, rest = cls.partition(":")
    if sep and prefix in namespaces:
        cls = namespaces[prefix] + rest
    if cls.startswith(DIRAC_NAMESPACE):
        return "dirac:" + cls.removeprefix(DIRAC_NAMESPACE)
    return cls


def _hints(hints: Any, namespaces: Mapping[str, str], where: str) -> tuple[Hint, ...]:
    out = []
    for hint in hints or []:
        if isinstance(hint, dict) and isinstance(hint.get("class"), str):
            cls = normalise_class(hint["class"], namespaces)
            body = {k: v for k, v in hint.items() if k != "class"}
            out.append(Hint(cls, body, join(where, "hints", cls)))
    return tuple(out)


def load_document(
    bundle: Bundle, limits: DocumentLimits | None = None
) -> tuple[LoadedDocument | None, list[Problem]]:
    """Load the bundle's main document and every process it runs, and every loading problem.

    The document is None when the main document cannot be read as CWL at all; a step whose
    process cannot be read has `process` None (and a problem saying why). Raises
    DeadlineExceeded when the current deadline passes or the work is abandoned.
    """
    loader = _Loader(bundle, limits or DocumentLimits())
    loaded = loader.main()
    if loaded is None:
        return None, loader.problems
    raw, typed = loaded
    namespaces = _namespaces(raw)
    scope = _fragment(typed.id or "")
    process_class = typed.class_
    run_sites = loader.run_sites(typed, raw, bundle.main, "")
    by_step = {site[1]: node for site, node in run_sites}
    raw_steps = _raw_entries(raw, "steps")
    steps = []
    for step in getattr(typed, "steps", None) or []:
        step_id = _local(step.id, scope)
        step_scope = f"{scope}/{step_id}" if scope else step_id
        key = raw_steps.get(step_id, (None, None))[0]
        steps.append(
            Step(
                id=step_id,
                label=step.label,
                doc=step.doc if isinstance(step.doc, str) else None,
                inputs=tuple(
                    StepInput(
                        _local(i.id, step_scope),
                        tuple(_local(s, scope) for s in _as_tuple(i.source)),
                    )
                    for i in step.in_ or []
                ),
                outputs=tuple(
                    _local(o if isinstance(o, str) else o.id, step_scope) for o in step.out or []
                ),
                hints=_hints(step.hints, namespaces, join("steps", step_id)),
                scatter=bool(step.scatter),
                when=step.when is not None,
                process=by_step.get(key) if key is not None else None,
            )
        )
    inputs = tuple(
        WorkflowInput(_local(i.id, scope), (i.extension_fields or {}).get(FEEDER_FIELD))
        for i in typed.inputs or []
    )
    outputs = tuple(
        WorkflowOutput(
            _local(o.id, scope),
            tuple(_local(s, scope) for s in _as_tuple(getattr(o, "outputSource", None))),
        )
        for o in typed.outputs or []
    )
    document = LoadedDocument(
        raw=raw,
        process_class=process_class,
        id=raw["id"].lstrip("#") or None if isinstance(raw.get("id"), str) else None,
        label=typed.label,
        doc=typed.doc if isinstance(typed.doc, str) else None,
        hints=_hints(typed.hints, namespaces, ""),
        inputs=inputs,
        steps=tuple(steps),
        outputs=outputs,
        run_sites=run_sites,
    )
    return document, loader.problems
