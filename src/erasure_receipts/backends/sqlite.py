"""SQLite: enumerate, lock, delete and scrub one thread's rows on a sqlite3 connection.

Everything here runs on one ``sqlite3.Connection`` (for the async saver, the raw
connection inside aiosqlite's worker thread), so the sync and async savers share it.

Tombstones live in the database (table ``erasure_tombstones``) and are enforced by
``BEFORE INSERT`` triggers on ``checkpoints`` and ``writes``: a late write from any
process or connection - even a plain ``SqliteSaver`` - is rejected, not just writes
through this library. Under the ``new_conversations`` policy (its row in
``erasure_tombstone_policies``) the triggers let a new conversation start under the id
and refuse only what continues the erased one (see :data:`TOMBSTONE_POLICIES`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .. import lease
from .._clock import fresh_after
from .._parts import LeafSink, Part, TableCount
from ..digest import RowLeafHasher
from ..errors import ConfigurationError
from .keep_latest import DELTA_KEYS, DeltaChannelError, Head, KeepLatest, Removed, plan
from .sqlite_residue import (
    JOURNAL_FILE_MODES,
    Needles,
    bounded_checkpoint,
    clear_journal,
    residue_scan,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the in-process lease only
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "TOMBSTONE_MESSAGE",
    "PlannedSqlPart",
    "SqlTablePart",
    "SqliteBackend",
    "database_path",
    "ensure_tombstones",
    "find_needles",
    "idle_threads",
    "is_erased",
    "is_tombstone_error",
    "journal_receipts",
    "journal_residue",
    "latest_checkpoint",
    "lease_file",
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
    "scrub",
    "still_pending",
    "take_lease",
    "threads_by_metadata",
]

TOMBSTONE_MESSAGE = "erasure_receipts: thread erased"
CHECKPOINT_WAIT_MS = 1000
"""Longest wait for readers before the WAL checkpoint gives up and reports ``partial``."""

LIVE_PAGE_RESIDUE: dict[str, Any] = {
    "action": "sqlite.live_page_free_space",
    "status": "skipped",
    "detail": {
        "reason": "not scanned: secure_delete does not zero the unused space of pages "
        "rebuilt while the B-tree rebalances, so copies of erased rows can remain there "
        "until VACUUM; enable residue_scan to check and remove them",
    },
}
"""Stated in every receipt made without the residue scan: what was *not* scrubbed."""

TOMBSTONE_DDL = """
CREATE TABLE IF NOT EXISTS erasure_tombstones (
    thread_id TEXT PRIMARY KEY,
    receipt_id TEXT NOT NULL,
    erased_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS erasure_journal (
    receipt_id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    issued_at TEXT NOT NULL,
    entry TEXT NOT NULL,
    statement TEXT,
    receipt_sha256 TEXT,
    receipt TEXT
);
CREATE INDEX IF NOT EXISTS erasure_journal_pending ON erasure_journal (receipt_id)
WHERE receipt_sha256 IS NULL;
CREATE TABLE IF NOT EXISTS erasure_tombstone_policies (
    thread_id TEXT PRIMARY KEY,
    policy TEXT NOT NULL,
    fresh_after TEXT NOT NULL
);
"""

_META_ROOT = (
    "CASE WHEN json_valid(CAST(NEW.metadata AS TEXT)) "
    """THEN json_extract(CAST(NEW.metadata AS TEXT), '$.parents.""') ELSE '' END"""
)
TOMBSTONE_TRIGGERS = f"""
CREATE TRIGGER IF NOT EXISTS erasure_tombstone_checkpoints BEFORE INSERT ON checkpoints
WHEN EXISTS (SELECT 1 FROM erasure_tombstones WHERE thread_id = NEW.thread_id)
AND NOT EXISTS (SELECT 1 FROM erasure_tombstone_policies p
    WHERE p.thread_id = NEW.thread_id AND p.policy = 'new_conversations'
    AND NEW.checkpoint_id > p.fresh_after
    AND length(NEW.checkpoint_id) = 36 AND substr(NEW.checkpoint_id, 15, 1) = '6'
    AND (NEW.parent_checkpoint_id IS NULL OR NEW.parent_checkpoint_id > p.fresh_after)
    AND NOT coalesce(({_META_ROOT}) <= p.fresh_after, 0))
BEGIN SELECT RAISE(ABORT, '{TOMBSTONE_MESSAGE}'); END;
CREATE TRIGGER IF NOT EXISTS erasure_tombstone_writes BEFORE INSERT ON writes
WHEN EXISTS (SELECT 1 FROM erasure_tombstones WHERE thread_id = NEW.thread_id)
AND NOT EXISTS (SELECT 1 FROM erasure_tombstone_policies p
    WHERE p.thread_id = NEW.thread_id AND p.policy = 'new_conversations'
    AND EXISTS (SELECT 1 FROM checkpoints c WHERE c.thread_id = NEW.thread_id
        AND c.checkpoint_ns = NEW.checkpoint_ns AND c.checkpoint_id = NEW.checkpoint_id))
BEGIN SELECT RAISE(ABORT, '{TOMBSTONE_MESSAGE}'); END;
"""
"""A tombstoned thread refuses every write, except under ``new_conversations``: a
checkpoint (and writes) of a *new* conversation - its id (a uuid6, as LangGraph makes
them), its parent's and its root's
(``metadata.parents[""]``, a subgraph call's) all sort after ``fresh_after``, the highest
id the erasure removed or the erasure's time as a uuid6, whichever is later. So a
checkpoint whose parent is an erased one, writes for an erased checkpoint and a run that
began before the erasure are refused; a conversation started afresh is not."""


TRIGGER_MARKS = {
    "erasure_tombstone_checkpoints": "erasure_tombstone_policies",
    "erasure_tombstone_writes": "FROM checkpoints c WHERE",
}
"""Text only the current version of each trigger holds: a trigger without it is older
and is replaced (version 2 of the writes trigger accepted writes for a checkpoint that
was never saved)."""


def ensure_tombstones(conn: sqlite3.Connection) -> None:
    """Create the tombstone tables and triggers (idempotent), replacing triggers of an
    older version in the same transaction (never a moment without them); also turn on
    secure_delete.

    secure_delete is connection-scoped: enabling it for the saver's whole life means
    every overwrite of a row (``INSERT OR REPLACE``) is zeroed too, not only erasures.
    """
    triggers = dict(
        conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name IN "
            "('erasure_tombstone_checkpoints', 'erasure_tombstone_writes')"
        ).fetchall()
    )
    old = [name for name, sql in triggers.items() if TRIGGER_MARKS[name] not in sql]
    if len(triggers) == 2 and not old:  # current: no write lock (never wait on a writer)
        conn.executescript("PRAGMA secure_delete = ON;" + TOMBSTONE_DDL)
        return
    drop = "".join(f"DROP TRIGGER {name};" for name in old)
    conn.executescript(
        "PRAGMA secure_delete = ON; BEGIN IMMEDIATE;"
        + TOMBSTONE_DDL + drop + TOMBSTONE_TRIGGERS + "COMMIT;"
    )  # fmt: skip


@contextmanager
def _autocommit(conn: sqlite3.Connection) -> Iterator[None]:
    """One short write transaction that is committed, or rolled back on any failure
    (a busy database must never leave the saver's connection inside a transaction)."""
    try:
        yield
        conn.commit()
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise


def record_statement(conn: sqlite3.Connection, receipt_id: str, statement: str) -> str:
    """Journal the statement about to be signed, first writer wins; returns the winner.

    Whoever signs the journaled statement (this process or a later recovery) produces
    the identical receipt, because Ed25519 signatures are deterministic.
    """
    with _autocommit(conn):
        conn.execute(
            "UPDATE erasure_journal SET statement = ? WHERE receipt_id = ? AND statement IS NULL",
            (statement, receipt_id),
        )
        row = conn.execute(
            "SELECT statement FROM erasure_journal WHERE receipt_id = ?", (receipt_id,)
        ).fetchone()
    if row is None or row[0] is None:
        raise RuntimeError(f"erasure journal entry {receipt_id} is missing")
    return str(row[0])


def mark_issued(conn: sqlite3.Connection, receipt_id: str, receipt_json: bytes) -> None:
    """Close a journal entry with its signed receipt, so the receipt can never be lost
    (it holds digests and counts, no row content). First writer wins."""
    with _autocommit(conn):
        conn.execute(
            "UPDATE erasure_journal SET receipt_sha256 = ?, receipt = ? "
            "WHERE receipt_id = ? AND receipt_sha256 IS NULL",
            (hashlib.sha256(receipt_json).hexdigest(), receipt_json.decode("utf-8"), receipt_id),
        )


def journal_receipts(conn: sqlite3.Connection, thread_id: str | None = None) -> list[bytes]:
    """The signed receipts kept in the journal, oldest first (optionally of one thread)."""
    where, params = ("AND thread_id = ?", (thread_id,)) if thread_id is not None else ("", ())
    rows = conn.execute(
        f"SELECT CAST(receipt AS BLOB) FROM erasure_journal WHERE receipt IS NOT NULL {where} "
        "ORDER BY issued_at, receipt_id",
        params,
    ).fetchall()
    enc = text_encoding(conn)
    if conn.in_transaction:
        conn.commit()  # end the implicit read transaction
    # Bytes as stored (a damaged row fails to parse on its own, not the query).
    if enc == "utf-8":
        return [bytes(r[0]) for r in rows]
    return [bytes(r[0]).decode(enc, "replace").encode() for r in rows]


def pending_journal(
    conn: sqlite3.Connection, older_than: str | None = None
) -> list[tuple[str, str, str, str | None]]:
    """``(receipt_id, issued_at, entry, statement)`` of erasures committed without a
    receipt, optionally only those that began before ``older_than`` (an erasure still
    signing in another process is younger than any sensible lease)."""
    cutoff, params = ("AND issued_at < ?", (older_than,)) if older_than else ("", ())
    with _autocommit(conn):
        # As stored bytes: one row whose text is not valid (a damaged or foreign write)
        # must not fail the whole query; it is decoded with lone surrogates, named by
        # the caller and left alone.
        rows = conn.execute(
            "SELECT CAST(receipt_id AS BLOB), CAST(issued_at AS BLOB), CAST(entry AS BLOB), "
            "CAST(statement AS BLOB) FROM erasure_journal "
            f"WHERE receipt_sha256 IS NULL {cutoff} ORDER BY issued_at, receipt_id",
            params,
        ).fetchall()
        enc = text_encoding(conn)
    errors = "surrogateescape" if enc == "utf-8" else "surrogatepass"

    def text(v: Any) -> str:
        return bytes(v or b"").decode(enc, errors)

    return [(text(a), text(b), text(c), None if d is None else text(d)) for a, b, c, d in rows]


_NO_FILE = "in-process"
"""The lease token of a database without a file (``:memory:``: no other process sees
it) or a platform without ``fcntl``: the in-process lease only."""

_LEASE_FILES: dict[str, int] = {}
"""Lease file path -> this process's descriptor on it, kept open for the process's life:
a POSIX record lock belongs to the process and ends when *any* of its descriptors on
the file is closed, so one per file is opened and never closed."""
_LEASE_FILES_LOCK = threading.Lock()


def lease_file(path: str) -> str:
    """The lease file of the database at ``path``: one per database, in its directory,
    named by a hash of its real path - a fixed length, so it fits wherever the database
    (and SQLite's own ``-wal``/``-shm`` next to it) fits, whatever its name's length."""
    real = os.path.realpath(path)
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:24]
    return os.path.join(os.path.dirname(real), f"erasure-lease-{digest}")


def _lease_offset(receipt_id: str) -> int:
    """The byte of the lease file locked for ``receipt_id`` (62 bits of its hash: two
    concurrent receipt ids sharing one is as likely as a hash collision)."""
    return int.from_bytes(hashlib.sha256(receipt_id.encode()).digest()[:8], "big") >> 2


def _lease_fd(name: str) -> int:
    with _LEASE_FILES_LOCK:
        fd = _LEASE_FILES.get(name)
        try:
            if fd is not None and os.fstat(fd).st_ino == os.stat(name).st_ino:
                return fd
        except FileNotFoundError:
            pass
        # First use, or the file was removed or replaced: other processes lock the one
        # at the path now. The old descriptor stays open (closing it would end this
        # process's other locks on that file).
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        _LEASE_FILES[name] = fd
        return fd


def take_lease(conn: sqlite3.Connection, receipt_id: str) -> Any:
    """Lease an open journal entry: an exclusive ``fcntl`` lock on one byte (keyed by
    the receipt id) of the database's :func:`lease_file`, held until released or until
    the holder dies (the kernel drops it). Returns the token for :func:`release_lease`,
    or None if another process holds it. Record locks do not exclude the process
    itself: within it, ``lease.claim`` does."""
    path = database_path(conn)
    if path == ":memory:" or fcntl is None:
        return _NO_FILE
    fd = _lease_fd(lease_file(path))
    offset = _lease_offset(receipt_id)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    except (BlockingIOError, PermissionError):  # EAGAIN / EACCES: another holder
        return None
    return (fd, offset)


def release_lease(conn: sqlite3.Connection, receipt_id: str, token: Any) -> None:
    """End a lease taken by :func:`take_lease` (the lease file stays: removing it would
    let a new file at its path be locked beside the old one)."""
    if token == _NO_FILE:
        return
    fd, offset = token
    fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)


def still_pending(conn: sqlite3.Connection, receipt_id: str) -> bool:
    """Whether the journal entry is still open (no receipt marked issued)."""
    with _autocommit(conn):
        row = conn.execute(
            "SELECT 1 FROM erasure_journal WHERE receipt_id = ? AND receipt_sha256 IS NULL",
            (receipt_id,),
        ).fetchone()
    return row is not None


def reopen(conn: sqlite3.Connection, thread_id: str) -> bool:
    """Remove a thread's tombstone (explicit opt-in to reuse its id); True if one existed."""
    with _autocommit(conn):
        cur = conn.execute("DELETE FROM erasure_tombstones WHERE thread_id = ?", (thread_id,))
        conn.execute("DELETE FROM erasure_tombstone_policies WHERE thread_id = ?", (thread_id,))
    return cur.rowcount > 0


def is_erased(conn: sqlite3.Connection, thread_id: str) -> bool:
    """Whether the thread id is tombstoned."""
    row = conn.execute(
        "SELECT 1 FROM erasure_tombstones WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    if conn.in_transaction:
        conn.commit()  # end an implicit read transaction (legacy isolation modes)
    return row is not None


def scrub(conn: sqlite3.Connection, label: str = "") -> list[dict[str, Any]]:
    """Report ``secure_delete`` and truncate the WAL of one connection's database.

    Never raises: every outcome, failures included, becomes a residue entry. ``label``
    names the database in the entries when it is not the saver's own.
    """
    suffix = f".{label}" if label else ""
    where = {"database": database_path(conn)} if label else {}
    out: list[dict[str, Any]] = []
    try:
        value = int(conn.execute("PRAGMA secure_delete").fetchone()[0])
        out.append(
            {"action": f"sqlite.secure_delete{suffix}", "status": "applied" if value else "failed",
             "detail": {"value": value, "scope": "this connection", **where}}
        )  # fmt: skip
    except sqlite3.Error as exc:
        out.append({"action": f"sqlite.secure_delete{suffix}", "status": "failed",
                    "detail": {"error": str(exc)[:200], **where}})  # fmt: skip
    action = f"sqlite.wal_checkpoint{suffix}"
    try:
        mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
    except sqlite3.Error as exc:
        mode = f"unknown ({exc})"[:60]
    if mode != "wal":
        out.append({"action": action, "status": "not_applicable",
                    "detail": {"journal_mode": mode, **where}})  # fmt: skip
        out.append(journal_residue(conn, mode, suffix, where))
        return out
    try:
        busy, log, done, waited = bounded_checkpoint(conn, CHECKPOINT_WAIT_MS)
    except sqlite3.Error as exc:
        out.append({"action": action, "status": "failed",
                    "detail": {"mode": "TRUNCATE", "error": str(exc)[:200], **where}})  # fmt: skip
        out.append(journal_residue(conn, mode, suffix, where))
        return out
    wal = database_path(conn) + "-wal"
    wal_bytes = os.path.getsize(wal) if os.path.exists(wal) else 0
    ok = busy == 0 and wal_bytes == 0
    detail = {
        "mode": "TRUNCATE",
        "busy": int(busy),
        "log_frames": max(int(log), 0),
        "checkpointed_frames": max(int(done), 0),
        "wal_bytes_after": wal_bytes,
        "reader_wait_ms": waited,
        **where,
    }
    out.append({"action": action, "status": "applied" if ok else "partial", "detail": detail})
    out.append(journal_residue(conn, mode, suffix, where))
    return out


def journal_residue(
    conn: sqlite3.Connection, mode: str, suffix: str = "", where: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The ``sqlite.rollback_journal`` entry: the ``-journal`` file cleared of the
    erased rows' pre-images (:func:`clear_journal`), whatever the journal mode.

    ``applied`` only if the file was read back absent, empty or all zeros; ``partial``
    if another writer kept the lock (the file is left as it is), ``failed`` on an error;
    ``not_applicable`` for an in-memory database, or a mode that writes no ``-journal``
    (``wal``, ``memory``, ``off``) when none was there.
    """
    action = f"sqlite.rollback_journal{suffix}"
    base: dict[str, Any] = {"journal_mode": mode, **(where or {})}
    path = database_path(conn)
    if path == ":memory:":
        return {"action": action, "status": "not_applicable",
                "detail": {**base, "reason": "in-memory database: no -journal file"}}  # fmt: skip
    detail = {**base, **clear_journal(conn, path, CHECKPOINT_WAIT_MS)}
    cleared = detail.pop("cleared")
    if "error" in detail:
        status = "failed"
    elif not cleared:
        status = "partial"
        detail.setdefault("reason", "the -journal file still holds non-zero bytes")
    elif mode in JOURNAL_FILE_MODES or detail["journal_bytes_before"]:
        status = "applied"
    else:
        status = "not_applicable"
    return {"action": action, "status": status, "detail": detail}


NEEDLE_TABLES = ("checkpoints", "writes", "store")
"""The tables a needle search reads (``store_vectors`` holds only embeddings)."""


def find_needles(
    conn: sqlite3.Connection, forms: Sequence[bytes], threads: Sequence[str] | None
) -> list[dict[str, Any]]:
    """Every stored location of any of ``forms`` (see ``SqliteBackend.find_needles``);
    ``threads=None`` searches every row, otherwise only those threads' checkpoint rows."""
    if not forms:
        return []
    enc = text_encoding(conn)
    search = list(enumerate(forms))
    if enc != "utf-8":
        # TEXT (e.g. a store prefix or key) is stored in UTF-16 there, BLOBs (LangGraph's
        # checkpoints, metadata, store values) stay UTF-8: look for each form both ways.
        search += [(i, _transcode(f, enc)) for i, f in enumerate(forms)]
        search = list(dict.fromkeys((i, f) for i, f in search if f))
    existing = {
        bytes(r[0]).decode(enc)
        for r in conn.execute("SELECT CAST(name AS BLOB) FROM sqlite_master WHERE type='table'")
    }
    out: list[dict[str, Any]] = []
    for table in NEEDLE_TABLES:
        if table not in existing or (threads is not None and table == "store"):
            continue
        info = conn.execute(
            "SELECT CAST(name AS BLOB), pk FROM pragma_table_info(?) ORDER BY cid", (table,)
        ).fetchall()
        cols = [bytes(r[0]).decode(enc) for r in info]
        pk = [c for _, c in sorted((r[1], c) for c, r in zip(cols, info, strict=True) if r[1])]
        blob = [f"CAST({_quote(c)} AS BLOB)" for c in cols]
        match = " OR ".join(f"instr({b}, ?) > 0" for b in blob for _ in search)
        params: list[Any] = [f for _ in blob for _, f in search]
        where = f"({match})"
        if threads is not None:
            where += f" AND thread_id IN ({', '.join('?' * len(threads))})"
            params += list(threads)
        sql = f"SELECT {', '.join(blob)} FROM {_quote(table)} WHERE {where}"
        for row in conn.execute(sql, params):
            key = {
                c: (bytes(row[cols.index(c)]).decode(enc, "replace")
                    if row[cols.index(c)] is not None else None)
                for c in [*pk, *(["channel"] if "channel" in cols else [])]
            }  # fmt: skip
            for c, v in zip(cols, row, strict=True):
                hits = sorted({i for i, f in search if v is not None and f in bytes(v)})
                out += [{"table": table, **key, "column": c, "form": i} for i in hits]
    return out


def _transcode(form: bytes, enc: str) -> bytes:
    """A UTF-8 needle form in the database's text encoding (b"" if it is not text)."""
    try:
        return form.decode("utf-8", "surrogatepass").encode(enc, "surrogatepass")
    except UnicodeError:
        return b""


def locate(
    conn: sqlite3.Connection, forms: Sequence[tuple[int, str, bytes]]
) -> list[dict[str, Any]]:
    """Every stored location of each ``(needle index, form name, bytes)`` across all
    rows of ``checkpoints``, ``writes`` and ``store``, in one read snapshot.

    Each location is :func:`find_needles`' (table, primary key, channel, column) with
    ``needle`` and ``form`` set from the searched form; never the value itself.
    """
    out: list[dict[str, Any]] = []
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        for i, name, data in forms:
            found = find_needles(conn, [data], None)
            out += [{**loc, "needle": i, "form": name} for loc in found]
    finally:
        if own:
            conn.rollback()
    return out


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its ``(key, value)`` pairs, duplicates kept (as ``json_each``)."""


def threads_by_metadata(conn: sqlite3.Connection, key: str, value: str) -> list[str]:
    """Thread ids (sorted) with a checkpoint whose metadata has the top-level ``key``
    equal to ``value`` (a JSON string, or a JSON integer written as ``value``).

    LangGraph copies ``configurable`` keys such as ``user_id`` into every checkpoint's
    metadata (a JSON BLOB), and ``copy_thread`` forks keep it. One scan of
    ``checkpoints``: rows are pre-filtered by a byte search for ``value`` as JSON text
    and only those are parsed. Read-only; inside an erasure it reads that transaction.

    The JSON is parsed here, not with SQLite's ``json_each``: that needs the BLOB cast
    to TEXT, which reads its UTF-8 bytes as UTF-16 in a UTF-16 database. Metadata a
    writer stored as TEXT is read in the database's encoding. Raises
    ``ConfigurationError`` if metadata holding the value is not JSON (the thread can
    then not be told to be the subject's or not).
    """
    enc = text_encoding(conn)
    texts = dict.fromkeys(json.dumps(value, ensure_ascii=a)[1:-1] for a in (False, True))
    codecs = ["utf-8"] if enc == "utf-8" else ["utf-8", enc]
    forms = list(dict.fromkeys(t.encode(c, "surrogatepass") for t in texts for c in codecs))
    pre = " OR ".join("instr(CAST(metadata AS BLOB), ?) > 0" for _ in forms)
    rows = conn.execute(
        "SELECT CAST(thread_id AS BLOB), typeof(metadata) = 'text', CAST(metadata AS BLOB) "
        f"FROM checkpoints WHERE metadata IS NOT NULL AND ({pre})",
        forms,
    ).fetchall()
    found: set[bytes] = set()
    for tid, is_text, raw in rows:
        if bytes(tid) in found:
            continue
        try:
            doc = json.loads(
                bytes(raw).decode(enc if is_text else "utf-8", "replace"), object_pairs_hook=_Pairs
            )
        except ValueError:
            raise ConfigurationError(
                # No value or thread id named: it may be a raw subject id (privacy mode).
                f"a checkpoint's metadata holding the subject's {key!r} value is not JSON: "
                "its thread cannot be told to be the subject's or not; name the threads "
                "with threads=[...]"
            ) from None
        if isinstance(doc, _Pairs) and any(
            k == key
            and ((type(v) is str and v == value) or (type(v) is int and -(1 << 63) <= v < 1 << 63
                                                     and str(v) == value))
            for k, v in doc
        ):  # fmt: skip
            found.add(bytes(tid))
    return sorted(t.decode(enc, "surrogatepass") for t in found)


def purge_journal(conn: sqlite3.Connection, older_than: str) -> int:
    """Delete closed journal entries (their receipt was issued) of erasures that began
    before ``older_than``; returns how many. Open entries are never purged (their
    receipt is still to be issued); tombstones are untouched."""
    with _autocommit(conn):
        cur = conn.execute(
            "DELETE FROM erasure_journal WHERE receipt_sha256 IS NOT NULL AND issued_at < ?",
            (older_than,),
        )
    return int(cur.rowcount)


def redact_journal(
    conn: sqlite3.Connection, receipt_id: str, thread_id: str, rewrite: Callable[[str], str]
) -> bool:
    """Privacy mode: once an entry's statement is journaled (recovery then only signs
    it), replace the raw ids it kept for recovery: ``thread_id`` becomes the given
    commitment and ``entry`` is passed through ``rewrite``. False if the entry has no
    statement yet (then it is left as it is)."""
    with _autocommit(conn):
        row = conn.execute(
            "SELECT entry FROM erasure_journal WHERE receipt_id = ? AND statement IS NOT NULL",
            (receipt_id,),
        ).fetchone()
        if row is not None:
            conn.execute(
                "UPDATE erasure_journal SET thread_id = ?, entry = ? WHERE receipt_id = ?",
                (thread_id, rewrite(str(row[0])), receipt_id),
            )
    return row is not None


def is_tombstone_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the tombstone trigger's abort (an ``IntegrityError`` carrying
    ``TOMBSTONE_MESSAGE``), not some other constraint failure."""
    return isinstance(exc, sqlite3.IntegrityError) and TOMBSTONE_MESSAGE in str(exc)


def database_path(conn: sqlite3.Connection) -> str:
    """Absolute path of the ``main`` database, or ":memory:"."""
    for _, name, path in conn.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return str(path) if path else ":memory:"
    return ":memory:"  # pragma: no cover - every connection has main


def _glob_escape(text: str) -> str:
    return text.replace("[", "[[]").replace("*", "[*]").replace("?", "[?]")


def namespace_condition(namespaces: Sequence[Sequence[str]]) -> tuple[str, list[str]]:
    """SQL matching store rows under any of the namespace prefixes.

    Same semantics as ``SqliteStore.search``: the namespace itself or anything below it
    (a "." separator must follow), case-sensitive (GLOB, not LIKE).
    """
    conds, params = [], []
    for ns in namespaces:
        if not ns:
            raise ValueError("an empty store namespace would match every item in the store")
        text = ".".join(ns)
        conds.append("(prefix = ? OR prefix GLOB ?)")
        params += [text, _glob_escape(text) + ".*"]
    return "(" + " OR ".join(conds) + ")", params


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def text_encoding(conn: sqlite3.Connection) -> str:
    """The database's text encoding as a Python codec name (compared in SQL, so no
    ``text_factory`` is involved)."""
    le, be = conn.execute(
        "SELECT encoding = 'UTF-16le', encoding = 'UTF-16be' FROM pragma_encoding"
    ).fetchone()
    return "utf-16-le" if le else "utf-16-be" if be else "utf-8"


@dataclass
class SqlTablePart:
    """One table's rows of the scope, streamed in primary-key order from raw storage."""

    conn: sqlite3.Connection
    table: str
    group: str
    where: str
    params: Sequence[Any]
    method: str = "atomic-transaction"
    irreversible_deleted: int = 0
    namespaces_seen: set[str] = field(default_factory=set)
    observer: Callable[[Sequence[Any]], None] | None = None
    """Sees every measured row (the residue scan's needle collector)."""
    unit: str = ""
    """The receipt unit the rows belong to (``thread:<id>``, ``store``; "" = one tree)."""
    role: str = "removed"
    """``removed`` (measured and deleted) or ``kept`` (measured only: history receipts)."""
    _columns: list[str] | None = None
    _pk: list[str] | None = None
    _measured: int = 0
    _last_bytes: int = 0
    _encoding: str = "utf-8"

    def _describe(self) -> tuple[list[str], list[str]] | None:
        if self._columns is None:
            # Names read as BLOBs: a connection's text_factory must not change them.
            info = self.conn.execute(
                "SELECT CAST(name AS BLOB), pk FROM pragma_table_info(?) ORDER BY cid",
                (self.table,),
            ).fetchall()
            if not info:
                return None  # the table does not exist (e.g. store without vectors)
            self._encoding = text_encoding(self.conn)
            self._columns = [bytes(r[0]).decode(self._encoding) for r in info]
            pk = sorted((r[1], c) for c, r in zip(self._columns, info, strict=True) if r[1])
            self._pk = [c for _, c in pk]
        assert self._pk is not None
        return self._columns, self._pk

    def _rows(self) -> Iterator[tuple[Sequence[Any], int]]:
        """``(values, text_mask)`` per row in primary-key order, read by storage class.

        Every column is selected as an aliased expression - so no declared type or
        column name reaches ``detect_types`` converters - and TEXT is cast to BLOB, so
        no ``text_factory`` applies: values are exactly None, int, float or bytes (the
        stored bytes, in the database's encoding), and bit i of ``text_mask`` says
        column i holds TEXT. Items after the columns are the mask columns.
        """
        desc = self._describe()
        if desc is None:
            return
        cols, pk = desc
        quoted = [_quote(c) for c in cols]
        values = ", ".join(
            f"CASE WHEN typeof({q}) = 'text' THEN CAST({q} AS BLOB) ELSE {q} END AS \"v{i}\""
            for i, q in enumerate(quoted)
        )
        masks = [
            " | ".join(f"((typeof({q}) = 'text') << {j})" for j, q in enumerate(quoted[s : s + 62]))
            + f' AS "m{s}"'
            for s in range(0, len(quoted), 62)
        ]
        order = ", ".join(_quote(c) for c in pk)
        sql = (
            f"SELECT {values}, {', '.join(masks)} FROM {_quote(self.table)} "
            f"WHERE {self.where} ORDER BY {order}"
        )
        cur = self.conn.cursor()
        cur.row_factory = None  # plain tuples whatever the connection's row_factory
        cur.execute(sql, list(self.params))
        n, k = len(cols), len(masks)
        for row in cur:
            yield row, row[n] if k == 1 else sum(row[n + j] << (62 * j) for j in range(k))

    def _utf8(self, row: Sequence[Any], mask: int) -> Sequence[Any]:
        """The row with its TEXT as UTF-8 (a no-op unless the database is UTF-16)."""
        if self._encoding == "utf-8":
            return row
        return tuple(
            v.decode(self._encoding, "surrogatepass").encode("utf-8", "surrogatepass")
            if mask >> i & 1 else v
            for i, v in enumerate(row[: len(self._columns or ())])
        )  # fmt: skip

    def measure(self, sink: LeafSink) -> TableCount:
        """Hash every row of the scope into ``sink`` in primary-key order, recording the
        checkpoint namespaces seen and feeding ``observer``; a missing table is empty."""
        desc = self._describe()
        count = TableCount()
        if desc is None:
            return count
        cols, pk = desc
        leaf = RowLeafHasher(self.table, cols, pk).stored
        ns_idx = cols.index("checkpoint_ns") if "checkpoint_ns" in cols else None
        utf8 = self._encoding == "utf-8"
        for row, mask in self._rows():
            h, size = leaf(row if utf8 else self._utf8(row, mask), mask)
            sink(h)
            count.rows += 1
            count.bytes += size
            if ns_idx is not None:
                ns = row[ns_idx]
                ns = ns.decode(self._encoding, "replace") if type(ns) is bytes else ns
                self.namespaces_seen.add(ns)
            if self.observer is not None:
                self.observer(row[: len(cols)])  # stored bytes, in the database's encoding
        self._last_bytes = count.bytes
        return count

    def leaves(self) -> Iterator[bytes]:
        """The leaf data of every row, in the order ``measure`` hashes them (legal hold)."""
        desc = self._describe()
        if desc is None:
            return
        leaf = RowLeafHasher(self.table, *desc).stored_data
        for row, mask in self._rows():
            yield leaf(self._utf8(row, mask), mask)

    def erase(self, sink: LeafSink) -> TableCount:
        """Measure only: the DELETE is deferred to :meth:`finish` (cascade order)."""
        self._measured = self.measure(sink).rows
        return TableCount(self._measured, self._last_bytes)

    def finish(self) -> None:
        """DELETE the scope's rows; raises ``RuntimeError`` if the number deleted differs
        from the number :meth:`erase` measured."""
        if self._describe() is None:
            return
        cur = self.conn.execute(f'DELETE FROM "{self.table}" WHERE {self.where}', list(self.params))
        if cur.rowcount != self._measured:
            raise RuntimeError(
                f"{self.table}: measured {self._measured} rows but deleted {cur.rowcount}"
            )

    def remaining(self) -> int:
        """Rows of the scope still in the table, by SQL (0 if the table does not exist)."""
        if self._describe() is None:
            return 0
        row = self.conn.execute(
            f'SELECT count(*) FROM "{self.table}" WHERE {self.where}', list(self.params)
        ).fetchone()
        return int(row[0])


class SqliteBackend:
    """An :class:`~erasure_receipts._engine.ErasureBackend` over one sqlite3 connection."""

    kind = "sqlite"

    def __init__(
        self,
        conn: sqlite3.Connection,
        thread_id: str,
        *,
        saver: str,
        store: str | None,
        store_rows_namespaces: Sequence[Sequence[str]] = (),
        extra_parts: Sequence[Part] = (),
        extra_residue: Callable[[], list[dict[str, Any]]] | None = None,
        versions: dict[str, str],
        residue_scan: bool | str = False,
        threads: Sequence[str] | None = None,
        keep: str = "none",
        kept: Sequence[Sequence[str]] = (),
        removed: Removed | None = None,
        tombstone_policy: str = "new_conversations",
    ) -> None:
        self.extra_residue = extra_residue
        self.tombstone_policy = tombstone_policy
        """What a tombstone written by this erasure enforces (the receipt says it)."""
        self._newest: dict[str, str] = {}
        self.force_vacuum = residue_scan == "vacuum"
        # keep="latest" (history): the kept checkpoints, planned inside the transaction
        # unless given (recovery); see backends/keep_latest.py.
        self.keep = keep
        self._plan: KeepLatest | None = KeepLatest.of(kept) if kept else None
        # What the transaction deleted (given: recovery); from the commit on, the rule.
        self._removed = removed
        self._deleted: list[tuple[str, str]] = []
        self._writing = False
        self.needles: Needles | None = None
        self._erased = False
        self.conn = conn
        self.thread_id = thread_id
        self.saver = saver
        self.store = store
        self.database = database_path(conn)
        self.versions = versions
        # Several threads (a subject): one unit per thread and one for the store.
        self.threads = list(threads) if threads is not None else [thread_id]
        units = threads is not None
        self._parts: list[Part] = [
            SqlTablePart(conn, table, "checkpoints", "thread_id = ?", [t],
                         unit=f"thread:{t}" if units else "")
            for t in self.threads
            for table in ("checkpoints", "writes")
        ]  # fmt: skip
        if keep == "latest":
            self._parts = [
                PlannedSqlPart(conn, table, "checkpoints", "", (), role=role,
                               resolve=self._planned_where(table, role == "kept"),
                               record=self._deleted.extend
                               if role == "removed" and table == "checkpoints" else None)
                for table in ("checkpoints", "writes")
                for role in ("removed", "kept")
            ]  # fmt: skip
        if store_rows_namespaces:
            where, params = namespace_condition(store_rows_namespaces)
            self._parts += [
                SqlTablePart(conn, "store", "store", where, params, unit="store" * units),
                SqlTablePart(conn, "store_vectors", "store", where, params, unit="store" * units),
            ]
        # Tables the database does not have (e.g. store_vectors without an index) hold
        # nothing of the thread and are left out of the receipt rather than shown as 0.
        enc = text_encoding(conn)
        if enc != "utf-8":
            # The triggers read checkpoint metadata (UTF-8 JSON in a BLOB) as TEXT, which
            # only works in a UTF-8 database: elsewhere they refuse every write.
            self.tombstone_policy = "refuse_all"
        existing = {
            bytes(r[0]).decode(enc)  # as a BLOB: whatever the connection's text_factory
            for r in conn.execute("SELECT CAST(name AS BLOB) FROM sqlite_master WHERE type='table'")
        }
        self._parts = [
            p for p in self._parts if not isinstance(p, SqlTablePart) or p.table in existing
        ]
        if residue_scan:
            prefixes = [".".join(ns) for ns in store_rows_namespaces]
            self.needles = Needles(enc, exclude=[*self.threads, *prefixes])
            for p in self._parts:
                assert isinstance(p, SqlTablePart)
                if p.role != "kept":  # kept rows are not erased: not needles
                    p.observer = self.needles.add_row
        self._parts += list(extra_parts)

    def parts(self) -> Sequence[Part]:
        """``checkpoints`` and ``writes`` (with ``store``/``store_vectors`` if the store
        shares this database), existing tables only, then any extra (swept) parts."""
        return self._parts

    @property
    def checkpoint_namespaces(self) -> set[str]:
        """Checkpoint namespaces seen while measuring: where the API checks look."""
        seen: set[str] = set()
        for p in self._parts:
            if isinstance(p, SqlTablePart):
                seen |= p.namespaces_seen
        return seen

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` with ``secure_delete`` on; commit on success, roll back on
        any error. Refuses a connection that is already inside a transaction."""
        conn = self.conn
        if conn.in_transaction:
            raise RuntimeError("the saver's connection has an open transaction; refusing")
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute("BEGIN IMMEDIATE")
        self._writing = True
        if self.keep == "none":  # may tombstone: the newest id it will have erased
            self._newest = newest_ids(conn, self.threads)
        try:
            yield
            conn.commit()  # inside the try: a failed COMMIT leaves the transaction open
            self._erased = True
            if self.keep == "latest" and self._removed is None:
                self._removed = self.removed_keys()
                for p in self._parts:
                    if isinstance(p, PlannedSqlPart) and p.role == "removed":
                        p.where, p.params = self._late_where(p.table)
        except BaseException:
            try:
                conn.rollback()
            except sqlite3.Error as exc:  # pragma: no cover - connection unusable
                raise RuntimeError(f"erasure transaction could not be rolled back: {exc}") from exc
            raise
        finally:
            self._writing = False

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """A read transaction, rolled back afterwards; a transaction already open on the
        connection is used as it is (and left open)."""
        conn = self.conn
        own = not conn.in_transaction
        if own:
            conn.execute("BEGIN")
        try:
            yield
        finally:
            if own:
                conn.rollback()

    def write_tombstone(self, receipt_id: str, erased_at: str) -> None:
        """Tombstone the thread (the triggers then reject its writes); an existing
        tombstone is kept. Its policy row is (re)written: a later erasure of a new
        conversation moves ``fresh_after`` past what it erased."""
        self.conn.executemany(
            # An existing tombstone keeps pointing at the erasure that removed the data.
            "INSERT INTO erasure_tombstones (thread_id, receipt_id, erased_at) "
            "VALUES (?, ?, ?) ON CONFLICT (thread_id) DO NOTHING",
            [(t, receipt_id, erased_at) for t in self.threads],
        )
        self.conn.executemany(
            "INSERT INTO erasure_tombstone_policies (thread_id, policy, fresh_after) "
            "VALUES (?, ?, ?) ON CONFLICT (thread_id) DO UPDATE SET policy = excluded.policy, "
            "fresh_after = max(fresh_after, excluded.fresh_after)",
            [(t, self.tombstone_policy, fresh_after(erased_at, self._newest.get(t)))
             for t in self.threads],
        )  # fmt: skip

    def find_needles(
        self, forms: Sequence[bytes], scope: str, threads: Sequence[str]
    ) -> list[dict[str, Any]]:
        """Where any of ``forms`` occurs in a stored value: the scope's threads' rows
        (``scope="thread"``) or every row of every LangGraph table (``"database"``).

        Values are compared as stored bytes (TEXT cast to BLOB), so no connection
        setting can hide a match. Each location names the table, primary key, column
        and form index - never the value searched for.
        """
        return find_needles(self.conn, forms, None if scope == "database" else threads)

    def previous_erasure(self) -> str | None:
        """Receipt id of the thread's tombstone, else of its newest journal entry."""
        row = (
            self.conn.execute(
                "SELECT receipt_id FROM erasure_tombstones WHERE thread_id = ?", (self.thread_id,)
            ).fetchone()
            or self.conn.execute(
                "SELECT receipt_id FROM erasure_journal WHERE thread_id = ? "
                "ORDER BY issued_at DESC, receipt_id DESC LIMIT 1",
                (self.thread_id,),
            ).fetchone()
        )
        return None if row is None else str(row[0])

    def lease_entry(self, receipt_id: str) -> None:
        """Lease the journal entry ``receipt_id`` will be (when :func:`lease.owning`),
        first in the erasure transaction: before anything irreversible, so a lease that
        cannot be taken fails the erasure while all of it still rolls back; and before
        the commit makes the entry visible, so no recovery completes it meanwhile."""
        if lease.owning():
            token = take_lease(self.conn, receipt_id)
            if token is None:
                raise RuntimeError(f"the lease on journal entry {receipt_id} is taken")
            lease.owned(receipt_id, token)

    def write_journal(
        self, receipt_id: str, issued_at: str, entry: str, *, thread_id: str | None = None
    ) -> None:
        """Insert the journal entry under ``thread_id`` (privacy mode: a commitment) or
        the erased thread's id; it commits with the deletion, so a receipt can still be
        issued after a crash (leased since :meth:`lease_entry`)."""
        self.conn.execute(
            "INSERT INTO erasure_journal (receipt_id, thread_id, issued_at, entry) "
            "VALUES (?, ?, ?, ?)",
            (receipt_id, self.thread_id if thread_id is None else thread_id, issued_at, entry),
        )

    def reduce_residue(self) -> list[dict[str, Any]]:
        """After commit: ``secure_delete`` and WAL truncation (:func:`scrub`), the residue
        scan or the note that it was skipped, then the swept store's residue."""
        out = scrub(self.conn)
        if self.needles is not None:
            # Needles exist only if this backend measured the rows it deleted; a receipt
            # issued by recovery scans conservatively instead.
            needles = self.needles if self._erased else None
            out.append(residue_scan(self.conn, self.database, needles, vacuum=self.force_vacuum))
        else:
            out.append(LIVE_PAGE_RESIDUE)
        if self.extra_residue is not None:
            out += self.extra_residue()
        return out

    # -- keep="latest": the history erasure's plan (backends/keep_latest.py) ------------

    def _planned_where(self, table: str, kept: bool) -> Callable[[], tuple[str, list[Any]]]:
        def resolve() -> tuple[str, list[Any]]:
            if self._removed is not None and not kept:
                return self._late_where(table)
            cond, params = self._resolve_plan().where("?")
            return f"thread_id = ? AND {'NOT ' * kept}{cond}", [self.thread_id, *params]

        return resolve

    def _resolve_plan(self) -> KeepLatest:
        if self._plan is None:
            self._plan = plan_keep_latest(self.conn, self.thread_id, write=self._writing)
        return self._plan

    def _late_where(self, table: str) -> tuple[str, list[Any]]:
        """After the commit: the rows of the checkpoints the transaction deleted (a
        checkpoint saved since, whatever its id, is not one of them)."""
        assert self._removed is not None
        clauses, params = [], [self.thread_id]
        for ns, ids in self._removed.by_ns(table).items():
            clauses.append(
                "(checkpoint_ns = ? AND checkpoint_id IN (SELECT value FROM json_each(?)))"
            )
            params += [ns, json.dumps([i for (i,) in ids])]
        return f"thread_id = ? AND ({' OR '.join(clauses) or '1 = 0'})", params

    def kept_checkpoints(self) -> list[tuple[str, str]]:
        """``keep="latest"``: the kept ``(checkpoint_ns, checkpoint_id)`` pairs."""
        return list(self._resolve_plan().kept)

    def removed_keys(self) -> Removed:
        """``keep="latest"``: the checkpoints the transaction deletes (once finished)."""
        if self._removed is not None:
            return self._removed
        return Removed(frozenset(self._deleted))


@dataclass
class PlannedSqlPart(SqlTablePart):
    """A table's removed (or kept) rows of a history erasure: ``where`` and ``params``
    come from the plan the first time the part reads - inside the erasure transaction,
    so the plan sees what the write lock protects."""

    resolve: Callable[[], tuple[str, list[Any]]] | None = None
    record: Callable[[list[tuple[str, str]]], None] | None = None
    """``checkpoints``, removed: receives the keys each ``finish`` deletes."""

    def _ready(self) -> None:
        if self.resolve is not None:
            self.where, self.params = self.resolve()
            self.resolve = None

    def _rows(self) -> Iterator[tuple[Sequence[Any], int]]:
        self._ready()
        return super()._rows()

    def finish(self) -> None:
        """Plan first (if not yet), record the keys deleted, then
        :meth:`SqlTablePart.finish`."""
        self._ready()
        if self.record is not None and self._describe() is not None:
            enc = self._encoding
            self.record([
                (bytes(ns).decode(enc, "surrogatepass"), bytes(cid).decode(enc, "surrogatepass"))
                for ns, cid in self.conn.execute(
                    "SELECT CAST(checkpoint_ns AS BLOB), CAST(checkpoint_id AS BLOB) "
                    f"FROM checkpoints WHERE {self.where}", list(self.params))
            ])  # fmt: skip
        super().finish()

    def remaining(self) -> int:
        """Plan first (if not yet), then :meth:`SqlTablePart.remaining`."""
        self._ready()
        return super().remaining()


def newest_ids(conn: sqlite3.Connection, threads: Sequence[str]) -> dict[str, str]:
    """Per thread, the highest checkpoint id of its checkpoints and writes (if any)."""
    out: dict[str, str] = {}
    for t in threads:
        row = conn.execute(
            "SELECT max(m) FROM (SELECT max(checkpoint_id) AS m FROM checkpoints WHERE "
            "thread_id = ? UNION ALL SELECT max(checkpoint_id) FROM writes WHERE thread_id = ?)",
            (t, t),
        ).fetchone()
        if row[0] is not None:
            out[t] = str(row[0])
    return out


def _metadata(raw: Any, is_text: Any, enc: str) -> dict[str, Any]:
    """Checkpoint metadata as stored: a BLOB (LangGraph's) is UTF-8 JSON whatever the
    database's encoding, TEXT (another writer's) is in the database's encoding."""
    if raw is None:
        return {}
    try:
        meta = json.loads(bytes(raw).decode(enc if is_text else "utf-8", "surrogatepass"))
    except ValueError:
        return {}
    return meta if isinstance(meta, dict) else {}


def plan_keep_latest(conn: sqlite3.Connection, thread_id: str, *, write: bool) -> KeepLatest:
    """LangGraph's ``keep_latest`` choice for one thread (see ``keep_latest.plan``).

    Refuses (``DeltaChannelError``) a thread whose checkpoint metadata marks a
    ``DeltaChannel``. The SQLite saver keeps a pre-v4 checkpoint's pending sends in the
    checkpoint itself, so no sends parent is kept here. With ``write`` (inside the
    erasure transaction) a kept checkpoint whose parent is removed is left with no parent,
    as LangGraph's ``prune`` does.
    """
    enc = text_encoding(conn)
    marks = list(dict.fromkeys(f'"{k}"'.encode(c) for k in DELTA_KEYS for c in ("utf-8", enc)))
    for raw, is_text in conn.execute(
        "SELECT CAST(metadata AS BLOB), typeof(metadata) = 'text' FROM checkpoints "
        "WHERE thread_id = ? AND ("
        + " OR ".join("instr(CAST(metadata AS BLOB), ?) > 0" for _ in marks)
        + ")",
        [thread_id, *marks],
    ):
        if any(k in _metadata(raw, is_text, enc) for k in DELTA_KEYS):
            raise DeltaChannelError([thread_id])
    heads: list[Head] = []
    for raw_ns, raw_id in conn.execute(
        "SELECT CAST(checkpoint_ns AS BLOB), CAST(max(checkpoint_id) AS BLOB) FROM checkpoints "
        "WHERE thread_id = ? GROUP BY checkpoint_ns",
        (thread_id,),
    ).fetchall():
        ns, head = bytes(raw_ns).decode(enc), bytes(raw_id).decode(enc)
        root, saved = None, False
        if ":" in ns:
            row = conn.execute(
                "SELECT CAST(metadata AS BLOB), typeof(metadata) = 'text' FROM checkpoints "
                "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                (thread_id, ns, head),
            ).fetchone()
            raw, is_text = row if row is not None else (None, 0)
            parents = _metadata(raw, is_text, enc).get("parents")
            root = parents.get("") if isinstance(parents, dict) else None
            saved = isinstance(root, str) and bool(
                conn.execute(
                    "SELECT 1 FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
                    "AND checkpoint_id = ?",
                    (thread_id, root),
                ).fetchone()
            )
        heads.append(Head(ns, head, None, root if isinstance(root, str) else None, saved))
    k = plan(heads)
    if write:
        for ns, ids in k.by_ns.items():
            marks_ids = ", ".join("?" * len(ids))
            conn.execute(
                "UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = ? "
                f"AND checkpoint_ns = ? AND checkpoint_id IN ({marks_ids}) "
                f"AND parent_checkpoint_id NOT IN ({marks_ids})",
                [thread_id, ns, *ids, *ids],
            )
    return k


def _id_errors(enc: str) -> str:
    """How ids that are not valid text in the database's encoding are decoded, so that
    they round-trip to the same bytes (a thread id written by another writer, e.g.
    ``CAST(X'74ff00' AS TEXT)``): the result holds lone surrogates, which a sweep
    recognises and skips."""
    return "surrogateescape" if enc == "utf-8" else "surrogatepass"


def idle_threads(
    conn: sqlite3.Connection, before: str, after: str | None, limit: int
) -> list[tuple[str, str, int, int]]:
    """One page of retention candidates, in thread-id order after ``after``: threads whose
    latest checkpoint id (over every namespace) sorts before ``before`` - or is not a
    uuid6, so its time is unknown - as ``(thread_id, latest checkpoint id, checkpoints,
    namespaces)``. Reads only the ``checkpoints`` primary-key index, never a value. An id
    that is not valid text is returned with lone surrogates (see ``_id_errors``), and
    ``after`` may be such an id: it is compared as the stored bytes."""
    enc = text_encoding(conn)
    errors = _id_errors(enc)
    cond = ""
    if after is not None:
        # A literal, not a bound BLOB: SQLite casts a bound BLOB to TEXT as UTF-8
        # whatever the database's encoding, so in a UTF-16 database the comparison
        # would never advance past the page.
        cond = f"WHERE thread_id > CAST(X'{after.encode(enc, errors).hex()}' AS TEXT)"
    rows = conn.execute(
        "SELECT CAST(thread_id AS BLOB), CAST(max(checkpoint_id) AS BLOB), count(*), "
        f"count(DISTINCT checkpoint_ns) FROM checkpoints {cond} GROUP BY thread_id "
        "HAVING max(checkpoint_id) < ? OR length(max(checkpoint_id)) <> 36 "
        "OR substr(max(checkpoint_id), 15, 1) <> '6' ORDER BY thread_id LIMIT ?",
        [before, limit],
    ).fetchall()
    if conn.in_transaction:
        conn.commit()  # end an implicit read transaction (legacy isolation modes)
    return [
        (bytes(t).decode(enc, errors), bytes(m).decode(enc, errors), int(n), int(k))
        for t, m, n, k in rows
    ]


def latest_checkpoint(conn: sqlite3.Connection, thread_id: str) -> str | None:
    """The thread's latest checkpoint id over every namespace (inside a transaction:
    what that transaction sees)."""
    row = conn.execute(
        "SELECT CAST(max(checkpoint_id) AS BLOB) FROM checkpoints WHERE thread_id = ?",
        (thread_id,),
    ).fetchone()
    if row is None or row[0] is None:
        return None
    enc = text_encoding(conn)
    return bytes(row[0]).decode(enc, _id_errors(enc))


RUN_IN_FLIGHT = """
SELECT 1 FROM checkpoints c JOIN {writes} w ON w.thread_id = c.thread_id
  AND w.checkpoint_ns = c.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id
WHERE c.thread_id = {p} AND c.checkpoint_id = (
    SELECT max(c2.checkpoint_id) FROM checkpoints c2
    WHERE c2.thread_id = c.thread_id AND c2.checkpoint_ns = c.checkpoint_ns)
  AND (w.channel = '__resume__' OR NOT EXISTS (
    SELECT 1 FROM {writes} w2 WHERE w2.thread_id = w.thread_id
      AND w2.checkpoint_ns = w.checkpoint_ns AND w2.checkpoint_id = w.checkpoint_id
      AND w2.task_id = w.task_id AND w2.channel IN ('__interrupt__', '__error__')))
LIMIT 1
"""
"""A run is (or may be) going on in the thread: the latest checkpoint of one of its
namespaces has a ``__resume__`` write (``Command(resume=...)`` writes it under the
interrupted checkpoint; the next checkpoint exists only once the node finishes), or a
write of a task that neither interrupted nor failed (a task finished, its step not yet
checkpointed). Writes cannot be dated, so a thread left in such a state is skipped too.
Shared with the PostgreSQL backend (``{writes}``, ``{p}``)."""


def run_in_flight(conn: sqlite3.Connection, thread_id: str) -> bool:
    """Whether a run may be going on in the thread (``RUN_IN_FLIGHT``): a retention
    sweep must not erase it as idle, although its latest checkpoint is old."""
    sql = RUN_IN_FLIGHT.format(writes="writes", p="?")
    return conn.execute(sql, (thread_id,)).fetchone() is not None
