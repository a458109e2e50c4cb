"""Alembic's entry point for dxts: one metadata, on a connection dxts opened.

`dxts.core.migrations.api` (behind `dxts-db`) opens the connection after the server version
check and passes it in `config.attributes["connection"]`. The plain `alembic -c alembic.ini`
command passes none, so one is opened here the same way, on `sqlalchemy.url` when set or else
the DXTS_DB_URL setting; `alembic ... --sql` renders the DDL without connecting.
"""

import asyncio

import sqlalchemy as sa
from alembic import context

from dxts.core.migrations.api import context_options, run_on_connection
from dxts.core.schema import metadata
from dxts.core.settings import DatabaseSettings


def run_migrations(connection: sa.Connection) -> None:
    context.configure(connection=connection, **context_options(connection))
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline(url: str) -> None:
    context.configure(
        url=url, target_metadata=metadata, literal_binds=True, dialect_opts={"paramstyle": "named"}
    )
    with context.begin_transaction():
        context.run_migrations()


config = context.config
connection = config.attributes.get("connection")
if connection is not None:
    run_migrations(connection)
else:
    url = config.get_main_option("sqlalchemy.url") or DatabaseSettings().url
    if context.is_offline_mode():
        run_migrations_offline(url)
    else:
        asyncio.run(run_on_connection(url, run_migrations))
