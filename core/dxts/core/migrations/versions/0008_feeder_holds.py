"""feeder holds: FeederStates.HeldReason, a feeder stopped by a quota

A feeder that reaches one of the installation's quotas (inputs per invocation, per member, per
user per hour: `policy.quotas`) is held by execution, in its own row: the reason, in words a
person can read, naming the limit. A held feeder is not run until it is released (an operator
enabling it again: `ExecutionService.ResetFeeders`), and `dxts why` shows the reason.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03 22:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("FeederStates") as batch:
        batch.add_column(sa.Column("HeldReason", sa.String(length=512), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("FeederStates") as batch:
        batch.drop_column("HeldReason")
