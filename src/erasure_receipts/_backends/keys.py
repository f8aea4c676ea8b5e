"""The key store of crypto-shredding: one AES-256 data key per data subject (or per
thread without a subject), each wrapped by a key-encryption key.

The key store is a database of its own - a SQLite file or a PostgreSQL database that is
not the data database (the savers refuse the same file or database: a key next to its
ciphertext in one backup shreds nothing). Destroying a key (:meth:`KeyStore.destroy`)
deletes its row, rewrites the SQLite file (``secure_delete``, ``VACUUM``, no WAL left) and
then checks that neither the wrapped key nor its id occurs in any byte of the key
store's files; on PostgreSQL the row is deleted and the table vacuumed (its files are
the server's: the scan is reported as not done).
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..errors import CiphertextRejectedError, ConfigurationError, InputError, KeyFormatError

__all__ = [
    "DestroyedKey",
    "KeyStore",
    "KeyWrapper",
    "LocalKeyWrapper",
]

_KEK_PREFIX = "erasure-receipts-kek-v1:"
_WRAP_AAD = b"erasure-receipts-data-key-v1\x00"
KEY_ID_BYTES = 16


@runtime_checkable
class KeyWrapper(Protocol):
    """Wraps and unwraps data keys with a key-encryption key (a local file, an
    environment variable, or an external KMS behind these three members)."""

    @property
    def key_id(self) -> str:
        """A stable, non-secret id of the key-encryption key."""
        ...

    def wrap(self, data_key: bytes, context: bytes) -> bytes:
        """``data_key`` encrypted and authenticated, bound to ``context``."""
        ...

    def unwrap(self, wrapped: bytes, context: bytes) -> bytes:
        """The data key; raises ``CiphertextRejectedError`` if it does not authenticate."""
        ...


class LocalKeyWrapper:
    """A key-encryption key held locally: 32 random bytes, AES-256-GCM key wrapping.

    ``LocalKeyWrapper.generate(path)`` writes a new one (mode 0600, never overwriting);
    ``from_file(path)`` and ``from_env(name)`` read one (text ``erasure-receipts-kek-v1:``
    followed by the key in base64).
    """

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ConfigurationError("a key-encryption key is 32 bytes (AES-256)")
        self._aead = AESGCM(key)
        self._id = hashlib.sha256(b"erasure-receipts-kek-id\x00" + key).hexdigest()[:16]

    @property
    def key_id(self) -> str:
        """First 16 hex digits of a SHA-256 of the key (not secret)."""
        return self._id

    @staticmethod
    def _parse(text: str, where: str) -> LocalKeyWrapper:
        text = text.strip()
        if not text.startswith(_KEK_PREFIX):
            raise KeyFormatError(f"{where}: not a key-encryption key (expected {_KEK_PREFIX}...)")
        try:
            key = base64.b64decode(text[len(_KEK_PREFIX) :], validate=True)
        except ValueError:
            raise KeyFormatError(f"{where}: the key-encryption key is not base64") from None
        if len(key) != 32:
            raise KeyFormatError(f"{where}: the key-encryption key is not 32 bytes")
        return LocalKeyWrapper(key)

    @classmethod
    def generate(cls, path: str | Path) -> LocalKeyWrapper:
        """Write a new random key-encryption key to ``path`` (refuses an existing file)."""
        key = secrets.token_bytes(32)
        text = _KEK_PREFIX + base64.b64encode(key).decode() + "\n"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise ConfigurationError(
                f"{path}: exists; a key-encryption key is never overwritten"
            ) from None
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        return cls(key)

    @classmethod
    def from_file(cls, path: str | Path) -> LocalKeyWrapper:
        """The key-encryption key in the file ``path``."""
        try:
            text = Path(path).read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: cannot read the key-encryption key ({exc})") from None
        return cls._parse(text, str(path))

    @classmethod
    def from_env(cls, name: str) -> LocalKeyWrapper:
        """The key-encryption key in environment variable ``name``."""
        text = os.environ.get(name)
        if not text:
            raise ConfigurationError(f"environment variable {name} is not set")
        return cls._parse(text, f"${name}")

    def wrap(self, data_key: bytes, context: bytes) -> bytes:
        """AES-256-GCM of ``data_key``, ``context`` as associated data; nonce first."""
        nonce = secrets.token_bytes(12)
        return nonce + self._aead.encrypt(nonce, data_key, _WRAP_AAD + context)

    def unwrap(self, wrapped: bytes, context: bytes) -> bytes:
        """The data key of ``wrap``; ``CiphertextRejectedError`` if it fails."""
        try:
            return self._aead.decrypt(wrapped[:12], wrapped[12:], _WRAP_AAD + context)
        except (InvalidTag, ValueError):
            raise CiphertextRejectedError(
                "a data key does not unwrap with this key-encryption key "
                "(wrong key-encryption key, or the key store was altered)"
            ) from None


@dataclass(frozen=True)
class DestroyedKey:
    """What :meth:`KeyStore.destroy` removed and checked."""

    name: str
    key_id: bytes
    """The destroyed key's id (random; the receipt carries only a commitment to it)."""
    threads: list[str]
    """Threads bound to the key, their bindings deleted with it."""
    wrapped_sha256: str
    """SHA-256 of the wrapped key as it was stored (the pre-state leaf)."""
    residue: list[dict[str, Any]] = field(default_factory=list)
    """The scrub steps and the scan of the key store's files."""
    gone: bool = False
    """Re-read after the commit: no row of the key, no binding to it."""
    key_row: tuple[Any, ...] = ()
    """The ``erasure_data_keys`` row as it was stored (name, key_id, wrapped, kek_id,
    created_at), read in the deleting transaction."""
    thread_rows: list[tuple[Any, ...]] = field(default_factory=list)
    """The ``erasure_thread_keys`` rows (thread_id, name), by thread id."""
    namespace_rows: list[tuple[Any, ...]] = field(default_factory=list)
    """The ``erasure_namespace_keys`` rows (namespace, name): store namespaces whose items
    were encrypted under the key (``Encryption.wrap_store``), by namespace."""


_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS erasure_data_keys (
        name TEXT PRIMARY KEY,
        key_id BLOB NOT NULL UNIQUE,
        wrapped BLOB NOT NULL,
        kek_id TEXT NOT NULL,
        created_at TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS erasure_thread_keys (
        thread_id TEXT PRIMARY KEY,
        name TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS erasure_thread_keys_name ON erasure_thread_keys (name)",
    "CREATE TABLE IF NOT EXISTS erasure_key_store (token TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS erasure_namespace_keys (
        namespace TEXT PRIMARY KEY,
        name TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS erasure_namespace_keys_name ON erasure_namespace_keys (name)",
)
KEY_STORE_TABLE = "erasure_key_store"
"""The table whose random token identifies a key store (a saver looks for it in its own
database: found with this key store's token, the key store is the data database)."""


KEY_STORE_TABLES_SQL = (
    "SELECT format('%I.%I', schemaname, tablename) AS t FROM pg_tables "
    f"WHERE tablename = '{KEY_STORE_TABLE}'"
)


def key_store_tokens_sql(table: str) -> str:
    """The tokens of one key-store table named by :data:`KEY_STORE_TABLES_SQL` (already
    quoted by ``format('%I.%I')``)."""
    return f"SELECT token FROM {table}"


def postgres_tokens(conn: Any) -> list[str]:
    """The key-store tokens in the PostgreSQL database of ``conn`` (every schema): a key
    store whose token is among them is that database (``KeyStore.refuse_tokens``)."""
    seen: list[str] = []
    for row in conn.execute(KEY_STORE_TABLES_SQL).fetchall():
        table = row["t"] if isinstance(row, dict) else row[0]
        for r in conn.execute(key_store_tokens_sql(table)).fetchall():
            seen.append(str(r["token"] if isinstance(r, dict) else r[0]))
    return seen


KEY_COLUMNS = ("name", "key_id", "wrapped", "kek_id", "created_at")
THREAD_COLUMNS = ("thread_id", "name")
NAMESPACE_COLUMNS = ("namespace", "name")


def _key_rows(
    cur: Any, name: str, ph: str, *, lock: bool = False
) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]] | None:
    """The key's row and its thread bindings, or None."""
    cur.execute(
        f"SELECT {', '.join(KEY_COLUMNS)} FROM erasure_data_keys WHERE name = {ph}"
        + (" FOR UPDATE" if lock else ""),
        (name,),
    )
    row = cur.fetchone()
    if row is None:
        return None
    cur.execute(
        f"SELECT {', '.join(THREAD_COLUMNS)} FROM erasure_thread_keys WHERE name = {ph} "
        "ORDER BY thread_id",
        (name,),
    )
    key_row = tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
    return key_row, [tuple(r) for r in cur.fetchall()]


def _namespace_rows(cur: Any, name: str, ph: str) -> list[tuple[Any, ...]]:
    cur.execute(
        f"SELECT {', '.join(NAMESPACE_COLUMNS)} FROM erasure_namespace_keys WHERE name = {ph} "
        "ORDER BY namespace",
        (name,),
    )
    return [tuple(r) for r in cur.fetchall()]


def subject_key_name(subject: str) -> str:
    return "subject:" + subject


def thread_key_name(thread_id: str) -> str:
    return "thread:" + thread_id


class KeyStore:
    """Data keys, one per subject (``subject:<id>``) or thread (``thread:<id>``), and
    which key each thread's rows are encrypted under.

    ``KeyStore(path, wrapper)`` opens (creates) a SQLite key store;
    ``KeyStore.postgres(dsn, wrapper)`` a PostgreSQL one. ``backup_retention`` is how
    long copies of the key store itself are kept (e.g. ``"P30D"``): a shred receipt
    carries it, since a key survives in those copies until they expire.
    """

    def __init__(
        self,
        path: str | Path,
        wrapper: KeyWrapper,
        *,
        backup_retention: str | None = None,
        _dsn: str | None = None,
    ) -> None:
        if not isinstance(wrapper, KeyWrapper):
            raise ConfigurationError("wrapper must be a KeyWrapper (e.g. LocalKeyWrapper)")
        self.wrapper = wrapper
        self.backup_retention = backup_retention
        self._lock = threading.RLock()
        self.dsn = _dsn
        self.path: Path | None = None
        if _dsn is None:
            if str(path) == ":memory:" or not str(path):
                raise ConfigurationError(
                    "a key store is a file (an in-memory one shreds nothing durable)"
                )
            self.path = Path(path).resolve()
            conn = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=30
            )
            conn.execute("PRAGMA secure_delete=ON")
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() == "wal":
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.execute("PRAGMA journal_mode=DELETE")
            for stmt in _SCHEMA:
                conn.execute(stmt)
            self._sqlite: sqlite3.Connection | None = conn
            self._pg: Any = None
            self.token = self._ensure_token()
        else:
            import psycopg

            self._sqlite = None
            self._pg = psycopg.connect(_dsn, autocommit=True)
            with self._pg.cursor() as cur:
                for stmt in _SCHEMA:
                    cur.execute(stmt.replace("BLOB", "BYTEA"))
            self.token = self._ensure_token()

    @classmethod
    def postgres(
        cls, dsn: str, wrapper: KeyWrapper, *, backup_retention: str | None = None
    ) -> KeyStore:
        """A key store in the PostgreSQL database ``dsn`` (not the data database)."""
        return cls("", wrapper, backup_retention=backup_retention, _dsn=dsn)

    @property
    def label(self) -> str:
        """The key store as a receipt names it: its file, or ``postgresql://host:port/db``
        (no user, no password)."""
        if self.path is not None:
            return str(self.path)
        from psycopg.conninfo import conninfo_to_dict

        d = conninfo_to_dict(self.dsn or "")
        host = str(d.get("host") or "localhost")
        return f"postgresql://{host}:{d.get('port') or 5432}/{d.get('dbname') or ''}"

    @property
    def kind(self) -> str:
        """``"sqlite"`` or ``"postgres"``."""
        return "sqlite" if self._sqlite is not None else "postgres"

    def close(self) -> None:
        """Close the key store's connection."""
        with self._lock:
            if self._sqlite is not None:
                self._sqlite.close()
            if self._pg is not None:
                self._pg.close()

    def __enter__(self) -> KeyStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- identity: the savers refuse a key store that is their own database ---------------

    def _ensure_token(self) -> str:
        with self._cursor() as cur:
            cur.execute("SELECT token FROM erasure_key_store")
            row = cur.fetchone()
            if row is not None:
                return str(row[0])
            token = secrets.token_hex(16)
            cur.execute(self._q("INSERT INTO erasure_key_store (token) VALUES (?)"), (token,))
            return token

    def refuse_tokens(self, seen: list[str], where: str) -> None:
        """Refuse when ``where`` (the data database) holds this key store's token."""
        if self.token in seen:
            raise ConfigurationError(
                f"{where}: the key store must not be the data database "
                "(a backup of it would hold the keys next to the ciphertext)"
            )

    def check_not_database(self, *, sqlite_path: str | None = None) -> None:
        """Refuse to keep keys in the data database (one backup would hold both)."""
        if sqlite_path and self.path is not None and sqlite_path != ":memory:":
            same = Path(sqlite_path).resolve() == self.path
            with suppress(OSError):
                same = same or os.path.samefile(sqlite_path, self.path)
            if same:
                raise ConfigurationError(
                    f"{self.path}: the key store must not be the data database "
                    "(a backup of it would hold the keys next to the ciphertext)"
                )

    # -- reads and writes -----------------------------------------------------------------

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        with self._lock:
            if self._sqlite is not None:
                with closing(self._sqlite.cursor()) as cur:
                    yield cur
            else:
                with self._pg.cursor() as cur:
                    yield cur

    def _q(self, sql: str) -> str:
        return sql if self._sqlite is not None else sql.replace("?", "%s")

    def _unwrap(self, name: str, key_id: bytes, wrapped: bytes) -> bytes:
        return self.wrapper.unwrap(bytes(wrapped), name.encode() + b"\x00" + bytes(key_id))

    def key_for_thread(self, thread_id: str, subject: str | None) -> tuple[bytes, bytes]:
        """``(key_id, data_key)`` of ``thread_id``: the key it is bound to, else (first
        write) the subject's key - created if needed - or its own, bound now. A thread
        bound to one subject is never written under another (``ConfigurationError``)."""
        want = subject_key_name(subject) if subject is not None else None
        with self._lock:
            with self._cursor() as cur:
                cur.execute(
                    self._q("SELECT name FROM erasure_thread_keys WHERE thread_id = ?"),
                    (thread_id,),
                )
                row = cur.fetchone()
            if row is not None:
                name = str(row[0])
                if want is not None and name != want:
                    raise ConfigurationError(
                        f"thread {thread_id!r} is encrypted under {name.split(':', 1)[0]} key "
                        f"{name.split(':', 1)[1]!r}, not subject {subject!r}"
                    )
                found = self._get(name)
                if found is None:
                    from ..errors import KeyShreddedError

                    raise KeyShreddedError(thread_id)
                return found
            name = want if want is not None else thread_key_name(thread_id)
            if self._get(name) is None:
                self._create(name)
            with self._cursor() as cur:  # another process may have bound it meanwhile
                cur.execute(
                    self._q(
                        "INSERT INTO erasure_thread_keys (thread_id, name) VALUES (?, ?) "
                        "ON CONFLICT (thread_id) DO NOTHING"
                    ),
                    (thread_id, name),
                )
            return self.key_for_thread(thread_id, subject)  # the binding that won

    def _get(self, name: str) -> tuple[bytes, bytes] | None:
        with self._cursor() as cur:
            cur.execute(
                self._q("SELECT key_id, wrapped FROM erasure_data_keys WHERE name = ?"), (name,)
            )
            row = cur.fetchone()
        if row is None:
            return None
        return bytes(row[0]), self._unwrap(name, row[0], row[1])

    def _create(self, name: str) -> None:
        """A new key ``name``, unless another process created it first (that one wins)."""
        key_id, key = secrets.token_bytes(KEY_ID_BYTES), AESGCM.generate_key(bit_length=256)
        wrapped = self.wrapper.wrap(key, name.encode() + b"\x00" + key_id)
        now = datetime.now(UTC).isoformat(timespec="seconds")
        with self._cursor() as cur:
            cur.execute(
                self._q(
                    "INSERT INTO erasure_data_keys (name, key_id, wrapped, kek_id, created_at) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING"
                ),
                (name, key_id, wrapped, self.wrapper.key_id, now),
            )

    def unwrap_check(self, name: str) -> None:
        """Key ``name`` unwraps with this key store's wrapper (``CiphertextRejectedError``
        if not; ``NoDataKeyError`` if there is no such key)."""
        with self._lock:
            if self._get(name) is None:
                from ..errors import NoDataKeyError

                raise NoDataKeyError(f"no data key {name!r} in the key store")

    def key_by_id(self, key_id: bytes) -> tuple[str, bytes] | None:
        """``(name, data_key)`` of ``key_id``, or None when it is gone (shredded)."""
        with self._cursor() as cur:
            cur.execute(
                self._q("SELECT name, wrapped FROM erasure_data_keys WHERE key_id = ?"), (key_id,)
            )
            row = cur.fetchone()
        if row is None:
            return None
        return str(row[0]), self._unwrap(str(row[0]), key_id, row[1])

    def name_of_thread(self, thread_id: str) -> str | None:
        """The key ``thread_id`` is bound to, or None."""
        with self._cursor() as cur:
            cur.execute(
                self._q("SELECT name FROM erasure_thread_keys WHERE thread_id = ?"), (thread_id,)
            )
            row = cur.fetchone()
        return None if row is None else str(row[0])

    def threads_of(self, name: str) -> list[str]:
        """The threads bound to key ``name``, sorted."""
        with self._cursor() as cur:
            cur.execute(
                self._q(
                    "SELECT thread_id FROM erasure_thread_keys WHERE name = ? ORDER BY thread_id"
                ),
                (name,),
            )
            return [str(r[0]) for r in cur.fetchall()]

    def namespaces_of(self, name: str) -> list[str]:
        """The store namespaces (labels joined with ``.``) bound to key ``name``."""
        with self._cursor() as cur:
            return [str(r[0]) for r in _namespace_rows(cur, name, "?" if self._sqlite else "%s")]

    def key_for_namespace(self, namespace: str, subject: str) -> tuple[bytes, bytes]:
        """``(key_id, data_key)`` for store items in ``namespace``: the subject's key
        (created if needed), the namespace bound to it on first use; a namespace bound
        to one subject is never written under another (``ConfigurationError``)."""
        want = subject_key_name(subject)
        with self._lock:
            with self._cursor() as cur:
                cur.execute(
                    self._q("SELECT name FROM erasure_namespace_keys WHERE namespace = ?"),
                    (namespace,),
                )
                row = cur.fetchone()
            if row is not None:
                if str(row[0]) != want:
                    raise ConfigurationError(
                        f"store namespace {namespace!r} is encrypted under key "
                        f"{str(row[0])!r}, not subject {subject!r}"
                    )
                found = self._get(want)
                if found is None:
                    from ..errors import KeyShreddedError

                    raise KeyShreddedError(namespace, scope="store namespace")
                return found
            if self._get(want) is None:
                self._create(want)
            with self._cursor() as cur:
                cur.execute(
                    self._q(
                        "INSERT INTO erasure_namespace_keys (namespace, name) VALUES (?, ?) "
                        "ON CONFLICT (namespace) DO NOTHING"
                    ),
                    (namespace, want),
                )
            return self.key_for_namespace(namespace, subject)

    def has_key(self, name: str) -> bool:
        """Whether key ``name`` exists."""
        with self._cursor() as cur:
            cur.execute(self._q("SELECT 1 FROM erasure_data_keys WHERE name = ?"), (name,))
            return cur.fetchone() is not None

    # -- destroying a key -----------------------------------------------------------------

    def destroy(self, name: str) -> DestroyedKey | None:
        """Delete key ``name`` and its thread bindings in one transaction (the rows are
        read in it first: the receipt's pre-state), scrub the key store, check it is
        gone; None when there is no such key."""
        with self._lock:
            if self._sqlite is not None:
                conn = self._sqlite
                conn.execute("BEGIN IMMEDIATE")
                try:
                    rows = _key_rows(conn.cursor(), name, "?")
                    ns_rows = _namespace_rows(conn.cursor(), name, "?")
                    if rows is not None:
                        conn.execute("DELETE FROM erasure_namespace_keys WHERE name = ?", (name,))
                        conn.execute("DELETE FROM erasure_thread_keys WHERE name = ?", (name,))
                        conn.execute("DELETE FROM erasure_data_keys WHERE name = ?", (name,))
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                if rows is None:
                    return None
                residue = self._scrub_sqlite(rows[0][1], rows[0][2])
            else:
                with self._pg.transaction(), self._pg.cursor() as cur:
                    rows = _key_rows(cur, name, "%s", lock=True)
                    ns_rows = _namespace_rows(cur, name, "%s")
                    if rows is not None:
                        cur.execute("DELETE FROM erasure_namespace_keys WHERE name = %s", (name,))
                        cur.execute("DELETE FROM erasure_thread_keys WHERE name = %s", (name,))
                        cur.execute("DELETE FROM erasure_data_keys WHERE name = %s", (name,))
                if rows is None:
                    return None
                with self._pg.cursor() as cur:
                    cur.execute("VACUUM erasure_data_keys")
                    cur.execute("VACUUM erasure_thread_keys")
                    cur.execute("VACUUM erasure_namespace_keys")
                residue = [
                    {"action": "key_store.vacuum", "status": "applied",
                     "detail": {"key_store": "postgres",
                                "tables": "erasure_data_keys, erasure_thread_keys"}},
                    {"action": "key_store.residue_scan", "status": "skipped",
                     "detail": {"key_store": "postgres",
                                "reason": "the server's data files, WAL and its backups are "
                                          "not readable from here; VACUUM marks the row's "
                                          "space reusable but does not overwrite it at once"}},
                ]  # fmt: skip
            key_row, thread_rows = rows
            key_id = bytes(key_row[1])
            gone = (
                not self.has_key(name)
                and self.key_by_id(key_id) is None
                and not self.threads_of(name)
                and not self.namespaces_of(name)
            )

        return DestroyedKey(
            name=name,
            key_id=key_id,
            threads=[str(r[0]) for r in thread_rows],
            wrapped_sha256=hashlib.sha256(bytes(key_row[2])).hexdigest(),
            residue=residue,
            gone=gone,
            key_row=key_row,
            thread_rows=thread_rows,
            namespace_rows=ns_rows,
        )

    def _scrub_sqlite(self, key_id: bytes, wrapped: bytes) -> list[dict[str, Any]]:
        conn = self._sqlite
        assert conn is not None and self.path is not None
        conn.execute("VACUUM")
        out: list[dict[str, Any]] = [
            {"action": "key_store.vacuum", "status": "applied",
             "detail": {"key_store": str(self.path), "secure_delete": True}},
        ]  # fmt: skip
        needles = (wrapped, key_id, wrapped[12:28])
        files = [self.path] + [
            Path(str(self.path) + s)
            for s in ("-wal", "-journal", "-shm")
            if Path(str(self.path) + s).exists()
        ]
        hits = [str(f) for f in files if any(n in f.read_bytes() for n in needles)]
        out.append(
            {"action": "key_store.residue_scan", "status": "applied" if not hits else "failed",
             "detail": {"files": len(files), "occurrences": len(hits),
                        "searched": "the wrapped key, its id, a 16-byte slice of its ciphertext"}}
        )  # fmt: skip
        return out
