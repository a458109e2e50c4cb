"""The null adaptor's failure injection by input, which the scenarios steer it with: a rule
matches a parcel by an input's descriptor (a non-file input's CWL value) or LFN (a File input,
a data request's file), decides the first `times` parcels it matches, and yields to the mix
afterwards; split children carry a mask."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from dxts.backends.edge.servicer import AdaptorServicer
from dxts.backends.null.logic.adaptor import FAILURE, SPLIT, SUCCESS, NullAdaptor
from dxts.backends.null.settings import NullRule, NullSettings
from dxts.core.adaptor.model import OutcomeResult
from dxts.core.ids import id_to_str, new_id
from dxts.v1 import backend_pb2, common_pb2


def parcel(*, parameters: object = None, request: object = None) -> backend_pb2.ParcelSubmission:
    return backend_pb2.ParcelSubmission(
        parcel_id=id_to_str(new_id()),
        output_prefix="/dxts/t/p",
        input_ids=[id_to_str(new_id())],
        parameters_json=json.dumps(parameters) if parameters is not None else "",
        request_json=json.dumps(request) if request is not None else "",
    )


def seed(n: int, **more: object) -> dict[str, object]:
    return {"files": [json.dumps({"seed": n, **more}, separators=(",", ":"))]}


async def fates(adaptor: NullAdaptor, *parcels: backend_pb2.ParcelSubmission) -> list[str]:
    await AdaptorServicer(adaptor).Submit(backend_pb2.SubmitRequest(parcels=list(parcels)), None)
    return [adaptor.jobs[p.parcel_id].fate for p in parcels]


async def test_a_rule_decides_the_parcels_carrying_a_matching_input_times_over() -> None:
    adaptor = NullAdaptor(
        NullSettings(
            rules=[
                NullRule(fate="failure", descriptor={"seed": 3}, times=2),
                NullRule(fate="split", lfn="/raw/7"),
            ]
        )
    )
    assert await fates(adaptor, parcel(parameters=seed(3)), parcel(parameters=seed(4))) == [
        FAILURE,
        SUCCESS,
    ]
    # A re-submission of an accepted parcel is not a new parcel: the rule is not used again.
    first = parcel(parameters=seed(3, mask="1/2"))
    assert await fates(adaptor, first, first) == [FAILURE, FAILURE]
    assert adaptor.rule_hits[0] == 2
    assert await fates(adaptor, parcel(parameters=seed(3))) == [SUCCESS]  # used up
    files = {"files": [{"class": "File", "location": "lfn:/raw/7.dst"}]}
    request = {"Operations": [{"Type": "RemoveFile", "Files": [{"LFN": "/raw/7b", "Size": 1}]}]}
    assert await fates(adaptor, parcel(parameters=files), parcel(request=request)) == [
        SPLIT,
        SPLIT,
    ]


async def test_split_children_carry_a_mask() -> None:
    adaptor = NullAdaptor(NullSettings(split=1.0, split_parts=3, split_success_fraction=0.34))
    submitted = parcel(parameters=seed(1))
    await fates(adaptor, submitted)
    report = json.loads(adaptor.outcome(adaptor.jobs[submitted.parcel_id]).status_report_json)
    (entry,) = report.values()
    masks = [c["descriptor"]["mask"] for c in entry["SUCCESS"] + entry["FAILURE"]]
    assert masks == ["1/3", "2/3", "3/3"]
    assert len(entry["SUCCESS"]) == 1


async def test_a_rule_may_match_the_output_prefix() -> None:
    adaptor = NullAdaptor(NullSettings(rules=[NullRule(fate="failure", output_prefix="/t/")]))
    other = parcel(parameters=seed(1))
    other.output_prefix = "/dxts/u/p"
    assert await fates(adaptor, parcel(parameters=seed(1)), other) == [FAILURE, SUCCESS]


async def test_a_not_tried_rule_reports_every_input_not_tried() -> None:
    adaptor = NullAdaptor(NullSettings(rules=[NullRule(fate="not_tried", descriptor={"seed": 1})]))
    submitted = parcel(parameters=seed(1))
    assert await fates(adaptor, submitted) == ["not_tried"]
    outcome = adaptor.outcome(adaptor.jobs[submitted.parcel_id])
    assert outcome.result is OutcomeResult.SUCCEEDED
    assert json.loads(outcome.status_report_json) == {
        submitted.input_ids[0]: {"action": "NOT_TRIED"}
    }


def test_a_rule_matches_by_one_thing() -> None:
    with pytest.raises(ValidationError, match="one of them"):
        NullRule(fate="failure")
    with pytest.raises(ValidationError, match="one of them"):
        NullRule(fate="failure", lfn="/x", descriptor={"seed": 1})


async def test_a_rule_may_set_its_own_delay_and_ignore_cancel() -> None:
    adaptor = NullAdaptor(
        NullSettings(
            delay_s=3600,
            rules=[
                NullRule(fate="failure", descriptor={"seed": 1}, delay_s=0.2, cancellable=False)
            ],
        )
    )
    stubborn, ordinary = parcel(parameters=seed(1)), parcel(parameters=seed(2))
    await fates(adaptor, stubborn, ordinary)
    identifiers = [adaptor.jobs[p.parcel_id].identifier for p in (stubborn, ordinary)]
    await AdaptorServicer(adaptor).Cancel(backend_pb2.CancelRequest(identifiers=identifiers), None)
    assert not adaptor.jobs[stubborn.parcel_id].cancelled  # asked while it was still running
    await asyncio.sleep(0.3)  # its own delay is over: it ends as it was going to
    reply = await AdaptorServicer(adaptor).Poll(
        backend_pb2.PollRequest(identifiers=identifiers), None
    )
    results = {o.parcel_id: o.result for o in reply.outcomes}
    assert results == {
        stubborn.parcel_id: common_pb2.OUTCOME_RESULT_FAILED,
        ordinary.parcel_id: common_pb2.OUTCOME_RESULT_CANCELLED,
    }


async def test_a_failure_rule_says_its_status_message_and_exit_code_below_a_requirement() -> None:
    """Out of memory while a parcel asks less than 4000 MB (or nothing): a retry rule's test."""
    adaptor = NullAdaptor(
        NullSettings(
            rules=[
                NullRule(
                    fate="failure",
                    descriptor={"seed": 1},
                    backend_status="OUT_OF_MEMORY",
                    message="killed: out of memory",
                    exit_code=137,
                    while_below={"memory_mb": 4000},
                )
            ]
        )
    )
    asked = [parcel(parameters=seed(1)) for _ in range(3)]
    asked[1].requirements_json = json.dumps({"memory_mb": 2000})
    asked[2].requirements_json = json.dumps({"memory_mb": 4000})
    assert await fates(adaptor, *asked) == [FAILURE, FAILURE, SUCCESS]
    reply = await AdaptorServicer(adaptor).Poll(
        backend_pb2.PollRequest(identifiers=[adaptor.jobs[asked[0].parcel_id].identifier]), None
    )
    (outcome,) = reply.outcomes
    assert (outcome.backend_status, outcome.message, outcome.exit_code) == (
        "OUT_OF_MEMORY",
        "killed: out of memory",
        137,
    )
    assert outcome.HasField("exit_code")
    success = adaptor.outcome(adaptor.jobs[asked[2].parcel_id])
    assert success.exit_code is None
