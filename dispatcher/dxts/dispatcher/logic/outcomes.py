"""Outcomes: checked on the way in, forwarded to execution in batches.

Execution records outcomes (`ExecutionService.RecordOutcomes`, idempotent: an outcome for a
parcel already past Assigned is acknowledged and ignored); the dispatcher only forwards them,
through an `OutcomeSink`. What an adaptor reports is checked first, because a backend is outside
dxts and its mistakes must not reach the database:

* an outcome whose identifier the dispatcher did not ask about, or that names another parcel,
  is dropped (logged and counted): recording it could only attach it to the wrong parcel;
* an outcome with no result, or whose output manifest is malformed (a file without an output
  name or with a relative, empty or over-long LFN, a negative size), is forwarded as a FAILED
  outcome with the reason in its message and no files: the backend did finish, but nothing it
  produced can be registered, and a failed parcel returns its inputs to the pool; so is one
  whose output object is not a JSON object.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from typing import Protocol

from dxts.core.adaptor.model import (
    TERMINAL_RESULTS,
    Failure,
    FailureClass,
    Outcome,
    OutcomeAck,
    OutcomeResult,
)

log = logging.getLogger(__name__)

LFN_MAX = 512


class OutcomeSink(Protocol):
    """Where outcomes go: execution, which records them."""

    async def record(self, outcomes: Sequence[Outcome]) -> list[OutcomeAck]:
        """Record a batch; one ack per outcome, in order. Idempotent."""
        ...


def manifest_problem(outcome: Outcome) -> str | None:
    """Why an outcome cannot be recorded as reported, or None when it can."""
    if outcome.result not in TERMINAL_RESULTS:
        return f"result {outcome.result} is not a terminal outcome"
    for i, output in enumerate(outcome.outputs):
        where = f"outputs[{i}]"
        if not output.output_name:
            return f"{where} has no output name"
        if not output.lfn.startswith("/") or len(output.lfn) > LFN_MAX:
            return f"{where}: {output.lfn[:80]!r} is not an absolute LFN of at most {LFN_MAX}"
        if output.size < 0:
            return f"{where}: negative size {output.size}"
    if outcome.output_object_json:
        try:
            output_object = json.loads(outcome.output_object_json)
        except (ValueError, RecursionError) as error:
            return f"the output object is not JSON: {str(error)[:80]}"
        if not isinstance(output_object, dict):
            return "the output object is not a JSON object"
    return None


def as_failure(outcome: Outcome, reason: str) -> Outcome:
    """The outcome recorded in place of a malformed one: FAILED, no files, the reason kept."""
    return dataclasses.replace(
        outcome,
        outputs=[],
        status_report_json="",
        output_object_json="",
        result=OutcomeResult.FAILED,
        message=f"unusable outcome from the backend ({reason}); reported: {outcome.message}",
        failure=outcome.failure or Failure(FailureClass.STAGE_OUT),
    )
