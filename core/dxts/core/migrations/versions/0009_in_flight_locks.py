"""in-flight locks: the dispatcher's lock row per VO whose parcels in flight are capped

A claim that would take parcels of a VO with a cap on its parcels in flight locks the VO's row
here before counting what the VO has in flight, so that concurrent claimers (replicas, claim
loops) take turns and never both fill the same room. The rows are created by the first claim.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 22:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "InFlightLocks",
        sa.Column("VO", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("VO"),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )


def downgrade() -> None:
    op.drop_table("InFlightLocks")
