"""The SQLite residue scan: erased bytes left in live pages are stated in the receipt and
removed by the verified scan, also for recovered receipts, under kill -9, with a reader
pinning the WAL, in UTF-16 files and in vacuum mode. Each test asserts on raw files, raw
rows or the signed receipt, not only on return values.
"""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import (
    AttestingSqliteSaver,
    ConfigurationError,
    ErasureIncompleteError,
    Signer,
    verify_receipt,
)
from erasure_receipts._backends.sqlite_residue import Needles, residue_scan
from faults import inject
from scenario import MARKER, build_graph, human, marker_in_files, raw_rows

NS = ("users", "alice")


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def put(saver: Any, thread: str, i: int, payload: str) -> None:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": payload}
    cp["id"] = f"1ef{i:029d}"
    saver.put(cfg(thread), cp, {"step": i}, {})


def residue(receipt: Any, action: str) -> dict[str, Any]:
    [entry] = [r for r in receipt.predicate["residue"] if r["action"] == action]
    return entry


# -- erased bytes in live pages: stated, and removed by the verified residue scan ------


def _interleaved_db(path: Path, seed: int) -> tuple[sqlite3.Connection, dict[str, list[bytes]]]:
    """Rows of several 'threads' interleaved in one rowid table, like LangGraph's."""
    rnd = random.Random(seed)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA secure_delete=ON")
    conn.execute("CREATE TABLE t (thread TEXT, id TEXT, b BLOB, PRIMARY KEY (thread, id))")
    markers: dict[str, list[bytes]] = {}
    for i in range(3000):
        th = f"thr{rnd.randrange(3)}" if rnd.random() < 0.5 else "victim"
        m = rnd.randbytes(24).hex().encode()
        markers.setdefault(th, []).append(m)
        conn.execute(
            "INSERT INTO t VALUES (?, ?, ?)",
            (th, f"{i:06d}", m + rnd.randbytes(rnd.randint(10, 400))),
        )
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return conn, markers


def test_secure_delete_leaves_copies_the_scan_finds_and_vacuum_removes(tmp_path: Path) -> None:
    """Reproduced with plain sqlite3: after one DELETE with
    secure_delete and a TRUNCATE checkpoint, erased rows survive in live pages. The scan
    must find every such case, and after it no erased marker is in the file."""
    left_by_sqlite = 0
    for seed in range(12):
        path = tmp_path / f"{seed}.db"
        conn, markers = _interleaved_db(path, seed)
        needles = Needles(exclude=["victim"])
        for row in conn.execute("SELECT * FROM t WHERE thread = 'victim' ORDER BY thread, id"):
            needles.add_row(row)
        conn.execute("DELETE FROM t WHERE thread = 'victim'")
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        data = path.read_bytes()
        truth = sum(data.count(m) for m in markers["victim"])
        entry = residue_scan(conn, str(path), needles)
        after = path.read_bytes()
        assert entry["status"] == "applied", entry
        if truth:
            left_by_sqlite += 1
            assert entry["detail"]["copies_before"] > 0 and entry["detail"]["vacuum"] is True
        assert entry["detail"]["copies_after"] == 0
        assert sum(after.count(m) for m in markers["victim"]) == 0
        # other rows are untouched by the VACUUM
        assert all(after.count(m) >= 1 for th in ("thr0", "thr1") for m in markers[th])
        conn.close()
    assert left_by_sqlite >= 3  # the bug is real, so the test is not vacuous


def _many_threads(saver: Any, threads: int, per: int) -> dict[str, str]:
    marks = {f"t{k}": f"MARK-{k:02d}-" + os.urandom(12).hex() for k in range(threads)}
    for i in range(per):
        for t, m in marks.items():
            put(saver, t, i, f"{m} turn {i} " + "x" * (50 + 7 * i))
    return marks


def test_default_receipt_says_live_page_space_was_not_scrubbed(
    tmp_path: Path, signer: Signer
) -> None:
    with AttestingSqliteSaver.from_conn_string(str(tmp_path / "a.db"), signer=signer) as s:
        _many_threads(s, 2, 3)
        r = s.erase_thread("t0")
    entry = residue(r, "sqlite.live_page_free_space")
    assert entry["status"] == "skipped" and "VACUUM" in entry["detail"]["reason"]
    assert not [x for x in r.predicate["residue"] if x["action"] == "residue_scan"]


def test_residue_scan_leaves_no_erased_content_in_any_file(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, residue_scan=True) as s:
        marks = _many_threads(s, 8, 25)
        receipts = [s.erase_thread(t) for t in ("t1", "t4", "t6")]
        # per-call override: off for this one
        plain = s.erase_thread("t2", residue_scan=False)
    for r, t in zip(receipts, ("t1", "t4", "t6"), strict=True):
        entry = residue(r, "residue_scan")
        assert entry["status"] == "applied", entry
        assert entry["detail"]["copies_after"] == 0 and entry["detail"]["bytes_scanned"] > 0
        assert entry["detail"]["needles"] > 0
        assert verify_receipt(r.to_json(), [signer.public_key]).thread_id == t
        assert sum(marker_in_files(db, marks[t]).values()) == 0
    assert residue(plain, "sqlite.live_page_free_space")["status"] == "skipped"
    for t in ("t0", "t3", "t5", "t7"):  # the others are intact
        assert len(raw_rows(db, "checkpoints", "thread_id = ?", (t,))) == 25


def test_residue_scan_with_a_real_graph_and_same_file_store(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "app.db"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, store=store, residue_scan=True
        ) as saver,
    ):
        store.setup()
        graph = build_graph(saver, store)
        for tid in ("alice-chat", "bob-chat"):
            for text in (f"my SSN is {MARKER}" if tid == "alice-chat" else "hello", "more"):
                graph.invoke(human(text), {"configurable": {"thread_id": tid, "user_id": "alice"}})
        assert sum(marker_in_files(db).values()) > 0
        r = saver.erase_thread("alice-chat", store_namespaces=[NS])
    assert residue(r, "residue_scan")["status"] == "applied"
    assert sum(marker_in_files(db).values()) == 0


def test_residue_scan_is_partial_while_a_reader_pins_the_wal(
    tmp_path: Path, signer: Signer
) -> None:
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, residue_scan=True) as s:
        marks = _many_threads(s, 3, 10)
        reader = sqlite3.connect(db)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM checkpoints").fetchone()  # holds a snapshot
        try:
            r = s.erase_thread("t1")
            # the truth the receipt must not deny: the pinned WAL still holds the thread
            assert marker_in_files(db, marks["t1"])["a.db-wal"] > 0
        finally:
            reader.rollback()
            reader.close()
    entry = residue(r, "residue_scan")
    assert entry["status"] == "partial", entry
    assert "WAL could not be checkpointed" in entry["detail"]["reason"]


def test_recovered_receipt_scans_conservatively(
    tmp_path: Path, signer: Signer, monkeypatch
) -> None:
    db = tmp_path / "a.db"
    from erasure_receipts import _engine as engine

    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, residue_scan=True) as s:
        marks = _many_threads(s, 4, 20)

        def crash(*a: Any, **k: Any) -> Any:
            raise OSError("process died after commit")

        monkeypatch.setattr("erasure_receipts._engine.eraser.sign_and_archive", crash)
        with pytest.raises(ErasureIncompleteError):
            s.erase_thread("t2")
        monkeypatch.setattr(
            "erasure_receipts._engine.eraser.sign_and_archive", engine.sign_and_archive
        )
        # The statement was journaled with the scan's result: re-signing is byte-identical.
        [r] = s.recover_receipts(min_age_seconds=0)
    assert residue(r, "residue_scan")["status"] == "applied"
    assert sum(marker_in_files(db, marks["t2"]).values()) == 0


def test_recovery_without_needles_vacuums(tmp_path: Path, signer: Signer, monkeypatch) -> None:
    """Killed before the statement was journaled: the rows are gone, so the scan cannot
    know what to look for; it must VACUUM rather than claim a clean file."""
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, residue_scan=True) as s:
        marks = _many_threads(s, 4, 20)

        def crash(*a: Any, **k: Any) -> Any:
            raise OSError("died before journaling the statement")

        inject(monkeypatch, s, record_statement=crash)
        with pytest.raises(ErasureIncompleteError):
            s.erase_thread("t3")
        monkeypatch.undo()
        [r] = s.recover_receipts(min_age_seconds=0)
    entry = residue(r, "residue_scan")
    assert entry["detail"]["mode"] == "conservative" and entry["detail"]["vacuum"] is True
    assert entry["status"] == "applied" and entry["detail"]["copies_before"] is None
    assert sum(marker_in_files(db, marks["t3"]).values()) == 0


# -- kill -9 at random points, with the residue scan on ----------------------------------

CHILD = """
import os, signal, sys
from erasure_receipts import AttestingSqliteSaver, Signer

kill_at, seen = int(sys.argv[3]), 0


def tracer(frame, event, arg):
    # Count executed lines of the library; die by SIGKILL at line number kill_at.
    global seen
    if "erasure_receipts" not in frame.f_code.co_filename:
        return None
    if event == "line":
        seen += 1
        if seen == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
    return tracer


signer = Signer.from_seed(bytes(range(32)))
with AttestingSqliteSaver.from_conn_string(
    sys.argv[1], signer=signer, archive=sys.argv[2], residue_scan=True
) as s:
    s.setup()
    sys.settrace(tracer)
    s.erase_thread("t1")
    sys.settrace(None)
print(seen, flush=True)
"""


def test_kill_9_at_random_points_leaves_no_erased_content(tmp_path: Path, signer: Signer) -> None:
    """SIGKILL at a random line of the library's erasure (measure, delete, commit, scan,
    VACUUM, journal, sign, archive), then recovery by another process: the thread is
    intact with no receipt, or erased with exactly one receipt and no copy in any file."""
    import subprocess
    import sys

    def prepare(db: Path) -> dict[str, str]:
        with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
            return _many_threads(s, 6, 30)

    def child(db: Path, archive: Path, kill_at: int) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-c", CHILD, str(db), str(archive), str(kill_at)]
        return subprocess.run(cmd, capture_output=True, text=True, check=False)

    probe = (
        child(tmp_path / "probe.db", tmp_path / "probe", 0)
        if prepare(tmp_path / "probe.db")
        else None
    )
    assert probe is not None and probe.returncode == 0, probe
    total = int(probe.stdout)
    rnd = random.Random(7)
    outcomes = {"intact": 0, "erased": 0}
    for trial in range(10):
        db, archive = tmp_path / f"{trial}.db", tmp_path / f"r{trial}"
        marks = prepare(db)
        res = child(db, archive, rnd.randint(1, total))
        assert res.returncode == -9, res.stderr  # it really died mid-way
        with AttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, archive=archive, residue_scan=True
        ) as s:
            recovered = s.recover_receipts(min_age_seconds=0)
            kept = s.journal_receipts("t1")
        rows = raw_rows(db, "checkpoints", "thread_id = ?", ("t1",))
        files = sorted(archive.glob("*.json")) if archive.exists() else []
        if rows:
            outcomes["intact"] += 1
            assert len(rows) == 30 and recovered == [] and kept == [] and files == []
        else:
            outcomes["erased"] += 1
            [receipt] = kept
            assert [f.name for f in files] == [f"{receipt.receipt_id}.json"]
            assert verify_receipt(files[0].read_bytes(), [signer.public_key]).thread_id == "t1"
            assert residue(receipt, "residue_scan")["status"] == "applied"
            assert sum(marker_in_files(db, marks["t1"]).values()) == 0, trial
        for t in ("t0", "t2"):
            assert len(raw_rows(db, "checkpoints", "thread_id = ?", (t,))) == 30
    assert outcomes["intact"] and outcomes["erased"], outcomes


# -- residue scan: pinned WAL, short rows, rewritten files, UTF-16, vacuum, other files ---


def _victim_table(path: Path, value: Any) -> tuple[sqlite3.Connection, list[bytes]]:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (thread TEXT, id INTEGER, v TEXT, PRIMARY KEY (thread, id))")
    marks = []
    for i in range(20):
        m = os.urandom(12).hex()
        marks.append(m.encode())
        conn.execute("INSERT INTO t VALUES ('victim', ?, ?)", (i, value(m)))
        conn.execute("INSERT INTO t VALUES ('other', ?, ?)", (i, value(os.urandom(12).hex())))
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return conn, marks


def _erase_victim(conn: sqlite3.Connection) -> Needles:
    needles = Needles(exclude=["victim"])
    for row in conn.execute("SELECT * FROM t WHERE thread = 'victim'"):
        needles.add_row(row)
    conn.execute("DELETE FROM t WHERE thread = 'victim'")
    conn.commit()
    return needles


def test_scan_never_claims_a_file_that_a_pinned_wal_keeps_stale(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    conn, marks = _victim_table(path, lambda m: m + os.urandom(100).hex())
    reader = sqlite3.connect(path)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchone()
    needles = _erase_victim(conn)
    entry = residue_scan(conn, str(path), needles)
    assert sum(path.read_bytes().count(m) for m in marks) == 20  # the truth: all there
    assert entry["status"] == "partial" and "WAL" in entry["detail"]["reason"]
    reader.rollback()
    entry = residue_scan(conn, str(path), needles)  # reader gone: now it settles
    assert entry["status"] == "applied", entry
    assert sum(path.read_bytes().count(m) for m in marks) == 0


def test_rows_too_short_to_search_make_the_scan_conservative(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    conn, marks = _victim_table(path, lambda m: m)  # 24-byte values, 31-byte rows
    conn.execute("PRAGMA secure_delete = OFF")  # deleted cells keep their bytes
    needles = _erase_victim(conn)
    assert needles.blind_rows == 20 and not needles.usable
    entry = residue_scan(conn, str(path), needles)
    assert entry["detail"]["mode"] == "conservative" and entry["detail"]["vacuum"] is True
    assert entry["status"] == "applied"
    assert sum(path.read_bytes().count(m) for m in marks) == 0


def test_record_body_windows_find_rows_of_short_values(tmp_path: Path) -> None:
    """Rows whose values are each under 32 bytes are still searched, as a whole."""
    path = tmp_path / "a.db"
    conn, _marks = _victim_table(path, lambda m: m[:20] + "---" + m[20:])  # 27 bytes
    conn.execute("PRAGMA secure_delete = OFF")
    rows = conn.execute("SELECT * FROM t WHERE thread = 'victim'").fetchall()
    needles = Needles()  # rows: "victim" + an id of 0-1 bytes + 27 bytes >= 32 bytes
    for row in rows:
        needles.add_row(row)
    assert needles.usable and needles.hashes
    conn.execute("DELETE FROM t WHERE thread = 'victim'")
    conn.commit()
    entry = residue_scan(conn, str(path), needles)
    assert entry["detail"]["mode"] == "needles" and entry["detail"]["copies_before"] > 0
    assert entry["status"] == "applied" and entry["detail"]["copies_after"] == 0


def test_scan_survives_a_process_that_rewrites_the_file(tmp_path: Path) -> None:
    """Another process VACUUMs and truncates the file in a loop; the scan holds a read
    transaction, so the file cannot shrink under it (no SIGBUS, no false 'applied')."""
    import subprocess
    import sys
    import time

    path = tmp_path / "a.db"
    conn, marks = _victim_table(path, lambda m: m + os.urandom(1500).hex())
    needles = _erase_victim(conn)
    churn = subprocess.Popen([sys.executable, "-c", f"""
import sqlite3, os
c = sqlite3.connect({str(path)!r}, timeout=5)
while True:
    c.execute("INSERT INTO t SELECT 'y', id, v FROM t WHERE thread = 'other'"); c.commit()
    c.execute("DELETE FROM t WHERE thread = 'y'"); c.commit()
    c.execute("VACUUM"); c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
"""])  # fmt: skip
    seen: set[str] = set()
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3:
            entry = residue_scan(conn, str(path), needles)
            seen.add(entry["status"])
            assert entry["status"] in ("applied", "partial"), entry
    finally:
        churn.kill()
        churn.wait()
    assert seen
    entry = residue_scan(conn, str(path), needles)
    assert entry["status"] == "applied"
    assert sum(path.read_bytes().count(m) for m in marks) == 0


def test_utf16_database_with_residue_scan(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "u.db"
    with sqlite3.connect(db) as c:
        c.execute("PRAGMA encoding = 'UTF-16le'")
        c.execute("CREATE TABLE x (a)")
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, residue_scan=True) as s:
        marks = _many_threads(s, 3, 10)
        r = s.erase_thread("t1")
    assert residue(r, "residue_scan")["status"] == "applied"
    utf16 = marks["t1"].encode("utf-16-le")
    assert db.read_bytes().count(utf16) == 0


def test_vacuum_mode_removes_earlier_versions_too(tmp_path: Path, signer: Signer) -> None:
    """Versions overwritten before the erasure by a connection without secure_delete are
    not among the erased values; residue_scan="vacuum" removes them regardless."""
    db = tmp_path / "a.db"
    with SqliteStore.from_conn_string(str(db)) as store:
        store.setup()
        store.conn.execute("PRAGMA secure_delete = OFF")
        old = []
        for i in range(60):
            m = os.urandom(24).hex()
            old.append(m.encode())
            store.put(NS, f"k{i}", {"note": m})
        for i in range(60):
            store.put(NS, f"k{i}", {"note": "v2 " + os.urandom(24).hex()})
        assert sum(db.read_bytes().count(m) for m in old) > 0
        with AttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, store=store, residue_scan="vacuum"
        ) as s:
            put(s, "alice-chat", 0, "hi " + os.urandom(40).hex())
            r = s.erase_thread("alice-chat", store_namespaces=[NS])
    entry = residue(r, "residue_scan")
    assert entry["detail"]["mode"] == "vacuum" and entry["detail"]["vacuum"] is True
    assert entry["status"] == "applied"
    assert sum(marker_in_files(db, m.decode()).get("a.db", 0) for m in old) == 0
    with pytest.raises(ConfigurationError):
        AttestingSqliteSaver(sqlite3.connect(":memory:"), signer=signer, residue_scan="yes")  # type: ignore[arg-type]


def test_store_in_another_file_is_said_to_be_unscanned(tmp_path: Path, signer: Signer) -> None:
    with SqliteStore.from_conn_string(str(tmp_path / "store.db")) as store:
        store.setup()
        store.put(NS, "k", {"v": 1})
        with AttestingSqliteSaver.from_conn_string(
            str(tmp_path / "a.db"), signer=signer, store=store, residue_scan=True
        ) as s:
            put(s, "t", 0, "x")
            r = s.erase_thread("t", store_namespaces=[NS])
    entry = residue(r, "residue_scan.store")
    assert entry["status"] == "skipped" and entry["detail"]["database"].endswith("store.db")
    assert residue(r, "residue_scan")["status"] == "applied"
