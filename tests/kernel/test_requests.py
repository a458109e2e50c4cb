"""The servicers' request-parsing helpers: every bad field named, all of them at once."""

from __future__ import annotations

import pytest

from dxts.core.errors import InvalidArgument
from dxts.core.grpc.requests import (
    Problems,
    next_page_token,
    optional_id,
    page_after,
    required_id,
)
from dxts.core.ids import id_to_str, new_id
from dxts.core.states import InputStatus
from dxts.v1 import common_pb2


def fields(error: pytest.ExceptionInfo[InvalidArgument]) -> list[str]:
    return [v.field for v in error.value.violations]


def test_a_required_id_names_its_field_when_missing_or_malformed() -> None:
    with pytest.raises(InvalidArgument) as missing:
        required_id("", "workgraph_id")
    assert fields(missing) == ["workgraph_id"]
    with pytest.raises(InvalidArgument) as malformed:
        required_id("None", "workgraph_id")
    assert fields(malformed) == ["workgraph_id"]
    identifier = new_id()
    assert required_id(id_to_str(identifier), "workgraph_id") == identifier


def test_an_empty_optional_id_is_none() -> None:
    assert optional_id("", "parcel_id") is None
    with pytest.raises(InvalidArgument):
        optional_id("not-a-uuid", "parcel_id")


def test_every_bad_field_of_a_request_is_reported_together() -> None:
    problems = Problems()
    problems.id("", "workgraph_id")
    problems.ids([id_to_str(new_id()), "x"], "parcel_ids")
    problems.hash("zz", "process_id")
    assert problems.enums(InputStatus, [0, common_pb2.INPUT_STATUS_PROBLEMATIC], "statuses") == [
        InputStatus.PROBLEMATIC
    ]
    with pytest.raises(InvalidArgument) as error:
        problems.raise_if_any()
    assert fields(error) == ["workgraph_id", "parcel_ids[1]", "process_id", "statuses[0]"]


def test_page_tokens_round_trip_and_are_bound_to_their_filters() -> None:
    last = new_id()
    token = next_page_token(last, "filters-a")
    assert page_after(common_pb2.Paging(page_token=token), "filters-a") == last
    with pytest.raises(InvalidArgument) as error:
        page_after(common_pb2.Paging(page_token=token), "filters-b")
    assert fields(error) == ["paging.page_token"]
    assert page_after(common_pb2.Paging(), "filters-a") is None
    assert next_page_token(None, "filters-a") == ""
    assert next_page_token(last, "filters-a", full=False) == ""
