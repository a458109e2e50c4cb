"""Refusing at submission what a read-only storage element would refuse later: a data member
declared to replicate to one, or to remove replicas from one (`DXTS_STORAGE_ENDPOINTS`, an SE
named `NAME:ro`; docs/storage.md). The data adaptor refuses each such file anyway; found here,
the production manager hears it before anything runs, with the path of the declaration. A
removal of whole files (no `storage`) is not judged here: where their replicas are is known
only when the files are."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from dxts.cwl.analysis import Analysis
from dxts.cwl.problems import Kind, Problem, error


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def read_only_problems(analysis: Analysis, read_only: Collection[str]) -> list[Problem]:
    """An error for each read-only SE a data member would write to or remove from, by its
    declaration or its DataManagement packer's `operation` argument."""
    if not read_only:
        return []
    problems: list[Problem] = []
    for member in analysis.members.values():
        if member.kind != "Data":
            continue
        packer = member.hint.get("packer")
        args = packer.get("args") if isinstance(packer, dict) else None
        override = args.get("operation") if isinstance(args, dict) else None
        for where, declared in (
            (member.path, member.hint),
            (f"{member.path}.packer.args.operation", override),
        ):
            if not isinstance(declared, dict):
                continue
            replicate = declared.get("operation") == "replicate"
            field, verb = (
                ("destination", "replicated to") if replicate else ("storage", "removed from")
            )
            problems.extend(
                error(
                    Kind.POLICY,
                    f"{where}.{field}",
                    f"{se} is a read-only storage element: nothing is {verb} it",
                )
                for se in _names(declared.get(field))
                if se in read_only
            )
    return problems
