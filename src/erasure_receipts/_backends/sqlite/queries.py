"""SQLite: read-only (or plan-writing) queries over LangGraph's tables - needle search
and locate, threads by metadata, the keep-latest plan, retention candidates.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from ...errors import ConfigurationError
from .. import _table
from .._table import IDLE_HAVING, RUN_IN_FLIGHT
from ..keep_latest import DELTA_KEYS, DeltaChannelError, Head, KeepLatest, plan
from .connection import _id_errors, _quote, text_encoding

__all__ = [
    "NEEDLE_TABLES",
    "RUN_IN_FLIGHT",
    "find_needles",
    "idle_threads",
    "latest_checkpoint",
    "locate",
    "namespace_condition",
    "newest_ids",
    "plan_keep_latest",
    "run_in_flight",
    "threads_by_metadata",
]


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


def _glob_escape(text: str) -> str:
    return text.replace("[", "[[]").replace("*", "[*]").replace("?", "[?]")


def namespace_condition(namespaces: Sequence[Sequence[str]]) -> tuple[str, list[str]]:
    """SQL matching store rows under any of the namespace prefixes.

    Same semantics as ``SqliteStore.search``: the namespace itself or anything below it
    (a "." separator must follow), case-sensitive (GLOB, not LIKE).
    """
    return _table.namespace_condition(
        namespaces, "(prefix = ? OR prefix GLOB ?)", lambda text: _glob_escape(text) + ".*"
    )


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
        f"count(DISTINCT checkpoint_ns) FROM checkpoints {cond} " + IDLE_HAVING.format(p="?"),
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


def run_in_flight(conn: sqlite3.Connection, thread_id: str) -> bool:
    """Whether a run may be going on in the thread (``RUN_IN_FLIGHT``): a retention
    sweep must not erase it as idle, although its latest checkpoint is old."""
    sql = RUN_IN_FLIGHT.format(writes="writes", p="?")
    return conn.execute(sql, (thread_id,)).fetchone() is not None
