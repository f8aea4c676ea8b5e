"""A thread erasure's transaction: a failed commit rolls back, a receipt too large to verify is
refused before anything is deleted, and a second erasure keeps the first tombstone."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore

from erasure_receipts import AttestingSqliteSaver, ErasureIncompleteError, Signer
from scenario import raw_rows
from test_journal_recovery import journal, put


def test_failed_commit_rolls_back_and_says_so(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "a.db"
    conn = sqlite3.connect(db, check_same_thread=False, timeout=0.2)
    saver = AttestingSqliteSaver(conn, signer=signer)
    put(saver, "victim")
    conn.execute("PRAGMA journal_mode=DELETE")  # a reader's SHARED lock blocks COMMIT
    reader = sqlite3.connect(db)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM checkpoints").fetchone()
    try:
        with pytest.raises(ErasureIncompleteError, match="rolled back"):
            saver.erase_thread("victim")
        assert not conn.in_transaction  # no write lock left behind
    finally:
        reader.rollback()
        reader.close()
    put(saver, "bystander", 2)  # the next write must not commit the aborted erasure
    assert len(raw_rows(db, "checkpoints", "thread_id = ?", ("victim",))) == 1
    assert not saver.is_erased("victim")
    assert journal(db) == []
    conn.close()


def test_preflight_refuses_a_receipt_too_large_to_verify(tmp_path: Path, signer: Signer) -> None:
    store = InMemoryStore()
    namespaces = [("n" * 1000, f"{i}") for i in range(1000)]
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), signer=signer, store=store
    ) as s:
        put(s, "t")
        with pytest.raises(ValueError, match="byte limit"):
            s.erase_thread("t", store_namespaces=namespaces)
        assert raw_rows(tmp_path / "a.db", "checkpoints", "thread_id = ?", ("t",))


def test_second_erasure_keeps_the_first_tombstone(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
        put(s, "t")
        first = s.erase_thread("t")
        second = s.erase_thread("t", allow_empty=True)
        assert second.predicate["pre_state"]["leaves"] == 0
        assert second.predicate["issued_at"] >= first.predicate["issued_at"]
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT receipt_id FROM erasure_tombstones").fetchall() == [
            (first.receipt_id,)
        ]
