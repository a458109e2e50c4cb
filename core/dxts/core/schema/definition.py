"""Definition side: few rows, written by operators and tooling; owned by definition.

Transformations.FeederState, and clearing FeederEnabled on NoMoreInputs, are written by
execution (docs/architecture.md, table ownership); everything else here only by definition.
"""

import sqlalchemy as sa

from dxts.core.schema.metadata import MYSQL_TABLE_OPTIONS, metadata
from dxts.core.schema.types import Enum, Hash32, Json, Timestamp, Uuid
from dxts.core.states import ActionResult, Kind, TransformationStatus, WorkgraphStatus, values

workgraph_status = Enum("WorkgraphStatus", values(WorkgraphStatus))
transformation_status = Enum("TransformationStatus", values(TransformationStatus))

workgraphs = sa.Table(
    "Workgraphs",
    metadata,
    sa.Column("WorkgraphID", Uuid(), primary_key=True),
    sa.Column("Type", sa.String(32), nullable=False),
    sa.Column("Status", workgraph_status, nullable=False, server_default="New"),
    sa.Column("StrippedSpec", Json(), nullable=False),
    sa.Column("Annotations", Json(), nullable=True),
    sa.Column("Hooks", Json(), nullable=True),
    sa.Column("UpdatedAt", Timestamp(), nullable=False),
    sa.Index(None, "Status"),
    **MYSQL_TABLE_OPTIONS,
)

ownership = sa.Table(
    "Ownership",
    metadata,
    sa.Column("OwnershipID", Uuid(), primary_key=True),
    sa.Column("VO", sa.String(32), nullable=False),
    sa.Column("Sub", sa.String(256), nullable=False),
    sa.Column("WorkgraphID", Uuid(), sa.ForeignKey("Workgraphs.WorkgraphID"), nullable=True),
    sa.UniqueConstraint("WorkgraphID"),
    sa.Index(None, "VO", "Sub"),
    **MYSQL_TABLE_OPTIONS,
)

transformations = sa.Table(
    "Transformations",
    metadata,
    sa.Column("TransformationID", Uuid(), primary_key=True),
    sa.Column("OwnershipID", Uuid(), sa.ForeignKey("Ownership.OwnershipID"), nullable=False),
    sa.Column("ExecutingIdentity", sa.String(64), nullable=True),
    sa.Column("Type", sa.String(32), nullable=False),
    sa.Column("Kind", Enum("TransformationKind", values(Kind)), nullable=False),
    sa.Column("Status", transformation_status, nullable=False, server_default="New"),
    sa.Column("Feeder", sa.String(64), nullable=True),
    sa.Column("FeederArgs", Json(), nullable=True),
    sa.Column("FeederState", Json(), nullable=True),
    sa.Column("FeederEnabled", sa.Boolean(), nullable=False, server_default=sa.true()),
    sa.Column("Packer", sa.String(64), nullable=False),
    sa.Column("PackerArgs", Json(), nullable=True),
    sa.Column("Annotations", Json(), nullable=True),
    sa.Column("Hooks", Json(), nullable=True),
    sa.Column("UpdatedAt", Timestamp(), nullable=False),
    sa.Index(None, "OwnershipID"),
    sa.Index(None, "Status"),
    sa.Index(None, "Type"),
    **MYSQL_TABLE_OPTIONS,
)

processes = sa.Table(
    "Processes",
    metadata,
    sa.Column("ProcessID", Hash32(), primary_key=True),
    sa.Column("Process", Json(), nullable=False),
    sa.Column("CreatedAt", Timestamp(), nullable=False),
    **MYSQL_TABLE_OPTIONS,
)

process_references = sa.Table(
    "ProcessReferences",
    metadata,
    sa.Column("ParentProcessID", Hash32(), sa.ForeignKey("Processes.ProcessID"), primary_key=True),
    sa.Column("ChildProcessID", Hash32(), sa.ForeignKey("Processes.ProcessID"), primary_key=True),
    sa.Index(None, "ChildProcessID"),
    **MYSQL_TABLE_OPTIONS,
)

process_registry = sa.Table(
    "ProcessRegistry",
    metadata,
    sa.Column("VO", sa.String(32), primary_key=True),
    sa.Column("Name", sa.String(128), primary_key=True),
    sa.Column("Version", sa.String(64), primary_key=True),
    sa.Column("ProcessID", Hash32(), sa.ForeignKey("Processes.ProcessID"), nullable=False),
    sa.Column("Author", sa.String(64), nullable=False),
    sa.Column("CreatedAt", Timestamp(), nullable=False),
    sa.Index(None, "ProcessID"),
    **MYSQL_TABLE_OPTIONS,
)

requirements = sa.Table(
    "Requirements",
    metadata,
    sa.Column("RequirementsID", Hash32(), primary_key=True),
    sa.Column("Requirements", Json(), nullable=False),
    sa.Column("CreatedAt", Timestamp(), nullable=False),
    **MYSQL_TABLE_OPTIONS,
)

resolved_hints = sa.Table(
    "ResolvedHints",
    metadata,
    sa.Column("ResolvedHintsID", Hash32(), primary_key=True),
    sa.Column("Hints", Json(), nullable=False),
    sa.Column("CreatedAt", Timestamp(), nullable=False),
    **MYSQL_TABLE_OPTIONS,
)

compute_transformations = sa.Table(
    "ComputeTransformations",
    metadata,
    sa.Column(
        "TransformationID",
        Uuid(),
        sa.ForeignKey("Transformations.TransformationID"),
        primary_key=True,
    ),
    sa.Column("ProcessID", Hash32(), sa.ForeignKey("Processes.ProcessID"), nullable=False),
    sa.Column(
        "RequirementsTemplateID",
        Hash32(),
        sa.ForeignKey("Requirements.RequirementsID"),
        nullable=True,
    ),
    **MYSQL_TABLE_OPTIONS,
)

transformation_outputs = sa.Table(
    "TransformationOutputs",
    metadata,
    sa.Column("TransformationOutputID", Uuid(), primary_key=True),
    sa.Column(
        "TransformationID",
        Uuid(),
        sa.ForeignKey("Transformations.TransformationID"),
        nullable=False,
    ),
    sa.Column("Name", sa.String(64), nullable=False),
    sa.Column("Intermediate", sa.Boolean(), nullable=False),
    sa.UniqueConstraint("TransformationID", "Name"),
    **MYSQL_TABLE_OPTIONS,
)

actions = sa.Table(
    "Actions",
    metadata,
    sa.Column(
        "ActionID",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    sa.Column("WorkgraphID", Uuid(), sa.ForeignKey("Workgraphs.WorkgraphID"), nullable=True),
    sa.Column(
        "TransformationID",
        Uuid(),
        sa.ForeignKey("Transformations.TransformationID"),
        nullable=True,
    ),
    sa.Column("State", sa.String(32), nullable=False),
    sa.Column("Position", sa.Integer(), nullable=False),
    sa.Column("Action", sa.String(64), nullable=False),
    sa.Column("Args", Json(), nullable=True),
    sa.Column("Result", Enum("ActionResult", values(ActionResult)), nullable=True),
    sa.Column("Message", sa.String(512), nullable=True),
    sa.Column("Author", sa.String(64), nullable=True),
    sa.Column("UpdatedAt", Timestamp(), nullable=True),
    sa.UniqueConstraint("WorkgraphID", "State", "Position"),
    sa.UniqueConstraint("TransformationID", "State", "Position"),
    sa.CheckConstraint("(WorkgraphID IS NULL) <> (TransformationID IS NULL)", name="one_owner"),
    **MYSQL_TABLE_OPTIONS,
)

# Not in the seed schema: definition's lock row per (VO, Sub) whose active workgraphs are
# limited (`policy.quotas.active_workgraphs_per_user`), locked by a submission or start of that
# owner's before counting, so that two at once never both pass at the limit
# (`dxts.definition.store.quota_locks`). Created put-if-absent; it holds nothing but the lock.
workgraph_quota_locks = sa.Table(
    "WorkgraphQuotaLocks",
    metadata,
    sa.Column("VO", sa.String(32), primary_key=True),
    sa.Column("Sub", sa.String(256), primary_key=True),
    **MYSQL_TABLE_OPTIONS,
)
