"""DXTS_STORAGE_ENDPOINTS: the two spellings read the same, a replica's URL is the endpoint's
prefix and the LFN, and every mistake is one line naming the SE."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dxts.core.errors import InvalidArgument
from dxts.core.storage import StorageSettings


def test_both_spellings_name_the_same_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DXTS_STORAGE_ENDPOINTS", "A=root://h:1094//data, B=xroot://g//")
    listed = StorageSettings().endpoints
    monkeypatch.setenv("DXTS_STORAGE_ENDPOINTS", '{"A": "root://h:1094//data", "B": "xroot://g//"}')
    assert StorageSettings().endpoints == listed
    assert listed["A"].url("/vo/run1/f.dst") == "root://h:1094//data/vo/run1/f.dst"
    assert listed["A"].path("/vo/f") == "/data/vo/f"
    assert listed["B"].url("/vo/f") == "xroot://g//vo/f"
    assert StorageSettings().endpoint("C") is None


def test_webdav_and_read_only_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """davs:// is spoken as https:// with one slash before the path; `NAME:ro` is read-only and
    keeps that spelling when written out again (`key`, `base`)."""
    value = "D:ro=davs://dav.example.org:8443/data/,H=http://h:10943,R:ro=root://h//x"
    monkeypatch.setenv("DXTS_STORAGE_ENDPOINTS", value)
    endpoints = StorageSettings().endpoints
    assert sorted(endpoints) == ["D", "H", "R"]
    assert endpoints["D"].url("/vo/f") == "https://dav.example.org:8443/data/vo/f"
    assert endpoints["H"].url("/vo/f") == "http://h:10943/vo/f"
    assert [e.read_only for e in endpoints.values()] == [True, False, True]
    again = ",".join(f"{e.key}={e.base}" for e in endpoints.values())
    assert StorageSettings(endpoints=again).endpoints == endpoints


def test_unset_means_every_se_is_a_local_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DXTS_STORAGE_ENDPOINTS", raising=False)
    assert StorageSettings().endpoints == {}
    monkeypatch.setenv("DXTS_STORAGE_ENDPOINTS", "")
    assert StorageSettings().endpoints == {}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("A=root://h:1/data", "A: 'root://h:1/data': the path needs a double slash"),
        ("A=gsiftp://h//data", "A: 'gsiftp://h//data' is not a storage endpoint"),
        ("A=root://u:p@h//data", "A: 'root://u:p@h//data': no user, query or fragment"),
        ("A=root://h//data/../etc", "'..' in the path"),
        ("A root://h//d", "expected NAME=URL"),
        ("bad/name=root://h//d", "'bad/name' is not a storage element name"),
        ('{"A": 3}', "A: the endpoint is a URL string"),
        ("{nope", "not a JSON object"),
    ],
)
def test_a_mistake_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, value: str, words: str
) -> None:
    monkeypatch.setenv("DXTS_STORAGE_ENDPOINTS", value)
    with pytest.raises(ValidationError) as raised:
        StorageSettings()
    assert words in str(raised.value)


def test_an_lfn_cannot_leave_the_endpoint_prefix() -> None:
    endpoint = StorageSettings(endpoints="A=root://h//data").endpoints["A"]
    with pytest.raises(InvalidArgument):
        endpoint.url("/vo/../../etc/passwd")
