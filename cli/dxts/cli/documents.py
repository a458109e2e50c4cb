"""A document on disk as the bundle the services take: the document and every file its `run`
fields name (relative paths, followed recursively), read from under its directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dxts.core.errors import InvalidArgument
from dxts.v1 import common_pb2


def _runs(node: Any) -> list[str]:
    """Every relative `run` path in a parsed document (`proc:` references stay references)."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "run" and isinstance(value, str) and not value.startswith(("proc:", "#")):
                found.append(value)
            else:
                found.extend(_runs(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(_runs(item))
    return found


def yaml_problem(error: yaml.YAMLError) -> str:
    """A YAML syntax error in one line that still says where: "line 4, column 9: not YAML or
    JSON: mapping values are not allowed here" (PyYAML's own text spans several lines, with
    the offending line drawn under a caret)."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        return (
            f"line {mark.line + 1}, column {mark.column + 1}: not YAML or JSON: "
            f"{error.problem or error.context or 'syntax error'}"
        )
    return f"not YAML or JSON: {' '.join(str(error).split())}"


def bundle(document: Path, root: Path | None = None) -> common_pb2.DocumentBundle:
    """The bundle of `document`, its paths relative to `root` (default: its directory)."""
    base = (root or document.parent).resolve()
    try:
        main = document.resolve().relative_to(base).as_posix()
    except ValueError:
        raise InvalidArgument(f"{document} is not inside {base}", field="document") from None
    # Here, not at the top: the CWL tooling is a large import that only `submit` needs.
    from dxts.cwl.loading import BundleEscape, normalise_path

    files: dict[str, bytes] = {}
    pending = [main]
    while pending:
        path = pending.pop()
        if path in files:
            continue
        target = base / path
        try:
            content = target.read_bytes()
        except FileNotFoundError:
            raise InvalidArgument(f"no such file: {target}", field=path) from None
        except OSError as error:
            raise InvalidArgument(f"cannot read {target}: {error.strerror}", field=path) from None
        files[path] = content
        try:
            parsed = yaml.safe_load(content)
        except yaml.YAMLError as error:
            raise InvalidArgument(yaml_problem(error), field=path) from None
        for reference in _runs(parsed):
            try:
                pending.append(normalise_path(path, reference))
            except BundleEscape as error:
                raise InvalidArgument(str(error), field=path) from None
    return common_pb2.DocumentBundle(main_path=main, files=files)
