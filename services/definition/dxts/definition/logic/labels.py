"""Labels: the part of a workgraph's or transformation's annotations that users write.

Annotations also hold what compilation and the operators record (the document's id and label,
a member's initial state and `after`, the halted mark); those are the system's. Users set
labels at submission and change them with a JSON merge patch (RFC 7396) on `labels` only: a
string sets a label, null removes it; each change is one kernel command (UpdateAnnotations).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dxts.core.db import Database, Transaction, db_now
from dxts.core.errors import FieldViolation, InvalidArgument
from dxts.core.kernel.commands import Result
from dxts.definition.logic.authorise import Caller
from dxts.definition.logic.commands import transformation_command, workgraph_command
from dxts.definition.logic.locked import LockedTransformation, LockedWorkgraph
from dxts.definition.store import transformations as transformations_db
from dxts.definition.store import workgraphs as workgraphs_db

LABELS = "labels"
KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$")
VALUE_LENGTH = 256


def check_labels(labels: Mapping[str, Any], field: str = "labels") -> dict[str, str]:
    """Labels as given, or InvalidArgument naming every bad key and value."""
    problems = []
    for key, value in labels.items():
        if not isinstance(key, str) or not KEY.match(key):
            problems.append(
                FieldViolation(
                    f"{field}.{key}",
                    "a label key is 1 to 63 of A-Z a-z 0-9 . _ / -, starting alphanumeric",
                )
            )
        elif not isinstance(value, str) or len(value) > VALUE_LENGTH:
            problems.append(
                FieldViolation(
                    f"{field}.{key}",
                    f"a label value is a string of at most {VALUE_LENGTH} characters",
                )
            )
    if problems:
        raise InvalidArgument(problems)
    return dict(labels)


def apply_patch(annotations: Mapping[str, Any] | None, patch: Any) -> dict[str, Any]:
    """The annotations with `patch` merged into their labels."""
    if not isinstance(patch, dict) or not patch:
        raise InvalidArgument("a non-empty JSON object of labels", field="merge_patch_json")
    current = dict(annotations or {})
    labels = dict(current.get(LABELS) or {})
    check_labels({k: v for k, v in patch.items() if v is not None}, "merge_patch_json")
    for key, value in patch.items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    if labels:
        current[LABELS] = labels
    else:
        current.pop(LABELS, None)
    return current


async def update_labels(
    database: Database,
    caller: Caller,
    patch: Any,
    *,
    workgraph_id: bytes | None = None,
    transformation_id: bytes | None = None,
    request_id: str = "",
) -> dict[str, Any]:
    """Merge `patch` into the labels of one workgraph or transformation (whoever may steer
    it), as one kernel command; returns the annotations as stored (a retry: as the first
    application stored them)."""

    async def to_workgraph(conn: Transaction, workgraph: LockedWorkgraph) -> Result:
        annotations = apply_patch(workgraph.annotations, patch)
        await workgraphs_db.set_workgraph_annotations(
            conn, workgraph.workgraph_id, annotations, await db_now(conn)
        )
        return {"patch": patch, "annotations": annotations}

    async def to_transformation(conn: Transaction, locked: LockedTransformation) -> Result:
        annotations = apply_patch(locked.annotations, patch)
        await transformations_db.set_transformation_annotations(
            conn, locked.transformation_id, annotations, await db_now(conn)
        )
        return {"patch": patch, "annotations": annotations}

    if workgraph_id is not None:
        result = await workgraph_command(
            database, caller, workgraph_id, to_workgraph, request_id=request_id, reason=""
        )
    else:
        assert transformation_id is not None
        result = await transformation_command(
            database,
            caller,
            transformation_id,
            to_transformation,
            request_id=request_id,
            reason="",
        )
    return dict(result["annotations"])
