"""Problems found in a submitted document: every one of them, each with a kind and a path.

Validation never stops at the first problem: a production manager fixing a document wants the
whole list at once. Each problem names its kind (the vocabulary of docs/cwl.md, plus the loading
kinds below), a dotted path into the document (`steps.merge.in.input-data`) and a message long
enough to act on. Errors refuse the document; warnings are returned with it.

Kinds beyond that list, for documents that cannot be read at all: `invalid-cwl` (not YAML/JSON
or not CWL v1.2 according to cwl-utils), `document-limit` (a file or the bundle crosses one of the
installation's `document_limits`, named in the message), `invalid-bundle` (a file key that is
not a path inside the bundle) and `unresolved-run` (a `run` naming nothing in the
bundle or the store, or escaping the bundle); and `not-a-job`, a user job that is not a
CommandLineTool or Workflow (or is a workgraph); and `policy`, what the installation's policy
does not allow (`dxts.core.policy`: a requirement over its cap, a partition or site off the
allow-list, a sign-off by a role a plain user holds).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from dxts.core.errors import FieldViolation, InvalidArgument


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


class Kind(StrEnum):
    INVALID_CWL = "invalid-cwl"
    UNRESOLVED_RUN = "unresolved-run"
    DOCUMENT_LIMIT = "document-limit"
    INVALID_BUNDLE = "invalid-bundle"
    NOT_A_WORKGRAPH = "not-a-workgraph"
    NOT_A_JOB = "not-a-job"
    BARE_STEP = "bare-step"
    HINT_SCHEMA = "hint-schema"
    INVALID_NAME = "invalid-name"
    UNKNOWN_SOURCE = "unknown-source"
    ORPHAN_OUTPUT = "orphan-output"
    CYCLE = "cycle"
    NO_DRIVING_INPUT = "no-driving-input"
    AMBIGUOUS_DRIVING_INPUT = "ambiguous-driving-input"
    DRIVING_INPUT = "driving-input"
    UNKNOWN_PLUGIN = "unknown-plugin"
    PLUGIN_ARGS = "plugin-args"
    EXPRESSION_TOOL = "expression-tool"
    SCATTER = "scatter"
    WHEN = "when"
    ENDLESS_FEEDER = "endless-feeder"
    POLICY = "policy"


@dataclass(frozen=True)
class Problem:
    severity: Severity
    kind: Kind
    path: str
    message: str
    # (line, column) of the path in the main document as written, 1-based, where known
    # (`dxts.cwl.positions`).
    position: tuple[int, int] | None = None

    def line(self) -> str:
        """The CLI's one-line form: `error  kind  path  message`, then `(line L, column C)`
        when the position is known."""
        text = f"{self.severity.value}  {self.kind.value}  {self.path or '.'}  {self.message}"
        return text + _where(self.position)


def error(kind: Kind, path: str, message: str) -> Problem:
    return Problem(Severity.ERROR, kind, path, message)


def warning(kind: Kind, path: str, message: str) -> Problem:
    return Problem(Severity.WARNING, kind, path, message)


@dataclass(frozen=True)
class DocumentViolation(FieldViolation):
    """A FieldViolation that also carries the problem kind.

    The description starts with the kind (`cycle: ...`) so that a consumer that only knows
    FieldViolation (the gRPC BadRequest mapping) still shows it.
    """

    kind: str = ""


def errors_of(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity is Severity.ERROR]


def raise_for_errors(problems: Iterable[Problem]) -> None:
    """Raise InvalidArgument listing every error, if there is any: each description is
    `kind: message`, then `  (line L, column C)` when the position is known, as `Problem.line`
    ends (a client rebuilding the line from the path and the description prints the same)."""
    found = errors_of(problems)
    if found:
        raise InvalidArgument(
            [
                DocumentViolation(
                    p.path,
                    f"{p.kind.value}: {p.message}{_where(p.position)}",
                    kind=p.kind.value,
                )
                for p in found
            ]
        )


def _where(position: tuple[int, int] | None) -> str:
    return "" if position is None else f"  (line {position[0]}, column {position[1]})"


def join(*parts: str | int) -> str:
    """Dotted document path; list indices are rendered `[n]` on the part before them."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part:
            out = f"{out}.{part}" if out else part
    return out
