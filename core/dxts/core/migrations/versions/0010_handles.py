"""handles: WorkgraphHandles, TransformationHandles, ParcelHandles

The short names a person types (`wg-42`, `t-7`, `p-10293`): one table per kind, the number an
AUTO_INCREMENT primary key, the entity's id unique and referencing it. The upgrade numbers the
rows already there in id order (UUIDv7: creation order), each kind in one INSERT ... SELECT.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 22:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Handle table → (its id column, the entity's table).
HANDLES = {
    "WorkgraphHandles": ("WorkgraphID", "Workgraphs"),
    "TransformationHandles": ("TransformationID", "Transformations"),
    "ParcelHandles": ("ParcelID", "Parcels"),
}


def _uuid() -> sa.types.TypeEngine[bytes]:
    return (
        sa.LargeBinary(length=16)
        .with_variant(sa.BINARY(length=16), "mariadb")
        .with_variant(sa.BINARY(length=16), "mysql")
    )


def upgrade() -> None:
    for table, (column, entity) in HANDLES.items():
        op.create_table(
            table,
            sa.Column(
                "Number",
                sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                autoincrement=True,
                nullable=False,
            ),
            sa.Column(column, _uuid(), nullable=False),
            sa.ForeignKeyConstraint(
                [column], [f"{entity}.{column}"], name=op.f(f"fk_{table}_{column}_{entity}")
            ),
            sa.PrimaryKeyConstraint("Number"),
            sa.UniqueConstraint(column, name=op.f(f"uq_{table}_{column}")),
            mysql_charset="utf8mb4",
            mysql_collate="utf8mb4_unicode_ci",
            mysql_engine="InnoDB",
        )
        source = sa.table(entity, sa.column(column))
        target = sa.table(table, sa.column(column))
        op.execute(
            sa.insert(target).from_select(
                [column], sa.select(source.c[column]).order_by(source.c[column])
            )
        )


def downgrade() -> None:
    for table in reversed(HANDLES):
        op.drop_table(table)
