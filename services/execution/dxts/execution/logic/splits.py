"""Split children of a Completing parcel's inputs (a status report's SPLIT entries).

SUCCESS portions are inserted Processed and claimed by one new born-Done recovery parcel per
parcel; FAILURE portions Unassigned, for a packer to take. Split children inherit their
parent's failure history: a FAILURE portion starts at the parent's ErrorCount + 1 (it failed in
this parcel), a SUCCESS portion at the parent's count. A child whose identity the
transformation already has is not inserted again (a warning on the parcel).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from dxts.core.db import Transaction
from dxts.core.ids import id_to_str, new_id
from dxts.core.plugins import FileInput, Input
from dxts.core.states import InputStatus, ParcelStatus
from dxts.execution.logic.parcel_annotations import RECOVERY_BACKEND, RECOVERY_OF
from dxts.execution.logic.recording_plan import Recording
from dxts.execution.store import splits as store

I, P = InputStatus, ParcelStatus  # noqa: E741 - the state tables' names


async def insert_splits(
    conn: Transaction, plans: Sequence[Recording], now: datetime
) -> dict[bytes, bytes]:
    """Insert the split children of `plans`: SUCCESS portions Processed and claimed by one new
    born-Done recovery parcel per parcel, FAILURE portions Unassigned. Returns ParcelID → its
    recovery parcel."""
    if not plans:
        return {}
    wanted: dict[bytes, list[bytes]] = defaultdict(list)
    for plan in plans:
        assert plan.parcel.transformation_id is not None
        for _, entry in plan.splits:
            wanted[plan.parcel.transformation_id].extend(
                child.input_hash for child in (*entry.succeeded, *entry.failed)
            )
    taken = {tid: await store.existing_hashes(conn, tid, hashes) for tid, hashes in wanted.items()}
    facets = await store.compute_facets(conn, [plan.parcel.parcel_id for plan in plans])
    children: list[dict[str, Any]] = []
    recovered: list[store.RecoveryParcel] = []
    links: list[dict[str, Any]] = []
    recovery: dict[bytes, bytes] = {}
    for plan in plans:
        tid = plan.parcel.transformation_id
        assert tid is not None
        recovery_id = new_id()
        claimed = 0
        skipped = 0
        for parent, entry in plan.splits:
            for child, success in [(c, True) for c in entry.succeeded] + [
                (c, False) for c in entry.failed
            ]:
                if child.input_hash in taken[tid]:
                    skipped += 1
                    continue
                taken[tid].add(child.input_hash)
                row = child_row(tid, parent.input_id, parent.error_count, child, now)
                if success:
                    row.update(Status=I.PROCESSED, LastParcelID=recovery_id)
                    link = {"TransformationID": tid, "ParcelID": recovery_id}
                    links.append({**link, "InputID": row["InputID"]})
                    claimed += 1
                else:
                    row.update(ErrorCount=parent.error_count + 1)
                children.append(row)
        if skipped:
            plan.warnings.append(
                f"{skipped} split child(ren) already exist in the transformation: not inserted"
            )
        if claimed:
            recovery[plan.parcel.parcel_id] = recovery_id
            recovered.append(
                store.RecoveryParcel(
                    recovery_id,
                    plan.parcel,
                    RECOVERY_BACKEND,
                    {RECOVERY_OF: id_to_str(plan.parcel.parcel_id)},
                    facets.get(plan.parcel.parcel_id),
                )
            )
    # Parcels first: the Processed children's LastParcelID names them.
    await store.insert_born_done_parcels(conn, recovered, now)
    await store.insert_inputs(conn, children)
    await store.insert_parcel_inputs(conn, links)
    return recovery


def child_row(
    transformation_id: bytes, parent_id: bytes, error_count: int, child: Input, now: datetime
) -> dict[str, Any]:
    """An Inputs row for a split child (Unassigned, carrying its parent's ErrorCount)."""
    return {
        "TransformationID": transformation_id,
        "InputID": new_id(),
        "ParentInputID": parent_id,
        "InputHash": child.input_hash,
        "LFN": child.lfn if isinstance(child, FileInput) else None,
        "LFNSize": child.lfn_size if isinstance(child, FileInput) else None,
        "Descriptor": child.descriptor,
        "Status": I.UNASSIGNED,
        "ErrorCount": error_count,
        "DelayedUntil": None,
        "LastParcelID": None,
        "UpdatedAt": now,
    }
