"""The local adaptor's SQL: its own SQLite state (`state`), handing up typed records."""
