"""The `after` quarantine follows its consumer.

The packer sets aside (Problematic) an input whose file a transformation it waits on gave up on
(`dxts.core.builtins.after`). Before each packer invocation of a member with `after`, under its
packer lock, that decision is revisited for every input the packer set aside:

* a consumer wrote its copy off (NotProcessed) and none holds it Problematic → this copy is
  written off too: a file the consumer will never read is not waited for, and no second
  write-off is asked of a person;
* the consumers that hold it have all processed it (Processed or Split), one since this copy was
  set aside — a person reset the consumer's copy and it was processed — → the quarantine is
  lifted (Unassigned): the packer's wait takes it in this same invocation, or holds it back
  while another consumer has not processed it yet;
* otherwise it stays for a person.

Only inputs never put in a parcel are looked at (LastParcelID NULL: an input quarantined for its
own failures is left alone), and lifting needs a consumer's row newer than this one, so an input
set aside for another reason is not lifted round after round. Each page of `PAGE` inputs is one
read and at most two conditional moves, journalled and logged in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from dxts.core.builtins.after import DONE
from dxts.core.db import Database, Isolation, Transaction, db_now
from dxts.core.logs import LogEntry, log_transformations
from dxts.core.state_machines import Actor
from dxts.core.states import InputStatus
from dxts.execution.store.common import move_inputs
from dxts.execution.store.consumers import consumer_copies, set_aside

PAGE = 1000
AUTHOR = "execution"
I = InputStatus  # noqa: E741 - the state table's name


@dataclass
class Reviewed:
    """What one review moved."""

    written_off: int = 0
    lifted: int = 0

    @property
    def moved(self) -> int:
        return self.written_off + self.lifted


Copies = Sequence[tuple[bytes, InputStatus, datetime]]


def decide(copies: Copies, set_aside_at: datetime) -> InputStatus | None:
    """Where a set-aside input goes given its consumers' copies (None: it stays). Lifted, it
    meets the wait again: a consumer not fed the file yet still holds it back."""
    statuses = {status for _, status, _ in copies}
    if I.PROBLEMATIC in statuses:
        return None
    if I.NOT_PROCESSED in statuses:
        return I.NOT_PROCESSED
    newer = any(updated > set_aside_at for _, _, updated in copies)
    if statuses and statuses <= DONE and newer:
        return I.UNASSIGNED
    return None


async def review(
    database: Database, transformation_id: bytes, consumers: Sequence[UUID]
) -> Reviewed:
    """Revisit every input the packer set aside, a page at a time."""
    result = Reviewed()
    if not consumers:
        return result
    after: bytes | None = None
    while True:

        async def page(conn: Transaction, after: bytes | None = after) -> tuple[int, Any]:
            rows = await set_aside(conn, transformation_id, after=after, limit=PAGE)
            if not rows:
                return 0, None
            copies = await consumer_copies(
                conn, [r.lfn for r in rows], [c.bytes for c in consumers]
            )
            targets: dict[InputStatus, list[bytes]] = {}
            for row in rows:
                target = decide(copies.get(row.lfn, []), row.updated_at)
                if target is not None:
                    targets.setdefault(target, []).append(row.input_id)
            await _move(conn, transformation_id, targets, result)
            return len(rows), rows[-1].input_id

        seen, after = await database.run(page, isolation=Isolation.READ_COMMITTED)
        if seen < PAGE:
            return result


async def _move(
    conn: Transaction,
    transformation_id: bytes,
    targets: dict[InputStatus, list[bytes]],
    result: Reviewed,
) -> None:
    now = await db_now(conn)
    entries = []
    for target, ids in targets.items():
        moved = await move_inputs(
            conn,
            transformation_id,
            ids,
            source=I.PROBLEMATIC,
            target=target,
            actor=Actor.CORE,
            now=now,
        )
        if not moved:
            continue
        if target is I.NOT_PROCESSED:
            result.written_off += moved
            event, message = "AfterWrittenOff", "its `after` consumer wrote the files off"
        else:
            result.lifted += moved
            event, message = "AfterQuarantineLifted", "its `after` consumer processed the files"
        entries.append(
            LogEntry(
                transformation_id,
                event,
                AUTHOR,
                message=message,
                data={"inputs": moved, "input_ids": [str(UUID(bytes=i)) for i in ids[:20]]},
            )
        )
    if entries:
        await log_transformations(conn, entries)
