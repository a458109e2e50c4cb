"""Value conversions of common.proto's conventions, and page tokens."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from enum import StrEnum

import pytest

from dxts.core import states
from dxts.core.errors import InvalidArgument
from dxts.core.grpc.convert import (
    enum_from_proto,
    enum_to_proto,
    from_json_text,
    from_timestamp,
    json_text,
    to_timestamp,
)
from dxts.core.grpc.paging import (
    MAX_PAGE_SIZE,
    decode_page_token,
    encode_page_token,
    filters_fingerprint,
    page_size,
)
from dxts.v1 import common_pb2

NESTED = "[" * 100_000 + "]" * 100_000  # deeper than the JSON parser's recursion

ENUMS = [
    states.WorkgraphStatus,
    states.TransformationStatus,
    states.InputStatus,
    states.ParcelStatus,
    states.Kind,
    states.ActionResult,
]


@pytest.mark.parametrize("enum", ENUMS)
def test_every_state_round_trips(enum: type[StrEnum]) -> None:
    numbers = [enum_to_proto(member) for member in enum]
    assert numbers == list(range(1, len(enum) + 1))
    assert [enum_from_proto(enum, n, field="status") for n in numbers] == list(enum)


def test_the_proto_names_are_the_core_names() -> None:
    number = enum_to_proto(states.InputStatus.NOT_PROCESSED)
    assert common_pb2.InputStatus.Name(number) == "INPUT_STATUS_NOT_PROCESSED"  # type: ignore[arg-type]


@pytest.mark.parametrize("number", [0, 99, -1])
def test_unspecified_or_unknown_numbers_are_refused_with_the_field(number: int) -> None:
    with pytest.raises(InvalidArgument) as caught:
        enum_from_proto(states.ParcelStatus, number, field="filter.statuses[2]")
    assert caught.value.violations[0].field == "filter.statuses[2]"
    assert "PARCEL_STATUS_DONE" in caught.value.violations[0].description


def test_timestamps_are_utc() -> None:
    naive = datetime(2026, 7, 10, 12, 30, 1, 123456)  # as the database returns it
    stamp = to_timestamp(naive)
    assert stamp is not None
    assert from_timestamp(stamp) == naive.replace(tzinfo=UTC)
    assert to_timestamp(None) is None


def test_json_text_fields() -> None:
    value = {"Run": 1234, "Mask": "1-10", "big": 2**53}
    assert from_json_text(json_text(value), field="descriptor_json") == value
    assert json_text(None) == "" and from_json_text("", field="x") is None
    with pytest.raises(InvalidArgument) as caught:
        from_json_text("{not json", field="inputs_json")
    assert caught.value.violations[0].field == "inputs_json"
    with pytest.raises(InvalidArgument, match="nested too deeply") as caught:
        from_json_text(NESTED, field="inputs_json")  # RecursionError in the parser
    assert caught.value.violations[0].field == "inputs_json"


def test_page_size_defaults_and_caps() -> None:
    assert page_size(common_pb2.Paging()) == 100
    assert page_size(common_pb2.Paging(page_size=7)) == 7
    assert page_size(common_pb2.Paging(page_size=10**6)) == MAX_PAGE_SIZE
    with pytest.raises(InvalidArgument) as caught:
        page_size(common_pb2.Paging(page_size=-1))
    assert caught.value.violations[0].field == "paging.page_size"


def test_page_tokens_round_trip_under_the_same_filters() -> None:
    filters = filters_fingerprint("0190f1c2-7a4b-7c3d-8e9f-0123456789ab", ["Failed"])
    token = encode_page_token({"after": "0190f1c2-7a4b-7c3d-8e9f-0123456789ac"}, filters=filters)
    paging = common_pb2.Paging(page_token=token)
    assert decode_page_token(paging, filters=filters) == {
        "after": "0190f1c2-7a4b-7c3d-8e9f-0123456789ac"
    }
    assert decode_page_token(common_pb2.Paging(), filters=filters) is None
    other = filters_fingerprint("0190f1c2-7a4b-7c3d-8e9f-0123456789ab", ["Processed"])
    with pytest.raises(InvalidArgument, match="different filters"):
        decode_page_token(paging, filters=other)


@pytest.mark.parametrize(
    "token",
    [
        "!!!",
        "bm90IGpzb24",
        "WzFd",
        "eyJwIjogMSwgImYiOiAiIn0",
        base64.urlsafe_b64encode(NESTED.encode()).decode().rstrip("="),
    ],
)
def test_forged_page_tokens_are_invalid_arguments(token: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        decode_page_token(common_pb2.Paging(page_token=token))
    assert caught.value.violations[0].field == "paging.page_token"
