"""The conformance checks' parcels for a data adaptor (`Kind` DATA): requests naming its storage
elements and files, which only whoever runs the adaptor knows, so they are given to the checks
(`Target.data`) rather than made up by them, as the compute checks make up a `sleep`.

A data adaptor's properties are the compute ones with data parcels (docs/adaptors.md): a quick
request (one that ends soon, e.g. a small replication), a long one (a real transfer that cannot
end for minutes: a large file from or to a throttled server) for the cancellation, capacity and
restart properties, and failing ones (a copy failing for a reason the data side owns: a source
missing, a corrupted source) for the failure property, each with the class, file, storage
element and the storage's own words its outcome must carry. `dxts adaptor check --data-parcels
FILE` reads them from a JSON file (`from_file`); the pytest suite's entries make fresh ones for
every parcel.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dxts.v1 import common_pb2


@dataclass(frozen=True)
class DataFailure:
    """A request that must fail, and how: its outcome FAILED with `failure_class`, naming `lfn`
    and `storage_element`, its `tool_message` holding `words` (the storage's own)."""

    request_json: str
    failure_class: common_pb2.FailureClass.ValueType
    lfn: str
    storage_element: str
    words: str


@dataclass(frozen=True)
class DataParcels:
    """What a data adaptor's check parcels ask, for the VO `vo` (whose files they name): each
    callable gives the request JSON of one more parcel."""

    vo: str
    quick: Callable[[], Awaitable[str]]  # ends soon, and succeeds
    long: Callable[[], Awaitable[str]]  # a real transfer that cannot end for minutes
    failing: Callable[[], Awaitable[list[DataFailure]]]  # each fails as it says


def _constant(value: Any) -> Callable[[], Awaitable[Any]]:
    async def given() -> Any:
        return value

    return given


def from_file(path: Path) -> DataParcels:
    """The parcels a JSON file gives: `{"vo": VO, "quick": REQUEST, "long": REQUEST,
    "failing": [{"request": REQUEST, "class": "stage-in", "lfn": LFN, "storage_element": SE,
    "words": WORDS}, ...]}`, each REQUEST a data request (DIRAC RMS body). The same requests
    serve every parcel: a data request is idempotent (a replica in place is not copied again)."""
    given = json.loads(path.read_text())
    failing = [
        DataFailure(
            json.dumps(entry["request"]),
            common_pb2.FailureClass.Value(
                "FAILURE_CLASS_" + entry["class"].upper().replace("-", "_")
            ),
            entry["lfn"],
            entry["storage_element"],
            entry["words"],
        )
        for entry in given["failing"]
    ]
    return DataParcels(
        given["vo"],
        _constant(json.dumps(given["quick"])),
        _constant(json.dumps(given["long"])),
        _constant(failing),
    )
