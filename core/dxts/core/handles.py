"""Handles, the short names a person types: `wg-42` (a workgraph), `wg-42/Reco` (its member
Reco), `t-7` (a transformation, whatever its workgraph), `p-10293` (a parcel).

Each kind has its own sequence, numbered by the database as the rows are created (the handle
tables of `dxts.core.schema.handles`), so a handle is short while the installation is young and
grows by a digit per tenfold, never reused and never changed. The full UUID stays the contract's
id; a handle is another name for it, resolved where the data lives (`ResolveName`).
"""

from __future__ import annotations

import re
from typing import Literal

Kind = Literal["workgraph", "transformation", "parcel"]

PREFIXES: dict[Kind, str] = {"workgraph": "wg", "transformation": "t", "parcel": "p"}
_HANDLE = re.compile(r"(wg|t|p)-([0-9]{1,18})", re.IGNORECASE)
_KINDS: dict[str, Kind] = {prefix: kind for kind, prefix in PREFIXES.items()}


def handle(kind: Kind, number: int) -> str:
    """`wg-42` for workgraph number 42."""
    return f"{PREFIXES[kind]}-{number}"


def member_handle(workgraph_number: int | None, step: str, number: int | None) -> str:
    """A member's handle: `wg-42/Reco` in a workgraph, `t-7` standalone; "" when unnumbered."""
    if workgraph_number is not None and step:
        return f"{handle('workgraph', workgraph_number)}/{step}"
    return handle("transformation", number) if number is not None else ""


def parse(text: str) -> tuple[Kind, int] | None:
    """(kind, number) of a handle (`WG-42` as well as `wg-42`); None for anything else."""
    found = _HANDLE.fullmatch(text.strip())
    if found is None:
        return None
    return _KINDS[found.group(1).lower()], int(found.group(2))
