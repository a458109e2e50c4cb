"""Execution side: the bulk rows, written constantly by the system.

Owned by execution, except the Parcels transitions Unassigned → Reserved → Assigned (and back
on a refused submission), Parcels.Backend, ComputeParcels.ResolvedHintsID and the backend
identifier tables, which belong to the dispatcher.
The bulk tables lead their keys with the transformation so that each transformation's rows are
contiguous and cleaning is a range delete.
"""

import sqlalchemy as sa

from dxts.core.schema.metadata import MYSQL_TABLE_OPTIONS, metadata
from dxts.core.schema.types import Enum, Hash16, Hash32, Json, Lfn, Timestamp, Uuid
from dxts.core.states import InputStatus, Kind, ParcelStatus, values

input_status = Enum("InputStatus", values(InputStatus))
parcel_status = Enum("ParcelStatus", values(ParcelStatus))

inputs = sa.Table(
    "Inputs",
    metadata,
    sa.Column(
        "TransformationID",
        Uuid(),
        sa.ForeignKey("Transformations.TransformationID"),
        primary_key=True,
    ),
    sa.Column("InputID", Uuid(), primary_key=True),
    sa.Column("ParentInputID", Uuid(), nullable=True),
    sa.Column("InputHash", Hash16(), nullable=False),
    sa.Column("LFN", Lfn(), nullable=True),
    sa.Column("LFNSize", sa.BigInteger(), nullable=True),
    sa.Column("Descriptor", Json(), nullable=True),
    sa.Column("Status", input_status, nullable=False, server_default="Unassigned"),
    sa.Column("ErrorCount", sa.Integer(), nullable=False, server_default=sa.text("0")),
    sa.Column("DelayedUntil", Timestamp(), nullable=True),
    sa.Column("LastParcelID", Uuid(), nullable=True),
    sa.Column("UpdatedAt", Timestamp(), nullable=False),
    sa.ForeignKeyConstraint(
        ["TransformationID", "ParentInputID"],
        ["Inputs.TransformationID", "Inputs.InputID"],
        ondelete="CASCADE",
    ),
    sa.UniqueConstraint("TransformationID", "InputHash"),
    sa.Index(None, "TransformationID", "Status"),
    sa.Index(None, "TransformationID", "LFN"),
    sa.Index(None, "TransformationID", "ParentInputID"),
    **MYSQL_TABLE_OPTIONS,
)

parcels = sa.Table(
    "Parcels",
    metadata,
    sa.Column("ParcelID", Uuid(), primary_key=True),
    sa.Column(
        "TransformationID",
        Uuid(),
        sa.ForeignKey("Transformations.TransformationID"),
        nullable=True,
    ),
    sa.Column("Kind", Enum("ParcelKind", values(Kind)), nullable=False),
    sa.Column("Status", parcel_status, nullable=False, server_default="Unassigned"),
    sa.Column("Backend", sa.String(32), nullable=True),
    sa.Column("Annotations", Json(), nullable=True),
    sa.Column("UpdatedAt", Timestamp(), nullable=False),
    sa.Column("CompletedAt", Timestamp(), nullable=True),
    sa.Index(None, "TransformationID", "Status"),
    sa.Index(None, "Backend", "Status"),
    sa.Index(None, "Kind", "Status"),
    **MYSQL_TABLE_OPTIONS,
)

# MariaDB, seeing ORDER BY ParcelID LIMIT n over a status, may walk the primary key from the
# start through every parcel already Done (seconds a query at a million) rather than read the
# (Kind, Status) index, whose entries are in ParcelID order within a status: the queries that
# page through a status name every kind and force the index.
PARCELS_BY_KIND_AND_STATUS = "FORCE INDEX (ix_Parcels_Kind_Status)"

# A batch naming its rows by key reads that key. InnoDB estimates the number of distinct values
# of a key's leading column from a few sampled pages, and for TransformationID (a handful of
# values, each over a long run of rows) the estimate is wrong by orders of magnitude: MariaDB was
# seen taking "TransformationID = :t" on some index for one row and reading the transformation's
# every input (seconds a batch at a million) instead of probing the 900 keys named.
BY_PRIMARY_KEY = "FORCE INDEX (PRIMARY)"
INPUTS_BY_HASH = "FORCE INDEX (uq_Inputs_TransformationID_InputHash)"

user_parcels = sa.Table(
    "UserParcels",
    metadata,
    sa.Column("ParcelID", Uuid(), sa.ForeignKey("Parcels.ParcelID"), primary_key=True),
    sa.Column("VO", sa.String(32), nullable=False),
    sa.Column("Sub", sa.String(256), nullable=False),
    sa.Index(None, "VO", "Sub"),
    **MYSQL_TABLE_OPTIONS,
)

compute_parcels = sa.Table(
    "ComputeParcels",
    metadata,
    sa.Column("ParcelID", Uuid(), sa.ForeignKey("Parcels.ParcelID"), primary_key=True),
    sa.Column("ProcessID", Hash32(), sa.ForeignKey("Processes.ProcessID"), nullable=False),
    sa.Column(
        "RequirementsID", Hash32(), sa.ForeignKey("Requirements.RequirementsID"), nullable=True
    ),
    sa.Column(
        "ResolvedHintsID", Hash32(), sa.ForeignKey("ResolvedHints.ResolvedHintsID"), nullable=True
    ),
    sa.Column("Parameters", Json(), nullable=True),
    **MYSQL_TABLE_OPTIONS,
)

data_parcels = sa.Table(
    "DataParcels",
    metadata,
    sa.Column("ParcelID", Uuid(), sa.ForeignKey("Parcels.ParcelID"), primary_key=True),
    sa.Column("Request", Json(), nullable=False),
    **MYSQL_TABLE_OPTIONS,
)

data_parcel_deltas = sa.Table(
    "DataParcelDeltas",
    metadata,
    sa.Column("ParcelID", Uuid(), sa.ForeignKey("DataParcels.ParcelID"), primary_key=True),
    sa.Column("StorageElement", sa.String(64), primary_key=True),
    sa.Column("FilesAdded", sa.BigInteger(), nullable=False),
    sa.Column("BytesAdded", sa.BigInteger(), nullable=False),
    sa.Column("FilesFreed", sa.BigInteger(), nullable=False),
    sa.Column("BytesFreed", sa.BigInteger(), nullable=False),
    sa.Index(None, "StorageElement"),
    **MYSQL_TABLE_OPTIONS,
)

parcel_inputs = sa.Table(
    "ParcelInputs",
    metadata,
    sa.Column("TransformationID", Uuid(), primary_key=True),
    sa.Column("ParcelID", Uuid(), sa.ForeignKey("Parcels.ParcelID"), primary_key=True),
    sa.Column("InputID", Uuid(), primary_key=True),
    sa.ForeignKeyConstraint(
        ["TransformationID", "InputID"], ["Inputs.TransformationID", "Inputs.InputID"]
    ),
    sa.Index(None, "TransformationID", "InputID"),
    **MYSQL_TABLE_OPTIONS,
)

parcel_outputs = sa.Table(
    "ParcelOutputs",
    metadata,
    sa.Column(
        "TransformationOutputID",
        Uuid(),
        sa.ForeignKey("TransformationOutputs.TransformationOutputID"),
        primary_key=True,
    ),
    sa.Column("OutputID", Uuid(), primary_key=True),
    sa.Column("ParcelID", Uuid(), sa.ForeignKey("Parcels.ParcelID"), nullable=False),
    sa.Column("LFN", Lfn(), nullable=False),
    sa.Column("LFNSize", sa.BigInteger(), nullable=True),
    sa.Index(None, "ParcelID"),
    sa.Index(None, "TransformationOutputID", "LFN"),
    **MYSQL_TABLE_OPTIONS,
)

# Backend identifier tables: one per backend, owned by the dispatcher. A parcel has a row in at
# most one of them; the unique index is the reverse lookup when the backend reports back.

diracx_ids = sa.Table(
    "DiracXIDs",
    metadata,
    sa.Column("ParcelID", Uuid(), sa.ForeignKey("Parcels.ParcelID"), primary_key=True),
    sa.Column("SlotID", Uuid(), nullable=False),
    sa.UniqueConstraint("SlotID"),
    **MYSQL_TABLE_OPTIONS,
)

glidein_ids = sa.Table(
    "GlideInIDs",
    metadata,
    sa.Column("ParcelID", Uuid(), sa.ForeignKey("Parcels.ParcelID"), primary_key=True),
    sa.Column("Server", sa.String(255), nullable=False),
    sa.Column("GlideInID", sa.String(255), nullable=False),
    sa.UniqueConstraint("Server", "GlideInID"),
    **MYSQL_TABLE_OPTIONS,
)

# Every adaptor's identifiers, in one table owned by the dispatcher: a new adaptor needs no
# schema change. Each adaptor mints a UUID per accepted parcel, unique among its adaptor type's;
# (Adaptor, Identifier) is the reverse lookup when the adaptor reports back. A parcel has a row
# here or in one of the spec's tables above (which no shipped adaptor writes), never both.
backend_ids = sa.Table(
    "BackendIDs",
    metadata,
    sa.Column("ParcelID", Uuid(), sa.ForeignKey("Parcels.ParcelID"), primary_key=True),
    sa.Column("Adaptor", sa.String(64), nullable=False),
    sa.Column("Identifier", Uuid(), nullable=False),
    sa.UniqueConstraint("Adaptor", "Identifier"),
    **MYSQL_TABLE_OPTIONS,
)

# Not in the seed schema: each feeder's bookmark and whether it said NoMoreInputs, execution's
# own row per transformation, written in the transaction of the inputs the feeder yields. The
# operator's switch stays definition's (Transformations.FeederEnabled); a feeder runs while the
# switch is on and its row is not Exhausted. Transformations.FeederState, the seed's place for
# the bookmark, is no longer written (see docs/architecture.md, "Table ownership").
feeder_states = sa.Table(
    "FeederStates",
    metadata,
    sa.Column(
        "TransformationID",
        Uuid(),
        sa.ForeignKey("Transformations.TransformationID"),
        primary_key=True,
    ),
    sa.Column("Bookmark", Json(), nullable=True),
    sa.Column("Exhausted", sa.Boolean(), nullable=False, server_default=sa.false()),
    sa.Column("UpdatedAt", Timestamp(), nullable=False),
    # Why a quota holds the feeder (NULL: it is not held); cleared when it is reset.
    sa.Column("HeldReason", sa.String(512), nullable=True),
    **MYSQL_TABLE_OPTIONS,
)

# Not in the seed schema: execution's own row per declared output, the reader-writer lock of the
# Edge feeder's watermark (`dxts.execution.store.watermark`). A recording transaction creates it
# put-if-absent the first time it writes under the output, so the lock is taken on a row
# execution owns rather than on definition's TransformationOutputs row.
output_watermarks = sa.Table(
    "OutputWatermarks",
    metadata,
    sa.Column(
        "TransformationOutputID",
        Uuid(),
        sa.ForeignKey("TransformationOutputs.TransformationOutputID"),
        primary_key=True,
    ),
    **MYSQL_TABLE_OPTIONS,
)

# Not in the seed schema: where execution directs a parcel, its own row per parcel so directed,
# written with the parcel (a packer's choice of backend, or `recovery` for a split's born-Done
# recovery parcel, which is never dispatched). Parcels.Backend is the dispatcher's alone: the
# backend it reserved the parcel for, cleared when that backend refuses it. The dispatcher's
# claim reads this row (a directed parcel goes to its backend or waits for a dispatcher that has
# it); a parcel without one goes where the dispatcher's policy chooses.
directed_parcels = sa.Table(
    "DirectedParcels",
    metadata,
    sa.Column("ParcelID", Uuid(), sa.ForeignKey("Parcels.ParcelID"), primary_key=True),
    sa.Column("Backend", sa.String(32), nullable=False),
    sa.Index(None, "Backend"),
    **MYSQL_TABLE_OPTIONS,
)

# Not in the seed schema: the dispatcher's own row per VO whose parcels in flight are capped,
# locked by every claim that would take that VO's parcels, so that two claimers never both see
# room the other is taking (`dxts.dispatcher.store.quota`). Created put-if-absent by the first
# claim of the VO; it holds nothing but the lock.
in_flight_locks = sa.Table(
    "InFlightLocks",
    metadata,
    sa.Column("VO", sa.String(32), primary_key=True),
    **MYSQL_TABLE_OPTIONS,
)
