"""PostgreSQL: enumerate, lock, delete and report residue of one thread's rows.

Everything here talks to the database through a :class:`Session`: a synchronous
``psycopg.Connection`` (:class:`SyncSession`), or an ``AsyncConnection`` driven from a
worker thread (:class:`AsyncBridgeSession`, each call is run on the connection's event
loop). The engine is synchronous, so the async saver runs exactly this code on a worker
thread: there is one implementation of the rows, locking, journal and residue.

Concurrency. Writes of a thread and its erasure are serialised by a transaction-scoped
advisory lock ``(ADVISORY_CLASS, hashtext(thread_id))``: ``BEFORE INSERT`` triggers on
``checkpoints``, ``checkpoint_blobs`` and ``checkpoint_writes`` take it *shared* (so
writers of a thread never block each other) and then refuse rows of a tombstoned
thread; the erasure takes it *exclusively* before its first read, under READ
COMMITTED. A write that got the lock first commits before the erasure measures (it is
measured and deleted); a write that asks later waits for the erasure's commit and then
sees the tombstone (``ThreadErasedError``). No row can be inserted between measurement
and delete, and the trigger holds for every connection and process, including plain
``PostgresSaver`` workers.

Leaves. Every column is read with an explicit cast so the hashed value does not depend
on client settings (``DateStyle``, ``TimeZone``, binary/text protocol); see
:data:`LEAF_EXPRESSIONS` and RECEIPT_SPEC.md, "PostgreSQL leaves". Rows are ordered by
primary key with ``COLLATE "C"`` (code-point order, the same as SQLite's ``BINARY``).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq
from psycopg.rows import tuple_row

from .. import lease
from .._clock import fresh_after
from .._parts import LeafSink, Part, TableCount
from ..digest import RowLeafHasher
from .keep_latest import DeltaChannelError, Head, KeepLatest, Removed, plan

__all__ = [
    "ADVISORY_CLASS",
    "CHECKPOINT_TABLES",
    "LEASE_CLASS",
    "RETRYABLE",
    "TOMBSTONE_MESSAGE",
    "AsyncBridgeSession",
    "PgTablePart",
    "PlannedPgPart",
    "PostgresBackend",
    "Session",
    "SyncSession",
    "database_label",
    "ensure_schema",
    "horizon_holders",
    "idle_threads",
    "installed_version",
    "is_erased",
    "is_tombstone_error",
    "journal_receipts",
    "latest_checkpoint",
    "leaf_expression",
    "locate",
    "mark_issued",
    "namespace_condition",
    "pending_journal",
    "plan_keep_latest",
    "purge_journal",
    "record_statement",
    "redact_journal",
    "release_lease",
    "reopen",
    "run_in_flight",
    "server_identity",
    "still_pending",
    "take_lease",
    "threads_by_metadata",
]

TOMBSTONE_MESSAGE = "erasure_receipts: thread erased"
ADVISORY_CLASS = 1162039635
"""First key of the two-key advisory locks (``'ERAS'`` as int4); the second is
``hashtext(thread_id)``. Two-key locks never collide with single-bigint ones."""
SCHEMA_VERSION = "erasure_receipts schema 4"
"""Stored as the trigger function's comment; ``setup()`` upgrades an older version."""
ENFORCING_VERSIONS = (
    "erasure_receipts schema 1",
    "erasure_receipts schema 2",
    "erasure_receipts schema 3",
    SCHEMA_VERSION,
)
"""Versions whose triggers refuse erased threads: the erasure API uses any of them
without installing anything (version 1 is the same check, slower and with names
resolved through the writer's ``search_path``; versions before 3 refuse every write,
whatever the tombstone's policy: their receipts say ``refuse_all``; version 3 accepted
writes for a checkpoint that was never saved, so its receipts say ``refuse_all`` too)."""

CHECKPOINT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
FETCH_ROWS = 500
"""Rows per ``FETCH`` from the server-side cursor: memory stays bounded by this page."""
RETRYABLE: tuple[type[Exception], ...] = (
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
    pg_errors.LockNotAvailable,
)
"""Failures after which the whole erasure is retried (everything was rolled back)."""

SCHEMA_SQL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS erasure_tombstones (
    thread_id text PRIMARY KEY,
    receipt_id text NOT NULL,
    erased_at text NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS erasure_journal (
    receipt_id text PRIMARY KEY,
    thread_id text NOT NULL,
    issued_at text NOT NULL,
    entry text NOT NULL,
    statement text,
    receipt_sha256 text,
    receipt text
)""",
    """CREATE INDEX IF NOT EXISTS erasure_journal_pending ON erasure_journal (issued_at)
    WHERE receipt_sha256 IS NULL""",
    "CREATE INDEX IF NOT EXISTS erasure_journal_thread ON erasure_journal (thread_id)",
    # A tombstone's policy (NULL: written by an older version, refuses every write); in
    # the tombstone row, so a worker granted SELECT on erasure_tombstones reads it too.
    "ALTER TABLE erasure_tombstones ADD COLUMN IF NOT EXISTS policy text, "
    "ADD COLUMN IF NOT EXISTS fresh_after text",
)
"""Tables and indexes (``IF NOT EXISTS``), created in ``current_schema()``."""

TRIGGER_FUNCTION_SQL = f"""CREATE OR REPLACE FUNCTION erasure_receipts_refuse_erased()
RETURNS trigger LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    locked pg_catalog.text;
    bound pg_catalog.text;
    root pg_catalog.text;
    receipt pg_catalog.text;
    saved pg_catalog.bool;
BEGIN
    -- The shared lock first, then the look-up in a new snapshot (the function is
    -- VOLATILE: under READ COMMITTED each statement sees what committed before it), so
    -- a write that waited for an erasure sees its tombstone. An assignment (not
    -- PERFORM) takes the lock as a simple expression, without an executor run.
    locked := pg_catalog.pg_advisory_xact_lock_shared(
        {ADVISORY_CLASS}, pg_catalog.hashtext(NEW.thread_id))::pg_catalog.text;
    PERFORM FROM {{schema}}.erasure_tombstones t
        WHERE t.thread_id OPERATOR(pg_catalog.=) NEW.thread_id;
    IF NOT FOUND THEN
        RETURN NEW;
    END IF;
    SELECT t.receipt_id, CASE WHEN t.policy OPERATOR(pg_catalog.=) 'new_conversations'
        THEN t.fresh_after END INTO receipt, bound FROM {{schema}}.erasure_tombstones t
        WHERE t.thread_id OPERATOR(pg_catalog.=) NEW.thread_id;
    -- "new_conversations": a new conversation (LangGraph's uuid6 ids) may start under
    -- the id; whatever continues the erased one (an id, parent or subgraph root not
    -- after the bound) is refused. Blobs are saved in the transaction of their
    -- checkpoint, which decides.
    IF bound IS NOT NULL THEN
        IF TG_TABLE_NAME OPERATOR(pg_catalog.=) 'checkpoint_blobs' THEN
            RETURN NEW;
        END IF;
        IF (NEW.checkpoint_id COLLATE "C") OPERATOR(pg_catalog.>) bound
           AND pg_catalog.length(NEW.checkpoint_id) OPERATOR(pg_catalog.=) 36
           AND pg_catalog.substr(NEW.checkpoint_id, 15, 1) OPERATOR(pg_catalog.=) '6' THEN
            -- Writes only for a saved checkpoint (one accepted here): a run begun
            -- before the erasure has its next checkpoint refused, and so its writes.
            -- The checkpoints table next to the written one, named explicitly.
            IF TG_TABLE_NAME OPERATOR(pg_catalog.<>) 'checkpoints' THEN
                EXECUTE pg_catalog.format('SELECT EXISTS (SELECT FROM %I.checkpoints c '
                    'WHERE c.thread_id OPERATOR(pg_catalog.=) $1 '
                    'AND c.checkpoint_ns OPERATOR(pg_catalog.=) $2 '
                    'AND c.checkpoint_id OPERATOR(pg_catalog.=) $3)', TG_TABLE_SCHEMA)
                    INTO saved USING NEW.thread_id, NEW.checkpoint_ns, NEW.checkpoint_id;
                IF saved THEN
                    RETURN NEW;
                END IF;
                RAISE EXCEPTION '{TOMBSTONE_MESSAGE}'
                    USING ERRCODE = 'P0001',
                          DETAIL = pg_catalog.format('erased by receipt %s', receipt),
                          HINT = 'a write is accepted once its checkpoint is saved';
            END IF;
            root := NEW.metadata OPERATOR(pg_catalog.->) 'parents'
                OPERATOR(pg_catalog.->>) '';
            IF (NEW.parent_checkpoint_id IS NULL
                OR (NEW.parent_checkpoint_id COLLATE "C") OPERATOR(pg_catalog.>) bound)
               AND (root IS NULL OR (root COLLATE "C") OPERATOR(pg_catalog.>) bound) THEN
                RETURN NEW;
            END IF;
        END IF;
    END IF;
    -- The server log keeps this message: it names the erasure's receipt, never the id.
    RAISE EXCEPTION '{TOMBSTONE_MESSAGE}'
        USING ERRCODE = 'P0001',
              DETAIL = pg_catalog.format('erased by receipt %s', receipt),
              HINT = 'reopen_thread() allows the thread id to be written again';
END
$fn$"""
"""The trigger function (``{schema}``: where ``erasure_tombstones`` is). Every name is
schema-qualified, so a writer's ``search_path`` (or a temporary table called
``erasure_tombstones``) cannot point the look-up or the lock elsewhere. ``CREATE OR
REPLACE`` keeps the function's OID: triggers created by an older version run the new
body from the next statement on."""

TRIGGERS_SQL = f"""DO $do$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY{list(CHECKPOINT_TABLES)!r} LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_trigger
                       WHERE tgrelid = to_regclass(t) AND tgname = 'erasure_tombstone') THEN
            EXECUTE format('CREATE TRIGGER erasure_tombstone BEFORE INSERT OR UPDATE OF '
                           'thread_id ON %I FOR EACH ROW '
                           'EXECUTE FUNCTION erasure_receipts_refuse_erased()', t);
        END IF;
    END LOOP;
END
$do$"""

T = TypeVar("T")
log = logging.getLogger("erasure_receipts")


# -- sessions: one interface over sync and async connections --------------------------


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


def stream(session: Session, sql: str, params: Sequence[Any], name: str) -> Iterator[Any]:
    """Rows of ``sql`` through a server-side cursor (``DECLARE``/``FETCH``), page by page.

    Plain SQL rather than psycopg's named cursors, so it works the same on sync, async
    and pipeline-mode connections. Must run inside a transaction.
    """
    session.execute(f"DECLARE {name} NO SCROLL CURSOR FOR {sql}", params)
    try:
        while True:
            rows = session.query(f"FETCH FORWARD {FETCH_ROWS} FROM {name}")
            yield from rows
            if len(rows) < FETCH_ROWS:
                return
    finally:
        session.execute(f"CLOSE {name}")


# -- schema, tombstones, journal --------------------------------------------------------


def ensure_schema(session: Session) -> None:
    """Create tombstone and journal tables, the trigger function and the triggers, or
    upgrade those of an older version.

    Idempotent and safe to run from several workers at once (serialised by an advisory
    lock); existing triggers are left alone, so no table lock is taken after the first
    run. An older version's function is replaced in place (``CREATE OR REPLACE``: its
    triggers enforce the tombstones throughout); a role that may not replace it keeps
    the older version, which still enforces them, and a warning says so.
    """
    if installed_version(session) == SCHEMA_VERSION:
        return  # workers without CREATE/owner privileges can call setup() too
    try:
        with session.transaction():
            session.execute("SELECT pg_advisory_xact_lock(%s, 0)", (ADVISORY_CLASS,))
            if installed_version(session) == SCHEMA_VERSION:
                return  # installed by another worker while this one waited
            for statement in SCHEMA_SQL:
                session.execute(statement)
            schema = str(session.query("SELECT current_schema()")[0][0])
            quoted = '"' + schema.replace('"', '""') + '"'
            session.execute(TRIGGER_FUNCTION_SQL.replace("{schema}", quoted))
            session.execute(
                f"COMMENT ON FUNCTION erasure_receipts_refuse_erased() IS '{SCHEMA_VERSION}'"
            )
            session.execute(TRIGGERS_SQL)
    except pg_errors.InsufficientPrivilege as exc:
        old = installed_version(session)
        if old not in ENFORCING_VERSIONS:
            raise
        log.warning(
            "erasure schema left at %r (its triggers still refuse erased threads): this role "
            "may not upgrade it to %r (%s); run setup() once as the tables' owner",
            old, SCHEMA_VERSION, str(exc).strip().splitlines()[0],
        )  # fmt: skip


def installed_version(session: Session) -> str | None:
    """The installed schema version (the trigger function's comment), if the tables and
    all three triggers exist; otherwise None."""
    rows = session.query(
        "SELECT CASE WHEN to_regclass('erasure_tombstones') IS NOT NULL "
        "   AND to_regclass('erasure_journal') IS NOT NULL "
        "   AND (SELECT count(*) FROM pg_trigger WHERE tgname = 'erasure_tombstone' "
        "        AND tgrelid IN (to_regclass('checkpoints'), to_regclass('checkpoint_blobs'), "
        "                        to_regclass('checkpoint_writes'))) = 3 "
        "THEN obj_description(to_regprocedure('erasure_receipts_refuse_erased()'), 'pg_proc') "
        "END"
    )
    return str(rows[0][0]) if rows and rows[0][0] is not None else None


def schema_installed(session: Session) -> bool:
    """Whether tables, trigger function and three triggers of an enforcing version (this
    one or an older one that ``setup()`` would upgrade) exist."""
    return installed_version(session) in ENFORCING_VERSIONS


def is_tombstone_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the tombstone trigger's ``RAISE`` (a ``RaiseException`` carrying
    ``TOMBSTONE_MESSAGE``), not some other error; its cause is not looked at."""
    return isinstance(exc, pg_errors.RaiseException) and TOMBSTONE_MESSAGE in str(exc)


def record_statement(session: Session, receipt_id: str, statement: str) -> str:
    """Journal the statement about to be signed, first writer wins; returns the winner."""
    with session.transaction():
        session.execute(
            "UPDATE erasure_journal SET statement = %s WHERE receipt_id = %s AND statement IS NULL",
            (statement, receipt_id),
        )
        rows = session.query(
            "SELECT statement FROM erasure_journal WHERE receipt_id = %s", (receipt_id,)
        )
    if not rows or rows[0][0] is None:
        raise RuntimeError(f"erasure journal entry {receipt_id} is missing")
    return str(rows[0][0])


def mark_issued(session: Session, receipt_id: str, receipt_json: bytes) -> None:
    """Close a journal entry with its signed receipt (first writer wins)."""
    with session.transaction():
        session.execute(
            "UPDATE erasure_journal SET receipt_sha256 = %s, receipt = %s "
            "WHERE receipt_id = %s AND receipt_sha256 IS NULL",
            (hashlib.sha256(receipt_json).hexdigest(), receipt_json.decode("utf-8"), receipt_id),
        )


def journal_receipts(session: Session, thread_id: str | None = None) -> list[bytes]:
    """The signed receipts kept in the journal, oldest first (``issued_at``, then receipt
    id, in code-point order), optionally of one thread."""
    where, params = ("AND thread_id = %s", (thread_id,)) if thread_id is not None else ("", ())
    rows = session.query(
        f"SELECT receipt FROM erasure_journal WHERE receipt IS NOT NULL {where} "
        'ORDER BY issued_at COLLATE "C", receipt_id COLLATE "C"',
        params,
    )
    return [str(r[0]).encode("utf-8") for r in rows]


def pending_journal(
    session: Session, older_than: str | None = None
) -> list[tuple[str, str, str, str | None]]:
    """``(receipt_id, issued_at, entry, statement)`` of erasures without a receipt."""
    cutoff, params = ('AND issued_at COLLATE "C" < %s', (older_than,)) if older_than else ("", ())
    rows = session.query(
        "SELECT receipt_id, issued_at, entry, statement FROM erasure_journal "
        f"WHERE receipt_sha256 IS NULL {cutoff} "
        'ORDER BY issued_at COLLATE "C", receipt_id COLLATE "C"',
        params,
    )
    return [(str(a), str(b), str(c), None if d is None else str(d)) for a, b, c, d in rows]


LEASE_CLASS = ADVISORY_CLASS + 1
"""Advisory-lock class of the leases on open journal entries (``erasure_receipts.lease``)."""


def take_lease(session: Session, receipt_id: str) -> Any:
    """Lease an open journal entry: a session-level advisory lock keyed by its receipt
    id, held until released or until the holder's connection ends (a killed owner's
    lease ends with it). Returns the token for :func:`release_lease`, or None if another
    session holds it.

    On a connection from a pool, the lock would last only as long as the pool keeps
    that connection, which it may close (``max_lifetime``) while the erasure is still
    signing: the lease is held on a connection of its own instead, opened with the
    pool's parameters and kept by the flow until it releases the lease (it takes no
    pool slot, so erasures never wait for one another's connections)."""
    sql = "SELECT pg_try_advisory_lock(%s, hashtext(%s))"
    pool = getattr(session, "pool", None)
    if pool is None:
        rows = session.query(sql, (LEASE_CLASS, receipt_id))
        return session if rows and rows[0][0] else None
    conninfo, kwargs = (_resolved(session, v) for v in (pool.conninfo, pool.kwargs))
    own = psycopg.Connection.connect(conninfo or "", **_lease_kwargs(kwargs))
    try:
        row = own.execute(sql, (LEASE_CLASS, receipt_id)).fetchone()
    except BaseException:
        own.close()
        raise
    if row is None or not row[0]:
        own.close()
        return None
    return own


def _resolved(session: Session, value: Any) -> Any:
    """A pool parameter: as given, or what its (sync or async) callable returns."""
    if not callable(value):
        return value
    value = value()
    if inspect.iscoroutine(value):  # an async pool's: awaited on its loop
        assert isinstance(session, AsyncBridgeSession)
        return session._call(value)
    return value


def _lease_kwargs(kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """The pool's connection parameters, as a plain autocommit connection (an idle
    session, not one idle in a transaction; its cursor and row types are the pool's
    business, possibly async)."""
    drop = {"autocommit", "row_factory", "cursor_factory", "context", "prepare_threshold"}
    return {**{k: v for k, v in (kwargs or {}).items() if k not in drop}, "autocommit": True}


def release_lease(session: Session, receipt_id: str, token: Any) -> None:
    """End a lease taken by :func:`take_lease`, on the connection that holds it: with a
    pool, its own connection, closed (which ends the lock); else the saver's."""
    if isinstance(token, psycopg.Connection):
        token.close()
        return
    holder: Session = session
    if isinstance(token, SyncSession | AsyncBridgeSession):
        if token.conn.closed:
            return  # the lease ended with its connection
        holder = token
    holder.query("SELECT pg_advisory_unlock(%s, hashtext(%s))", (LEASE_CLASS, receipt_id))


def still_pending(session: Session, receipt_id: str) -> bool:
    """Whether the journal entry is still open (no receipt marked issued)."""
    rows = session.query(
        "SELECT 1 FROM erasure_journal WHERE receipt_id = %s AND receipt_sha256 IS NULL",
        (receipt_id,),
    )
    return bool(rows)


def reopen(session: Session, thread_id: str) -> bool:
    """Remove a thread's tombstone (explicit opt-in to reuse its id), in a transaction of
    its own; True if one existed."""
    with session.transaction():
        rows = session.query(
            "WITH d AS (DELETE FROM erasure_tombstones WHERE thread_id = %s RETURNING 1) "
            "SELECT count(*) FROM d",
            (thread_id,),
        )
    return int(rows[0][0]) > 0


def is_erased(session: Session, thread_id: str) -> bool:
    """Whether the thread id is tombstoned."""
    rows = session.query("SELECT 1 FROM erasure_tombstones WHERE thread_id = %s", (thread_id,))
    return bool(rows)


def database_label(info: psycopg.ConnectionInfo) -> str:
    """``postgresql://host:port/dbname`` (no user, no password) for the receipt; a Unix
    socket directory is given as ``postgresql:///dbname?host=DIR&port=PORT``."""
    host = info.host or "localhost"
    if host.startswith("/"):
        return f"postgresql:///{info.dbname}?host={host}&port={info.port}"[:4096]
    return f"postgresql://{host}:{info.port}/{info.dbname}"[:4096]


def server_identity(session: Session) -> tuple[Any, ...]:
    """What identifies one database of one running server, as seen by a connection."""
    return tuple(
        session.query(
            "SELECT current_database(), inet_server_port(), "
            "pg_postmaster_start_time()::text, current_schema()"
        )[0]
    )


def namespace_condition(namespaces: Sequence[Sequence[str]]) -> tuple[str, list[str]]:
    """SQL matching ``store`` rows under the prefixes, as ``PostgresStore.search`` does:
    the namespace itself or anything below it (``LIKE 'a.b.%'``, metacharacters escaped)."""
    conds, params = [], []
    for ns in namespaces:
        if not ns:
            raise ValueError("an empty store namespace would match every item in the store")
        text = ".".join(ns)
        escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        conds.append("(prefix = %s OR prefix LIKE %s ESCAPE '\\')")
        params += [text, escaped + ".%"]
    return "(" + " OR ".join(conds) + ")", params


# -- leaves -----------------------------------------------------------------------------

_TEXT_TYPES = {"text", "varchar", "bpchar", "name", "char"}
_INT_TYPES = {"int2", "int4", "int8"}
_NUMERIC_WIRE = {"bool", "float4", "float8"}
_TS_FORMAT = "'YYYY-MM-DD\"T\"HH24:MI:SS.US'"


def leaf_expression(column: str, typname: str) -> str:
    """The SQL expression whose value is hashed for a column of type ``typname``.

    text-like: the stored text; ``bytea``: the raw bytes; ``int2/4/8``: the integer;
    ``bool``: 0/1; ``float4/8``: float8; ``json``/``jsonb``: ``::text`` as the server
    prints it (jsonb's normalised form: keys ordered, ``", "`` and ``": "``);
    ``timestamptz``: UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (always 6 fractional digits);
    ``timestamp``: the same without ``Z``; anything else (``numeric``, ``vector``,
    ``uuid``, ...): ``::text``. NULL is NULL.
    """
    q = '"' + column.replace('"', '""') + '"'
    if typname in _TEXT_TYPES or typname == "bytea" or typname in _INT_TYPES:
        return q
    if typname == "bool":
        return f"{q}::int4"
    if typname in ("float4", "float8"):
        return f"{q}::float8"
    if typname == "timestamptz":
        return f"to_char({q} AT TIME ZONE 'UTC', {_TS_FORMAT[:-1]}\"Z\"')"
    if typname == "timestamp":
        return f"to_char({q}, {_TS_FORMAT})"
    return f"{q}::text"


def wire_expression(column: str, typname: str) -> tuple[str, bool]:
    """What the library actually selects: ``leaf_expression``, with text values sent as
    their UTF-8 bytes (``convert_to(..., 'UTF8')``) so they are hashed without being
    decoded and re-encoded; the flag says the value is TEXT (``VAL`` tag ``t``)."""
    expr = leaf_expression(column, typname)
    if typname == "bytea" or typname in _INT_TYPES or typname in _NUMERIC_WIRE:
        return expr, False
    return f"convert_to({expr}, 'UTF8')", True


LEAF_EXPRESSIONS = {
    t: leaf_expression("c", t)
    for t in ("text", "bytea", "int4", "bool", "float8", "jsonb", "timestamptz", "numeric")
}
"""For documentation and tests: the expression used per type (column named ``c``)."""


@dataclass
class _Table:
    columns: list[str]
    types: list[str]
    pk: list[str]
    collatable: set[str]


def describe(session: Session, table: str) -> _Table | None:
    """Columns (in ``attnum`` order), their types and the primary key; None if absent.

    ``collatable`` lists the columns whose order is not already code-point order: they
    are sorted with ``COLLATE "C"``. A column whose collation is ``C``/``POSIX`` (or the
    default of a libc ``C`` database) needs none, so its primary-key index gives the
    order without a sort.
    """
    rows = session.query(
        "SELECT a.attname, t.typname, "
        "       a.attcollation <> 0 AND NOT coalesce(co.collname IN ('C', 'POSIX') OR "
        "         (co.collname = 'default' AND (SELECT d.datcollate IN ('C', 'POSIX') "
        "            AND coalesce(to_jsonb(d) ->> 'datlocprovider', 'c') = 'c' "
        "          FROM pg_database d WHERE d.datname = current_database())), false), "
        "       array_position(i.indkey::int2[], a.attnum) "
        "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
        "LEFT JOIN pg_collation co ON co.oid = a.attcollation "
        "LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary "
        "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum",
        (table,),
    )
    if not rows:
        return None
    pk = [r[0] for r in sorted((r for r in rows if r[3] is not None), key=lambda r: r[3])]
    return _Table(
        columns=[r[0] for r in rows],
        types=[r[1] for r in rows],
        pk=pk,
        collatable={r[0] for r in rows if r[2]},
    )


@dataclass
class PgTablePart:
    """One table's rows of the scope, streamed in primary-key order from raw storage."""

    session: Session
    table: str
    group: str
    where: str
    params: Sequence[Any]
    shape: _Table
    lock_rows: bool = False
    """``FOR UPDATE`` while erasing (store rows: no row lock-free writer can slip by)."""
    unit: str = ""
    """The receipt unit the rows belong to (``thread:<id>``, ``store``; "" = one tree)."""
    role: str = "removed"
    """``removed`` (measured and deleted) or ``kept`` (measured only: history receipts)."""
    method: str = "atomic-transaction"
    irreversible_deleted: int = 0
    namespaces_seen: set[str] = field(default_factory=set)
    _measured: int = 0

    def _select(self, lock: bool) -> str:
        s = self.shape
        cols = ", ".join(wire_expression(c, t)[0] for c, t in zip(s.columns, s.types, strict=True))
        order = ", ".join(f'"{c}" COLLATE "C"' if c in s.collatable else f'"{c}"' for c in s.pk)
        sql = f'SELECT {cols} FROM "{self.table}" WHERE {self.where} ORDER BY {order}'
        return sql + (" FOR UPDATE" if lock else "")

    def _text_mask(self) -> int:
        s = self.shape
        return sum(
            1 << i
            for i, (c, t) in enumerate(zip(s.columns, s.types, strict=True))
            if wire_expression(c, t)[1]
        )

    def _measure(self, sink: LeafSink, lock: bool) -> TableCount:
        s = self.shape
        stored = RowLeafHasher(self.table, s.columns, s.pk).stored
        mask = self._text_mask()
        ns_idx = s.columns.index("checkpoint_ns") if "checkpoint_ns" in s.columns else None
        seen = self.namespaces_seen
        count = TableCount()
        rows = nbytes = 0
        for row in stream(self.session, self._select(lock), self.params, f"m_{self.table}"):
            leaf, size = stored(row, mask)
            sink(leaf)
            rows += 1
            nbytes += size
            if ns_idx is not None:
                seen.add(row[ns_idx].decode("utf-8"))
        count.rows, count.bytes = rows, nbytes
        return count

    def measure(self, sink: LeafSink) -> TableCount:
        """Hash every row of the scope into ``sink`` in primary-key order (streamed by a
        server-side cursor: run it in a transaction), recording the checkpoint namespaces
        seen; takes no row locks."""
        return self._measure(sink, lock=False)

    def leaves(self) -> Iterator[bytes]:
        """The leaf data of every row, in the order ``measure`` hashes them (legal hold)."""
        s = self.shape
        data = RowLeafHasher(self.table, s.columns, s.pk).stored_data
        mask = self._text_mask()
        for row in stream(self.session, self._select(False), self.params, f"l_{self.table}"):
            yield data(row, mask)

    def erase(self, sink: LeafSink) -> TableCount:
        """Measure only (``FOR UPDATE`` if ``lock_rows``): the DELETE is deferred to
        :meth:`finish`."""
        count = self._measure(sink, lock=self.lock_rows)
        self._measured = count.rows
        return count

    def finish(self) -> None:
        """DELETE the scope's rows; raises ``RuntimeError`` if the number deleted differs
        from the number :meth:`erase` measured."""
        # Counted by the server (a pipeline-mode cursor has no rowcount until a sync).
        rows = self.session.query(
            f'WITH d AS (DELETE FROM "{self.table}" WHERE {self.where} RETURNING 1) '
            "SELECT count(*) FROM d",
            self.params,
        )
        deleted = int(rows[0][0])
        if deleted != self._measured:
            raise RuntimeError(
                f"{self.table}: measured {self._measured} rows but deleted {deleted}"
            )

    def remaining(self) -> int:
        """Rows of the scope still in the table, by SQL."""
        rows = self.session.query(
            f'SELECT count(*) FROM "{self.table}" WHERE {self.where}', self.params
        )
        return int(rows[0][0])


# -- the backend ------------------------------------------------------------------------


class PostgresBackend:
    """An :class:`~erasure_receipts._engine.ErasureBackend` over one PostgreSQL session."""

    kind = "postgres"

    def __init__(
        self,
        session: Session,
        thread_id: str,
        *,
        saver: str,
        store: str | None,
        store_rows_namespaces: Sequence[Sequence[str]] = (),
        extra_parts: Sequence[Part] = (),
        extra_residue: Callable[[], list[dict[str, Any]]] | None = None,
        versions: dict[str, str],
        vacuum: bool | str = False,
        lock_timeout_ms: int = 30_000,
        residue_scan: bool = False,
        threads: Sequence[str] | None = None,
        keep: str = "none",
        kept: Sequence[Sequence[str]] = (),
        removed: Removed | None = None,
        tombstone_policy: str = "new_conversations",
    ) -> None:
        if vacuum not in (False, True, "full"):
            raise ValueError('vacuum= must be False, True or "full"')
        # keep="latest" (history): the kept checkpoints, planned inside the transaction
        # unless given (recovery); see backends/keep_latest.py.
        self.keep = keep
        self._plan: KeepLatest | None = KeepLatest.of(kept) if kept else None
        # What the transaction deleted (given: recovery); from the commit on, the rule.
        self._removed = removed
        self._deleted: dict[str, list[tuple[str, ...]]] = {}
        self._policy = tombstone_policy
        self._enforced: str | None = None
        self._newest: dict[str, str] = {}
        self._writing = False
        self.session = session
        self.thread_id = thread_id
        self.saver = saver
        self.store = store
        self.database = database_label(session.info)
        self.versions = {**versions, "postgresql": _server_version(session.info)}
        self.extra_residue = extra_residue
        self.vacuum = vacuum
        self.lock_timeout_ms = int(lock_timeout_ms)
        self.residue_scan = residue_scan
        self.erasure_xids: list[int] = []
        """``txid_current()`` of each committed erasure transaction (empty at recovery):
        the horizon check after ``VACUUM`` looks for what is older than these."""
        self.lock_tables: tuple[str, ...] = ()
        """Tables locked ``SHARE ROW EXCLUSIVE`` first in the transaction: their writers
        (every thread's) wait for the commit, readers do not. Set when the scope was
        found by a search (subject discovery, database-wide needles) that must still
        hold at commit."""
        # Several threads (a subject): one unit per thread and one for the store.
        self.threads = list(threads) if threads is not None else [thread_id]
        units = threads is not None
        specs = [
            (table, "checkpoints", "thread_id = %s", [t], f"thread:{t}" if units else "")
            for t in self.threads
            for table in CHECKPOINT_TABLES
        ]
        if store_rows_namespaces:
            where, params = namespace_condition(store_rows_namespaces)
            specs += [
                ("store", "store", where, params, "store" * units),
                ("store_vectors", "store", where, params, "store" * units),
            ]
        self._parts: list[Part] = []
        shapes: dict[str, _Table | None] = {}
        for table, group, where, params, unit in specs:
            if table not in shapes:
                shapes[table] = describe(session, table)
            shape = shapes[table]
            if shape is None:
                # A table the database does not have (store_vectors without pgvector)
                # holds nothing of the scope: left out of the receipt, not shown as 0.
                continue
            self._parts.append(
                PgTablePart(session, table, group, where, params, shape,
                            lock_rows=group == "store", unit=unit)
            )  # fmt: skip
        if keep == "latest":
            rows = [p for p in self._parts
                    if isinstance(p, PgTablePart) and p.group == "checkpoints"]  # fmt: skip
            self._parts = [
                PlannedPgPart(session, p.table, p.group, "", (), p.shape, role=role,
                              resolve=self._planned_where(p.table, role == "kept"),
                              record=self._deleted.setdefault(p.table, []).extend
                              if role == "removed" and p.table != "checkpoint_writes"
                              else None)
                for p in rows
                for role in ("removed", "kept")
            ] + [p for p in self._parts if p not in rows]  # fmt: skip
        self._parts += list(extra_parts)

    def parts(self) -> Sequence[Part]:
        """The three checkpoint tables of every thread (one unit per thread when several
        were given; with ``keep="latest"`` a removed and a kept part each),
        ``store``/``store_vectors`` under ``store_rows_namespaces``, existing tables only,
        then any extra (swept) parts."""
        return self._parts

    @property
    def checkpoint_namespaces(self) -> set[str]:
        """Checkpoint namespaces seen while measuring: where the API checks look."""
        seen: set[str] = set()
        for p in self._parts:
            if isinstance(p, PgTablePart):
                seen |= p.namespaces_seen
        return seen

    @property
    def tables(self) -> list[str]:
        """The tables the scope's parts read, each once, in part order: what ``VACUUM``
        processes (a subject's threads share tables)."""
        return list(dict.fromkeys(p.table for p in self._parts if isinstance(p, PgTablePart)))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """READ COMMITTED with ``lock_timeout``; before anything is read it takes
        ``lock_tables`` (if set), then each thread's exclusive advisory lock in sorted
        order. Commit on success, roll back on any error."""
        s = self.session
        with s.transaction():
            # READ COMMITTED: every statement after the lock sees what committed before it
            # (a snapshot taken before the lock wait would miss a writer we waited for).
            s.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            s.execute(f"SET LOCAL lock_timeout = {self.lock_timeout_ms}")
            if self.lock_tables:
                # Before the advisory locks: every writer holding a thread's shared lock
                # also holds ROW EXCLUSIVE on a table here, so it has committed by now.
                names = ", ".join('"' + t.replace('"', '""') + '"' for t in self.lock_tables)
                s.execute(f"LOCK TABLE {names} IN SHARE ROW EXCLUSIVE MODE")
            for t in sorted(set(self.threads)):  # one order for every erasure: no deadlock
                s.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (ADVISORY_CLASS, t))
            if self.keep == "none":  # may tombstone: the newest id it will have erased
                self._newest = newest_ids(s, self.threads)
            self._writing = True
            try:
                yield
                # The xid whose deletions VACUUM must be able to remove (None: wrote
                # nothing). Everything here runs in the top transaction (no savepoints).
                xid = s.query("SELECT txid_current_if_assigned()")[0][0]
                if xid is not None:
                    self.erasure_xids.append(int(xid))
            finally:
                self._writing = False
        if self.keep == "latest" and self._removed is None:  # committed
            self._removed = self.removed_keys()
            for p in self._parts:
                if isinstance(p, PlannedPgPart) and p.role == "removed":
                    p.where, p.params = self._late_where(p.table)

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """A REPEATABLE READ, READ ONLY transaction; takes no advisory lock, so writers
        are not held back."""
        s = self.session
        with s.transaction():
            s.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield

    def previous_erasure(self) -> str | None:
        """Receipt id of the thread's tombstone, else of its newest journal entry."""
        rows = self.session.query(
            "SELECT receipt_id FROM erasure_tombstones WHERE thread_id = %s", (self.thread_id,)
        ) or self.session.query(
            "SELECT receipt_id FROM erasure_journal WHERE thread_id = %s "
            'ORDER BY issued_at COLLATE "C" DESC, receipt_id COLLATE "C" DESC LIMIT 1',
            (self.thread_id,),
        )
        return str(rows[0][0]) if rows else None

    @property
    def tombstone_policy(self) -> str:
        """What a tombstone of this erasure enforces: the saver's policy where the
        installed triggers are this version's, else ``refuse_all``."""
        if self._enforced is None:
            self._enforced = self._policy if self._schema_current() else "refuse_all"
        return self._enforced

    def _schema_current(self) -> bool:
        return installed_version(self.session) == SCHEMA_VERSION

    def write_tombstone(self, receipt_id: str, erased_at: str) -> None:
        """Tombstone every thread of the scope (the triggers then refuse their writes); an
        existing tombstone is kept. Its policy row is (re)written: a later erasure of a
        new conversation moves ``fresh_after`` past what it erased."""
        current = self._schema_current()  # else no policy columns: every write refused
        for t in self.threads:
            if not current:
                self.session.execute(
                    "INSERT INTO erasure_tombstones (thread_id, receipt_id, erased_at) "
                    "VALUES (%s, %s, %s) ON CONFLICT (thread_id) DO NOTHING",
                    (t, receipt_id, erased_at),
                )
                continue
            bound = fresh_after(erased_at, self._newest.get(t))
            inserted = self.session.query(
                "INSERT INTO erasure_tombstones "
                "(thread_id, receipt_id, erased_at, policy, fresh_after) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (thread_id) DO NOTHING "
                "RETURNING 1",
                (t, receipt_id, erased_at, self._policy, bound),
            )
            if inserted:
                continue
            # An existing tombstone keeps its receipt; its bound moves past this erasure.
            # A separate UPDATE (not ON CONFLICT DO UPDATE, which needs UPDATE even when
            # nothing conflicts), so a worker role granted SELECT, INSERT on the table
            # can still tombstone a thread for the first time.
            self.session.execute(
                "UPDATE erasure_tombstones SET policy = %s, "
                'fresh_after = GREATEST(fresh_after COLLATE "C", %s) WHERE thread_id = %s',
                (self._policy, bound, t),
            )

    def find_needles(
        self, forms: Sequence[bytes], scope: str, threads: Sequence[str]
    ) -> list[dict[str, Any]]:
        """Where any of ``forms`` occurs in a stored value (see the SQLite backend's
        ``find_needles``): ``text`` compared as text, ``jsonb`` as its ``::text`` form,
        ``bytea`` as bytes."""
        found = find_needles(self.session, forms, None if scope == "database" else threads)
        if self.keep != "none":
            found = [_with_checkpoints(self.session, loc) for loc in found]
        return found

    # -- keep="latest": the history erasure's plan (backends/keep_latest.py) ------------

    def _planned_where(self, table: str, kept: bool) -> Callable[[], tuple[str, list[Any]]]:
        def resolve() -> tuple[str, list[Any]]:
            if self._removed is not None and not kept:
                return self._late_where(table)
            k = self._resolve_plan()
            if table == "checkpoint_blobs":
                cond, params = k.blobs_where(self.thread_id)
            else:
                cond, params = k.where("%s")
            return f"thread_id = %s AND {'NOT ' * kept}{cond}", [self.thread_id, *params]

        return resolve

    def _resolve_plan(self) -> KeepLatest:
        if self._plan is None:
            self._plan = plan_keep_latest(self.session, self.thread_id, write=self._writing)
        return self._plan

    def _late_where(self, table: str) -> tuple[str, list[Any]]:
        """After the commit: the rows of the checkpoints (and the blobs) the transaction
        deleted - a checkpoint saved since, whatever its id, is not one of them."""
        assert self._removed is not None
        clauses: list[str] = []
        params: list[Any] = [self.thread_id]
        for ns, keys in self._removed.by_ns(table).items():
            if table == "checkpoint_blobs":
                # ... unless a checkpoint saved since references the key again: its data.
                clauses.append("(checkpoint_ns = %s AND (channel, version) IN "
                               "(SELECT * FROM unnest(%s::text[], %s::text[])) AND NOT EXISTS "
                               "(SELECT 1 FROM checkpoints c WHERE c.thread_id = "
                               "checkpoint_blobs.thread_id AND c.checkpoint_ns = "
                               "checkpoint_blobs.checkpoint_ns AND c.checkpoint -> "
                               "'channel_versions' ->> checkpoint_blobs.channel = "
                               "checkpoint_blobs.version))")  # fmt: skip
                params += [ns, [c for c, _ in keys], [v for _, v in keys]]
            else:
                clauses.append("(checkpoint_ns = %s AND checkpoint_id = ANY(%s::text[]))")
                params += [ns, [i for (i,) in keys]]
        return f"thread_id = %s AND ({' OR '.join(clauses) or '1 = 0'})", params

    def kept_checkpoints(self) -> list[tuple[str, str]]:
        """``keep="latest"``: the kept ``(checkpoint_ns, checkpoint_id)`` pairs."""
        return list(self._resolve_plan().kept)

    def removed_keys(self) -> Removed:
        """``keep="latest"``: the checkpoints and blobs the transaction deletes (once
        finished)."""
        if self._removed is not None:
            return self._removed
        return Removed(
            frozenset((a, b) for a, b in self._deleted.get("checkpoints", ())),
            frozenset((a, b, c) for a, b, c in self._deleted.get("checkpoint_blobs", ())),
        )

    def lease_entry(self, receipt_id: str) -> None:
        """Lease the journal entry ``receipt_id`` will be (when :func:`lease.owning`),
        first in the erasure transaction: before anything irreversible, so a lease that
        cannot be taken fails the erasure while all of it still rolls back; and before
        the commit makes the entry visible, so no recovery completes it meanwhile."""
        if lease.owning():
            holder = take_lease(self.session, receipt_id)
            if holder is None:
                raise RuntimeError(f"the lease on journal entry {receipt_id} is taken")
            lease.owned(receipt_id, holder)

    def write_journal(
        self, receipt_id: str, issued_at: str, entry: str, *, thread_id: str | None = None
    ) -> None:
        """Insert the journal entry under ``thread_id`` (privacy mode: a commitment) or
        the erased thread's id; it commits with the deletion, so a receipt can still be
        issued after a crash (leased since :meth:`lease_entry`)."""
        self.session.execute(
            "INSERT INTO erasure_journal (receipt_id, thread_id, issued_at, entry) "
            "VALUES (%s, %s, %s, %s)",
            (receipt_id, self.thread_id if thread_id is None else thread_id, issued_at, entry),
        )

    def reduce_residue(self) -> list[dict[str, Any]]:
        """After commit: ``VACUUM`` (or ``VACUUM (FULL)``) of the tables if ``vacuum`` asks
        and the connection is not in pipeline mode, the note that WAL cannot be scrubbed,
        the residue scan's "not applicable", then the extra parts' residue."""
        out = self._vacuum()
        out.append(
            {"action": "postgres.wal", "status": "skipped",
             "detail": {"reason": "the deleted rows stay in WAL segments until they are "
                                  "recycled, and in archived WAL, replicas and backups "
                                  "(out of scope); PostgreSQL offers no WAL scrub"}}
        )  # fmt: skip
        if self.residue_scan:
            out.append(
                {"action": "residue_scan", "status": "not_applicable",
                 "detail": {"reason": "the residue scan reads SQLite database files; a "
                                      "PostgreSQL cluster's files are not readable through "
                                      "a database connection"}}
            )  # fmt: skip
        if self.extra_residue is not None:
            out += self.extra_residue()
        return out

    def _vacuum(self) -> list[dict[str, Any]]:
        tables = self.tables
        if not self.vacuum:
            return [
                {"action": "postgres.vacuum", "status": "skipped",
                 "detail": {"tables": ",".join(tables),
                            "reason": "not requested (vacuum=False): the deleted rows remain "
                                      "as dead tuples in the table files until VACUUM or "
                                      "autovacuum removes them"}}
            ]  # fmt: skip
        full = self.vacuum == "full"
        verb = "VACUUM (FULL)" if full else "VACUUM"
        detail: dict[str, Any] = {"mode": verb, "tables": ",".join(tables)}
        if self.session.in_pipeline:
            detail["reason"] = (
                "the saver's connection is in pipeline mode, where every statement runs "
                "in an implicit transaction block and VACUUM cannot run; the deleted rows "
                "remain as dead tuples until VACUUM or autovacuum removes them"
            )
            return [{"action": "postgres.vacuum", "status": "skipped", "detail": detail}]
        version = int(self.session.info.server_version)
        # Plain VACUUM may skip index vacuuming when few tuples died (PostgreSQL 14+);
        # INDEX_CLEANUP ON makes it remove the erased keys from the indexes too.
        command = verb if full or version < 120000 else "VACUUM (INDEX_CLEANUP ON)"
        xid = max(self.erasure_xids) if self.erasure_xids else None
        try:
            before = horizon_holders(self.session, xid)
            marks = _vacuum_marks(self.session, tables, full, version)
            if not full and version >= 150000:
                # Our own DELETE's statistics must reach the server before VACUUM sets
                # n_dead_tup, or they would be added to it afterwards.
                self.session.outside_transaction("SELECT pg_stat_force_next_flush()")
            for t in tables:
                self.session.outside_transaction(f'{command} "{t}"')
            after = horizon_holders(self.session, xid)
            holders = {h[0]: h[1] for h in [*before, *after]}  # by kind and id, latest
            moved = _vacuum_marks(self.session, tables, full, version)
            outcome = _vacuum_outcome(self.session, tables, full, version)
        except psycopg.Error as exc:
            detail["error"] = str(exc).strip()[:200] or type(exc).__name__
            return [{"action": "postgres.vacuum", "status": "failed", "detail": detail}]
        # A role that neither owns a table nor the database gets a WARNING and VACUUM
        # skips the table: seen as an unchanged file (FULL) or vacuum count (plain).
        skipped = [t for t in marks if marks[t] == moved.get(t)]
        if skipped:
            outcome["not_vacuumed"] = ",".join(skipped)
            outcome["unverified"] = (
                "the server skipped VACUUM of these tables (only their owner, the database "
                "owner or a superuser may vacuum them)"
            )
        detail["snapshots_holding_horizon"] = len(holders)
        if holders:
            detail["horizon_holders"] = "; ".join(holders.values())[:4096]
        if xid is None:
            detail["horizon_reference"] = (
                "the erasure's transaction id is not known here (receipt issued from the "
                "journal): every session with a transaction id or snapshot is counted"
            )
        detail.update(outcome)
        if not full:
            detail["index_cleanup"] = command != "VACUUM"
            detail["note"] = (
                "VACUUM makes the space of dead tuples reusable but does not zero it; "
                "bytes may remain in the table files until overwritten (VACUUM FULL "
                "rewrites the tables)"
            )
        if outcome.get("dead_tuples_after"):
            detail["reason"] = (
                "dead tuples remain after VACUUM (kept for a horizon holder, on pages "
                "a concurrent reader pinned, or other rows deleted meanwhile); the "
                "erased rows may be among them"
            )
        verified = not holders and outcome.get("dead_tuples_after", 0) == 0
        status = "applied" if verified and "unverified" not in outcome else "partial"
        return [{"action": "postgres.vacuum", "status": status, "detail": detail}]


_HORIZON_SQL = """
SELECT 'backend:' || a.pid, 'session pid ' || a.pid || ' (' ||
       coalesce(a.state, 'state hidden') ||
       coalesce(', transaction ' ||
                extract(epoch FROM clock_timestamp() - a.xact_start)::bigint || ' s old', '') ||
       ', xid age ' || greatest(age(a.backend_xid), age(a.backend_xmin)) || ')'
FROM pg_stat_activity a
WHERE a.pid <> pg_backend_pid()
  AND a.pid NOT IN (SELECT v.pid FROM pg_stat_progress_vacuum v)
  AND (coalesce(age(a.backend_xid) >= {ref}, a.backend_xid IS NOT NULL)
       OR ((a.datid IS NULL OR a.datid = (SELECT oid FROM pg_database
                                          WHERE datname = current_database()))
           AND coalesce(age(a.backend_xmin) >= {ref}, a.backend_xmin IS NOT NULL)))
UNION ALL
SELECT 'slot:' || s.slot_name, 'replication slot ' || s.slot_name ||
       ' (xid age ' || age(s.xmin) || ')'
FROM pg_replication_slots s
WHERE coalesce(age(s.xmin) >= {ref}, s.xmin IS NOT NULL)
UNION ALL
SELECT 'prepared:' || p.gid, 'prepared transaction ' || p.gid || ' (' ||
       extract(epoch FROM clock_timestamp() - p.prepared)::bigint || ' s old, xid age ' ||
       age(p.transaction) || ')'
FROM pg_prepared_xacts p
WHERE coalesce(age(p.transaction) >= {ref}, true)
UNION ALL
SELECT 'setting:vacuum_defer_cleanup_age', 'vacuum_defer_cleanup_age = ' || v.setting
FROM pg_settings v WHERE v.name = 'vacuum_defer_cleanup_age' AND v.setting <> '0'
"""
"""What keeps VACUUM from removing tuples deleted by transaction ``{ref}`` (its age):
a session whose transaction id is that old or older, *in any database* (a transaction
still running there is in every new snapshot here, VACUUM FULL's own included), and a
session of this database (or of none: walsenders relaying hot-standby feedback) whose
snapshot is - an idle-in-transaction session that has written has an xid but no
snapshot; a running lazy VACUUM (autovacuum too) is left out, as VACUUM leaves it out
of the horizon -, a replication slot's ``xmin``, a prepared transaction (any database),
``vacuum_defer_cleanup_age``. With no reference (``NULL``), every transaction id and
snapshot counts."""


def horizon_holders(session: Session, xid: int | None) -> list[tuple[str, str]]:
    """``(id, description)`` of everything that holds the xmin horizon at or before
    ``xid`` (a ``txid_current()``), see :data:`_HORIZON_SQL`; pid, state and age of
    each session (the state is hidden for other roles' sessions without
    ``pg_read_all_stats``; the ids and ages are not)."""
    params: tuple[str, ...] = ()
    if xid is None:
        sql = _HORIZON_SQL.replace("{ref}", "NULL::int")
    else:
        sql = _HORIZON_SQL.replace("{ref}", "age(%s::text::xid)")
        params = (str(xid % 2**32),) * 4
    with session.transaction():  # never left open: VACUUM must run outside one
        return [(str(a), str(b)) for a, b in session.query(sql, params)]


def _vacuum_marks(
    session: Session, tables: Sequence[str], full: bool, version: int
) -> dict[str, Any]:
    """What changes when VACUUM processes a table: its file node (``VACUUM FULL``
    writes a new file), else its ``vacuum_count`` (set at once from PostgreSQL 15 on;
    before that nothing reliable is compared)."""
    if not full and version < 150000:
        return {}
    sql = (
        "SELECT pg_relation_filenode(to_regclass(%s))::int8"
        if full
        else "SELECT vacuum_count FROM pg_stat_all_tables WHERE relid = to_regclass(%s)"
    )
    with session.transaction():
        if not full:
            session.query("SELECT pg_stat_clear_snapshot()")
        return {t: r[0][0] if (r := session.query(sql, (t,))) else None for t in tables}


def _vacuum_outcome(
    session: Session, tables: Sequence[str], full: bool, version: int
) -> dict[str, Any]:
    """What VACUUM left: dead tuples still in the tables (and their TOAST tables).

    ``pgstattuple`` (contrib; ``pg_stat_scan_tables`` may run it) counts them when it is
    installed and callable - after ``VACUUM FULL`` (it reads the whole table, which the
    rewrite has just done anyway) or before PostgreSQL 15. Otherwise plain ``VACUUM`` is
    read back from ``n_dead_tup``, which VACUUM itself sets to the dead tuples it could
    not remove (immediately from PostgreSQL 15 on; any role may read it). ``VACUUM FULL``
    does not
    set it: the horizon check before and after the rewrite (exact under its ACCESS
    EXCLUSIVE lock: it copies a dead tuple only if the horizon keeps it) is then the
    evidence. A count includes other threads' dead rows: non-zero is reported as
    ``partial``, never explained away.
    """
    with session.transaction():
        return _dead_after(session, tables, full, version)


def _dead_after(
    session: Session, tables: Sequence[str], full: bool, version: int
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    relids = [
        int(r)
        for t in tables
        for row in session.query(
            "SELECT oid::int8, reltoastrelid::int8 FROM pg_class WHERE oid = to_regclass(%s)",
            (t,),
        )
        for r in row
        if r
    ]
    schema = session.query(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'pgstattuple'"
    )
    if schema and (full or version < 150000):
        fn = '"' + str(schema[0][0]).replace('"', '""') + '".pgstattuple'
        try:
            with session.transaction():  # a savepoint: a refusal must not end the check
                dead = sum(
                    int(session.query(f"SELECT dead_tuple_count FROM {fn}(%s::oid::regclass)",
                                      (r,))[0][0])
                    for r in relids
                )  # fmt: skip
        except psycopg.Error as exc:
            out["pgstattuple_error"] = str(exc).strip().splitlines()[0][:200]
        else:
            out["verified_by"] = "pgstattuple"
            out["dead_tuples_after"] = dead
            return out
    if full:
        out["verified_by"] = "horizon"
        return out
    if version < 150000:
        out["unverified"] = (
            "before PostgreSQL 15 n_dead_tup reaches the statistics collector "
            "asynchronously, and pgstattuple is not available: what VACUUM left cannot "
            "be read back"
        )
        return out
    session.query("SELECT pg_stat_clear_snapshot()")
    rows = session.query(
        "SELECT coalesce(sum(n_dead_tup), 0)::int8 FROM pg_stat_all_tables "
        "WHERE relid = ANY(%s::int8[]::oid[])",
        (relids,),
    )
    out["verified_by"] = "n_dead_tup"
    out["dead_tuples_after"] = int(rows[0][0])
    return out


def _server_version(info: psycopg.ConnectionInfo) -> str:
    v = int(info.server_version)
    return f"{v // 10000}.{v % 10000}" if v >= 100000 else str(v)


NEEDLE_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "store")
"""The tables a needle search reads (``store_vectors`` holds only embeddings)."""


def find_needles(
    session: Session, forms: Sequence[bytes], threads: Sequence[str] | None
) -> list[dict[str, Any]]:
    """Every stored location of any of ``forms``; ``threads=None`` searches every row,
    otherwise only those threads' checkpoint rows. Never returns the value itself."""
    out: list[dict[str, Any]] = []
    texts = [f.decode("utf-8", "surrogateescape") for f in forms]
    for table in NEEDLE_TABLES:
        shape = describe(session, table)
        if shape is None or (threads is not None and table == "store"):
            continue
        exprs: list[tuple[str, list[str]]] = []
        params_per_col: list[list[Any]] = []
        for c, t in zip(shape.columns, shape.types, strict=True):
            q = '"' + c.replace('"', '""') + '"'
            if t == "bytea":
                exprs.append((c, [f"position(%s::bytea in {q}) > 0" for _ in forms]))
                params_per_col.append(list(forms))
            elif t in _TEXT_TYPES or t in ("json", "jsonb"):
                e = q if t in _TEXT_TYPES else f"{q}::text"
                exprs.append((c, [f"strpos({e}, %s) > 0" for _ in forms]))
                params_per_col.append(list(texts))
        if not exprs:
            continue
        flags = ", ".join(f"({' OR '.join(conds)})" for _, conds in exprs)
        where = " OR ".join(" OR ".join(conds) for _, conds in exprs)
        params: list[Any] = [p for ps in params_per_col for p in ps]
        keys = [*shape.pk, *(["channel"] if "channel" in shape.columns else [])]
        key_sql = ", ".join(f'"{k}"::text' for k in dict.fromkeys(keys))
        sql = f'SELECT {key_sql}, {flags} FROM "{table}" WHERE ({where})'
        args: list[Any] = params + params
        if threads is not None:
            sql += " AND thread_id = ANY(%s)"
            args.append(list(threads))
        n = len(dict.fromkeys(keys))
        for row in session.query(sql, args):
            key = dict(zip(dict.fromkeys(keys), row[:n], strict=True))
            for (c, _), hit in zip(exprs, row[n:], strict=True):
                if hit:
                    out.append({"table": table, **key, "column": c})
    return out


def locate(session: Session, forms: Sequence[tuple[int, str, bytes]]) -> list[dict[str, Any]]:
    """Every stored location of each ``(needle index, form name, bytes)`` across all
    rows of the checkpoint tables and ``store``, in one REPEATABLE READ snapshot (see
    the SQLite backend's ``locate``)."""
    out: list[dict[str, Any]] = []
    with session.transaction():
        session.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        for i, name, data in forms:
            found = find_needles(session, [data], None)
            out += [{**loc, "needle": i, "form": name} for loc in found]
    return out


def threads_by_metadata(session: Session, key: str, value: str) -> list[str]:
    """Thread ids (sorted) with a checkpoint whose ``metadata ->> key`` is ``value``
    (LangGraph copies ``configurable`` keys such as ``user_id`` into the jsonb metadata
    of every checkpoint; ``copy_thread`` forks keep it). Read-only; one scan of
    ``checkpoints`` (no index serves an arbitrary key)."""
    rows = session.query(
        "SELECT DISTINCT thread_id FROM checkpoints WHERE metadata ->> %s::text = %s::text",
        (key, value),
    )
    return sorted(str(r[0]) for r in rows)


def purge_journal(session: Session, older_than: str) -> int:
    """Delete closed journal entries of erasures that began before ``older_than``;
    returns how many (see the SQLite backend's ``purge_journal``)."""
    with session.transaction():
        rows = session.query(
            "WITH d AS (DELETE FROM erasure_journal WHERE receipt_sha256 IS NOT NULL "
            'AND issued_at COLLATE "C" < %s RETURNING 1) SELECT count(*) FROM d',
            (older_than,),
        )
    return int(rows[0][0])


def redact_journal(
    session: Session, receipt_id: str, thread_id: str, rewrite: Callable[[str], str]
) -> bool:
    """Privacy mode: replace the raw ids of a journal entry whose statement is journaled
    (see the SQLite backend's ``redact_journal``)."""
    with session.transaction():
        rows = session.query(
            "SELECT entry FROM erasure_journal WHERE receipt_id = %s AND statement IS NOT NULL "
            "FOR UPDATE",
            (receipt_id,),
        )
        if rows:
            session.execute(
                "UPDATE erasure_journal SET thread_id = %s, entry = %s WHERE receipt_id = %s",
                (thread_id, rewrite(str(rows[0][0])), receipt_id),
            )
    return bool(rows)


def retryable(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a transient conflict worth retrying."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, RETRYABLE):
            return True
        seen = seen.__cause__
    return False


# -- keep="latest" (history erasure) and retention selection -----------------------------


@dataclass
class PlannedPgPart(PgTablePart):
    """A table's removed (or kept) rows of a history erasure: ``where`` and ``params``
    come from the plan the first time the part reads - inside the erasure transaction,
    after the advisory lock."""

    resolve: Callable[[], tuple[str, list[Any]]] | None = None
    record: Callable[[list[tuple[str, ...]]], None] | None = None
    """``checkpoints`` and ``checkpoint_blobs``, removed: receives the keys each
    ``finish`` deletes."""

    def _ready(self) -> None:
        if self.resolve is not None:
            self.where, self.params = self.resolve()
            self.resolve = None

    def _measure(self, sink: LeafSink, lock: bool) -> TableCount:
        self._ready()
        return super()._measure(sink, lock)

    def leaves(self) -> Iterator[bytes]:
        """Plan first (if not yet), then :meth:`PgTablePart.leaves`."""
        self._ready()
        return super().leaves()

    def finish(self) -> None:
        """Plan first (if not yet), record the keys deleted, then
        :meth:`PgTablePart.finish`."""
        self._ready()
        if self.record is not None:
            cols = "checkpoint_id" if self.table == "checkpoints" else "channel, version"
            rows = self.session.query(
                f'SELECT checkpoint_ns, {cols} FROM "{self.table}" WHERE {self.where}',
                self.params,
            )
            self.record([tuple(str(v) for v in r) for r in rows])
        super().finish()

    def remaining(self) -> int:
        """Plan first (if not yet), then :meth:`PgTablePart.remaining`."""
        self._ready()
        return super().remaining()


def plan_keep_latest(session: Session, thread_id: str, *, write: bool) -> KeepLatest:
    """LangGraph's ``keep_latest`` choice for one thread, with LangGraph's own queries
    (``PRUNE_HEADS_SQL``: heads, sends parents, subgraph calls' roots), see
    ``keep_latest.plan``. Refuses (``DeltaChannelError``) a ``DeltaChannel`` thread. With
    ``write`` (inside the erasure transaction) a kept checkpoint whose parent is removed
    is left with no parent, as LangGraph's ``prune`` does."""
    from langgraph.checkpoint.postgres.base import (
        PRUNE_DELTA_THREADS_SQL,
        PRUNE_HEADS_SQL,
        PRUNE_PARENTS_SQL,
    )

    if session.query(PRUNE_DELTA_THREADS_SQL, ([thread_id], [thread_id])):
        raise DeltaChannelError([thread_id])
    heads = [
        Head(str(ns), str(head), None if sends is None else str(sends),
             None if root is None else str(root), bool(saved))
        for ns, head, sends, root, saved in session.query(PRUNE_HEADS_SQL, (thread_id,) * 4)
    ]  # fmt: skip
    k = plan(heads)
    if write:
        for ns, ids in k.by_ns.items():
            session.execute(PRUNE_PARENTS_SQL, (thread_id, ns, list(ids), list(ids)))
    return k


def newest_ids(session: Session, threads: Sequence[str]) -> dict[str, str]:
    """Per thread, the highest checkpoint id (code-point order) of its checkpoints and
    writes, if any."""
    out: dict[str, str] = {}
    for t in threads:
        rows = session.query(
            'SELECT max(m COLLATE "C") FROM (SELECT max(checkpoint_id COLLATE "C") AS m '
            "FROM checkpoints WHERE thread_id = %s UNION ALL SELECT max(checkpoint_id "
            'COLLATE "C") FROM checkpoint_writes WHERE thread_id = %s) s',
            (t, t),
        )
        if rows and rows[0][0] is not None:
            out[t] = str(rows[0][0])
    return out


def _with_checkpoints(session: Session, loc: dict[str, Any]) -> dict[str, Any]:
    """A needle location in ``checkpoint_blobs`` (keyed by channel and version) also
    names the checkpoints that reference the blob."""
    if loc.get("table") != "checkpoint_blobs":
        return loc
    rows = session.query(
        "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s "
        "AND checkpoint -> 'channel_versions' ->> %s::text = %s::text ORDER BY checkpoint_id",
        (loc["thread_id"], loc["checkpoint_ns"], loc["channel"], loc["version"]),
    )
    named = {k: v for k, v in loc.items() if k != "column"}
    return {**named, "checkpoint_id": ",".join(str(r[0]) for r in rows) or None,
            "column": loc.get("column")}  # fmt: skip


def idle_threads(
    session: Session, before: str, after: str | None, limit: int
) -> list[tuple[str, str, int, int]]:
    """One page of retention candidates (see the SQLite backend's ``idle_threads``): read
    from the ``checkpoints`` primary key, never from a value or ``checkpoint_blobs``."""
    cond, params = ("WHERE thread_id > %s", [after]) if after is not None else ("", [])
    rows = session.query(
        "SELECT thread_id, max(checkpoint_id), count(*), count(DISTINCT checkpoint_ns) "
        f"FROM checkpoints {cond} GROUP BY thread_id "
        "HAVING max(checkpoint_id) < %s OR length(max(checkpoint_id)) <> 36 "
        "OR substr(max(checkpoint_id), 15, 1) <> '6' ORDER BY thread_id LIMIT %s",
        [*params, before, limit],
    )
    return [(str(t), str(m), int(n), int(k)) for t, m, n, k in rows]


def latest_checkpoint(session: Session, thread_id: str) -> str | None:
    """The thread's latest checkpoint id over every namespace."""
    rows = session.query("SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = %s",
                         (thread_id,))  # fmt: skip
    return None if not rows or rows[0][0] is None else str(rows[0][0])


def run_in_flight(session: Session, thread_id: str) -> bool:
    """Whether a run may be going on in the thread (see the SQLite backend's
    ``run_in_flight``)."""
    from .sqlite import RUN_IN_FLIGHT

    sql = RUN_IN_FLIGHT.format(writes="checkpoint_writes", p="%s")
    return bool(session.query(sql, (thread_id,)))
