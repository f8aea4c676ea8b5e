"""Regressions for defects found in review: each test failed before its fix."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from langgraph.store.sqlite.aio import AsyncSqliteStore
from langgraph.store.sqlite.base import VECTOR_MIGRATIONS

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    ErasureIncompleteError,
    Signer,
    verify_receipt,
)
from scenario import MARKER, marker_in_files, raw_rows

NS = ("users", "alice")
CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]


def recover_args(db: Path, key: Path, archive: Path) -> list[str]:
    return [str(db), "--key", str(key), "--archive", str(archive), "--min-age", "0"]


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


async def test_async_saver_and_store_sharing_one_connection(signer: Signer) -> None:
    import aiosqlite

    async with aiosqlite.connect(":memory:") as conn:
        store = AsyncSqliteStore(conn)
        await store.setup()
        saver = AsyncAttestingSqliteSaver(conn, signer=signer, store=store)
        await saver.aput(cfg("t"), empty_checkpoint(), {}, {})
        for i in range(12):
            await store.aput(NS, f"k{i}", {"i": i})
        receipt = await asyncio.wait_for(saver.aerase_thread("t", store_namespaces=[NS]), 20)
        assert receipt.predicate["methods"]["store"] == "atomic-transaction"
        assert receipt.predicate["pre_state"]["tables"]["store"]["rows"] == 12
        assert await store.asearch(NS, limit=100) == []


def test_receipt_without_archive_is_kept_in_the_journal(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
        put(s, "t")
        r = s.erase_thread("t")
        [kept] = s.journal_receipts("t")
        assert s.journal_receipts("other") == []
    assert kept.to_json() == r.to_json()


def test_cli_erase_to_a_full_stdout_loses_nothing(tmp_path: Path, signer: Signer) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    db, key, archive = tmp_path / "a.db", tmp_path / "k.pem", tmp_path / "archive"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
        put(s, "t")
    with open("/dev/full", "wb") as full:
        res = subprocess.run([*CLI, "erase", str(db), "--thread", "t", "--key", str(key)],
                             stdout=full, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert res.returncode == 3 and "Traceback" not in res.stderr
    assert "receipt recover" in res.stderr
    rec = subprocess.run(
        [*CLI, "recover", *recover_args(db, key, archive)], capture_output=True, text=True
    )
    assert rec.returncode == 0, rec.stderr
    assert "1 exported" in rec.stderr
    [path] = archive.iterdir()
    assert verify_receipt(path.read_bytes(), [signer.public_key]).thread_id == "t"


def test_foreign_key_cascade_cannot_hide_store_vectors(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "app.db"
    store = SqliteStore(sqlite3.connect(db, check_same_thread=False, isolation_level=None))
    store.setup()
    store.put(NS, "note", {"text": MARKER})
    store.conn.executescript(VECTOR_MIGRATIONS[0])
    store.conn.execute(
        "INSERT INTO store_vectors(prefix, key, field_name, embedding) "
        "VALUES ('users.alice', 'note', 'text', x'0000803f0000803f')"
    )
    conn = sqlite3.connect(db, check_same_thread=False)
    conn.execute("PRAGMA foreign_keys=ON")  # a common app-wide connection setting
    saver = AttestingSqliteSaver(conn, signer=signer, store=store)
    put(saver, "t")
    preview = saver.digest_thread("t", [NS])
    r = saver.erase_thread("t", store_namespaces=[NS])
    assert r.pre_digest == preview.digest
    assert r.predicate["pre_state"]["tables"]["store_vectors"]["rows"] == 1
    assert raw_rows(db, "store_vectors", "1", ()) == []
    conn.close()
    store.conn.close()


def test_sweep_error_reports_swept_items_when_rows_remain(tmp_path: Path, signer: Signer) -> None:
    class RacyStore(InMemoryStore):  # another worker writes right after the last page
        late = False

        def search(self, ns: Any, *a: Any, **k: Any) -> Any:
            res = super().search(ns, *a, **k)
            if not res and not self.late:
                self.late = True
                self.put(ns, "late", {"v": "written by another worker"})
            return res

    store = RacyStore()
    for i in range(3):
        store.put(NS, f"k{i}", {"secret": i})
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), signer=signer, store=store
    ) as s:
        put(s, "t")
        with pytest.raises(ErasureIncompleteError, match=r"not restorable.*'store': 3"):
            s.erase_thread("t", store_namespaces=[NS])


def test_store_in_other_file_is_scrubbed_and_named(tmp_path: Path, signer: Signer) -> None:
    sdb = tmp_path / "store.db"
    with (
        SqliteStore.from_conn_string(str(sdb)) as store,
        AttestingSqliteSaver.from_conn_string(str(tmp_path / "cp.db"), signer=signer,
                                              store=store) as saver,
    ):  # fmt: skip
        store.setup()
        store.put(NS, "k", {"v": MARKER})
        r = saver.erase_thread("t", store_namespaces=[NS])
    residue = {x["action"]: x for x in r.predicate["residue"]}
    wal = residue["sqlite.wal_checkpoint.store"]
    assert wal["detail"]["database"] == str(sdb)
    # SqliteStore leaves SQLite's default rollback journal: nothing to checkpoint, and
    # the receipt says exactly that rather than "applied".
    assert (wal["status"], wal["detail"]["journal_mode"]) == ("not_applicable", "delete")
    assert residue["sqlite.secure_delete.store"]["detail"]["value"] == 1
    assert marker_in_files(sdb) == {"store.db": 0, "store.db-wal": 0, "store.db-shm": 0}


def test_memory_store_residue_is_reported_as_skipped(tmp_path: Path, signer: Signer) -> None:
    store = InMemoryStore()
    store.put(NS, "k", {"v": 1})
    with AttestingSqliteSaver.from_conn_string(":memory:", signer=signer, store=store) as s:
        r = s.erase_thread("t", store_namespaces=[NS])
    residue = {x["action"]: x for x in r.predicate["residue"]}
    assert residue["store.scrub"]["status"] == "skipped"


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


def test_verify_json_usage_errors_still_print_one_document(tmp_path: Path) -> None:
    res = subprocess.run([*CLI, "verify", str(tmp_path / "x.json"), "--json"],
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 2
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and doc["exit_code"] == 2 and "key" in doc["error"]


def test_control_characters_in_file_names_cannot_forge_output(tmp_path: Path) -> None:
    pub = tmp_path / "pub.pem"
    pub.write_bytes(Signer.generate().public_pem())
    evil = tmp_path / "a.json\nOK    payroll.json: thread 'bob' erased"
    evil.write_bytes(b"{}")
    res = subprocess.run([*CLI, "verify", str(evil), "--key", str(pub)],
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 1
    assert len(res.stdout.splitlines()) == 1 and res.stdout.startswith("FAIL")
    assert "\\n" in res.stdout


def test_busy_database_while_closing_the_entry_leaves_no_open_transaction(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from erasure_receipts.backends import sqlite as backend
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
