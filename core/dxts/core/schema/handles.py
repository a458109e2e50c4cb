"""Handles: the short names a person types (`wg-42`, `t-7`, `p-10293`), one table per kind.

Not in the seed schema (whose 23 tables stay as specified): each row gives an entity a number
from its kind's own sequence (the table's AUTO_INCREMENT), minted in the statement that creates
the entity's rows and never reused, so a handle is short, unique within the installation and
stable for the entity's life. The number is the primary key (a handle resolves by one index
probe, among millions of parcels), the id is unique (an id finds its handle the same way), and
the foreign key to the entity makes the row go with it (cleaning deletes every table hanging off
Parcels). Workgraph and transformation handles are definition's, parcel handles execution's.
"""

import sqlalchemy as sa

from dxts.core.schema.metadata import MYSQL_TABLE_OPTIONS, metadata
from dxts.core.schema.types import Uuid


def _number() -> sa.Column[int]:
    return sa.Column(
        "Number",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        primary_key=True,
        autoincrement=True,
    )


workgraph_handles = sa.Table(
    "WorkgraphHandles",
    metadata,
    _number(),
    sa.Column("WorkgraphID", Uuid(), sa.ForeignKey("Workgraphs.WorkgraphID"), nullable=False),
    sa.UniqueConstraint("WorkgraphID"),
    **MYSQL_TABLE_OPTIONS,
)

transformation_handles = sa.Table(
    "TransformationHandles",
    metadata,
    _number(),
    sa.Column(
        "TransformationID",
        Uuid(),
        sa.ForeignKey("Transformations.TransformationID"),
        nullable=False,
    ),
    sa.UniqueConstraint("TransformationID"),
    **MYSQL_TABLE_OPTIONS,
)

parcel_handles = sa.Table(
    "ParcelHandles",
    metadata,
    _number(),
    sa.Column("ParcelID", Uuid(), sa.ForeignKey("Parcels.ParcelID"), nullable=False),
    sa.UniqueConstraint("ParcelID"),
    **MYSQL_TABLE_OPTIONS,
)
