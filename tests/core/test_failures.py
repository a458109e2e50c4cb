"""The failure taxonomy's shared readings: the tool's own line out of a payload's stderr, the
normalised message failures are grouped by, and the failure's round trips (contract, stored)."""

from __future__ import annotations

import pytest

from dxts.core.adaptor import codec, mapping
from dxts.core.adaptor.failures import normalise, tool_message
from dxts.core.adaptor.model import Failure, FailureClass, Outcome, OutcomeResult
from dxts.v1 import common_pb2

NOISE = [f"step {n}: reading event {n * 17}" for n in range(50)]


def test_the_last_error_looking_line_among_noise_is_the_tool_s_message() -> None:
    stderr = "\n".join([*NOISE[:25], "ERROR: seed 7 is out of range", *NOISE[25:], ""])
    assert tool_message(stderr) == "ERROR: seed 7 is out of range"
    later = stderr + "FATAL cannot open /data/x.root\nclosing\n"
    assert tool_message(later) == "FATAL cannot open /data/x.root"


def test_a_python_traceback_gives_its_last_line() -> None:
    stderr = "\n".join(
        [
            *NOISE[:3],
            "Traceback (most recent call last):",
            '  File "reco.py", line 3, in <module>',
            "    main()",
            "KeyError: 'momentum'",
            "exiting",
        ]
    )
    assert tool_message(stderr) == "KeyError: 'momentum'"


def test_without_an_error_line_the_last_non_empty_line_and_a_pattern_of_one_s_own() -> None:
    assert tool_message("\n".join([*NOISE, "", "   "])) == NOISE[-1]
    assert tool_message("") == ""
    stderr = "E042 calibration missing\nERROR-free summary\n"
    assert tool_message(stderr, r"^E\d{3} ") == "E042 calibration missing"
    assert len(tool_message("ERROR " + "x" * 5000)) == 500


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("ERROR: seed 7 is out of range", "ERROR: seed 12 is out of range"),
        (
            "cannot stage lfn:/lhcb/mc/2026/0001/a.dst: no replica at LOCAL",
            "cannot stage lfn:/lhcb/mc/2026/0417/b.dst: no replica at LOCAL",
        ),
        (
            "job 0192f0a4-3c1e-7b3a-9d2e-1f0e2d3c4b5a failed in /tmp/x1/run",
            "job 0192f0a4-3c1e-7b3a-9d2e-aaaaaaaaaaaa failed in /var/tmp/y/z",
        ),
        ("checksum deadbeef01 mismatch", "checksum 0badc0de77 mismatch"),
    ],
)
def test_messages_that_differ_only_by_numbers_ids_and_paths_normalise_alike(
    one: str, other: str
) -> None:
    assert normalise(one) == normalise(other)


def test_the_normalised_message_keeps_the_words() -> None:
    assert normalise("ERROR: seed 7 is out of range\nmore") == "ERROR: seed # is out of range"
    assert normalise("cannot open /data/a.root") == "cannot open <path>"
    assert normalise("") == ""
    assert normalise("ERROR: bad seed") != normalise("ERROR: bad input")


def test_the_failure_survives_the_contract_and_the_stored_outcome() -> None:
    failure = Failure(FailureClass.STAGE_IN, "", "/lhcb/a.dst", "LOCAL", "LCG.CERN.ch")
    outcome = Outcome("p", "local", "i", OutcomeResult.FAILED, exit_code=3, failure=failure)
    assert mapping.outcome_from_proto(mapping.outcome_to_proto(outcome)) == outcome
    assert codec.decode_outcome(codec.encode_outcome(outcome)) == outcome
    stored = codec.outcome_to_json(outcome)
    assert stored["failure"] == {
        "class": "stage-in",
        "lfn": "/lhcb/a.dst",
        "storage_element": "LOCAL",
        "site": "LCG.CERN.ch",
    }
    assert codec.outcome_from_json(stored).failure == failure
    assert "failure" not in codec.outcome_to_json(Outcome(result=OutcomeResult.SUCCEEDED))
    # Every class has its number in the contract, and a number it does not know reads unclassified.
    for failure_class in FailureClass:
        message = mapping.failure_to_proto(Failure(failure_class))
        assert mapping.failure_from_proto(message).failure_class is failure_class
    unknown = common_pb2.Failure(failure_class=99)  # type: ignore[arg-type]
    assert mapping.failure_from_proto(unknown).failure_class is FailureClass.UNSPECIFIED
