"""The status report (docs/cwl.md): what a compute parcel's process says became of each input.

A process declares its status report by having an output with the id `status-report` (the local
adaptor's convention, `dxts.backends.runner.cwl.STATUS_REPORT_OUTPUT`): for a transformation
that is a TransformationOutputs row of that name. The adaptor returns the report's JSON as the
outcome's `status_report_json`, keyed by input id:

    {"<input id>": {"action": "SUCCESS" | "FAILURE" | "NOT_TRIED"},
     "<input id>": {"action": "SPLIT", "SUCCESS": [child, ...], "FAILURE": [child, ...]}}

A child has the shape a feeder yields: `lfn` with `lfn_size`, and/or `descriptor` (the upstream
example calls it `data`; either is accepted, not both). A key set to null counts as absent, as
the null adaptor writes them. Anything else — unknown actions or keys, a SPLIT with no child,
two children with the same identity — fails the schema, and the parcel fails with the reason.
Keys that name no input the parcel carried (an input id or not) are not a schema failure: their
entries are ignored with a warning on the parcel.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from dxts.core.plugins import FileInput, Input
from dxts.core.plugins.args import violations

STATUS_REPORT_OUTPUT = "status-report"
SHOWN = 5  # problems quoted in a reason


class Action(StrEnum):
    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"
    NOT_TRIED = "NOT_TRIED"
    SPLIT = "SPLIT"


@dataclass(frozen=True)
class Entry:
    """One input's fate; a SPLIT lists the portions that succeeded and those that failed."""

    action: Action
    succeeded: tuple[Input, ...] = ()
    failed: tuple[Input, ...] = ()

    @property
    def some_success(self) -> bool:
        return self.action is Action.SUCCESS or bool(self.succeeded)


class ReportRefused(ValueError):
    """The report is not JSON or does not follow the schema; the message says where."""


@dataclass(frozen=True)
class StatusReport:
    entries: dict[bytes, Entry]  # by input id: the carried inputs the report names
    strangers: tuple[str, ...]  # keys naming no input the parcel carried (ids or not)


_PLAIN = {action: Entry(action) for action in Action if action is not Action.SPLIT}


def parse(text: str, carried: Mapping[str, bytes]) -> StatusReport:
    """The report in `text`, whose keys are looked up among `carried` (canonical input id →
    InputID); ReportRefused (with every problem found) when it is not one."""
    try:
        document = json.loads(text)
    except ValueError as error:
        raise ReportRefused(f"not JSON: {error}") from None
    if not isinstance(document, dict):
        raise ReportRefused(f"expected an object keyed by input id, got {type(document).__name__}")
    entries: dict[bytes, Entry] = {}
    strangers: list[str] = []
    problems: list[str] = []
    for key, value in document.items():
        entry = _entry(value, key, problems)
        input_id = carried.get(key)
        if input_id is None:
            strangers.append(key)
        elif entry is not None:
            entries[input_id] = entry
    if problems:
        more = f" (and {len(problems) - SHOWN} more)" if len(problems) > SHOWN else ""
        raise ReportRefused("; ".join(problems[:SHOWN]) + more)
    return StatusReport(entries, tuple(strangers))


def _entry(value: Any, key: str, problems: list[str]) -> Entry | None:
    if isinstance(value, dict) and len(value) == 1 and value.get("action") in _PLAIN:
        return _PLAIN[value["action"]]  # the common case, decided at once
    if not isinstance(value, dict):
        problems.append(f"{key}: expected an object with an action")
        return None
    raw = value.get("action")
    if raw not in set(Action):
        problems.append(f"{key}.action: expected one of {', '.join(Action)}, got {raw!r}")
        return None
    action = Action(str(raw))
    allowed = {"action", "SUCCESS", "FAILURE"} if action is Action.SPLIT else {"action"}
    extra = sorted(set(value) - allowed)
    if extra:
        problems.append(f"{key}: unexpected {', '.join(extra)} for {action}")
        return None
    if action is not Action.SPLIT:
        return Entry(action)
    succeeded = _children(value.get("SUCCESS", []), f"{key}.SUCCESS", problems)
    failed = _children(value.get("FAILURE", []), f"{key}.FAILURE", problems)
    if succeeded is None or failed is None:
        return None
    if not succeeded and not failed:
        problems.append(f"{key}: a SPLIT lists at least one child")
        return None
    hashes = [child.input_hash for child in (*succeeded, *failed)]
    if len(set(hashes)) != len(hashes):
        problems.append(f"{key}: two children have the same lfn and descriptor")
        return None
    return Entry(Action.SPLIT, tuple(succeeded), tuple(failed))


def _children(value: Any, path: str, problems: list[str]) -> list[Input] | None:
    if not isinstance(value, list):
        problems.append(f"{path}: expected a list of children")
        return None
    children: list[Input] = []
    for index, raw in enumerate(value):
        child = child_input(raw, f"{path}[{index}]", problems)
        if child is None:
            return None
        children.append(child)
    return children


def child_input(raw: Any, path: str, problems: list[str]) -> Input | None:
    """A child in the feeder's shape as an Input/FileInput; None (problem noted) if it is not."""
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected an object (lfn, lfn_size, descriptor)")
        return None
    fields = {k: v for k, v in raw.items() if v is not None}
    if "data" in fields:
        if "descriptor" in fields:
            problems.append(f"{path}: give descriptor or data, not both")
            return None
        fields["descriptor"] = fields.pop("data")
    try:
        return FileInput(**fields) if "lfn" in fields else Input(**fields)
    except ValidationError as error:
        problems.extend(f"{v.field}: {v.description}" for v in violations(error, path))
    except TypeError as error:
        problems.append(f"{path}: {error}")
    return None
