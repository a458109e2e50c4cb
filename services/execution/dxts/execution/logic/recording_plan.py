"""The record of one Completing parcel, planned from its stored outcome and the inputs it
carried: each input's fate (from the status report, when the process declares one), the
split children, the files to register, the parcel's terminal status, warnings.

Pure: nothing here reads or writes; `completing` writes what a plan says.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dxts.core.adaptor.model import Outcome, OutcomeResult, OutputFile
from dxts.core.ids import id_to_str
from dxts.core.states import InputStatus, Kind, ParcelStatus
from dxts.execution.logic import status_reports
from dxts.execution.logic.status_reports import STATUS_REPORT_OUTPUT, Action, Entry
from dxts.execution.store.outcomes import CarriedInput, ParcelRow

log = logging.getLogger(__name__)

I, P = InputStatus, ParcelStatus  # noqa: E741 - the state tables' names
SUCCEEDED = OutcomeResult.SUCCEEDED


@dataclass
class Recording:
    """What recording a Completing parcel does, computed from its outcome and its inputs."""

    parcel: ParcelRow
    target: ParcelStatus
    carried: list[CarriedInput]  # the inputs still Assigned to it: those it decides
    fates: dict[InputStatus, list[CarriedInput]] = field(default_factory=dict)
    splits: list[tuple[CarriedInput, Entry]] = field(default_factory=list)
    # (TransformationOutputID, or None for a user parcel's file; the file)
    files: list[tuple[bytes | None, OutputFile]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reason: str | None = None

    def fail(self, reason: str) -> None:
        """The whole parcel fails: every input Failed, nothing registered."""
        self.target, self.reason = P.FAILED, reason
        self.fates = {I.FAILED: list(self.carried)}
        self.splits, self.files = [], []


def plan_recording(
    parcel: ParcelRow,
    outcome: Outcome,
    carried: Sequence[CarriedInput],
    outputs: Mapping[str, bytes] | None,
) -> Recording:
    """The record of a parcel whose backend finished it; `outputs` is the transformation's
    declared outputs (name → TransformationOutputID), None for a user parcel."""
    mine = list(carried)
    plan = Recording(parcel, P.DONE, mine)
    if outcome.result != SUCCEEDED:  # stored by an older recorder, or by hand: still a failure
        plan.fail(outcome.message or "the backend reported a failure")
        return plan
    # A compute parcel's process declares its report; a data parcel's adaptor reports each
    # file's fate by the input ids the request names (docs/storage.md) when it has them.
    declared = (
        outputs is not None and parcel.kind == Kind.COMPUTE and STATUS_REPORT_OUTPUT in outputs
    ) or (parcel.kind == Kind.DATA and bool(outcome.status_report_json))
    entries: dict[bytes, Entry] = {}
    if declared:
        if not outcome.status_report_json:
            plan.fail("the process declares a status report but none arrived")
            return plan
        try:
            report = status_reports.parse(
                outcome.status_report_json, {_text_id(i.input_id): i.input_id for i in mine}
            )
        except status_reports.ReportRefused as error:
            plan.fail(f"the status report does not follow the schema: {error}")
            return plan
        if report.strangers:
            shown = ", ".join(repr(key[:40]) for key in report.strangers[:5])
            plan.warnings.append(
                f"the status report names {len(report.strangers)} input(s) this parcel did not "
                f"carry, ignored: {shown}"
            )
        entries = report.entries
    elif outcome.status_report_json:
        plan.warnings.append("a status report arrived but the process declares none: ignored")
    fates: dict[InputStatus, list[CarriedInput]] = defaultdict(list)
    some_success = False
    for item in mine:
        entry = entries.get(item.input_id) if declared else Entry(Action.SUCCESS)
        action = entry.action if entry is not None else Action.NOT_TRIED
        if entry is not None and action is Action.SPLIT:
            plan.splits.append((item, entry))
        else:
            fates[_FATE[action]].append(item)
        some_success = some_success or (entry is not None and entry.some_success)
    plan.fates = dict(fates)
    all_success = len(fates.get(I.PROCESSED, ())) == len(mine)
    plan.target = P.DONE if all_success else P.PARTIALLY_DONE if some_success else P.FAILED
    if plan.target != P.FAILED:
        plan.files = _declared_files(plan, outcome, outputs)
    return plan


def _text_id(value: bytes) -> str:
    """`ids.id_to_str` for ids read from the database (16 bytes by the column's type), without
    building a UUID: recording renders every input id of every report it reads."""
    h = value.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_FATE = {
    Action.SUCCESS: I.PROCESSED,
    Action.FAILURE: I.FAILED,
    Action.NOT_TRIED: I.UNASSIGNED,
}


def _declared_files(
    plan: Recording, outcome: Outcome, outputs: Mapping[str, bytes] | None
) -> list[tuple[bytes | None, OutputFile]]:
    files: list[tuple[bytes | None, OutputFile]] = []
    undeclared: set[str] = set()
    for file in outcome.outputs:
        if outputs is None:
            files.append((None, file))
        elif file.output_name in outputs:
            files.append((outputs[file.output_name], file))
        else:
            undeclared.add(file.output_name)
    if undeclared:
        names = ", ".join(repr(name[:64]) for name in sorted(undeclared))
        plan.warnings.append(f"outputs the process does not declare, not recorded: {names}")
        log.warning("parcel %s: undeclared outputs %s", id_to_str(plan.parcel.parcel_id), names)
    return files
