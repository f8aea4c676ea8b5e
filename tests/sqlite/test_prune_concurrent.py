"""``prune(keep_latest)`` and ``erase_history`` against a concurrent writer whose clock
is behind: a checkpoint it saves while the erasure runs has an id that sorts below the
kept head. It is new data, not history - LangGraph's ``prune`` keeps it - so it is never
deleted, never counted as left over, and the erasure never raises after its commit for
it. Writes that land later for a checkpoint the erasure *did* delete are still removed
(tests/sqlite/test_history_late_writes.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

from erasure_receipts import (
    AttestingPostgresSaver,
    AttestingSqliteSaver,
    Signer,
    verify_receipt,
)
from erasure_receipts._engine import protocol as engine

TID = "busy-thread"


def put(saver: Any, parent: dict[str, Any] | None, step: int, cid: str | None = None) -> Any:
    cfg = {"configurable": {"thread_id": TID, "checkpoint_ns": ""}}
    if parent is not None:
        cfg["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    c = empty_checkpoint()
    if cid is not None:
        c["id"] = cid
    c["channel_values"], c["channel_versions"] = {"x": [f"v{step}"]}, {"x": str(step)}
    return saver.put(cfg, c, {"step": step}, {"x": str(step)})


def history(saver: Any) -> Any:
    """Three checkpoints with a write each; returns the head's config."""
    parent = None
    for step in (1, 2, 3):
        parent = put(saver, parent, step)
        saver.put_writes(parent, [("x", f"w{step}")], f"task-{step}")
    return parent


HOOKS = {
    # right after the commit, before the late-write rounds
    "before_late_rounds": "_remove_late_writes",
    # after the late-write rounds, before the post-state is measured
    "before_post_state": "measure_rows",
}


def run(saver: Any, plain: Any, hook: str, monkeypatch: pytest.MonkeyPatch, api: str) -> None:
    head = history(saver)
    lower = "0" + head["configurable"]["checkpoint_id"][1:]
    saved: list[Any] = []
    name = HOOKS[hook]
    real: Callable[..., Any] = getattr(engine, name)

    def a_writer_behind(*args: Any) -> Any:
        if not saved:
            child = put(plain, head, 4, cid=lower)
            plain.put_writes(child, [("x", "w4")], "task-4")
            saved.append(child)
        return real(*args)

    monkeypatch.setattr(engine, name, a_writer_behind)
    if api == "prune":
        [r] = saver.prune([TID])
    else:
        r = saver.erase_history(TID)
    assert saved, "the concurrent write did not happen"
    assert saver.pending_erasures() == []
    loaded = saver.get_tuple(saved[0])
    assert loaded is not None, "the checkpoint saved during the erasure was deleted"
    assert loaded.checkpoint["channel_values"] == {"x": ["v4"]}
    assert [v for _, _, v in loaded.pending_writes or []] == ["w4"]
    assert loaded.parent_config == head
    assert saver.get_tuple(head) is not None
    # The receipt claims the three-checkpoint history minus the head, nothing more.
    assert r.predicate["pre_state"]["tables"]["checkpoints"]["rows"] == 2
    assert not [c for c in r.predicate["checks"] if c["name"] == "late_writes_removed"]
    assert verify_receipt(r.to_json(), [saver.signer.public_key])


@pytest.mark.parametrize("api", ["prune", "erase_history"])
@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_sqlite_checkpoint_of_a_writer_behind_is_kept(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch, hook: str, api: str
) -> None:
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        plain_conn = sqlite3.connect(db, check_same_thread=False)
        try:
            run(saver, SqliteSaver(plain_conn), hook, monkeypatch, api)
        finally:
            plain_conn.close()
    raw = sqlite3.connect(db)
    assert raw.execute("SELECT count(*) FROM checkpoints").fetchone() == (2,)
    assert raw.execute("SELECT count(*) FROM writes").fetchone() == (2,)


@contextmanager
def pg_savers(pg_db: str, signer: Signer) -> Iterator[tuple[Any, Any]]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        with psycopg.connect(pg_db, autocommit=True, prepare_threshold=0) as conn:
            yield saver, PostgresSaver(conn)


@pytest.mark.parametrize("api", ["prune", "erase_history"])
@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_postgres_checkpoint_of_a_writer_behind_is_kept(
    pg_db: str, signer: Signer, monkeypatch: pytest.MonkeyPatch, hook: str, api: str
) -> None:
    import psycopg

    with pg_savers(pg_db, signer) as (saver, plain):
        run(saver, plain, hook, monkeypatch, api)
    with psycopg.connect(pg_db) as c:
        assert c.execute("SELECT count(*) FROM checkpoints").fetchone() == (2,)
        assert c.execute("SELECT count(*) FROM checkpoint_writes").fetchone() == (2,)
        # the head's x=3 and the new checkpoint's x=4; the history's blobs are gone
        blobs = c.execute("SELECT version FROM checkpoint_blobs ORDER BY 1").fetchall()
        assert blobs == [("3",), ("4",)]


def test_sqlite_late_write_of_a_removed_checkpoint_still_goes_beside_a_new_one(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both at once after the commit: the new lower-id checkpoint stays, the write for
    a deleted checkpoint is removed and attested."""
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        plain = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
        first = put(saver, None, 1)
        head = history_after(saver, first)
        lower = "0" + head["configurable"]["checkpoint_id"][1:]
        real = engine._remove_late_writes

        def both(b: Any) -> Any:
            plain.put_writes(first, [("x", "late for a deleted checkpoint")], "task-late")
            put(plain, head, 9, cid=lower)
            return real(b)

        monkeypatch.setattr(engine, "_remove_late_writes", both)
        r = saver.erase_history(TID)
        [late] = [c for c in r.predicate["checks"] if c["name"] == "late_writes_removed"]
        assert late["detail"].startswith("1 row(s)")
        ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list(None)]
        assert ids == [head["configurable"]["checkpoint_id"], lower]
        plain.conn.close()
    assert verify_receipt(r.to_json(), [signer.public_key])
    assert b"late for a deleted checkpoint" not in db.read_bytes()


def history_after(saver: Any, first: Any) -> Any:
    return put(saver, put(saver, first, 2), 3)


def test_sqlite_recovery_keeps_a_checkpoint_saved_before_it(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the commit: the journal keeps what was deleted, so a recovery after a
    writer behind saved a lower-id checkpoint re-measures those rows only - it keeps the
    new checkpoint and issues the receipt (before: it deleted it as a late write)."""
    from erasure_receipts import ErasureIncompleteError
    from faults import inject

    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        head = history(saver)

        def crash(*args: Any) -> Any:
            raise OSError("disk gone")

        inject(monkeypatch, saver, record_statement=crash)
        with pytest.raises(ErasureIncompleteError, match="recover_receipts"):
            saver.erase_history(TID)
        monkeypatch.undo()
        lower = "0" + head["configurable"]["checkpoint_id"][1:]
        child = put(saver, head, 4, cid=lower)
        saver.put_writes(child, [("x", "w4")], "task-4")
        (r,) = saver.recover_receipts(min_age_seconds=0)
        loaded = saver.get_tuple(child)
        assert loaded is not None and [v for _, _, v in loaded.pending_writes or []] == ["w4"]
        assert saver.pending_erasures() == []
    assert verify_receipt(r.to_json(), [signer.public_key])
    assert r.predicate["pre_state"]["tables"]["checkpoints"]["rows"] == 2


def test_postgres_blob_saved_again_after_the_commit_is_kept(
    pg_db: str, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint saved after the commit may store a blob under a key the erasure
    deleted (the same channel version again): it is that checkpoint's data and stays."""
    with pg_savers(pg_db, signer) as (saver, plain):
        head = history(saver)
        real = engine._remove_late_writes
        saved: list[Any] = []

        def a_writer_reusing_a_version(b: Any) -> Any:
            cfg = {"configurable": {**head["configurable"], "thread_id": TID}}
            c = empty_checkpoint()
            c["channel_values"], c["channel_versions"] = {"x": ["again"]}, {"x": "2"}
            saved.append(plain.put(cfg, c, {"step": 4}, {"x": "2"}))
            return real(b)

        monkeypatch.setattr(engine, "_remove_late_writes", a_writer_reusing_a_version)
        r = saver.erase_history(TID)
        loaded = saver.get_tuple(saved[0])
        assert loaded is not None and loaded.checkpoint["channel_values"] == {"x": ["again"]}
        assert verify_receipt(r.to_json(), [signer.public_key])
