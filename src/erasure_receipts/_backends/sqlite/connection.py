"""SQLite: the connection itself - its database file, text encoding, short transactions
- and the statements a saver runs on its own or its store's connection.

These read only the connection's pragmas and ``sqlite_master``: no library table.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "asecure_store_connection",
    "database_path",
    "has_checkpoints_table",
    "secure_store_connection",
    "table_names",
    "text_encoding",
]


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


def database_path(conn: sqlite3.Connection) -> str:
    """Absolute path of the ``main`` database, or ":memory:"."""
    for _, name, path in conn.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return str(path) if path else ":memory:"
    return ":memory:"  # pragma: no cover - every connection has main


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def text_encoding(conn: sqlite3.Connection) -> str:
    """The database's text encoding as a Python codec name (compared in SQL, so no
    ``text_factory`` is involved)."""
    le, be = conn.execute(
        "SELECT encoding = 'UTF-16le', encoding = 'UTF-16be' FROM pragma_encoding"
    ).fetchone()
    return "utf-16-le" if le else "utf-16-be" if be else "utf-8"


def _id_errors(enc: str) -> str:
    """How ids that are not valid text in the database's encoding are decoded, so that
    they round-trip to the same bytes (a thread id written by another writer, e.g.
    ``CAST(X'74ff00' AS TEXT)``): the result holds lone surrogates, which a sweep
    recognises and skips."""
    return "surrogateescape" if enc == "utf-8" else "surrogatepass"


def has_checkpoints_table(conn: sqlite3.Connection) -> bool:
    """Whether the database has LangGraph's ``checkpoints`` table (read-only: a preview
    on a ``mode=ro`` connection tells a LangGraph database from another)."""
    return bool(
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'checkpoints'"
        ).fetchone()
    )


def table_names(conn: sqlite3.Connection) -> set[str]:
    """The database's table names (read-only: works on a ``mode=ro`` connection)."""
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def secure_store_connection(conn: sqlite3.Connection) -> str:
    """Turn ``secure_delete`` on for a store's own connection (overwrites made through it
    must be zeroed too, or old item versions linger in free space: connection-scoped) and
    return its :func:`database_path`. Raises ``sqlite3.Error`` as the statements do."""
    conn.execute("PRAGMA secure_delete = ON")
    return database_path(conn)


async def asecure_store_connection(conn: Any) -> str | None:
    """:func:`secure_store_connection` for an ``aiosqlite.Connection``: ``secure_delete``
    on, then the ``main`` database's path (":memory:" without a file; None if the
    connection lists no ``main``)."""
    await conn.execute("PRAGMA secure_delete = ON")
    async with conn.execute("PRAGMA database_list") as cur:
        rows = await cur.fetchall()
    return next((r[2] or ":memory:" for r in rows if r[1] == "main"), None)
