"""directed parcels: DirectedParcels, where execution directs a parcel

Parcels.Backend becomes the dispatcher's alone (the backend it reserved the parcel for); where
execution directs a parcel (a packer's choice, `recovery` for a split's born-Done recovery
parcel) is execution's own row here. The upgrade moves the directions already recorded: an
Unassigned parcel's backend (the dispatcher clears the backend it chose when a parcel goes back
to Unassigned, so what is left there was directed) and every `recovery` parcel's; their
Parcels.Backend is cleared. A parcel reserved or further on keeps the backend it was reserved
for; whether the packer had directed it cannot be told from the row, so it has no direction.
The downgrade writes each direction back into Parcels.Backend where that is empty.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RECOVERY = "recovery"


def _uuid() -> sa.types.TypeEngine[bytes]:
    return (
        sa.LargeBinary(length=16)
        .with_variant(sa.BINARY(length=16), "mariadb")
        .with_variant(sa.BINARY(length=16), "mysql")
    )


def upgrade() -> None:
    op.create_table(
        "DirectedParcels",
        sa.Column("ParcelID", _uuid(), nullable=False),
        sa.Column("Backend", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(
            ["ParcelID"], ["Parcels.ParcelID"], name=op.f("fk_DirectedParcels_ParcelID_Parcels")
        ),
        sa.PrimaryKeyConstraint("ParcelID"),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    op.create_index(op.f("ix_DirectedParcels_Backend"), "DirectedParcels", ["Backend"])
    parcels = sa.table("Parcels", sa.column("ParcelID"), sa.column("Status"), sa.column("Backend"))
    directed = sa.table("DirectedParcels", sa.column("ParcelID"), sa.column("Backend"))
    was_directed = sa.and_(
        parcels.c.Backend.is_not(None),
        sa.or_(parcels.c.Status == "Unassigned", parcels.c.Backend == RECOVERY),
    )
    op.execute(
        sa.insert(directed).from_select(
            ["ParcelID", "Backend"],
            sa.select(parcels.c.ParcelID, parcels.c.Backend).where(was_directed),
        )
    )
    op.execute(sa.update(parcels).where(was_directed).values(Backend=None))


def downgrade() -> None:
    parcels = sa.table("Parcels", sa.column("ParcelID"), sa.column("Backend"))
    directed = sa.table("DirectedParcels", sa.column("ParcelID"), sa.column("Backend"))
    op.execute(
        sa.update(parcels)
        .where(parcels.c.Backend.is_(None))
        .values(
            Backend=sa.select(directed.c.Backend)
            .where(directed.c.ParcelID == parcels.c.ParcelID)
            .scalar_subquery()
        )
    )
    op.drop_index(op.f("ix_DirectedParcels_Backend"), table_name="DirectedParcels")
    op.drop_table("DirectedParcels")
