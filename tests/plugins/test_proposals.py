"""The proposal types validate themselves: what a plugin cannot build, the core never sees."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from dxts.core.ids import input_hash
from dxts.core.plugins import (
    ActionResult,
    BadInput,
    ComputeParcel,
    DataParcel,
    DelayInput,
    FileInput,
    Input,
    Operation,
    SetFeederState,
    SplitInto,
    StorageDelta,
    ToProblematic,
)
from dxts.core.plugins.args import positional_fields, violations


def refused(error: pytest.ExceptionInfo[ValidationError]) -> list[str]:
    """The field paths the core would report for this construction error."""
    title = error.value.title
    import dxts.core.plugins.proposals as proposals

    fields = positional_fields(getattr(proposals, title))
    return [v.field for v in violations(error.value, title, fields)]


def test_the_input_hash_is_the_cores_and_empty_descriptors_are_none() -> None:
    seed = Input(descriptor={"seed": 7, "nested": {"b": [1, 2], "a": "x"}})
    assert seed.input_hash == input_hash(None, {"nested": {"a": "x", "b": [1, 2]}, "seed": 7})
    bare = FileInput(lfn="/lhcb/a.dst", lfn_size=10, descriptor={})
    assert bare.descriptor is None
    assert bare.input_hash == input_hash("/lhcb/a.dst", None)
    assert bare.input_hash == FileInput(lfn="/lhcb/a.dst", lfn_size=10).input_hash
    masked = FileInput(lfn="/lhcb/a.dst", lfn_size=10, descriptor={"mask": [0, 5]})
    assert masked.input_hash != bare.input_hash


def test_a_descriptor_is_copied_so_the_plugin_cannot_change_it_afterwards() -> None:
    inner = [1, 2]
    seed = Input(descriptor={"events": inner})
    inner.append(3)
    assert seed.descriptor == {"events": [1, 2]}
    assert seed.input_hash == input_hash(None, {"events": [1, 2]})


@pytest.mark.parametrize(
    ("build", "fields"),
    [
        (lambda: FileInput(lfn="/a", lfn_size=-1), ["FileInput.lfn_size"]),
        (lambda: FileInput(lfn="/" + "x" * 512, lfn_size=1), ["FileInput.lfn"]),
        (lambda: FileInput(lfn="", lfn_size=1), ["FileInput.lfn"]),
        (lambda: FileInput(lfn="/a", lfn_size=True), ["FileInput.lfn_size"]),
        (lambda: FileInput(lfn="/a", lfn_size="12"), ["FileInput.lfn_size"]),
        (lambda: FileInput(lfn="/a", lfn_size=2**63), ["FileInput.lfn_size"]),
        (lambda: FileInput(lfn_size=1), ["FileInput.lfn"]),
        (lambda: Input(), ["Input.descriptor"]),
        (lambda: Input(descriptor={}), ["Input.descriptor"]),
        (lambda: Input(descriptor={"x": float("nan")}), ["Input.descriptor"]),
        (lambda: Input(descriptor={"x": {1, 2}}), ["Input.descriptor"]),
        (lambda: Input(descriptor={1: "x"}), ["Input.descriptor[1].[key]"]),
        (lambda: Input(descriptor={"x": 1}, lfn="/a"), ["Input.lfn"]),
        (lambda: SetFeederState({"at": datetime.now(UTC)}), ["SetFeederState.state"]),
    ],
)
def test_malformed_inputs_are_refused(build: object, fields: list[str]) -> None:
    with pytest.raises(ValidationError) as error:
        build()  # type: ignore[operator]
    assert refused(error) == fields


def test_a_descriptor_keeps_an_integer_beyond_2_to_the_53() -> None:
    """The canonical JSON writes such an integer's exact digits (dxts.core.ids)."""
    assert Input(descriptor={"x": 2**60 + 1}).descriptor == {"x": 2**60 + 1}


def test_parcels_are_checked() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    assert ComputeParcel(inputs=[str(a)]).inputs == [a]  # ids may be given as strings
    with pytest.raises(ValidationError) as error:
        ComputeParcel(inputs=[])
    assert refused(error) == ["ComputeParcel.inputs"]
    with pytest.raises(ValidationError, match=r"item 2 .* repeats item 0"):
        ComputeParcel(inputs=[a, b, a])
    with pytest.raises(ValidationError) as error:
        ComputeParcel(inputs=[a], parameters={"x": float("inf")})
    assert refused(error) == ["ComputeParcel.parameters"]
    parcel = DataParcel(
        inputs=[a, b],
        request={"operation": "ReplicateAndRegister", "targetSE": "CERN-DST"},
        deltas=[StorageDelta("CERN-DST", 2, 2000), StorageDelta("BUFFER", -2, -2000)],
    )
    assert [d.se for d in parcel.deltas] == ["CERN-DST", "BUFFER"]
    with pytest.raises(ValidationError, match="one delta per storage element"):
        DataParcel(inputs=[a], request={}, deltas=[StorageDelta("X", 1, 1)] * 2)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        (("X", 1, -5), "StorageDelta.bytes"),
        (("X", 0, 0), "StorageDelta.files"),
        (("X" * 65, 1, 1), "StorageDelta.se"),
        (("", 1, 1), "StorageDelta.se"),
        (("X", 1.5, 1), "StorageDelta.files"),
    ],
)
def test_storage_deltas_go_one_way(arguments: tuple[object, ...], field: str) -> None:
    with pytest.raises(ValidationError) as error:
        StorageDelta(*arguments)  # type: ignore[arg-type]
    assert refused(error) == [field]


def test_delays_are_timezone_aware_and_stored_in_utc() -> None:
    paris = timezone(timedelta(hours=2))
    delay = DelayInput([uuid.uuid4()], datetime(2026, 7, 1, 14, 0, tzinfo=paris))
    assert delay.delay_until == datetime(2026, 7, 1, 12, 0, tzinfo=UTC)
    with pytest.raises(ValidationError) as error:
        DelayInput([uuid.uuid4()], datetime(2026, 7, 1, 14, 0))
    assert refused(error) == ["DelayInput.delay_until"]


def test_reasons_and_messages_fit_their_columns() -> None:
    assert len(BadInput(uuid.uuid4(), "x" * 2000).reason) == 512
    assert ToProblematic("y" * 600).reason.endswith("…")
    assert len(ActionResult.failed("z" * 513).message) == 512


def test_operations_take_booleans_not_truthy_values() -> None:
    assert Operation(feeder_args={"end_run": 10}, pause=True).feeder_args == {"end_run": 10}
    with pytest.raises(ValidationError) as error:
        Operation(pause=1)
    assert refused(error) == ["Operation.pause"]


def test_split_children_are_feeder_shaped_and_distinct() -> None:
    split = SplitInto(
        [{"lfn": "/a", "lfn_size": 3, "descriptor": {"half": 0}}, {"descriptor": {"seed": 1}}]
    )
    assert [type(child) for child in split.children] == [FileInput, Input]
    with pytest.raises(ValidationError) as error:
        SplitInto([{"lfn": "/a", "lfn_size": -3}])
    assert refused(error) == ["SplitInto.children[0].FileInput.lfn_size"]
    with pytest.raises(ValidationError, match="item 1 repeats item 0"):
        SplitInto([FileInput(lfn="/a", lfn_size=3), FileInput(lfn="/a", lfn_size=3, descriptor={})])
    with pytest.raises(ValidationError):
        SplitInto([])


def test_action_results_carry_requirements_only_when_passing() -> None:
    member = uuid.uuid4()
    result = ActionResult.passed("measured", updated_requirements={member: {"cpu_hours": 2}})
    assert result.updated_requirements == {member: {"cpu_hours": 2}}
    with pytest.raises(ValidationError) as error:
        ActionResult("Failed", "too costly", {member: {"cpu_hours": 2000}})
    assert refused(error) == ["ActionResult.updated_requirements"]
    with pytest.raises(ValidationError) as error:
        ActionResult("Maybe")
    assert refused(error) == ["ActionResult.result"]
