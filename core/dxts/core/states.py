"""The value sets of the four state machines, in the schema's ENUM order.

The schema's ENUM columns are built from these tuples and the transition tables in
`dxts.core.state_machines` are keyed by them, so the database and the code cannot drift apart.
Appending a state is a migration that appends to the ENUM; never reorder.
"""

from __future__ import annotations

from enum import StrEnum


class WorkgraphStatus(StrEnum):
    NEW = "New"
    SCOUTING = "Scouting"
    APPROVING = "Approving"
    APPROVING_BLOCKED = "ApprovingBlocked"
    ACTIVE = "Active"
    FINALIZING = "Finalizing"
    COMPLETED = "Completed"
    ARCHIVING = "Archiving"
    ARCHIVED = "Archived"
    CANCELLING = "Cancelling"
    CANCELLED = "Cancelled"


class TransformationStatus(StrEnum):
    NEW = "New"
    ACTIVE = "Active"
    PAUSED = "Paused"
    FINALIZING = "Finalizing"
    FINALIZING_BLOCKED = "FinalizingBlocked"
    FINALIZED = "Finalized"
    COMPLETED = "Completed"
    ARCHIVING = "Archiving"
    ARCHIVING_BLOCKED = "ArchivingBlocked"
    ARCHIVED = "Archived"
    CANCELLING = "Cancelling"
    CANCELLING_BLOCKED = "CancellingBlocked"
    CANCELLED = "Cancelled"


class InputStatus(StrEnum):
    UNASSIGNED = "Unassigned"
    ASSIGNED = "Assigned"
    PROCESSED = "Processed"
    SPLIT = "Split"
    FAILED = "Failed"
    PROBLEMATIC = "Problematic"
    NOT_PROCESSED = "NotProcessed"


class ParcelStatus(StrEnum):
    UNASSIGNED = "Unassigned"
    RESERVED = "Reserved"
    ASSIGNED = "Assigned"
    COMPLETING = "Completing"
    DONE = "Done"
    PARTIALLY_DONE = "PartiallyDone"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


class Kind(StrEnum):
    COMPUTE = "Compute"
    DATA = "Data"


class ActionResult(StrEnum):
    PENDING = "Pending"
    PASSED = "Passed"
    FAILED = "Failed"
    DONE = "Done"


def values(enum: type[StrEnum]) -> tuple[str, ...]:
    """The ENUM value list of a state set, in declaration (= schema) order."""
    return tuple(member.value for member in enum)
