"""Submitting and recording a batch (SQLite and MariaDB): the parameters reach the backend as
stored; the usual batch is recorded by the quick path, one that is not as claimed is rolled
back and recorded by locking its parcels first, and either way the rows and the counters are
what the locking path alone would leave."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dispatch_support import (
    Keys,
    assert_counters_exact,
    dispatcher,
    empty,
    identifiers,
    parcels,
    statuses,
    transformation,
)

from dxts.backends.null.logic.adaptor import NullAdaptor
from dxts.core.adaptor.model import Payload, Submission, SubmitResult
from dxts.core.db import Database
from dxts.core.ids import id_to_str
from dxts.core.states import Kind
from dxts.dispatcher.store import recording

COMPUTE = {"name": "null", "address": "", "kind": "compute"}


def count_calls(monkeypatch: Any, name: str) -> list[int]:
    """Count the calls of `recording.<name>` (the dispatcher calls it through the module)."""
    calls: list[int] = []
    real = getattr(recording, name)

    async def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return await real(*args, **kwargs)

    monkeypatch.setattr(recording, name, counted)
    return calls


class KeepingNull(NullAdaptor):
    """The null adaptor, keeping the submissions it was sent."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: dict[str, Submission] = {}

    async def submit(self, payload: Payload, parcels: Sequence[Submission]) -> list[SubmitResult]:
        self.sent.update((p.parcel_id, p) for p in parcels)
        return await super().submit(payload, parcels)


async def test_the_parameters_reach_the_backend_as_stored(
    database: Database, keys: Keys, null_adaptors: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    parameters = {"seeds": ["1", "2"], "énergie": 6.5, "nested": {"a": [None, True]}}
    ids = await parcels(database, 2, transformation_id=tid, parameters=parameters)
    users = await parcels(database, 1, parameters=[])
    adaptor, address = await null_adaptors(KeepingNull)
    component = await dispatcher(database, [{**COMPUTE, "address": address}], keys)

    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 3

    for p in ids:
        assert json.loads(adaptor.sent[id_to_str(p)].parameters_json) == parameters
    assert json.loads(adaptor.sent[id_to_str(users[0])].parameters_json) == []
    await component.stop()


async def test_a_usual_batch_is_recorded_without_the_locking_path(
    database: Database, keys: Keys, null_adaptors: Any, monkeypatch: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    ids = await parcels(database, 4, transformation_id=tid, inputs_per_parcel=1)
    _, address = await null_adaptors()
    component = await dispatcher(database, [{**COMPUTE, "address": address}], keys)
    locking = count_calls(monkeypatch, "record_accepted")

    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 4

    assert locking == []
    assert set((await statuses(database, ids)).values()) == {"Assigned"}
    assert set(await identifiers(database, "null")) == set(ids)
    await assert_counters_exact(database)
    await component.stop()


async def test_a_clashing_identifier_rolls_the_quick_path_back(
    database: Database, keys: Keys, null_adaptors: Any, monkeypatch: Any
) -> None:
    await empty(database)
    tid = await transformation(database)
    (first,) = await parcels(database, 1, transformation_id=tid)
    _, address = await null_adaptors()
    component = await dispatcher(database, [{**COMPUTE, "address": address}], keys)
    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 1
    (taken,) = (await identifiers(database, "null")).values()

    ids = await parcels(database, 3, transformation_id=tid)
    backend = component.dispatcher.backends["null"]
    real_submit = backend.submit

    async def misbehaving(*args: Any) -> Any:
        results = await real_submit(*args)
        results[1].identifier = id_to_str(taken)  # the first parcel's identifier, again
        return results

    backend.submit = misbehaving  # type: ignore[method-assign]
    locking = count_calls(monkeypatch, "record_accepted")
    assert await component.dispatcher.dispatch_once(Kind.COMPUTE) == 3

    assert locking == [1]  # the quick path rolled back, the locking path recorded the batch
    states = await statuses(database, ids)
    assert [states[p] for p in ids] == ["Assigned", "Reserved", "Assigned"]
    recorded = await identifiers(database, "null")
    assert set(recorded) == {first, ids[0], ids[2]}
    assert recorded[first] == taken
    await assert_counters_exact(database)
    await component.stop()
