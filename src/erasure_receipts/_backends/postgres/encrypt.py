"""Migrating a plaintext PostgreSQL LangGraph database to per-subject encryption
(``receipt encrypt DSN``): every row of ``checkpoints``, ``checkpoint_blobs`` and
``checkpoint_writes`` that is not sealed is rewritten as the encrypting saver
(``AttestingPostgresSaver(encryption=...)``) would have written it, in one transaction
that holds off writers (the three tables locked ``SHARE ROW EXCLUSIVE``; readers go on):

* a primitive channel value (``str``/``int``/``float``/``bool``/``None``), which the
  parent keeps in the checkpoint's JSON, moves out of it into a sealed
  ``checkpoint_blobs`` row (thread, namespace, channel, version) - the encrypting saver's
  one more blob row per checkpoint; a ``DeltaChannel`` snapshot's inline ``true`` marker
  (a blob row behind it) stays;
* a blob (``type`` not ``empty``) and a pending write are sealed in place to their row.

A thread's key is its subject's, from the checkpoint metadata (``{"configurable":
metadata}``, so the default ``subject_of`` finds ``user_id``), bound before its first
row is sealed; a thread with nothing left to seal is not touched (its key is not looked
up: a shredded thread stays as it is). After the commit the three tables are rewritten
(``VACUUM (FULL)``, on an autocommit connection) so no live page keeps a plaintext row
version; the server's WAL, replicas and backups taken before keep the plaintext.
Store items (table ``store``) are not sealed: they are counted and stay plaintext.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

from ..sealing import SEALED_TYPE, SEALED_VALUE_KEY, Encryption, Migrated

__all__ = ["TABLES", "encrypt_database", "has_checkpoint_tables"]

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
LOCK_TIMEOUT = "30s"
"""Longest wait for the tables' lock (a writer in a long transaction holds it off)."""

_PRIMITIVES = (str, int, float, bool)


def has_checkpoint_tables(conn: Any) -> bool:
    """Whether the database has the PostgreSQL saver's three tables."""
    with conn.cursor(row_factory=tuple_row) as cur:
        for table in TABLES:
            cur.execute("SELECT to_regclass(%s) IS NOT NULL", (table,))
            row = cur.fetchone()
            if not (row and row[0]):
                return False
    return True


def _config(thread_id: str, metadata: Any) -> RunnableConfig:
    """The configuration a write of the thread had: its metadata's keys (LangGraph
    copies the configurable ones, e.g. ``user_id``) and the thread id."""
    meta = metadata if isinstance(metadata, dict) else {}
    return {"configurable": {**meta, "thread_id": thread_id}}


class _Run:
    """One migration's state: the connection's cursor, counts, bound threads."""

    def __init__(
        self,
        cur: Any,
        encryption: Encryption,
        inner: SerializerProtocol,
        progress: Callable[[int, int], None] | None,
    ) -> None:
        self.cur = cur
        self.encryption = encryption
        self.inner = inner
        self.progress = progress
        self.total = self.done = 0
        self.threads: set[str] = set()
        self.bound: set[str] = set()
        self.configs: dict[str, list[RunnableConfig]] = {}

    def sealed_one(self, thread_id: str) -> None:
        self.threads.add(thread_id)
        if self.progress is not None:
            self.progress(self.done, self.total)

    def bind(self, thread_id: str) -> None:
        """Bind the thread's key as the encrypting saver's writes would have: under the
        subject of each of its checkpoints, in order (a thread written as two subjects
        is refused, ``ConfigurationError``); a thread without a checkpoint or a subject
        gets a key of its own."""
        if thread_id in self.bound:
            return
        for config in self.configs.get(thread_id) or [_config(thread_id, None)]:
            self.encryption.bind(config)
        self.bound.add(thread_id)

    def seal(self, thread_id: str, obj: Any, identity: tuple[str, ...]) -> bytes:
        self.bind(thread_id)
        plain: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        return self.encryption.seal(self.inner, obj, plain, identity).blob


def encrypt_database(
    conn: Any,
    encryption: Encryption,
    inner: SerializerProtocol,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Migrated:
    """Seal every plaintext row of ``conn``'s checkpoint tables in one transaction."""
    with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        cur.execute(f"LOCK TABLE {', '.join(TABLES)} IN SHARE ROW EXCLUSIVE MODE")
        run = _Run(cur, encryption, inner, progress)
        cur.execute(
            "SELECT (SELECT count(*) FROM checkpoints) + (SELECT count(*) FROM "
            "checkpoint_blobs) + (SELECT count(*) FROM checkpoint_writes)"
        )
        run.total = int(cur.fetchone()[0])
        cps, created = _checkpoints(run)
        blobs, blobs_before = _blobs(run, created)
        writes, writes_before = _writes(run)
        store = _store_plaintext(cur)
    vacuumed = False
    if (cps or blobs or writes) and conn.autocommit:
        with conn.cursor() as cur:
            for table in TABLES:
                cur.execute(f"VACUUM (FULL) {table}")
        vacuumed = True
    return Migrated(checkpoints=cps, writes=writes, already_sealed=blobs_before + writes_before,
                    threads=len(run.threads), store_plaintext=store,
                    blobs=blobs + len(created), vacuumed=vacuumed)  # fmt: skip


def _checkpoints(run: _Run) -> tuple[int, set[tuple[str, str, str, str]]]:
    """Move each checkpoint's inline values into sealed blob rows; the checkpoints
    rewritten and the blob rows created."""
    cur = run.cur
    cur.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, checkpoint -> 'channel_values', "
        "checkpoint -> 'channel_versions', metadata FROM checkpoints "
        'ORDER BY thread_id COLLATE "C", checkpoint_ns COLLATE "C", checkpoint_id COLLATE "C"'
    )
    rows = cur.fetchall()
    for t, _ns, _cid, _values, _versions, metadata in rows:
        config = _config(str(t), metadata)
        subjects = run.configs.setdefault(str(t), [])
        if not subjects or run.encryption.subject_of(config) != run.encryption.subject_of(
            subjects[-1]
        ):
            subjects.append(config)
    created: set[tuple[str, str, str, str]] = set()
    rewritten = 0
    for t, ns, cid, values, versions, _metadata in rows:
        run.done += 1
        t, ns = str(t), str(ns)
        values = values if isinstance(values, dict) else {}
        versions = versions if isinstance(versions, dict) else {}
        kept: dict[str, Any] = {}
        moved = False
        for ch, v in values.items():
            if ch not in versions or not (v is None or isinstance(v, _PRIMITIVES)):
                kept[ch] = v  # not the parent's inline primitive: left as it is
                continue
            key = (t, ns, str(ch), str(versions[ch]))
            if v is True and key not in created and _blob_exists(run.cur, key):
                kept[ch] = v  # a DeltaChannel snapshot's marker: its value is the blob
                continue
            moved = True
            if key in created:
                continue  # an earlier checkpoint of the same version moved it
            blob = run.seal(t, v, ("blob", *key))
            cur.execute(
                "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, "
                "type, blob) VALUES (%s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING",
                (*key, SEALED_TYPE, blob),
            )
            created.add(key)
        if not moved:
            continue
        cur.execute(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_values}', %s) "
            "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s",
            (Jsonb(kept), t, ns, cid),
        )
        rewritten += 1
        run.sealed_one(t)
    return rewritten, created


def _blob_exists(cur: Any, key: tuple[str, str, str, str]) -> bool:
    cur.execute(
        "SELECT 1 FROM checkpoint_blobs WHERE thread_id = %s AND checkpoint_ns = %s "
        "AND channel = %s AND version = %s",
        key,
    )
    return cur.fetchone() is not None


def _blobs(run: _Run, created: set[tuple[str, str, str, str]]) -> tuple[int, int]:
    """Seal each blob row in place; (sealed now, sealed before)."""
    cur = run.cur
    cur.execute(
        "SELECT thread_id, checkpoint_ns, channel, version, type FROM checkpoint_blobs "
        'ORDER BY thread_id COLLATE "C", checkpoint_ns COLLATE "C", channel COLLATE "C", '
        'version COLLATE "C"'
    )
    sealed = before = 0
    for t, ns, ch, ver, type_ in cur.fetchall():
        key = (str(t), str(ns), str(ch), str(ver))
        if key in created:
            continue  # counted in the total as rows of the checkpoints they left
        run.done += 1
        if type_ == SEALED_TYPE:
            before += 1
            continue
        if type_ == "empty":
            continue  # no value (the encrypting saver writes the same row)
        cur.execute(
            "SELECT type, blob FROM checkpoint_blobs WHERE thread_id = %s AND "
            "checkpoint_ns = %s AND channel = %s AND version = %s",
            key,
        )
        type_, value = cur.fetchone()
        obj = run.inner.loads_typed((type_, bytes(value) if value is not None else b""))
        blob = run.seal(key[0], obj, ("blob", *key))
        cur.execute(
            "UPDATE checkpoint_blobs SET type = %s, blob = %s WHERE thread_id = %s AND "
            "checkpoint_ns = %s AND channel = %s AND version = %s",
            (SEALED_TYPE, blob, *key),
        )
        sealed += 1
        run.sealed_one(key[0])
    return sealed, before


def _writes(run: _Run) -> tuple[int, int]:
    """Seal each pending write in place; (sealed now, sealed before)."""
    cur = run.cur
    cur.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type "
        'FROM checkpoint_writes ORDER BY thread_id COLLATE "C", checkpoint_ns COLLATE "C", '
        'checkpoint_id COLLATE "C", task_id COLLATE "C", idx'
    )
    sealed = before = 0
    for t, ns, cid, task, idx, ch, type_ in cur.fetchall():
        run.done += 1
        if type_ == SEALED_TYPE:
            before += 1
            continue
        pk = (t, ns, cid, task, idx)
        cur.execute(
            "SELECT type, blob FROM checkpoint_writes WHERE thread_id = %s AND "
            "checkpoint_ns = %s AND checkpoint_id = %s AND task_id = %s AND idx = %s",
            pk,
        )
        type_, value = cur.fetchone()
        obj = run.inner.loads_typed((type_, bytes(value)))
        identity = ("write", str(t), str(ns), str(cid), str(task), str(ch))
        blob = run.seal(str(t), obj, identity)
        cur.execute(
            "UPDATE checkpoint_writes SET type = %s, blob = %s WHERE thread_id = %s AND "
            "checkpoint_ns = %s AND checkpoint_id = %s AND task_id = %s AND idx = %s",
            (SEALED_TYPE, blob, *pk),
        )
        sealed += 1
        run.sealed_one(str(t))
    return sealed, before


def _store_plaintext(cur: Any) -> int:
    """Store items (``PostgresStore``'s ``store`` table) whose value is not sealed."""
    cur.execute("SELECT to_regclass('store') IS NOT NULL")
    row = cur.fetchone()
    if not (row and row[0]):
        return 0
    cur.execute(
        "SELECT count(*) FROM store WHERE NOT (jsonb_typeof(value) = 'object' AND value ? %s "
        "AND (SELECT count(*) FROM jsonb_object_keys(value)) = 1)",
        (SEALED_VALUE_KEY,),
    )
    return int(cur.fetchone()[0])
