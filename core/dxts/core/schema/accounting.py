"""Accounting side: append-only rows serving monitoring; owned by accounting.

Other components append log rows only through `dxts.core.logs` inside their own transaction.
The journalled counter tables are generated from their declarations in `dxts.core.counters`
(docs/counters.md gives their shapes) and registered into the same metadata there.
"""

import sqlalchemy as sa

from dxts.core.schema.definition import transformation_status, workgraph_status
from dxts.core.schema.metadata import MYSQL_TABLE_OPTIONS, metadata
from dxts.core.schema.types import Json, Timestamp, Uuid


def _log_table(name: str, owner_column: str, owner_table: str, status: sa.Enum) -> sa.Table:
    """TransformationLog and WorkgraphLog share one shape, keyed on their owner."""
    return sa.Table(
        name,
        metadata,
        sa.Column(
            "LogID",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column(
            owner_column, Uuid(), sa.ForeignKey(f"{owner_table}.{owner_column}"), nullable=False
        ),
        sa.Column("EventType", sa.String(32), nullable=False),
        sa.Column("OldStatus", status, nullable=True),
        sa.Column("NewStatus", status, nullable=True),
        sa.Column("Author", sa.String(64), nullable=False),
        sa.Column("Message", sa.String(512), nullable=True),
        sa.Column("Data", Json(), nullable=True),
        sa.Column("CreatedAt", Timestamp(), nullable=False),
        sa.Index(None, owner_column, "CreatedAt"),
        **MYSQL_TABLE_OPTIONS,
    )


transformation_log = _log_table(
    "TransformationLog", "TransformationID", "Transformations", transformation_status
)
workgraph_log = _log_table("WorkgraphLog", "WorkgraphID", "Workgraphs", workgraph_status)
