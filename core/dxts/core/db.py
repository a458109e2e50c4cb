"""Database access shared by every component: one engine per URL, explicit transactions.

* `Database.transaction(isolation)` opens one transaction at the isolation level the caller's
  argument needs (stated at every call site, never inherited from a pool default).
* `Database.run(fn, isolation=...)` runs a whole transaction function and replays it on a
  deadlock or a Galera certification failure (MySQL error 1213, `Aborted` when the retries are
  exhausted) and on a lost connection, on a new one, for up to `failover_wait_s`
  (`dxts.core.replay` says when and why that is safe); a database that cannot be reached
  raises `Unavailable`.
* On a Galera node every session reads causally (`wsrep_sync_wait=1`): a read waits until the
  node has applied every write the cluster committed before it, so a transaction replayed on
  another node after a failover sees the commits made through the one that died.
* Cancellation (a gRPC deadline cancels the task running a query) invalidates the connection and
  kills the query on the server, so a pooled connection never hands a stale result to its next
  user.
* `start()` refuses servers too old for `FOR UPDATE SKIP LOCKED` (MariaDB < 10.6, MySQL < 8.0)
  and statement-based binary logging, and sets `pool_recycle` below the server's `wait_timeout`.
* SQLite (the embedded default) runs in WAL mode with a busy timeout, foreign keys on, and every
  transaction begun IMMEDIATE: one writer at a time, which is what makes the same code paths
  correct there without SKIP LOCKED.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

from dxts.core.errors import Aborted, InvalidArgument, Unavailable
from dxts.core.replay import MYSQL_DEADLOCK as MYSQL_DEADLOCK
from dxts.core.replay import ConnectionLost, replaying
from dxts.core.replay import is_deadlock as is_deadlock
from dxts.core.settings import DatabaseSettings

log = logging.getLogger(__name__)

T = TypeVar("T")

# An open transaction, as logic holds it: a handle it passes on to its stores and to core's
# journals, locks and logs, and never reads itself (its SQL is theirs).
Transaction: TypeAlias = AsyncConnection

MYSQL_DUPLICATE_KEY = 1062
# Client-side codes meaning the server is gone or unreachable (CR_CONN_HOST_ERROR,
# CR_SERVER_GONE_ERROR, CR_SERVER_LOST, CR_CONNECTION_ERROR, ER_CON_COUNT_ERROR...).
MYSQL_UNREACHABLE = {1040, 1042, 1043, 1047, 1053, 1077, 2002, 2003, 2005, 2006, 2013, 2055}
# ER_ERROR_DURING_COMMIT: on a Galera node that lost the primary component under a write, the
# provider's "Not connected to Primary Component" (the node then answers 1047 until it is back).
MYSQL_ERROR_DURING_COMMIT = 1180

MIN_MARIADB = (10, 6)
MIN_MYSQL = (8, 0)


class Isolation(StrEnum):
    """The isolation levels dxts uses; each operation names the one its argument needs."""

    READ_COMMITTED = "READ COMMITTED"
    REPEATABLE_READ = "REPEATABLE READ"
    SERIALIZABLE = "SERIALIZABLE"


# The level every pooled session starts at; a transaction asking for another sets and restores it.
DEFAULT_ISOLATION = Isolation.READ_COMMITTED


class utcnow(FunctionElement[Any]):
    """The database clock in UTC with microseconds: use it wherever ordering matters."""

    type = sa.DateTime()
    inherit_cache = True


@compiles(utcnow, "mysql")
@compiles(utcnow, "mariadb")
def _utcnow_mysql(element: utcnow, compiler: Any, **kw: Any) -> str:
    return "UTC_TIMESTAMP(6)"


@compiles(utcnow, "sqlite")
def _utcnow_sqlite(element: utcnow, compiler: Any, **kw: Any) -> str:
    # Six fractional digits, the format SQLAlchemy stores Python datetimes in, so that text
    # comparisons between the two order correctly.
    return "strftime('%Y-%m-%d %H:%M:%f000', 'now')"


async def db_now(conn: AsyncConnection) -> Any:
    """The database clock, read once: pass it as a plain value into bulk statements.

    An SQL expression inside the rows of an executemany stops asyncmy from rewriting the batch
    into one multi-row INSERT (it then sends one statement per row), so bulk writers read the
    clock once per transaction instead of embedding `utcnow()` in every row.
    """
    return await conn.scalar(sa.select(utcnow()))


@dataclass(frozen=True)
class ServerInfo:
    """What `start()` learnt about the server."""

    dialect: str  # "sqlite", "mariadb" or "mysql"
    version: tuple[int, ...]
    version_string: str
    wait_timeout_s: int | None
    galera: bool = False  # a node of a Galera cluster (wsrep_on)


def parse_server_version(version_string: str) -> tuple[str, tuple[int, ...]]:
    """('mariadb' | 'mysql', (major, minor, patch)) from `SELECT VERSION()`."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version_string)
    if not match:
        raise Unavailable(f"cannot parse the server version {version_string!r}")
    numbers = tuple(int(part) for part in match.groups(default="0"))
    flavour = "mariadb" if "mariadb" in version_string.lower() else "mysql"
    return flavour, numbers


def check_server_version(version_string: str) -> tuple[str, tuple[int, ...]]:
    """Refuse a server too old for FOR UPDATE SKIP LOCKED, with a message saying so."""
    flavour, numbers = parse_server_version(version_string)
    floor = MIN_MARIADB if flavour == "mariadb" else MIN_MYSQL
    if numbers[:2] < floor:
        name = "MariaDB" if flavour == "mariadb" else "MySQL"
        raise Unavailable(
            f"{name} {version_string} is too old: dxts needs {name} "
            f"{'.'.join(map(str, floor))} or newer (FOR UPDATE SKIP LOCKED)"
        )
    return flavour, numbers


def mysql_error_code(error: BaseException) -> int | None:
    """The server/client error number behind a SQLAlchemy DBAPI error, if any."""
    orig = getattr(error, "orig", None)
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int):
        return args[0]
    return None


def is_duplicate_key(error: BaseException) -> bool:
    """A unique key refused the row: another transaction inserted the same key first."""
    return isinstance(error, exc.IntegrityError) and mysql_error_code(error) == MYSQL_DUPLICATE_KEY


def is_transient(error: BaseException) -> bool:
    """An error that says "try later" rather than "this cannot be done": the database or a
    service away, a deadlock that persisted, a lock wait that timed out."""
    if isinstance(error, Unavailable | Aborted | OSError | TimeoutError):
        return True
    return isinstance(error, exc.OperationalError | exc.InterfaceError) or (
        isinstance(error, exc.DBAPIError) and error.connection_invalidated
    )


def is_unreachable(error: BaseException) -> bool:
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(error, exc.InterfaceError):
        return True
    if isinstance(error, exc.OperationalError):
        code = mysql_error_code(error)
        if code in MYSQL_UNREACHABLE:
            return True
        if code == MYSQL_ERROR_DURING_COMMIT:
            return "primary component" in str(error.orig).lower()
        message = str(error.orig).lower()
        return "unable to open database" in message
    return isinstance(error, OSError | ConnectionError)


def _unreachable(cause: object) -> ConnectionLost:
    """What a caller hears when the database does not answer: the driver's own words (hosts,
    ports) go to this process's log only."""
    log.warning("database unreachable: %s", cause)
    return ConnectionLost("the database is unreachable; retry later")


class Database:
    """One engine for one URL, with the transaction discipline every component follows."""

    def __init__(self, url: str, settings: DatabaseSettings | None = None) -> None:
        if not isinstance(url, str) or "://" not in url:
            raise InvalidArgument(f"{url!r} is not a database URL", field="url")
        self.url = sa.make_url(url)
        self.settings = settings or DatabaseSettings(url=url)
        backend = self.url.get_backend_name()
        if backend not in ("sqlite", "mysql", "mariadb"):
            raise InvalidArgument(
                f"unsupported database {backend!r}: use sqlite+aiosqlite:// or "
                "mysql+asyncmy:// (MariaDB >= 10.6, MySQL >= 8.0)",
                field="url",
            )
        self.is_sqlite = backend == "sqlite"
        self._engine: AsyncEngine | None = None
        self.server: ServerInfo | None = None

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise RuntimeError("Database.start() has not been awaited")
        return self._engine

    @property
    def dialect_name(self) -> str:
        return "sqlite" if self.is_sqlite else (self.server.dialect if self.server else "mysql")

    async def start(self) -> ServerInfo:
        """Check the server and build the pooled engine; idempotent."""
        if self._engine is not None and self.server is not None:
            return self.server
        if self.is_sqlite:
            folder = Path(self.url.database or "").parent
            if self.url.database not in (None, "", ":memory:") and not folder.is_dir():
                # Refused before connecting: aiosqlite's worker thread outlives a failed
                # connect and would print a traceback after the loop has closed.
                raise Unavailable(
                    f"cannot open the database at {self.url!r}: unable to open database file "
                    f"(folder {folder} does not exist)"
                )
            self._engine = self._sqlite_engine()
            try:
                async with self._engine.connect() as conn:
                    version = (await conn.execute(sa.text("select sqlite_version()"))).scalar_one()
            except exc.DBAPIError as error:
                # Dispose before raising: aiosqlite's worker thread must not outlive the loop.
                await self.dispose()
                raise Unavailable(
                    f"cannot open the database at {self.url!r}: {error.orig}"
                ) from error
            self.server = ServerInfo("sqlite", tuple(map(int, version.split("."))), version, None)
            return self.server
        self.server = await self._probe_server()
        recycle = max(
            60, (self.server.wait_timeout_s or 28800) - self.settings.pool_recycle_margin_s
        )
        self._engine = create_async_engine(
            self.url,
            pool_size=self.settings.pool_size,
            max_overflow=self.settings.max_overflow,
            pool_recycle=recycle,
            # Round trips are the cost of a short transaction (measured: five per transaction
            # besides its own statements), so none is spent on ceremony: connections are
            # recycled below wait_timeout instead of pinged on checkout (a server restart
            # fails one transaction with UNAVAILABLE and SQLAlchemy then drops the pool);
            # every transaction ends explicitly, so no reset-on-return rollback is needed;
            # and sessions start at the level most operations ask for, so only the others
            # set and restore it.
            pool_reset_on_return=None,
            isolation_level=DEFAULT_ISOLATION.value,
        )
        event.listen(
            self._engine.sync_engine,
            "connect",
            _set_galera_session if self.server.galera else _set_mysql_session,
        )
        return self.server

    async def _probe_server(self) -> ServerInfo:
        probe = create_async_engine(self.url, poolclass=sa.pool.NullPool)
        try:
            async with probe.connect() as conn:
                row = (
                    await conn.execute(
                        sa.text("SELECT VERSION(), @@wait_timeout, @@log_bin, @@binlog_format")
                    )
                ).one()
                # SHOW, not @@wsrep_on: a server built without wsrep has no such variable.
                wsrep = (await conn.execute(sa.text("SHOW VARIABLES LIKE 'wsrep_on'"))).first()
        except exc.DBAPIError as error:
            raise Unavailable(f"cannot reach the database at {self.url!r}: {error.orig}") from error
        except OSError as error:
            raise Unavailable(f"cannot reach the database at {self.url!r}: {error}") from error
        finally:
            await probe.dispose()
        galera = wsrep is not None and str(wsrep[1]).upper() == "ON"
        version_string, wait_timeout, log_bin, binlog_format = row
        flavour, numbers = check_server_version(version_string)
        if int(log_bin or 0) and str(binlog_format).upper() != "ROW":
            raise Unavailable(
                f"the server writes a {binlog_format} binary log: FOR UPDATE SKIP LOCKED "
                "needs binlog_format=ROW wherever a binary log is on"
            )
        return ServerInfo(flavour, numbers, version_string, int(wait_timeout), galera)

    def _sqlite_engine(self) -> AsyncEngine:
        engine = create_async_engine(
            self.url, connect_args={"timeout": self.settings.sqlite_busy_timeout_ms / 1000}
        )
        busy_ms = self.settings.sqlite_busy_timeout_ms
        in_memory = self.url.database in (None, "", ":memory:")

        @event.listens_for(engine.sync_engine, "connect")
        def _configure(dbapi_connection: Any, _record: Any) -> None:
            # Let SQLAlchemy, not the driver, decide when transactions begin (below).
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            if not in_memory:
                cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _begin_immediate(conn: Any) -> None:
            # One writer at a time: take the write lock at BEGIN, not at the first write, so a
            # read-then-write transaction can never deadlock on lock upgrade.
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine

    async def dispose(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None

    @contextlib.asynccontextmanager
    async def transaction(self, isolation: Isolation) -> AsyncIterator[AsyncConnection]:
        """One transaction at `isolation`; commits on success, rolls back on error.

        On SQLite every transaction is serialisable (one writer), whatever is asked for.
        """
        if not isinstance(isolation, Isolation):
            raise InvalidArgument(f"{isolation!r} is not an Isolation level", field="isolation")
        try:
            conn = await self.engine.connect()
        except exc.DBAPIError as error:
            if is_unreachable(error):
                raise _unreachable(error.orig) from error
            raise
        except OSError as error:
            raise _unreachable(error) from error
        thread_id: int | None = None
        try:
            if not self.is_sqlite:
                # Known before any query runs: once a query is cancelled SQLAlchemy invalidates
                # the connection, and the server thread to kill can no longer be asked for.
                # Noted on the pool's record when the session was opened (no greenlet hop).
                thread_id = conn.info.get(THREAD_ID)
                if isolation is not DEFAULT_ISOLATION:
                    await conn.execution_options(isolation_level=isolation.value)
            async with conn.begin():
                yield conn
        except asyncio.CancelledError as cancelled:
            if self.is_sqlite:
                # The frames of the interrupted call hold its cursor, whose statement is never
                # finalised while they live: the connection would close as a zombie keeping
                # its write lock until the garbage collector finds the cycle.
                traceback.clear_frames(cancelled.__traceback__)
            await self._abandon(conn, thread_id)
            raise
        except exc.DBAPIError as error:
            await conn.close()
            if is_unreachable(error):
                raise _unreachable(error.orig) from error
            raise
        except BaseException:
            await conn.close()
            raise
        else:
            await conn.close()

    async def _abandon(self, conn: AsyncConnection, thread_id: int | None) -> None:
        """A cancelled query: kill it on the server and drop the connection from the pool."""
        with contextlib.suppress(Exception):
            await conn.invalidate()
        with contextlib.suppress(Exception):
            await conn.close()
        if thread_id is not None:
            # Shielded and detached: cancellation must not be delayed by the kill, and the
            # kill must not be cancelled with the task.
            task = asyncio.ensure_future(self._kill_query(thread_id))
            _background.add(task)
            task.add_done_callback(_background.discard)

    async def _kill_query(self, thread_id: int) -> None:
        # A connection of its own, outside the pool: the pool may be exhausted by the very
        # callers waiting for the cancelled query's connection.
        killer = create_async_engine(self.url, poolclass=sa.pool.NullPool)
        try:
            async with killer.connect() as conn:
                await conn.execute(sa.text(f"KILL QUERY {int(thread_id)}"))
        except Exception as error:
            log.warning("could not kill cancelled query on thread %s: %s", thread_id, error)
        finally:
            await killer.dispose()

    async def run(
        self,
        work: Callable[[AsyncConnection], Awaitable[T]],
        *,
        isolation: Isolation,
        retries: int | None = None,
    ) -> T:
        """Run `work(conn)` as one transaction, replaying the whole of it on a deadlock (at
        most `retries` times, default `deadlock_retries`) or on a lost connection (for up to
        `failover_wait_s`), as `dxts.core.replay` describes."""

        async def attempt() -> T:
            async with self.transaction(isolation) as conn:
                return await work(conn)

        return await replaying(
            attempt,
            deadlock_retries=self.settings.deadlock_retries if retries is None else retries,
            failover_wait_s=self.settings.failover_wait_s,
        )

    async def ping(self) -> bool:
        """True when the database answers a trivial query (health checks)."""
        try:
            async with self.engine.connect() as conn:
                await conn.execute(sa.text("SELECT 1"))
            return True
        except Exception:
            return False


_background: set[asyncio.Future[None]] = set()
THREAD_ID = "dxts_thread_id"  # key of a pooled MariaDB/MySQL connection's server thread id


def _set_mysql_session(dbapi_connection: Any, record: Any) -> None:
    """Every session in UTC with strict SQL modes, whatever the server's defaults; its server
    thread id noted on the pool's record for `Database.transaction` (a cancelled query is
    killed by it).

    IN lists are planned from index dives whatever their length: past the server's default of
    200 values MariaDB estimates them from index statistics instead, which lag a fast-growing
    table, and was seen reading a transformation's every ParcelInputs row for a batch of 500
    parcels (a ref on TransformationID alone rather than 500 ranges of the primary key)."""
    record.info[THREAD_ID] = int(dbapi_connection.driver_connection.thread_id())
    cursor = dbapi_connection.cursor()
    cursor.execute(
        "SET time_zone = '+00:00', "
        "sql_mode = 'STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
        "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION', "
        "eq_range_index_dive_limit = 0"
    )
    cursor.close()


def _set_galera_session(dbapi_connection: Any, record: Any) -> None:
    """A session on a Galera node: as on any server, and reading causally (wsrep_sync_wait=1:
    a SELECT first waits until this node has applied what the cluster committed before it).
    Through a proxy the node a pooled connection reaches is the writer of the moment; after a
    failover it is a node that may still be applying the old writer's last commits, and a
    transaction deciding from what it reads must see them."""
    _set_mysql_session(dbapi_connection, record)
    cursor = dbapi_connection.cursor()
    cursor.execute("SET wsrep_sync_wait = 1")
    cursor.close()


async def open_database(url: str, settings: DatabaseSettings | None = None) -> Database:
    """Build and start a Database for `url`."""
    database = Database(url, settings)
    await database.start()
    return database
