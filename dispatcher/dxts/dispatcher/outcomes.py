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
  produced can be registered, and a failed parcel returns its inputs to the pool.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

import grpc

from dxts.core.errors import Unavailable
from dxts.core.ids import id_to_str, new_id
from dxts.v1 import common_pb2, execution_pb2, execution_pb2_grpc

log = logging.getLogger(__name__)

LFN_MAX = 512
TERMINAL = frozenset(
    {
        common_pb2.OUTCOME_RESULT_SUCCEEDED,
        common_pb2.OUTCOME_RESULT_FAILED,
        common_pb2.OUTCOME_RESULT_CANCELLED,
    }
)


class OutcomeSink(Protocol):
    """Where outcomes go: execution, which records them."""

    async def record(self, outcomes: Sequence[common_pb2.Outcome]) -> list[common_pb2.OutcomeAck]:
        """Record a batch; one ack per outcome, in order. Idempotent."""
        ...


class GrpcOutcomeSink:
    """An OutcomeSink over `ExecutionService.RecordOutcomes`."""

    def __init__(self, channel: grpc.aio.Channel, *, timeout_s: float) -> None:
        self._stub = execution_pb2_grpc.ExecutionServiceStub(channel)
        self._timeout_s = timeout_s

    async def record(self, outcomes: Sequence[common_pb2.Outcome]) -> list[common_pb2.OutcomeAck]:
        request = execution_pb2.RecordOutcomesRequest(
            request_id=id_to_str(new_id()), outcomes=list(outcomes)
        )
        try:
            reply = await self._stub.RecordOutcomes(request, timeout=self._timeout_s)
        except grpc.aio.AioRpcError as error:
            raise Unavailable(f"execution did not record outcomes: {error.details()}") from error
        if len(reply.acks) != len(outcomes):
            raise Unavailable(
                f"execution acknowledged {len(reply.acks)} of {len(outcomes)} outcomes"
            )
        return list(reply.acks)


def manifest_problem(outcome: common_pb2.Outcome) -> str | None:
    """Why an outcome cannot be recorded as reported, or None when it can."""
    if outcome.result not in TERMINAL:
        return f"result {outcome.result} is not a terminal outcome"
    for i, output in enumerate(outcome.outputs):
        where = f"outputs[{i}]"
        if not output.output_name:
            return f"{where} has no output name"
        if not output.lfn.startswith("/") or len(output.lfn) > LFN_MAX:
            return f"{where}: {output.lfn[:80]!r} is not an absolute LFN of at most {LFN_MAX}"
        if output.size < 0:
            return f"{where}: negative size {output.size}"
    return None


def as_failure(outcome: common_pb2.Outcome, reason: str) -> common_pb2.Outcome:
    """The outcome recorded in place of a malformed one: FAILED, no files, the reason kept."""
    failed = common_pb2.Outcome()
    failed.CopyFrom(outcome)
    del failed.outputs[:]
    failed.status_report_json = ""
    failed.result = common_pb2.OUTCOME_RESULT_FAILED
    failed.message = f"unusable outcome from the backend ({reason}); reported: {outcome.message}"
    return failed
