"""Column types that mean the same on MariaDB/MySQL and on SQLite.

MariaDB/MySQL get the spec's exact types; SQLite gets the nearest working equivalent (binary ids
as BLOBs, ENUMs as strings with a CHECK constraint, DATETIME(6) as ISO text).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

SERVER_DIALECTS = ("mysql", "mariadb")


def _server_variant(
    generic: sa.types.TypeEngine, server: sa.types.TypeEngine
) -> sa.types.TypeEngine:
    for name in SERVER_DIALECTS:
        generic = generic.with_variant(server, name)
    return generic


def Uuid() -> sa.types.TypeEngine:
    """BINARY(16): a UUIDv7 id."""
    return _server_variant(sa.LargeBinary(16), mysql.BINARY(16))


def Hash32() -> sa.types.TypeEngine:
    """BINARY(32): a SHA-256 content hash."""
    return _server_variant(sa.LargeBinary(32), mysql.BINARY(32))


def Hash16() -> sa.types.TypeEngine:
    """BINARY(16): an XXH3-128 input hash."""
    return _server_variant(sa.LargeBinary(16), mysql.BINARY(16))


def Timestamp() -> sa.types.TypeEngine:
    """DATETIME(6) in UTC (naive values, always UTC by convention)."""
    return _server_variant(sa.DateTime(), mysql.DATETIME(fsp=6))


def Lfn() -> sa.types.TypeEngine:
    """VARCHAR(512) compared case-sensitively: LFNs are paths."""
    return _server_variant(sa.String(512), mysql.VARCHAR(512, collation="utf8mb4_bin"))


def Enum(name: str, values: tuple[str, ...]) -> sa.Enum:
    """A native ENUM on MariaDB/MySQL in exactly this order; a checked VARCHAR on SQLite."""
    return sa.Enum(
        *values,
        name=name,
        native_enum=True,
        create_constraint=True,
        validate_strings=True,
        length=max(len(v) for v in values),
    )


def Json() -> sa.types.TypeEngine:
    """JSON (validated text on MariaDB, binary JSON on MySQL, text on SQLite)."""
    return sa.JSON(none_as_null=True)
