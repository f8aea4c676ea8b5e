"""PostgreSQL: read-only (or plan-writing) queries over LangGraph's tables - needle search
and locate, threads by metadata, the keep-latest plan, retention candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _table
from .._table import IDLE_HAVING, RUN_IN_FLIGHT
from ..keep_latest import DeltaChannelError, Head, KeepLatest, plan
from .leaves import _TEXT_TYPES, describe
from .session import Session, text_of

__all__ = [
    "NEEDLE_TABLES",
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


def namespace_condition(namespaces: Sequence[Sequence[str]]) -> tuple[str, list[str]]:
    """SQL matching ``store`` rows under the prefixes, as ``PostgresStore.search`` does:
    the namespace itself or anything below it (``LIKE 'a.b.%'``, metacharacters escaped)."""
    return _table.namespace_condition(
        namespaces,
        "(prefix = %s OR prefix LIKE %s ESCAPE '\\')",
        lambda text: _like_escape(text) + ".%",
    )


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


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


def newest_ids(session: Session, threads: Sequence[str]) -> tuple[dict[str, str], int]:
    """Per thread, the highest checkpoint id (code-point order) of its checkpoints and
    writes, if any; and how many checkpoints the threads have (in the same round trip:
    the measuring reads then know a large scope before its first table)."""
    out: dict[str, str] = {}
    total = 0
    # One round trip for all the threads, each looked up by its own index scans.
    rows = session.query(
        'SELECT u.t, (SELECT max(m COLLATE "C") FROM (SELECT max(checkpoint_id COLLATE "C") '
        "AS m FROM checkpoints WHERE thread_id = u.t UNION ALL SELECT max(checkpoint_id "
        'COLLATE "C") FROM checkpoint_writes WHERE thread_id = u.t) s), '
        "(SELECT count(*) FROM checkpoints WHERE thread_id = u.t) "
        "FROM unnest(%s::text[]) AS u(t)",
        (list(dict.fromkeys(threads)),),
    )
    for t, newest, checkpoints in rows:
        total += int(checkpoints)
        if newest is not None:
            out[text_of(t)] = text_of(newest)
    return out, total


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
        f"FROM checkpoints {cond} " + IDLE_HAVING.format(p="%s"),
        [*params, before, limit],
    )
    return [(str(t), str(m), int(n), int(k)) for t, m, n, k in rows]


def latest_checkpoint(session: Session, thread_id: str) -> str | None:
    """The thread's latest checkpoint id over every namespace."""
    rows = session.query("SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = %s",
                         (thread_id,))  # fmt: skip
    return None if not rows or rows[0][0] is None else str(rows[0][0])


def idle_states(session: Session, threads: Sequence[str]) -> dict[str, tuple[str | None, bool]]:
    """:func:`latest_checkpoint` and :func:`run_in_flight` of several threads in one
    round trip (a batched sweep's check under the lock), each by the same look-ups."""
    in_flight = RUN_IN_FLIGHT.format(writes="checkpoint_writes", p="u.t")
    rows = session.query(
        "SELECT u.t, (SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = u.t), "
        f"EXISTS ({in_flight}) FROM unnest(%s::text[]) AS u(t)",
        (list(dict.fromkeys(threads)),),
    )
    return {text_of(t): (None if latest is None else text_of(latest), bool(busy))
            for t, latest, busy in rows}  # fmt: skip


def run_in_flight(session: Session, thread_id: str) -> bool:
    """Whether a run may be going on in the thread (see the SQLite backend's
    ``run_in_flight``)."""
    sql = RUN_IN_FLIGHT.format(writes="checkpoint_writes", p="%s")
    return bool(session.query(sql, (thread_id,)))
