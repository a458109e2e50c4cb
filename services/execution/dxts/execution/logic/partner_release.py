"""A set withheld for its partner is offered again once the partner output has grown.

A joining packer (ByPartner, Join) withholds a driving input whose partner is not produced yet
(DelayInput, `delay_minutes`): the delay is the longest it waits for a partner that may never
come, not how long every set whose sides end at different times must wait. The plugin cannot
be woken (it proposes, and only when the core offers it inputs), so before each packer
invocation of a member that joins other members' outputs (`Annotations["joined"]`, recorded by
the compiler for every step whose inputs are sourced from other steps, whatever its packer),
under its packer lock, the core clears DelayedUntil on the inputs it withheld before the newest
file recorded under a joined output: the packer meets them again in this invocation and, with
the same lookup, packs those whose partner is there and withholds the others anew (their
UpdatedAt then after that file, so each is looked at again only when the partner grows again).

The newest file's time is its OutputID's (a UUIDv7 minted when it is recorded, before its
transaction commits), compared with when an input was withheld (UpdatedAt, the database's
clock, whole seconds on MariaDB): an input withheld up to `RACE_S` after it is offered again
too, for a lookup may have run before that recording committed. Two statements when nothing is
withheld: one primary-key read per joined output, one conditional UPDATE on the
(TransformationID, Status) index.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from dxts.core.db import Database, Isolation, Transaction, db_now
from dxts.execution.logic.parcel_times import created_at
from dxts.execution.store import partners

JOINED = "joined"  # what the compiler records: step input → TransformationOutputID it joins
RACE_S = 5.0  # the longest a recording is taken to stay uncommitted after minting its files


def joined_outputs(annotations: Mapping[str, Any]) -> set[bytes]:
    """The TransformationOutputIDs a member joins (none for a malformed record: its packer
    names that itself)."""
    joined = annotations.get(JOINED)
    found = set()
    for value in joined.values() if isinstance(joined, Mapping) else ():
        try:
            found.add(uuid.UUID(str(value)).bytes)
        except ValueError:
            continue
    return found


async def release(database: Database, transformation_id: bytes, joined: set[bytes]) -> int:
    """Clear DelayedUntil on the inputs withheld before the newest joined file (plus `RACE_S`);
    how many."""
    if not joined:
        return 0

    async def work(conn: Transaction) -> int:
        newest = await partners.newest_output(conn, joined)
        if newest is None:
            return 0
        by = created_at(newest) + timedelta(seconds=RACE_S)
        now = await db_now(conn)
        return await partners.release_withheld(conn, transformation_id, withheld_by=by, now=now)

    return await database.run(work, isolation=Isolation.READ_COMMITTED)
