"""The Edge feeder's reader reads an output's watermark at most once per interval (the read
takes the output's lock exclusively and holds recording back), and always afresh once the
producer is seen drained, so the feed after a drained check still goes to the end. On
SQLite and MariaDB."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

import pytest

from dxts.core.db import Database
from dxts.execution.logic import feeding
from dxts.execution.logic.feeding import EdgeReader


@dataclass
class Producer:
    id: bytes
    feeder_enabled: bool


class Snapshot:
    def __init__(self, producer: Producer) -> None:
        self.producer = producer

    async def producer_of(self, output_id: bytes) -> Producer:
        return self.producer


@pytest.fixture
def watermarks(monkeypatch: pytest.MonkeyPatch) -> list[UUID]:
    """Each read of the watermark returns a newer one; the list holds every one read."""
    read: list[UUID] = []

    async def settled_through(conn: Any, output_id: bytes) -> bytes:
        read.append(uuid4())
        return read[-1].bytes

    async def live_work(database: Database, transformation_id: bytes) -> bool:
        return False

    monkeypatch.setattr(feeding.watermark, "settled_through", settled_through)
    monkeypatch.setattr(feeding, "live_work", live_work)
    return read


async def test_the_watermark_is_read_once_per_interval_and_afresh_once_drained(
    database: Database, watermarks: list[UUID]
) -> None:
    producer = Producer(b"p" * 16, feeder_enabled=True)
    reader = EdgeReader(database, Snapshot(producer), watermark_interval_s=3600)  # type: ignore[arg-type]
    output = uuid4()
    assert not await reader.producer_drained(output)
    first = await reader.settled_through(output)
    assert await reader.settled_through(output) == first  # within the interval: no second read
    assert watermarks == [first]
    other = uuid4()
    assert await reader.settled_through(other) != first  # each output has its own
    producer.feeder_enabled = False
    assert await reader.producer_drained(output)
    drained = await reader.settled_through(output)
    assert drained == watermarks[-1] and drained != first
    assert await reader.settled_through(output) != drained  # fresh for as long as drained


async def test_with_no_interval_every_read_is_fresh(
    database: Database, watermarks: list[UUID]
) -> None:
    producer = Producer(b"p" * 16, feeder_enabled=True)
    reader = EdgeReader(database, Snapshot(producer), watermark_interval_s=0)  # type: ignore[arg-type]
    output = uuid4()
    reads = [await reader.settled_through(output) for _ in range(3)]
    assert reads == watermarks and len(set(reads)) == 3
