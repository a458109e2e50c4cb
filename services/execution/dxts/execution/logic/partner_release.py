"""A set withheld for its partner is offered again once the partner is made.

A joining packer (ByPartner, Join) withholds a driving input whose partner is not produced yet
(DelayInput, for `delay_minutes`): the delay is the longest it waits for a partner that may never
come, not how long every set whose sides end at different times must wait. The plugin cannot be
woken (it proposes, and only on what the core offers it), so before each packer invocation of a
member that joins another step's output (`Annotations["joined"]`, which the compiler records for
every such step, whatever its packer) and is fed along an edge (its driving output), under its
packer lock, the core follows the partner files recorded since it last looked back to the
withheld sets they complete: the partner parcels' source files, the driving producer's files
made from the same sources, the member's withheld inputs on those files, whose DelayedUntil it
clears (`store.partner_release`). The packer meets them in this invocation and, with its own
lookup, packs those whose partner is all there and withholds the others anew.

Where it last looked is this process's memory, per member and partner output: an OutputID below
which every partner file was followed (`_Settled`). A file is minted before its recording
commits, so what was minted in the last `RACE_S` is followed again on the next rounds (a set
withheld by a lookup that ran before such a file committed is released then), and a member not
looked at yet by this process starts from its longest-withheld input. Nothing depends on the
memory for correctness: a process that lost it follows again what it followed (the sets are
withheld again), and a set it missed waits out its delay, as before. A round with no new partner
file costs one primary-key read per joined output.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from dxts.core.db import Database, Isolation, Transaction, db_now
from dxts.execution.logic.parcel_times import first_id_at
from dxts.execution.logic.transformations import ActiveTransformation
from dxts.execution.store import partner_release as db

JOINED = "joined"  # what the compiler records: step input → TransformationOutputID it joins
DRIVING = "transformation_output_id"  # the Edge feeder's argument: the output the pool is fed
RACE_S = 5.0  # the longest a recording is taken to stay uncommitted after minting its files


def _id(value: Any) -> bytes | None:
    try:
        return uuid.UUID(str(value)).bytes
    except ValueError:
        return None


def joined_outputs(annotations: Mapping[str, Any]) -> list[bytes]:
    """The TransformationOutputIDs a member joins (none of a malformed record: its packer
    names that itself)."""
    joined = annotations.get(JOINED)
    found = {_id(value) for value in (joined.values() if isinstance(joined, Mapping) else ())}
    return sorted(output for output in found if output is not None)


def _recent(now: datetime) -> bytes:
    """The first OutputID minted `RACE_S` before `now` (naive UTC)."""
    return first_id_at(now - timedelta(seconds=RACE_S))


class PartnerRelease:
    """The release, with this process's memory of how far each member's partners were followed
    (one per process: execution's `PartnerFinder` holds it)."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._settled: dict[tuple[bytes, bytes], bytes] = {}

    async def release(self, transformation: ActiveTransformation) -> int:
        """Offer again the member's withheld inputs whose partner was made since; how many."""
        joined = joined_outputs(transformation.annotations)
        driving = _id(transformation.feeder_args.get(DRIVING))
        if not joined or driving is None:
            return 0
        settled: dict[tuple[bytes, bytes], bytes] = {}

        async def work(conn: Transaction) -> int:
            released = 0
            now = datetime.now(UTC).replace(tzinfo=None)
            for output in joined:
                key = (transformation.id, output)
                newest = await db.newest_output(conn, output)
                floor = self._settled.get(key)
                if newest is None or (floor is not None and newest < floor):
                    continue  # nothing minted since it was followed
                if floor is None:  # not looked at by this process: from what waits longest
                    oldest = await db.oldest_withheld(conn, transformation.id)
                    if oldest is None:
                        settled[key] = _recent(now)
                        continue
                    floor = first_id_at(oldest - timedelta(seconds=RACE_S))
                released += await self._follow(conn, transformation.id, output, driving, floor)
                settled[key] = max(floor, _recent(now))
            return released

        released = await self._database.run(work, isolation=Isolation.READ_COMMITTED)
        self._settled.update(settled)  # once committed
        return released

    async def _follow(
        self, conn: Transaction, member: bytes, output: bytes, driving: bytes, floor: bytes
    ) -> int:
        """Release the member's withheld inputs on the driving files made from the sources of
        the partner files minted from `floor` on."""
        sources = await db.sources_made_after(conn, output, floor)
        producer = await db.producer(conn, driving) if sources else None
        if producer is None:
            return 0
        files = await db.made_from(conn, producer, driving, sources)
        return await db.release(conn, member, files, await db_now(conn)) if files else 0
