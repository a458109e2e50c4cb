"""The whole dxts schema as SQLAlchemy Core tables: one metadata, one module per side.

The specified schema is implemented exactly, with two deliberate widenings recorded in the
tests that compare it with the live database: every timestamp is DATETIME(6) (UTC), and the
counter tables are derived from their declarations (see `dxts.core.counters`).
"""

from dxts.core.counters import instances as counters  # registers the counter tables
from dxts.core.schema import accounting, definition, execution, handles
from dxts.core.schema.metadata import metadata

__all__ = ["accounting", "counters", "definition", "execution", "handles", "metadata"]
