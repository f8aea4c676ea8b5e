"""Migrating a plaintext SQLite LangGraph database to per-subject encryption
(``receipt encrypt``): every checkpoint and pending write that is not sealed is read with
the application serializer, sealed to its row, and written back in place, in one write
transaction; then ``VACUUM`` (with ``secure_delete``) rewrites the file so no plaintext
page survives in it. Copies of the file taken before (backups) keep the plaintext.
Store items (table ``store``) are not sealed: they are counted and stay plaintext.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..sealing import SEALED_TYPE, SEALED_VALUE_KEY, Encryption, Migrated

__all__ = ["Migrated", "encrypt_database"]


def _config(thread_id: str, metadata: Any) -> RunnableConfig:
    """The configuration a write of the thread had: its metadata's configurable keys
    (LangGraph copies them, e.g. ``user_id``) and the thread id."""
    meta: dict[str, Any] = {}
    if metadata is not None:
        try:
            loaded = json.loads(metadata)
        except (ValueError, TypeError):
            loaded = {}
        if isinstance(loaded, dict):
            meta = loaded
    return {"configurable": {**meta, "thread_id": thread_id}}


def encrypt_database(
    conn: sqlite3.Connection,
    encryption: Encryption,
    inner: SerializerProtocol,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Migrated:
    """Seal every plaintext row of ``conn``'s ``checkpoints`` and ``writes`` in place."""
    total = conn.execute(
        "SELECT (SELECT count(*) FROM checkpoints) + (SELECT count(*) FROM writes)"
    ).fetchone()[0]
    done = sealed_before = cps = ws = 0
    threads: set[str] = set()
    conn.execute("PRAGMA secure_delete=ON")
    if conn.in_transaction:
        conn.commit()
    conn.execute("BEGIN IMMEDIATE")
    try:
        keys = conn.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints "
            "ORDER BY thread_id, checkpoint_ns, checkpoint_id"
        ).fetchall()
        for t, ns, cid in keys:
            type_, blob, metadata = conn.execute(
                "SELECT type, checkpoint, metadata FROM checkpoints "
                "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                (t, ns, cid),
            ).fetchone()
            done += 1
            if type_ == SEALED_TYPE:
                sealed_before += 1
                continue
            obj = inner.loads_typed((type_, blob))
            identity = ("checkpoint", str(t), str(ns), str(cid))
            sealed = encryption.seal(inner, obj, _config(str(t), metadata), identity)
            conn.execute(
                "UPDATE checkpoints SET type = ?, checkpoint = ? "
                "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                (SEALED_TYPE, sealed.blob, t, ns, cid),
            )
            cps += 1
            threads.add(str(t))
            if progress is not None:
                progress(done, total)
        wkeys = conn.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx FROM writes "
            "ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx"
        ).fetchall()
        for t, ns, cid, task, idx in wkeys:
            channel, type_, value = conn.execute(
                "SELECT channel, type, value FROM writes WHERE thread_id = ? AND "
                "checkpoint_ns = ? AND checkpoint_id = ? AND task_id = ? AND idx = ?",
                (t, ns, cid, task, idx),
            ).fetchone()
            done += 1
            if type_ == SEALED_TYPE:
                sealed_before += 1
                continue
            obj = inner.loads_typed((type_, value))
            wid = ("write", str(t), str(ns), str(cid), str(task), str(channel))
            sealed = encryption.seal(inner, obj, _config(str(t), None), wid)
            conn.execute(
                "UPDATE writes SET type = ?, value = ? WHERE thread_id = ? AND "
                "checkpoint_ns = ? AND checkpoint_id = ? AND task_id = ? AND idx = ?",
                (SEALED_TYPE, sealed.blob, t, ns, cid, task, idx),
            )
            ws += 1
            threads.add(str(t))
            if progress is not None:
                progress(done, total)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    store = 0
    has_store = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'store'"
    if conn.execute(has_store).fetchone():
        for (value,) in conn.execute("SELECT value FROM store"):
            try:
                obj = json.loads(value)
            except (ValueError, TypeError):
                obj = None
            store += not (isinstance(obj, dict) and set(obj) == {SEALED_VALUE_KEY})
    if cps or ws:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")  # no page of the file keeps a plaintext copy
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return Migrated(checkpoints=cps, writes=ws, already_sealed=sealed_before,
                    threads=len(threads), store_plaintext=store)  # fmt: skip
