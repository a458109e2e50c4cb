"""The local catalogue's own tables, in their own metadata: not part of the dxts schema.

The catalogue stands in for the DIRAC File Catalog or Rucio, which live in databases of their
own, so it is created by the catalogue itself (`create_all`) in whatever database its URL names
(a SQLite file by default) and is never migrated with the dxts schema.

* CatalogueFiles: one row per LFN; `Seq` is the registration batch, allocated in commit order
  (see `db.allocate_sequence`), which is what makes the watermark exact.
* CatalogueMetadataValues: the scalar metadata, one row per (file, key), typed columns indexed
  by key so that equality, `in` and range conditions are index lookups.
* CatalogueReplicas: one row per (file, storage element).
* CatalogueSequence: one row, the last allocated Seq; its row lock serialises writers.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from dxts.core.schema.metadata import MYSQL_TABLE_OPTIONS, NAMING_CONVENTION
from dxts.core.schema.types import SERVER_DIALECTS, Json, Lfn, Timestamp, Uuid

KEY_MAX = 64
STRING_VALUE_MAX = 255
SE_MAX = 64
CHECKSUM_MAX = 128

catalogue_metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


def _server(generic: sa.types.TypeEngine, server: sa.types.TypeEngine) -> sa.types.TypeEngine:
    for name in SERVER_DIALECTS:
        generic = generic.with_variant(server, name)
    return generic


def _binary_string(length: int) -> sa.types.TypeEngine:
    """Compared case-sensitively on MariaDB/MySQL, as SQLite compares by default."""
    return _server(sa.String(length), mysql.VARCHAR(length, collation="utf8mb4_bin"))


catalogue_files = sa.Table(
    "CatalogueFiles",
    catalogue_metadata,
    sa.Column("FileID", Uuid(), primary_key=True),
    sa.Column("LFN", Lfn(), nullable=False, unique=True),
    sa.Column("Size", sa.BigInteger(), nullable=False),
    sa.Column("Checksum", sa.String(CHECKSUM_MAX), nullable=True),
    sa.Column("Metadata", Json(), nullable=True),
    sa.Column("Seq", sa.BigInteger(), nullable=False),
    sa.Column("RegisteredAt", Timestamp(), nullable=False),
    sa.Index(None, "Seq", "FileID"),
    **MYSQL_TABLE_OPTIONS,
)

catalogue_metadata_values = sa.Table(
    "CatalogueMetadataValues",
    catalogue_metadata,
    sa.Column("FileID", Uuid(), sa.ForeignKey("CatalogueFiles.FileID"), primary_key=True),
    sa.Column("MetaKey", _binary_string(KEY_MAX), primary_key=True),
    sa.Column("StrValue", _binary_string(STRING_VALUE_MAX), nullable=True),
    sa.Column("IntValue", sa.BigInteger(), nullable=True),
    sa.Column("FloatValue", _server(sa.Float(), mysql.DOUBLE()), nullable=True),
    sa.Index(None, "MetaKey", "StrValue"),
    sa.Index(None, "MetaKey", "IntValue"),
    sa.Index(None, "MetaKey", "FloatValue"),
    **MYSQL_TABLE_OPTIONS,
)

catalogue_replicas = sa.Table(
    "CatalogueReplicas",
    catalogue_metadata,
    sa.Column("FileID", Uuid(), sa.ForeignKey("CatalogueFiles.FileID"), primary_key=True),
    sa.Column("StorageElement", _binary_string(SE_MAX), primary_key=True),
    **MYSQL_TABLE_OPTIONS,
)

catalogue_sequence = sa.Table(
    "CatalogueSequence",
    catalogue_metadata,
    sa.Column("SequenceID", sa.Integer(), primary_key=True, autoincrement=False),
    sa.Column("Value", sa.BigInteger(), nullable=False),
    **MYSQL_TABLE_OPTIONS,
)
