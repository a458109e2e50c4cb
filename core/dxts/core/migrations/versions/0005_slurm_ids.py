"""slurm ids: SlurmIDs, the identifier table of the Slurm adaptor

Shaped like LocalIDs and NullIDs (0003): ParcelID primary key referencing Parcels, the adaptor's
own UUID with a unique index for the reverse lookup when the adaptor reports back.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 16:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _uuid() -> sa.types.TypeEngine[bytes]:
    return (
        sa.LargeBinary(length=16)
        .with_variant(sa.BINARY(length=16), "mariadb")
        .with_variant(sa.BINARY(length=16), "mysql")
    )


def upgrade() -> None:
    op.create_table(
        "SlurmIDs",
        sa.Column("ParcelID", _uuid(), nullable=False),
        sa.Column("SlurmID", _uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["ParcelID"], ["Parcels.ParcelID"], name=op.f("fk_SlurmIDs_ParcelID_Parcels")
        ),
        sa.PrimaryKeyConstraint("ParcelID"),
        sa.UniqueConstraint("SlurmID", name=op.f("uq_SlurmIDs_SlurmID")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )


def downgrade() -> None:
    op.drop_table("SlurmIDs")
