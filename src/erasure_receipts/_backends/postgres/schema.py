"""PostgreSQL: the library's schema - tombstone and journal tables, the trigger function
and its triggers on the checkpoint tables - its version, and what identifies the server.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from .._table import STORE_TOMBSTONE_MESSAGE, TOMBSTONE_MESSAGE
from .session import Session

__all__ = [
    "ADVISORY_CLASS",
    "CHECKPOINT_TABLES",
    "ENFORCING_VERSIONS",
    "RETRYABLE",
    "SCHEMA_SQL",
    "SCHEMA_VERSION",
    "STORE_ADVISORY_CLASS",
    "TOMBSTONE_MESSAGE",
    "TRIGGERS_SQL",
    "TRIGGER_FUNCTION_SQL",
    "database_label",
    "ensure_schema",
    "ensure_store_tombstones",
    "has_store_table",
    "installed_version",
    "is_store_tombstone_error",
    "is_tombstone_error",
    "retryable",
    "schema_installed",
    "server_identity",
    "tables_present",
]

ADVISORY_CLASS = 1162039635
"""First key of the two-key advisory locks (``'ERAS'`` as int4); the second is
``hashtext(thread_id)``. Two-key locks never collide with single-bigint ones."""
STORE_ADVISORY_CLASS = 1162039662
"""First key of a store prefix's advisory lock (``'ERAn'``); the second is
``hashtext(prefix)``: the store trigger takes it shared for the written prefix and each
ancestor, a store erasure exclusively for each prefix it erases (RECEIPT_SPEC.md 8.1)."""
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

log = logging.getLogger("erasure_receipts")


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


def retryable(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a transient conflict worth retrying."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, RETRYABLE):
            return True
        seen = seen.__cause__
    return False


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


def _server_version(info: psycopg.ConnectionInfo) -> str:
    v = int(info.server_version)
    return f"{v // 10000}.{v % 10000}" if v >= 100000 else str(v)


def has_store_table(session: Session) -> bool:
    """Whether the database (through the ``search_path``) has a ``store`` table."""
    rows = session.query("SELECT to_regclass('store') IS NOT NULL")
    return bool(rows and rows[0][0])


def tables_present(session: Session, names: Sequence[str]) -> dict[str, bool]:
    """Which of the tables ``names`` exist on the search path (read-only)."""
    rows = session.query(
        "SELECT " + ", ".join(["to_regclass(%s) IS NOT NULL"] * len(names)), list(names)
    )
    return dict(zip(names, rows[0] if rows else (False,) * len(names), strict=True))


# -- store tombstones (RECEIPT_SPEC.md 8.1) ---------------------------------------------

STORE_TOMBSTONE_TABLE_SQL = """CREATE TABLE IF NOT EXISTS erasure_store_tombstones (
    prefix text PRIMARY KEY,
    receipt_id text NOT NULL,
    erased_at text NOT NULL
)"""

STORE_TRIGGER_FUNCTION_SQL = f"""CREATE OR REPLACE FUNCTION erasure_receipts_refuse_erased_store()
RETURNS trigger LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    label pg_catalog.text;
    acc pg_catalog.text;
    ancestors pg_catalog.text[] := '{{}}';
    locked pg_catalog.text;
    receipt pg_catalog.text;
BEGIN
    -- The prefix and each ancestor, whole labels only ("users.al" is no ancestor of
    -- "users.alice"); each one's shared lock first, so a write that waited for an
    -- erasure of any of them sees its tombstone in the look-up's new snapshot.
    FOREACH label IN ARRAY pg_catalog.string_to_array(NEW.prefix, '.') LOOP
        acc := CASE WHEN acc IS NULL THEN label
               ELSE acc OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) label END;
        ancestors := pg_catalog.array_append(ancestors, acc);
        locked := pg_catalog.pg_advisory_xact_lock_shared(
            {STORE_ADVISORY_CLASS}, pg_catalog.hashtext(acc))::pg_catalog.text;
    END LOOP;
    SELECT t.receipt_id INTO receipt FROM {{schema}}.erasure_store_tombstones t
        WHERE t.prefix OPERATOR(pg_catalog.=) ANY (ancestors) LIMIT 1;
    IF receipt IS NULL THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION '{STORE_TOMBSTONE_MESSAGE}'
        USING ERRCODE = 'P0001',
              DETAIL = pg_catalog.format('erased by receipt %s', receipt),
              HINT = 'reopen_namespace() allows the namespace to be written again';
END
$fn$"""
"""The store trigger function (``{schema}``: where ``erasure_store_tombstones`` is),
schema-qualified like the checkpoint tables' one."""

STORE_TABLES = ("store", "store_vectors")
STORE_SCHEMA_VERSION = "erasure_receipts store tombstones 1"
"""The store trigger function's comment: an older body is replaced in place."""


def ensure_store_tombstones(session: Session) -> None:
    """Inside the caller's transaction: the store tombstone table, its trigger function
    and a ``BEFORE INSERT OR UPDATE OF prefix`` trigger on whichever of ``store`` and
    ``store_vectors`` exist (each created once; read-only when all are there)."""
    rows = session.query(
        "SELECT to_regclass('erasure_store_tombstones') IS NOT NULL, "
        "obj_description(to_regprocedure('erasure_receipts_refuse_erased_store()'), "
        "'pg_proc') IS NOT DISTINCT FROM %s, "
        "array(SELECT c.relname::text FROM pg_class c WHERE c.oid IN "
        "(to_regclass('store'), to_regclass('store_vectors')) AND NOT EXISTS "
        "(SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid "
        "AND g.tgname = 'erasure_store_tombstone'))",
        (STORE_SCHEMA_VERSION,),
    )
    table, function, missing = rows[0]
    if table and function and not missing:
        return
    session.execute(STORE_TOMBSTONE_TABLE_SQL)
    if not function:
        schema = str(session.query("SELECT current_schema()")[0][0])
        quoted = '"' + schema.replace('"', '""') + '"'
        session.execute(STORE_TRIGGER_FUNCTION_SQL.replace("{schema}", quoted))
        session.execute(
            "COMMENT ON FUNCTION erasure_receipts_refuse_erased_store() "
            f"IS '{STORE_SCHEMA_VERSION}'"
        )
    for name in missing:
        session.execute(
            f'CREATE TRIGGER erasure_store_tombstone BEFORE INSERT OR UPDATE OF prefix ON "{name}" '
            "FOR EACH ROW EXECUTE FUNCTION erasure_receipts_refuse_erased_store()"
        )


def is_store_tombstone_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the store trigger's refusal (an erased store namespace)."""
    return isinstance(exc, pg_errors.RaiseException) and STORE_TOMBSTONE_MESSAGE in str(exc)
