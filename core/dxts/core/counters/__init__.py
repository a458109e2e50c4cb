"""Journalled counters (docs/counters.md): the construct, and the two counters dxts declares.

`dxts.core.schema` is imported first on purpose: it registers the counter tables by importing
`instances`, so whichever of the two packages is imported first, the schema package finishes
loading before anything here needs it.
"""

import dxts.core.schema  # noqa: F401  (import order, see above)
from dxts.core.counters.construct import (
    Counter,
    Drift,
    FoldResult,
    KeyColumn,
    Reading,
    Source,
    on_drift,
)
from dxts.core.counters.instances import (
    DATA_PARCELS,
    TRANSFORMATION,
    Entity,
    StorageDelta,
    journal_data_parcels,
    journal_input_transition,
    journal_inputs,
    journal_parcel_transition,
    journal_parcels,
)
from dxts.core.counters.locks import counter_locks, ensure_lock_rows

__all__ = [
    "DATA_PARCELS",
    "TRANSFORMATION",
    "Counter",
    "Drift",
    "Entity",
    "FoldResult",
    "KeyColumn",
    "Reading",
    "Source",
    "StorageDelta",
    "counter_locks",
    "ensure_lock_rows",
    "journal_data_parcels",
    "journal_input_transition",
    "journal_inputs",
    "journal_parcel_transition",
    "journal_parcels",
    "on_drift",
]
