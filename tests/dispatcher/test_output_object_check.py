"""An adaptor's output object is checked like its manifest: one that is not a JSON object makes
the outcome unusable (FAILED, nothing of it kept), a JSON object passes as sent."""

from __future__ import annotations

import pytest

from dxts.core.adaptor.model import Outcome, OutcomeResult, OutputFile
from dxts.dispatcher.logic.outcomes import as_failure, manifest_problem

FILE = OutputFile("out", "/dxts/t/p/out.txt", 3, "adler32:00000001", "SE")


def outcome(output_object_json: str) -> Outcome:
    return Outcome(
        parcel_id="p",
        backend="local",
        identifier="i",
        result=OutcomeResult.SUCCEEDED,
        outputs=[FILE],
        output_object_json=output_object_json,
    )


@pytest.mark.parametrize(
    "text", ["", '{"out": {"class": "File", "location": "lfn:/dxts/t/p/out.txt"}, "n": 1e400}']
)
def test_an_object_or_none_passes(text: str) -> None:
    assert manifest_problem(outcome(text)) is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "the output object is not JSON"),
        ("[1, 2]", "the output object is not a JSON object"),
        ("[" * 100_000, "the output object is not JSON"),
    ],
)
def test_anything_else_makes_the_outcome_unusable(text: str, problem: str) -> None:
    found = manifest_problem(outcome(text))
    assert found is not None and found.startswith(problem)
    failed = as_failure(outcome(text), found)
    assert (failed.result, failed.outputs, failed.output_object_json) == (
        OutcomeResult.FAILED,
        [],
        "",
    )
