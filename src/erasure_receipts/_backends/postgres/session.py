"""PostgreSQL: the :class:`Session` every backend function talks through - a synchronous
``psycopg.Connection`` (:class:`SyncSession`), or an ``AsyncConnection`` driven from a
worker thread (:class:`AsyncBridgeSession`, each call is run on the connection's event
loop) - and :func:`stream`, a server-side cursor over it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol, TypeVar

import psycopg
from psycopg import pq
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row, tuple_row

__all__ = [
    "FETCH_ROWS",
    "AsyncBridgeSession",
    "Session",
    "SyncSession",
    "asecond_connection",
    "second_connection",
    "stream",
    "text_of",
]

log = logging.getLogger("erasure_receipts")

FETCH_ROWS = 500
"""Rows per ``FETCH`` from the server-side cursor: memory stays bounded by this page."""

T = TypeVar("T")


class Session(Protocol):
    """The database operations the backend needs, whatever drives the connection."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns its row count."""
        ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; returns all its rows as tuples."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """A transaction: committed on success, rolled back on any error."""
        ...

    def outside_transaction(self, sql: str) -> None:
        """Run a statement that cannot run in a transaction block (``VACUUM``)."""
        ...

    @property
    def info(self) -> psycopg.ConnectionInfo:
        """The connection's parameters (host, port, database, server version)."""
        ...

    @property
    def in_pipeline(self) -> bool:
        """Whether the connection is in pipeline mode (where ``VACUUM`` cannot run)."""
        ...


class SyncSession:
    """A :class:`Session` over a synchronous ``psycopg.Connection``, used as it is."""

    def __init__(self, conn: psycopg.Connection[Any], pool: Any = None) -> None:
        self.conn = conn
        self.pool = pool  # the pool ``conn`` is from: a lease is held outside it

    @property
    def info(self) -> psycopg.ConnectionInfo:
        """The connection's ``info``."""
        return self.conn.info

    @property
    def in_pipeline(self) -> bool:
        """Whether the connection is in pipeline mode (where ``VACUUM`` cannot run)."""
        return bool(self.conn.pgconn.pipeline_status != pq.PipelineStatus.OFF)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement on a binary cursor of its own; returns its row count."""
        with self.conn.cursor(binary=True, row_factory=tuple_row) as cur:
            cur.execute(sql, params or None)
            return cur.rowcount

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement on a binary cursor of its own (``bytea`` and converted text
        come back as bytes); returns all its rows as tuples."""
        with self.conn.cursor(binary=True, row_factory=tuple_row) as cur:
            cur.execute(sql, params or None)
            return cur.fetchall()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """``conn.transaction()``: commit on success, roll back on any error (a savepoint
        if a transaction is already open)."""
        with self.conn.transaction():
            yield

    def outside_transaction(self, sql: str) -> None:
        """Run ``sql`` in autocommit mode, then restore the connection's mode. Call it
        with no transaction open (psycopg refuses to switch autocommit inside one)."""
        conn = self.conn
        was = conn.autocommit
        if not was:
            conn.autocommit = True
        try:
            conn.execute(sql)
        finally:
            if not was:
                conn.autocommit = False


class AsyncBridgeSession:
    """Drive an ``AsyncConnection`` from a worker thread: every call runs on ``loop``.

    The async saver holds its connection (and lock) on the event loop and runs the
    synchronous engine in ``asyncio.to_thread``; the event loop stays free to serve
    these calls.
    """

    def __init__(
        self, conn: psycopg.AsyncConnection[Any], loop: asyncio.AbstractEventLoop, pool: Any = None
    ):
        self.conn = conn
        self.loop = loop
        self.pool = pool  # the pool ``conn`` is from: a lease is held outside it

    @property
    def info(self) -> psycopg.ConnectionInfo:
        """The connection's ``info`` (read directly: no round trip to the loop)."""
        return self.conn.info

    @property
    def in_pipeline(self) -> bool:
        """Whether the connection is in pipeline mode (where ``VACUUM`` cannot run)."""
        return bool(self.conn.pgconn.pipeline_status != pq.PipelineStatus.OFF)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement on ``loop`` (binary cursor), blocking this thread until it
        is done; returns its row count."""

        async def run() -> int:
            async with self.conn.cursor(binary=True, row_factory=tuple_row) as cur:
                await cur.execute(sql, params or None)
                return cur.rowcount

        return self._call(run())

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement on ``loop`` (binary cursor), blocking this thread until it
        is done; returns all its rows as tuples."""

        async def run() -> list[tuple[Any, ...]]:
            async with self.conn.cursor(binary=True, row_factory=tuple_row) as cur:
                await cur.execute(sql, params or None)
                return await cur.fetchall()

        return self._call(run())

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """``conn.transaction()`` entered and exited on ``loop`` around the block: commit
        on success, roll back on any error (``BaseException`` included)."""
        tx = self.conn.transaction()
        self._call(tx.__aenter__())
        try:
            yield
        except BaseException as exc:
            self._call(tx.__aexit__(type(exc), exc, exc.__traceback__))
            raise
        self._call(tx.__aexit__(None, None, None))

    def outside_transaction(self, sql: str) -> None:
        """Run ``sql`` on ``loop`` in autocommit mode, then restore the connection's mode.
        Call it with no transaction open."""

        async def run() -> None:
            was = self.conn.autocommit
            if not was:
                await self.conn.set_autocommit(True)
            try:
                await self.conn.execute(sql)
            finally:
                if not was:
                    await self.conn.set_autocommit(False)

        self._call(run())


def stream(
    session: Session, sql: str, params: Sequence[Any], name: str, expect: float = 0
) -> Iterator[Any]:
    """Rows of ``sql`` (a ``SELECT ... ORDER BY ... [FOR UPDATE]``), page by page.

    Most scopes are small (a thread's few rows per table), so the rows are first asked
    for with ``LIMIT FETCH_ROWS + 1``: one round trip, one statement, one snapshot. Only
    when that returns more than a page is its result dropped and the whole query run
    again through a server-side cursor (``DECLARE``/``FETCH``, one snapshot for all its
    pages), so memory stays bounded by a page however large the scope. Plain SQL rather
    than psycopg's named cursors, so it works the same on sync, async and pipeline-mode
    connections. Must run inside a transaction. ``expect``: how many rows the caller
    expects (a guess); over a page, the cursor is used from the start instead of a first
    try whose result would be dropped.
    """
    if expect <= FETCH_ROWS:
        lock = " FOR UPDATE"
        head, tail = (sql[: -len(lock)], lock) if sql.endswith(lock) else (sql, "")
        first = session.query(f"{head} LIMIT {FETCH_ROWS + 1}{tail}", params)
        if len(first) <= FETCH_ROWS:
            yield from first
            return
        del first
    session.execute(f"DECLARE {name} NO SCROLL CURSOR FOR {sql}", params)
    try:
        while True:
            rows = session.query(f"FETCH FORWARD {FETCH_ROWS} FROM {name}")
            yield from rows
            if len(rows) < FETCH_ROWS:
                return
    finally:
        session.execute(f"CLOSE {name}")


def text_of(v: Any) -> str:
    """A text value as a binary cursor returns it (``bytes``, from ``convert_to``) or a
    text one does."""
    return bytes(v).decode("utf-8") if isinstance(v, bytes | bytearray | memoryview) else str(v)


def _where(tables: Iterable[str]) -> str:
    """What a connection reads: the server instance (and whether it is a standby), its
    database, roles, search path and the settings its session changed, whether the
    tables have row-level security, and the oid each table name resolves to."""
    regs = [f"pg_catalog.to_regclass('{t}')" for t in tables]
    oids = ", ".join(f'{r}::oid::bigint AS "{t}"' for r, t in zip(regs, tables, strict=True))
    return (
        "SELECT pg_catalog.pg_postmaster_start_time() AS started, "
        "pg_catalog.pg_is_in_recovery() AS standby, pg_catalog.current_database() AS db, "
        "current_user AS role, session_user AS login, "
        "pg_catalog.current_setting('search_path') AS path, "
        "(SELECT pg_catalog.jsonb_object_agg(name, setting) FROM pg_catalog.pg_settings "
        " WHERE source = 'session' AND name <> 'search_path') AS settings, "
        "(SELECT pg_catalog.bool_or(relrowsecurity) FROM pg_catalog.pg_class "
        f" WHERE oid IN ({', '.join(regs)})) AS rls, {oids}"
    )


_SET_PATH = "SELECT pg_catalog.set_config('search_path', %s, false)"
_OPTIONS: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
"""A second connection configured as LangGraph configures the saver's."""


def _conninfo(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> str:
    """The connection's parameters as libpq used them (the password included), pinned
    to the host and port it is connected to (of a list of hosts, the one chosen)."""
    params = {o.keyword.decode(): o.val.decode() for o in conn.pgconn.info if o.val is not None}
    params.update(host=conn.info.host, port=str(conn.info.port))
    params.pop("hostaddr", None)
    if conn.info.hostaddr:
        params["hostaddr"] = conn.info.hostaddr
    return make_conninfo("", **params)


def _refused(why: str) -> None:
    log.info("batched sweep: read-back in turn (%s)", why)


def _not_shareable(here: dict[str, Any]) -> bool:
    """Whether what ``conn`` reads cannot be read the same elsewhere: on a standby, or
    through row-level security (its policies may read settings no catalog lists, such
    as ``SET app.tenant``)."""
    if here["standby"] or here["rls"]:
        _refused("a standby, or row-level security on the checkpoint tables")
        return True
    return False


def second_connection(
    conn: psycopg.Connection[Any], tables: Sequence[str]
) -> psycopg.Connection[Any] | None:
    """A new connection with ``conn``'s parameters (password included; the host and port
    it is connected to) and search path, configured as LangGraph's (autocommit,
    ``dict_row``); None, logged, if ``conn`` is not in autocommit mode, or the new one
    cannot be opened, or does not read the same: another server instance or a standby
    (of several hosts), another role (``SET ROLE``), or ``tables`` resolved to others (a
    temporary table of ``conn``'s session). The caller holds ``conn``'s lock."""
    if not conn.autocommit:  # LangGraph's requirement; a query would open a transaction
        _refused("the saver's connection is not in autocommit mode")
        return None
    query = _where(tables)
    try:
        here = conn.cursor(row_factory=dict_row).execute(query).fetchone()
    except psycopg.Error as exc:
        _refused(f"the saver's connection could not be described: {exc}")
        return None
    if here is None or _not_shareable(here):
        return None
    try:
        other = psycopg.Connection.connect(_conninfo(conn), **_OPTIONS)
    except psycopg.Error as exc:
        _refused(f"no second connection: {exc}")
        return None
    try:
        other.execute(_SET_PATH, (here["path"],))
        there = other.execute(query).fetchone()
    except BaseException as exc:
        other.close()
        if not isinstance(exc, psycopg.Error):
            raise
        there = f"failed: {exc}"
    if there != here:
        other.close()
        _refused(f"a second connection reads another server, role or tables: {there}")
        return None
    return other


async def asecond_connection(
    conn: psycopg.AsyncConnection[Any], tables: Sequence[str]
) -> psycopg.AsyncConnection[Any] | None:
    """Async :func:`second_connection` (the caller holds ``conn``'s lock)."""
    if not conn.autocommit:
        _refused("the saver's connection is not in autocommit mode")
        return None
    query = _where(tables)
    try:
        here = await (await conn.cursor(row_factory=dict_row).execute(query)).fetchone()
    except psycopg.Error as exc:
        _refused(f"the saver's connection could not be described: {exc}")
        return None
    if here is None or _not_shareable(here):
        return None
    try:
        other = await psycopg.AsyncConnection.connect(_conninfo(conn), **_OPTIONS)
    except psycopg.Error as exc:
        _refused(f"no second connection: {exc}")
        return None
    try:
        await other.execute(_SET_PATH, (here["path"],))
        there = await (await other.execute(query)).fetchone()
    except BaseException as exc:  # a cancelled task too: the connection is not left open
        await other.close()
        if not isinstance(exc, psycopg.Error):
            raise
        there = f"failed: {exc}"
    if there != here:
        await other.close()
        _refused(f"a second connection reads another server, role or tables: {there}")
        return None
    return other
