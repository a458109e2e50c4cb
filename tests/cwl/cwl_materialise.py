"""Test support: a stored process tree as the files a CWL runner reads, one per process.

Stored bodies reference their children as `proc:sha256-<hex>`; written into one directory, each
reference becomes the sibling file name `<hex>.cwl`, so `cwltool <root hex>.cwl` runs the tree
with nothing fetched from anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dxts.cwl.loading import parse_reference


def _rewrite(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "run" and isinstance(item, str):
                reference = parse_reference(item)
                if reference is not None and reference.process_id is not None:
                    item = f"{reference.process_id.hex()}.cwl"
            out[key] = _rewrite(item)
        return out
    if isinstance(value, list):
        return [_rewrite(item) for item in value]
    return value


def materialise(tree: Mapping[bytes, dict[str, Any]], directory: Path) -> dict[bytes, Path]:
    """Write every process of `tree` into `directory`; returns hash → file."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {}
    for process_id, body in tree.items():
        path = directory / f"{process_id.hex()}.cwl"
        path.write_text(json.dumps(_rewrite(body), indent=1))
        files[process_id] = path
    return files
