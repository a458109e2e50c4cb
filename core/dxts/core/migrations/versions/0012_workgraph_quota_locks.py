"""workgraph quota locks: definition's lock row per owner whose active workgraphs are limited

A submission or start by an owner (VO, Sub) under `policy.quotas.active_workgraphs_per_user`
locks the owner's row here before counting the owner's workgraphs, so that two at once take
turns and never both pass at the limit. The rows are created by the first such command.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04 09:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "WorkgraphQuotaLocks",
        sa.Column("VO", sa.String(length=32), nullable=False),
        sa.Column("Sub", sa.String(length=256), nullable=False),
        sa.PrimaryKeyConstraint("VO", "Sub"),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )


def downgrade() -> None:
    op.drop_table("WorkgraphQuotaLocks")
