"""`dxts-db`: the operator command that migrates the dxts database (Helm's job, `dxts up`).

Every failure the operator can cause or meet (bad URL, unreachable or too-old server, unknown
revision) is one line on stderr and exit status 1, never a traceback: the line is what a Helm job
log shows.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Coroutine
from typing import Annotated, Any, NoReturn, TypeVar

import sqlalchemy as sa
import typer
from alembic.util import CommandError

from dxts.core.errors import DxtsError
from dxts.core.migrations import api
from dxts.core.settings import DatabaseSettings, async_database_url

T = TypeVar("T")

app = typer.Typer(
    name="dxts-db",
    help="Create and migrate the dxts database schema.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="SQLAlchemy async URL of the database; default: the DXTS_DB_URL setting.",
        show_default=False,
    ),
]


def _fail(message: str) -> NoReturn:
    typer.echo(f"dxts-db: error: {message}", err=True)
    raise typer.Exit(1)


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coroutine)
    except (DxtsError, CommandError) as error:
        _fail(str(error))
    except sa.exc.DBAPIError as error:
        # Raw driver errors (e.g. an SQLite path that cannot be opened) carry a long SQL dump.
        _fail(str(error.orig).splitlines()[0] if str(error.orig) else type(error.orig).__name__)
    except (sa.exc.SQLAlchemyError, OSError) as error:
        _fail(str(error).splitlines()[0])


def _url(url: str | None) -> str:
    try:
        return async_database_url(url or DatabaseSettings().url)
    except DxtsError as error:
        _fail(f"--url: {error}")


@app.command()
def upgrade(
    url: UrlOption = None,
    revision: Annotated[str, typer.Option(help="Target revision.")] = "head",
) -> None:
    """Migrate the database up to REVISION (default: the latest); safe to repeat."""
    revisions = _run(api.upgrade(_url(url), revision))
    typer.echo(f"database at {revisions.describe()}")


@app.command()
def current(url: UrlOption = None) -> None:
    """Print the revision the database is at, and whether it is the latest."""
    revisions = _run(api.current(_url(url)))
    typer.echo(revisions.describe())


@app.command()
def revision(
    message: Annotated[str, typer.Option("-m", "--message", help="What the revision changes.")],
    url: UrlOption = None,
) -> None:
    """Autogenerate a revision from the schema's difference with --url (a database at head)."""
    path = _run(api.revision(_url(url), message))
    typer.echo(f"wrote {path}")


def _progress_only(record: logging.LogRecord) -> bool:
    """Alembic's "Running upgrade 0001 -> 0002, ..." lines, without its other INFO chatter, nor
    MariaDB's note that the name of Alembic's own version table's primary key is ignored."""
    message = record.getMessage()
    if message.endswith("ignored for PRIMARY key."):
        return False
    return record.levelno > logging.INFO or message.startswith("Running ")


def main() -> None:
    # The revisions being applied, one line each, are what the migration job's log shows.
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    logging.getLogger("alembic.runtime.migration").setLevel(logging.INFO)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_progress_only)
    app()
