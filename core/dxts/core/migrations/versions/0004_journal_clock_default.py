"""journal clock default: the counter journals' InsertedAt is the column's default

`InsertedAt` is set by the database (docs/counters.md). As a default rather than an expression in
every inserted row, `journal()` sends plain values only, which the driver sends as one
multi-row INSERT and SQLAlchemy compiles once. The default is the database clock in UTC with
microseconds, as `dxts.core.db.utcnow` writes it on each dialect (spelled out here so that
the revision stays what it was).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 06:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JOURNALS = ("TransformationCounterJournal", "DataParcelsCounterJournal")


def _clock() -> sa.TextClause:
    if op.get_bind().dialect.name == "sqlite":
        return sa.text("(strftime('%Y-%m-%d %H:%M:%f000', 'now'))")
    return sa.text("(UTC_TIMESTAMP(6))")


def upgrade() -> None:
    for journal in JOURNALS:
        with op.batch_alter_table(journal) as batch:
            batch.alter_column("InsertedAt", server_default=_clock())


def downgrade() -> None:
    for journal in JOURNALS:
        with op.batch_alter_table(journal) as batch:
            batch.alter_column("InsertedAt", server_default=None)
