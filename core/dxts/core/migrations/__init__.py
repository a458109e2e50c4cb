"""The schema's Alembic migrations and the `dxts-db` operator command.

Python callers (`dxts up`, tests) use the coroutines re-exported here; see `api` for what each
one guarantees. Adding a revision after changing `dxts.core.schema`:
`dxts-db revision -m "what changed" --url <a database at head>`, then review the new file.
"""

from dxts.core.migrations.api import Revisions, current, revision, upgrade

__all__ = ["Revisions", "current", "revision", "upgrade"]
