"""Erasure journal entries and their recovery: a receipt kept in the journal without an archive,
recovery past an entry it cannot attest, an archived receipt of another entry, a busy
database while closing an entry, young entries left to their process, a missing store."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.memory import InMemoryStore

from erasure_receipts import AttestingSqliteSaver, ErasureIncompleteError, Signer
from scenario import MARKER

NS = ("users", "alice")


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def put(saver: Any, thread: str, i: int = 1) -> None:
    cp = empty_checkpoint()
    cp["id"] = f"1ef{i:029d}"
    cp["channel_values"] = {"v": MARKER}
    saver.put(cfg(thread), cp, {}, {})


def journal(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT thread_id, receipt_sha256 FROM erasure_journal").fetchall()


def test_receipt_without_archive_is_kept_in_the_journal(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
        put(s, "t")
        r = s.erase_thread("t")
        [kept] = s.journal_receipts("t")
        assert s.journal_receipts("other") == []
    assert kept.to_json() == r.to_json()


def test_recovery_continues_past_an_entry_it_cannot_attest(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from faults import inject

    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
        put(s, "t1")
        put(s, "t2")
        # The database refuses the statement: both erasures commit with journal entries
        # only, so recovery must re-verify their scopes.
        locked = sqlite3.OperationalError("injected: database is locked")
        inject(monkeypatch, s, record_statement=locked)
        for t in ("t1", "t2"):
            with pytest.raises(ErasureIncompleteError, match=r"no receipt .*database is locked"):
                s.erase_thread(t, tombstone=False)
        monkeypatch.undo()
        assert not s.conn.in_transaction
        put(s, "t1", 9)  # t1 reused: its erasure can no longer be re-verified
        with pytest.raises(ErasureIncompleteError, match="1 journaled erasure") as ei:
            s.recover_receipts(min_age_seconds=0)
        [r2] = ei.value.recovered
        assert r2.thread_id == "t2"
        names = [c["name"] for c in r2.predicate["checks"]]
        assert "raw_rows_zero_at_recovery" in names and "raw_rows_zero_after_commit" not in names
    assert sorted(journal(db)) == [("t1", None), ("t2", journal(db)[1][1])]
    assert journal(db)[1][1] is not None


def test_recovery_rejects_an_archived_receipt_of_another_entry(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from faults import inject

    db, archive = tmp_path / "a.db", tmp_path / "r"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as s:
        put(s, "t1")
        put(s, "t2")
        r1 = s.erase_thread("t1")
        inject(monkeypatch, s, mark_issued=sqlite3.OperationalError("injected"))
        r2 = s.erase_thread("t2")
        monkeypatch.undo()
        (archive / f"{r2.receipt_id}.json").write_bytes(r1.to_json())  # wrong receipt
        with pytest.raises(ErasureIncompleteError, match="not overwriting"):
            s.recover_receipts(min_age_seconds=0)
    assert [row for row in journal(db) if row[1] is None] == [("t2", None)]


def test_busy_database_while_closing_the_entry_leaves_no_open_transaction(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from erasure_receipts._backends import sqlite as backend
    from faults import inject

    db = tmp_path / "a.db"
    conn = sqlite3.connect(db, check_same_thread=False, timeout=0.2)
    s = AttestingSqliteSaver(conn, signer=signer)
    put(s, "t")
    blocker = sqlite3.connect(db, isolation_level=None)

    def busy_mark(*a: Any) -> None:
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the database
        try:
            backend.mark_issued(*a)
        finally:
            blocker.execute("ROLLBACK")

    inject(monkeypatch, s, mark_issued=busy_mark)
    first = s.erase_thread("t")  # returned: signed from the journaled statement
    monkeypatch.undo()
    assert not conn.in_transaction
    put(s, "other")  # the connection is usable
    [again] = s.recover_receipts(min_age_seconds=0)
    assert again.to_json() == first.to_json()  # recovery re-signs the same statement
    conn.close()
    blocker.close()


def test_recovery_leaves_young_entries_to_the_process_still_signing(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from faults import inject

    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
        put(s, "t")
        inject(monkeypatch, s, record_statement=sqlite3.OperationalError("injected"))
        with pytest.raises(ErasureIncompleteError):
            s.erase_thread("t")
        monkeypatch.undo()
        assert s.recover_receipts() == []  # default lease: 300 s
        assert journal(db) == [("t", None)]
        assert len(s.recover_receipts(min_age_seconds=0)) == 1


def test_recovery_without_the_store_reports_instead_of_crashing(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from faults import inject

    db, store = tmp_path / "a.db", InMemoryStore()
    store.put(NS, "k", {"v": 1})
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as s:
        put(s, "a")
        put(s, "b")
        inject(monkeypatch, s, record_statement=sqlite3.OperationalError("injected"))
        for t, ns in (("a", [NS]), ("b", [])):
            with pytest.raises(ErasureIncompleteError):
                s.erase_thread(t, store_namespaces=ns)
        monkeypatch.undo()
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as bare:  # no store=
        with pytest.raises(ErasureIncompleteError, match="same store=") as ei:
            bare.recover_receipts(min_age_seconds=0)
        assert [r.thread_id for r in ei.value.recovered] == ["b"]
