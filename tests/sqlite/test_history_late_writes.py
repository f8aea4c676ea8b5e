"""A graph still running on a thread saves a node's writes in the background: writes for
a checkpoint older than the kept one can land right after ``erase_history`` commits
(LangGraph does this). They must neither strand the erasure without a receipt nor
survive it: they are removed too, measured, and the receipt says so."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

from erasure_receipts import AttestingPostgresSaver, AttestingSqliteSaver, Signer, verify_receipt


def two_checkpoints(saver: Any, tid: str) -> tuple[Any, Any]:
    cfg = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    c1 = empty_checkpoint()
    c1["channel_values"], c1["channel_versions"] = {"x": "v1"}, {"x": "1"}
    cfg1 = saver.put(cfg, c1, {"step": 1}, {"x": "1"})
    c2 = empty_checkpoint()
    c2["channel_values"], c2["channel_versions"] = {"x": "v2"}, {"x": "2"}
    return cfg1, saver.put(cfg1, c2, {"step": 2}, {"x": "2"})


def run(saver: Any, plain: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    tid = "busy-thread"
    cfg1, cfg2 = two_checkpoints(saver, tid)
    from erasure_receipts._engine import protocol as engine

    real = engine._remove_late_writes

    def a_late_write_lands(b: Any) -> Any:  # right after the commit
        plain.put_writes(cfg1, [("x", "late write for step 1 carrying SECRET")], "task-1")
        return real(b)

    monkeypatch.setattr(engine, "_remove_late_writes", a_late_write_lands)
    r = saver.erase_history(tid, needles=["SECRET"])
    assert saver.pending_erasures() == []
    [check] = [c for c in r.predicate["checks"] if c["name"] == "late_writes_removed"]
    assert check["detail"].startswith("1 row(s)")
    kept = [
        t.config["configurable"]["checkpoint_id"]
        for t in saver.list({"configurable": {"thread_id": tid}})
    ]
    assert kept == [cfg2["configurable"]["checkpoint_id"]]
    return r


def test_sqlite_late_write_is_removed_and_attested(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        plain_conn = sqlite3.connect(db, check_same_thread=False)
        r = run(saver, SqliteSaver(plain_conn), monkeypatch)
        plain_conn.close()
    assert verify_receipt(r.to_json(), [signer.public_key])
    assert b"SECRET" not in db.read_bytes()
    count = sqlite3.connect(db).execute("SELECT count(*) FROM writes").fetchone()
    assert count == (0,)


def test_postgres_late_write_is_removed_and_attested(
    pg_db: str, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        plain = PostgresSaver(psycopg.connect(pg_db, autocommit=True, prepare_threshold=0))
        r = run(saver, plain, monkeypatch)
    assert verify_receipt(r.to_json(), [signer.public_key])
    with psycopg.connect(pg_db) as c:
        assert c.execute("SELECT count(*) FROM checkpoint_writes").fetchone() == (0,)
