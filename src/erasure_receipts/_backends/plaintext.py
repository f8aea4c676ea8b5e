"""The rows of a crypto-shred's scope still stored in plaintext in the data database.

A shred destroys a data key; a row of its scope that was never sealed under that key
would stay readable, so the shred refuses while any exists (RECEIPT_SPEC.md 9.16). The
look-up reads both backends' tables (a SQLite connection or a PostgreSQL session).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from .sealing import SEALED_TYPE, SEALED_VALUE_KEY

__all__ = ["plaintext_rows"]


def _rows(handle: Any, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    if isinstance(handle, sqlite3.Connection):
        return handle.execute(sql.replace("%s", "?"), params).fetchall()
    return list(handle.query(sql, params))


def _text(v: Any) -> str:
    if isinstance(v, memoryview):
        v = bytes(v)
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def plaintext_rows(handle: Any, threads: list[str], namespaces: list[str]) -> list[str]:
    """The rows of a shred's scope stored in plaintext in the data database (SQLite
    connection or PostgreSQL session): checkpoints and pending writes of ``threads``
    not sealed, store items of ``namespaces`` (dotted) whose value is not sealed. A key
    destroyed over them would leave them readable."""
    sqlite = isinstance(handle, sqlite3.Connection)
    out: list[str] = []
    if threads:
        marks = ", ".join(["%s"] * len(threads))
        tables = (("checkpoints", "checkpoint_id"), ("writes", "checkpoint_id")) if sqlite else (
            ("checkpoint_blobs", "channel"), ("checkpoint_writes", "checkpoint_id"))  # fmt: skip
        for table, col in tables:
            sql = (f"SELECT thread_id, {col} FROM {table} WHERE thread_id IN ({marks}) "
                   "AND coalesce(type, '') NOT IN (%s, 'empty') ORDER BY 1, 2")  # fmt: skip
            out += [f"{table} thread {_text(t)!r} {col} {_text(c)!r}"
                    for t, c in _rows(handle, sql, [*threads, SEALED_TYPE])]  # fmt: skip
    if namespaces:
        exists = (
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'store'"
            if sqlite
            else "SELECT CAST(to_regclass('store') IS NOT NULL AS int)"
        )
        if _rows(handle, exists, [])[0][0]:
            marks = ", ".join(["%s"] * len(namespaces))
            value = "value" if sqlite else "value::text"
            sql = f"SELECT prefix, key, {value} FROM store WHERE prefix IN ({marks}) ORDER BY 1, 2"
            for prefix, key, v in _rows(handle, sql, list(namespaces)):
                try:
                    obj = json.loads(_text(v))
                except ValueError:
                    obj = None
                if not (isinstance(obj, dict) and set(obj) == {SEALED_VALUE_KEY}):
                    out.append(f"store item {_text(prefix)!r}/{_text(key)!r}")
    return out
