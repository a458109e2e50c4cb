"""Ids and hashes: UUIDv7 minting, RFC 8785 canonical JSON, content and input hashes.

The digests below are frozen: if one changes, every stored hash in every installation stops
matching, so a change here is a migration, never a refactor.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dxts.core.errors import InvalidArgument
from dxts.core.ids import (
    canonical_json,
    content_hash,
    hash_from_str,
    hash_to_str,
    id_from_str,
    id_to_str,
    input_hash,
    mint_after,
    new_id,
    new_ids,
)


def test_new_ids_are_uuid7_and_time_ordered() -> None:
    ids = new_ids(1000)
    assert all(len(i) == 16 for i in ids)
    assert all(uuid.UUID(bytes=i).version == 7 for i in ids)
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert new_id() > ids[-1]


def test_new_ids_carry_the_clock_and_the_rfc_9562_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    import dxts.core.ids as ids_module

    # As a fresh process mints: nothing minted before, no floor from a clock ahead.
    monkeypatch.setattr(ids_module, "_last_millisecond", 0)
    monkeypatch.setattr(ids_module, "_last_counter", 0)
    before = time.time_ns() // 1_000_000
    ids = new_ids(5000)  # far more than one millisecond's worth of a 12-bit counter
    after = time.time_ns() // 1_000_000
    for value in (ids[0], ids[-1]):
        assert before <= int.from_bytes(value[:6]) <= after + 1
        assert uuid.UUID(bytes=value).variant == uuid.RFC_4122
    assert ids == sorted(set(ids))


def test_new_ids_keep_increasing_when_the_clock_steps_back_or_the_counter_fills(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dxts.core.ids as ids_module

    first = new_ids(3)
    now = ids_module.time.time_ns()
    monkeypatch.setattr(ids_module.time, "time_ns", lambda: now - 10**9)  # a second back
    stepped_back = new_ids(3)
    assert stepped_back == sorted(stepped_back) and stepped_back[0] > first[-1]
    monkeypatch.setattr(ids_module, "_last_counter", (1 << ids_module._COUNTER_BITS) - 2)
    overflowed = new_ids(3)
    assert overflowed == sorted(overflowed) and overflowed[0] > stepped_back[-1]
    assert int.from_bytes(overflowed[0][:6]) == int.from_bytes(stepped_back[-1][:6]) + 1


def test_ids_minted_after_a_floor_from_a_clock_ahead_sort_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dxts.core.ids as ids_module

    # The floor 5 s ahead stays this test's: the worker's later tests mint by the clock again.
    for name in ("_last_millisecond", "_last_counter"):
        monkeypatch.setattr(ids_module, name, getattr(ids_module, name))
    ahead = (int.from_bytes(new_id()) + (5_000 << 80)).to_bytes(16)  # 5 s ahead
    mint_after(ahead)
    after = new_ids(3)
    assert after == sorted(after) and after[0] > ahead
    assert int.from_bytes(after[0][:6]) == int.from_bytes(ahead[:6])  # its millisecond on
    mint_after(new_ids(1)[0][:6] + bytes(10))  # a floor behind changes nothing
    assert new_id() > after[-1]


def test_id_round_trip_and_refusals() -> None:
    value = new_id()
    text = id_to_str(value)
    assert id_from_str(text) == value
    assert text == str(uuid.UUID(bytes=value))
    for bad in ["", "nope", text.upper(), "{" + text + "}", text.replace("-", "")]:
        with pytest.raises(InvalidArgument) as error:
            id_from_str(bad, field="transformation_id")
        assert error.value.violations[0].field == "transformation_id"
    with pytest.raises(InvalidArgument):
        id_to_str(b"short")
    with pytest.raises(InvalidArgument):
        id_from_str(42)  # type: ignore[arg-type]


def test_hash_round_trip_and_refusals() -> None:
    digest = content_hash({"a": 1})
    assert hash_from_str(hash_to_str(digest)) == digest
    assert hash_from_str("sha256:" + hash_to_str(digest)) == digest
    for bad in ["", "zz" * 32, "ab" * 31]:
        with pytest.raises(InvalidArgument):
            hash_from_str(bad, field="process_id")
    with pytest.raises(InvalidArgument):
        hash_to_str(b"\x00" * 16)


# RFC 8785 section 3.2.3 and appendix B.
RFC_NUMBERS = [
    (0.0, "0"),
    (-0.0, "0"),
    (5e-324, "5e-324"),
    (-5e-324, "-5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (9007199254740992.0, "9007199254740992"),
    (295147905179352830000.0, "295147905179352830000"),
    (9.999999999999997e22, "9.999999999999997e+22"),
    (1e23, "1e+23"),
    (0.000001, "0.000001"),
    (9.999999999999997e-7, "9.999999999999997e-7"),
    (333333333.3333333, "333333333.3333333"),
]


@pytest.mark.parametrize(("number", "expected"), RFC_NUMBERS)
def test_rfc8785_number_serialisation(number: float, expected: str) -> None:
    assert canonical_json(number) == expected.encode()


def test_rfc8785_example_document() -> None:
    document = {
        "numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
        "literals": [None, True, False],
    }
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical_json(document) == expected.encode()


def test_rfc8785_sorts_keys_by_utf16_code_units() -> None:
    document = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    text = canonical_json(document).decode()
    order = [
        text.index(value)
        for value in (
            "Carriage Return",
            "One",
            "Control",
            "Latin Small",
            "Euro Sign",
            "Emoji",
            "Hebrew",
        )
    ]
    assert order == sorted(order)


def test_frozen_digests() -> None:
    assert content_hash({}).hex() == (
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"  # sha256(b"{}")
    )
    assert (
        content_hash(
            {"outputs": {}, "inputs": {}, "cwlVersion": "v1.2", "class": "CommandLineTool"}
        ).hex()
        == "0e24f5dd4af3cfbba142ef84df2be4e3124e4e1c1938d320ecb1d1fe10c77c49"
    )
    assert input_hash("/lhcb/MC/2026/SIM/00012345_00000001_1.sim", None).hex() == (
        "05190ffbea83fcd2455489ff75a631b1"
    )
    assert input_hash(None, {"seed": 42}).hex() == "76a8bafcdac3f2af0a0cfd9b3212cb67"
    assert input_hash("/lhcb/data/RAW/1234.raw", {"Run": 1234, "Mask": "1-10"}).hex() == (
        "05ad940b91bcaf7de7829b40e18190d8"
    )
    assert input_hash(None, None).hex() == "78306e0c0295a01c4f8981655d59d340"


def test_input_hash_is_over_the_canonical_pair() -> None:
    import xxhash

    assert input_hash("a", {"b": 1, "a": [1.0, "x"]}) == xxhash.xxh3_128_digest(
        b'["a",{"a":[1,"x"],"b":1}]'
    )
    # Descriptor key order and float spelling do not matter; the LFN's case does.
    assert input_hash("x", {"b": 1, "a": 2}) == input_hash("x", {"a": 2, "b": 1.0})
    assert input_hash("/lhcb/A.dst", None) != input_hash("/lhcb/a.dst", None)
    # A split child (descriptor with a mask) differs from its parent.
    assert input_hash("f", {"Run": 1}) != input_hash("f", {"Run": 1, "Mask": "1-10"})


@pytest.mark.parametrize(
    "call",
    [
        lambda: canonical_json(float("nan")),
        lambda: canonical_json({1: "non-string key"}),
        lambda: canonical_json({"x": object()}),
        lambda: input_hash(3, None),  # type: ignore[arg-type]
        lambda: input_hash("x", ["not", "a", "dict"]),  # type: ignore[arg-type]
        lambda: input_hash("x", {"inf": float("inf")}),
    ],
)
def test_bad_input_is_a_domain_error(call: object) -> None:
    with pytest.raises(InvalidArgument):
        call()  # type: ignore[operator]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@given(json_values)
def test_canonical_form_is_stable_under_reserialisation(value: object) -> None:
    import json

    once = canonical_json(value)
    assert canonical_json(json.loads(once)) == once


# Every text, lone surrogates included (the reference refuses them), and keys that sort
# differently by UTF-16 code unit and by code point (U+E000-U+FFFF against astral ones).
any_text = st.text(st.characters(blacklist_categories=()), max_size=8)
awkward_keys = any_text | st.sampled_from(["\ufb33", "\U0001f600", "\ue000", "a", "A", ""])
scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # beyond 2**53 too: exact digits (the extension), reference-checked
    | st.floats()  # NaN and infinities too
    | any_text
)
any_json = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(awkward_keys, children, max_size=4)
    ),
    max_leaves=16,
)
plain_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=16,
)


def _reference(value: object) -> bytes | None:
    """rfc8785's answer, extended as dxts extends it: each integer beyond 2**53 - 1 stands in
    as a marker string for rfc8785 and its exact digits replace the marker afterwards."""
    import rfc8785

    big: list[int] = []

    def mark(item: object) -> object:
        if type(item) is int and abs(item) > 2**53 - 1:
            big.append(item)
            return f"\x00big{len(big) - 1}\x00"
        if type(item) in (list, tuple):
            return type(item)(mark(child) for child in item)  # type: ignore[call-arg]
        if type(item) is dict:
            return {key: mark(child) for key, child in item.items()}
        return item

    try:
        text = rfc8785.dumps(mark(value)).decode()  # type: ignore[arg-type]
    except (rfc8785.CanonicalizationError, TypeError, ValueError):
        return None
    for index, number in enumerate(big):
        text = text.replace(f'"\\u0000big{index}\\u0000"', str(number), 1)
    return text.encode()


@given(any_json)
def test_the_plain_path_writes_what_rfc8785_writes(value: object) -> None:
    from dxts.core.ids import _NotPlain, _plain_canonical

    expected = _reference(value)
    try:
        fast: bytes | None = _plain_canonical(value)
    except _NotPlain:
        fast = None
    if fast is not None:  # never an answer where the reference refuses
        assert fast == expected
    if expected is None:
        with pytest.raises(InvalidArgument):
            canonical_json(value)
    else:
        assert canonical_json(value) == expected


@given(plain_json)
def test_plain_values_take_the_plain_path(value: object) -> None:
    from dxts.core.ids import _plain_canonical

    assert _plain_canonical(value) == _reference(value)


def test_subclasses_and_odd_keys_go_to_the_reference() -> None:
    import enum
    from collections import OrderedDict

    from dxts.core.ids import _NotPlain, _plain_canonical

    class Colour(enum.IntEnum):
        RED = 1

    class Name(enum.StrEnum):
        A = "a"

    for value in (
        [Colour.RED],
        {"k": Name.A},
        OrderedDict(b=1, a=2),
        {1: "x"},
        float("nan"),
        "\ud800",
    ):
        with pytest.raises(_NotPlain):
            _plain_canonical(value)
        expected = _reference(value)
        if expected is None:
            with pytest.raises(InvalidArgument):
                canonical_json(value)
        else:
            assert canonical_json(value) == expected
