"""execution's own rows: FeederStates and OutputWatermarks

FeederStates holds each feeder's bookmark and whether it said NoMoreInputs, which execution
wrote into definition's Transformations row (FeederState, and clearing FeederEnabled). The
upgrade copies the bookmarks there; a feeder exhausted before it stays disabled by its switch.

The Edge feeder's watermark is a reader-writer lock per declared output. It was taken on
definition's TransformationOutputs row; it is now taken on this execution-owned row, created
put-if-absent before the first recording under the output; the upgrade creates the rows of
the outputs already declared, so that recordings in flight find theirs.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 18:45:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
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
        "FeederStates",
        sa.Column("TransformationID", _uuid(), nullable=False),
        sa.Column("Bookmark", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("Exhausted", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column(
            "UpdatedAt",
            sa.DateTime()
            .with_variant(mysql.DATETIME(fsp=6), "mariadb")
            .with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["TransformationID"],
            ["Transformations.TransformationID"],
            name=op.f("fk_FeederStates_TransformationID_Transformations"),
        ),
        sa.PrimaryKeyConstraint("TransformationID"),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    bookmarks = sa.table(
        "FeederStates",
        sa.column("TransformationID"),
        sa.column("Bookmark"),
        sa.column("UpdatedAt"),
    )
    owners = sa.table(
        "Transformations",
        sa.column("TransformationID"),
        sa.column("FeederState"),
        sa.column("UpdatedAt"),
    )
    op.execute(
        bookmarks.insert().from_select(
            ["TransformationID", "Bookmark", "UpdatedAt"],
            sa.select(owners.c.TransformationID, owners.c.FeederState, owners.c.UpdatedAt).where(
                owners.c.FeederState.is_not(None)
            ),
        )
    )
    op.create_table(
        "OutputWatermarks",
        sa.Column("TransformationOutputID", _uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["TransformationOutputID"],
            ["TransformationOutputs.TransformationOutputID"],
            name=op.f("fk_OutputWatermarks_TransformationOutputID_TransformationOutputs"),
        ),
        sa.PrimaryKeyConstraint("TransformationOutputID"),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    watermarks = sa.table("OutputWatermarks", sa.column("TransformationOutputID"))
    declared = sa.table("TransformationOutputs", sa.column("TransformationOutputID"))
    op.execute(
        watermarks.insert().from_select(
            ["TransformationOutputID"], sa.select(declared.c.TransformationOutputID)
        )
    )


def downgrade() -> None:
    op.drop_table("OutputWatermarks")
    op.drop_table("FeederStates")
