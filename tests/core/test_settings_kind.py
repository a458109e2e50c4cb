"""`KindSetting`: one reading of a parcel kind in settings, shared by the dispatcher's backend
list and the adaptors' own settings (the chart writes lowercase, the protocol's enum names carry
a `KIND_` prefix); anything else is refused by the field, naming it."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from dxts.backends.local.settings import LocalSettings
from dxts.backends.null.settings import NullSettings
from dxts.core.settings import KindSetting
from dxts.core.states import Kind
from dxts.dispatcher.settings import BackendConfig


class Holder(BaseModel):
    kind: KindSetting


@pytest.mark.parametrize(
    ("spelled", "kind"),
    [
        ("compute", Kind.COMPUTE),
        ("Data", Kind.DATA),
        ("KIND_DATA", Kind.DATA),
        (Kind.DATA, Kind.DATA),
    ],
)
def test_each_spelling_of_a_kind_is_read(spelled: object, kind: Kind) -> None:
    assert Holder(kind=spelled).kind is kind  # type: ignore[arg-type]


def test_anything_else_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="kind"):
        Holder(kind="transfer")  # type: ignore[arg-type]


def test_the_settings_that_name_a_kind_read_it_alike() -> None:
    assert BackendConfig(name="b", address="h:1", kind="data").kind is Kind.DATA  # type: ignore[arg-type]
    assert NullSettings(kind="KIND_DATA").kind is Kind.DATA  # type: ignore[arg-type]
    assert LocalSettings(kind="Data").kind is Kind.DATA  # type: ignore[arg-type]
