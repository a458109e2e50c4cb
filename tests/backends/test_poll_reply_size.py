"""A Poll reply stays under gRPC's message limit however large the outcomes' status reports:
the outcomes that do not fit are reported by the next Poll, so repeated Polls deliver them all."""

from __future__ import annotations

from dxts.backends.edge.servicer import POLL_REPLY_BYTES, AdaptorServicer
from dxts.backends.null.logic.adaptor import NullAdaptor
from dxts.backends.null.settings import NullSettings
from dxts.core.ids import id_to_str, new_id
from dxts.v1 import backend_pb2

INPUTS_PER_PARCEL = 2_000  # a status report of ~100 KB
PARCELS = 60  # ~6 MB of outcomes in all


async def test_outcomes_beyond_the_reply_limit_come_with_the_next_polls() -> None:
    servicer = AdaptorServicer(NullAdaptor(NullSettings()))
    parcels = [
        backend_pb2.ParcelSubmission(
            parcel_id=id_to_str(new_id()),
            output_prefix="/dxts/t/p",
            input_ids=[id_to_str(new_id()) for _ in range(INPUTS_PER_PARCEL)],
        )
        for _ in range(PARCELS)
    ]
    submitted = await servicer.Submit(backend_pb2.SubmitRequest(parcels=parcels), None)
    waiting = {result.identifier for result in submitted.results}
    replies = 0
    while waiting:
        reply = await servicer.Poll(backend_pb2.PollRequest(identifiers=sorted(waiting)), None)
        assert reply.ByteSize() <= POLL_REPLY_BYTES
        assert reply.outcomes, "a Poll with finished jobs reports at least one"
        waiting -= {outcome.identifier for outcome in reply.outcomes}
        replies += 1
    assert replies >= 2  # the first reply could not hold every outcome
