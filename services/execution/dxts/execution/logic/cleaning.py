"""Cleaning a transformation's bulk rows (CleanTransformation, called by CleanDatabaseEntries).

Both modes delete the same rows — every input (split lineages from the leaves up), every
ParcelInputs and ParcelOutputs row, every parcel with its facets and backend identifier rows —
and then the transformation's counter and journal rows (`delete_scope`, both counters). The
Transformations row, its Actions and its log stay. The modes differ in when they may run: an
archive while the transformation is Archiving (its files stay where they are), a clean while it
is Cancelling (the cleaning list removed its files before). Either refuses while a parcel is
still live: its outcome could still arrive.

Each call deletes at most `max_rows` rows, in batches of one transaction each (no counter
locks: the scope is unwritable), and says whether anything is left; the action calls again
until `complete`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import StrEnum

from dxts.core.counters import DATA_PARCELS, TRANSFORMATION
from dxts.core.db import Database, Isolation
from dxts.core.errors import FailedPrecondition
from dxts.core.ids import id_to_str
from dxts.core.state_machines import LIVE_PARCEL_STATES
from dxts.core.states import TransformationStatus
from dxts.execution.store import cleaning as db

RC = Isolation.READ_COMMITTED
BATCH = 1_000
MAX_ROWS = 50_000
T = TransformationStatus


class CleanMode(StrEnum):
    ARCHIVE = "archive"
    CLEAN = "clean"


# The states in which each mode may delete the bulk rows.
WHEN = {
    CleanMode.ARCHIVE: (T.ARCHIVING, T.ARCHIVING_BLOCKED),
    CleanMode.CLEAN: (T.CANCELLING, T.CANCELLING_BLOCKED),
}


@dataclass(frozen=True)
class Cleaned:
    rows_deleted: int
    complete: bool


def check_mode(mode: CleanMode, status: str, transformation_id: bytes) -> None:
    if status not in WHEN[mode]:
        raise FailedPrecondition(
            f"transformation {id_to_str(transformation_id)} is {status}: an {mode} cleans only "
            f"while it is {' or '.join(WHEN[mode])}",
            current_state=status,
        )


async def clean_transformation(
    database: Database,
    transformation_id: bytes,
    *,
    max_rows: int = MAX_ROWS,
    batch: int = BATCH,
) -> Cleaned:
    """Delete up to `max_rows` of the transformation's bulk rows (parcels first, then inputs
    bottom-up); once none is left, its counter scope too."""
    live = await database.run(
        functools.partial(
            db.live_parcels,
            transformation_id=transformation_id,
            statuses=sorted(LIVE_PARCEL_STATES),
        ),
        isolation=RC,
    )
    if live:
        raise FailedPrecondition(
            f"transformation {id_to_str(transformation_id)} has {live} parcel(s) in flight: "
            "cancel them and let them end first"
        )
    deleted = 0
    for step in (db.delete_parcels, db.delete_leaf_inputs):
        while deleted < max_rows:
            count = await database.run(
                functools.partial(
                    step, transformation_id=transformation_id, limit=min(batch, max_rows - deleted)
                ),
                isolation=RC,
            )
            deleted += count
            if count == 0:
                break
        if deleted >= max_rows:
            return Cleaned(deleted, complete=False)
    scope = {"TransformationID": transformation_id}
    deleted += await TRANSFORMATION.delete_scope(database, scope)
    deleted += await DATA_PARCELS.delete_scope(database, scope)
    return Cleaned(deleted, complete=True)
