"""backend ids: BackendIDs, one identifier table for every adaptor

LocalIDs, NullIDs and SlurmIDs (0003, 0005) each held one adaptor type's identifiers, so that
every new adaptor needed a table, a migration and a change in the dispatcher. BackendIDs holds
them all: ParcelID primary key referencing Parcels, the adaptor type, and the adaptor's own UUID,
unique per adaptor type for the reverse lookup when the adaptor reports back. Their rows move
here, and so do the rows the DiracX adaptor wrote in the spec's DiracXIDs, which stays (empty)
as the spec defines it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 19:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Adaptor type → (its former table, that table's identifier column).
FORMER_TABLES = {
    "local": ("LocalIDs", "LocalID"),
    "null": ("NullIDs", "NullID"),
    "slurm": ("SlurmIDs", "SlurmID"),
}


def _uuid() -> sa.types.TypeEngine[bytes]:
    return (
        sa.LargeBinary(length=16)
        .with_variant(sa.BINARY(length=16), "mariadb")
        .with_variant(sa.BINARY(length=16), "mysql")
    )


BACKEND_IDS = sa.table(
    "BackendIDs", sa.column("ParcelID"), sa.column("Adaptor"), sa.column("Identifier")
)


def _copy(source: str, column: str, adaptor: str) -> None:
    """Every row of the adaptor type's former table into BackendIDs."""
    former = sa.table(source, sa.column("ParcelID"), sa.column(column))
    rows = sa.select(former.c.ParcelID, sa.literal(adaptor), former.c[column])
    op.execute(sa.insert(BACKEND_IDS).from_select(["ParcelID", "Adaptor", "Identifier"], rows))


def _copy_back(target: str, column: str, adaptor: str) -> None:
    """The adaptor type's BackendIDs rows into its former table."""
    former = sa.table(target, sa.column("ParcelID"), sa.column(column))
    rows = sa.select(BACKEND_IDS.c.ParcelID, BACKEND_IDS.c.Identifier).where(
        BACKEND_IDS.c.Adaptor == adaptor
    )
    op.execute(sa.insert(former).from_select(["ParcelID", column], rows))


def upgrade() -> None:
    op.create_table(
        "BackendIDs",
        sa.Column("ParcelID", _uuid(), nullable=False),
        sa.Column("Adaptor", sa.String(length=64), nullable=False),
        sa.Column("Identifier", _uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["ParcelID"], ["Parcels.ParcelID"], name=op.f("fk_BackendIDs_ParcelID_Parcels")
        ),
        sa.PrimaryKeyConstraint("ParcelID"),
        sa.UniqueConstraint("Adaptor", "Identifier", name=op.f("uq_BackendIDs_Adaptor_Identifier")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    for adaptor, (table, column) in FORMER_TABLES.items():
        _copy(table, column, adaptor)
        op.drop_table(table)
    _copy("DiracXIDs", "SlotID", "diracx")
    op.execute(sa.delete(sa.table("DiracXIDs")))


def downgrade() -> None:
    for adaptor, (table, column) in FORMER_TABLES.items():
        op.create_table(
            table,
            sa.Column("ParcelID", _uuid(), nullable=False),
            sa.Column(column, _uuid(), nullable=False),
            sa.ForeignKeyConstraint(
                ["ParcelID"], ["Parcels.ParcelID"], name=op.f(f"fk_{table}_ParcelID_Parcels")
            ),
            sa.PrimaryKeyConstraint("ParcelID"),
            sa.UniqueConstraint(column, name=op.f(f"uq_{table}_{column}")),
            mysql_charset="utf8mb4",
            mysql_collate="utf8mb4_unicode_ci",
            mysql_engine="InnoDB",
        )
        _copy_back(table, column, adaptor)
    _copy_back("DiracXIDs", "SlotID", "diracx")
    op.drop_table("BackendIDs")
