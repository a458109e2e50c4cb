"""A document on disk as the bundle the services take: the document and every file its `run`
fields name (relative paths, followed recursively), read from under its directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dxts.core.errors import InvalidArgument
from dxts.cwl.loading import BundleEscape, normalise_path
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


def bundle(document: Path, root: Path | None = None) -> common_pb2.DocumentBundle:
    """The bundle of `document`, its paths relative to `root` (default: its directory)."""
    base = (root or document.parent).resolve()
    try:
        main = document.resolve().relative_to(base).as_posix()
    except ValueError:
        raise InvalidArgument(f"{document} is not inside {base}", field="document") from None
    files: dict[str, bytes] = {}
    pending = [main]
    while pending:
        path = pending.pop()
        if path in files:
            continue
        target = base / path
        try:
            content = target.read_bytes()
        except OSError as error:
            raise InvalidArgument(f"cannot read {target}: {error.strerror}", field=path) from None
        files[path] = content
        try:
            parsed = yaml.safe_load(content)
        except yaml.YAMLError as error:
            raise InvalidArgument(f"not YAML or JSON: {error}", field=path) from None
        for reference in _runs(parsed):
            try:
                pending.append(normalise_path(path, reference))
            except BundleEscape as error:
                raise InvalidArgument(str(error), field=path) from None
    return common_pb2.DocumentBundle(main_path=main, files=files)
