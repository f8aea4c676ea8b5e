"""SQLite rollback-journal modes: the ``-journal`` file holds pre-images of every page an
erasure changed. Whatever the journal mode, the receipt says what became of the file
(``sqlite.rollback_journal``), and ``applied`` means it was read back holding nothing.

Every test runs on real database files and reads their raw bytes.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import AsyncAttestingSqliteSaver, AttestingSqliteSaver, Signer, verify_receipt
from scenario import MARKER, TURNS, build_graph, human, raw_rows

NS = ("users", "alice")
FILE_MODES = ("persist", "truncate", "delete")
MODES = (*FILE_MODES, "memory", "off")
OTHER = "ALICE-2-ONLY-4417"


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": thread.split("-")[0]}}


def count(path: Path, marker: bytes) -> int:
    return path.read_bytes().count(marker) if path.exists() else 0


def journal(db: Path) -> Path:
    return Path(f"{db}-journal")


def entry(receipt: Any, action: str = "sqlite.rollback_journal") -> dict[str, Any]:
    [e] = [r for r in receipt.predicate["residue"] if r["action"] == action]
    return e


def fill(saver: Any, store: SqliteStore, filler: int = 15) -> None:
    """A real graph: alice's two chats (the marker in turn 1 of the first, ``OTHER`` in
    the second) and bob's, long enough that the erasure's journal spans more pages than
    the small transactions after it."""
    graph = build_graph(saver, store)
    for text in TURNS:
        graph.invoke(human(text + " " + "x" * 300), cfg("alice-1"))
        graph.invoke(human(text.replace(MARKER, OTHER) + " " + "x" * 300), cfg("alice-2"))
    for i in range(filler):
        graph.invoke(human(f"bob's note {i} " + "y" * 300), cfg("bob-1"))


@pytest.fixture
def saver_in(tmp_path: Path, signer: Signer) -> Iterator[Any]:
    """``saver_in(mode, **kw)``: a saver and store on a file in that journal mode."""
    opened: list[Any] = []

    def make(mode: str, **kw: Any) -> tuple[Path, AttestingSqliteSaver, SqliteStore]:
        db = tmp_path / f"{mode}.db"
        store_cm = SqliteStore.from_conn_string(str(db))
        store = store_cm.__enter__()
        store.setup()
        saver_cm = AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store, **kw)
        saver = saver_cm.__enter__()
        saver.setup()  # LangGraph's setup turns WAL on: switch afterwards
        for conn in (store.conn, saver.conn):
            assert conn.execute(f"PRAGMA journal_mode = {mode}").fetchone()[0] == mode
        opened.extend([saver_cm, store_cm])
        fill(saver, store)
        return db, saver, store

    yield make
    for cm in opened:
        cm.__exit__(None, None, None)


@pytest.mark.parametrize("mode", MODES)
def test_erase_thread_leaves_no_pre_image_in_the_journal(
    saver_in: Any, signer: Signer, mode: str
) -> None:
    db, saver, _ = saver_in(mode)
    r = saver.erase_thread("alice-1", store_namespaces=[NS])
    verify_receipt(r.to_json(), [signer.public_key])
    e = entry(r)
    assert e["detail"]["journal_mode"] == mode
    assert e["status"] == ("applied" if mode in FILE_MODES else "not_applicable")
    assert e["detail"]["journal_bytes_after"] == 0
    if mode == "persist":
        assert e["detail"]["zeroed_bytes"] > 0  # SQLite left the pre-images there
    assert raw_rows(db, "checkpoints", "thread_id = ?", ("alice-1",)) == []
    for path in (db, journal(db)):
        assert count(path, MARKER.encode()) == 0, path.name
    assert raw_rows(db, "checkpoints", "thread_id = ?", ("alice-2",))
    assert count(db, OTHER.encode()) > 0  # the other thread is untouched


@pytest.mark.parametrize("mode", ["persist", "delete"])
def test_every_kind_of_receipt_records_the_journal(
    saver_in: Any, signer: Signer, mode: str
) -> None:
    db, saver, store = saver_in(mode)
    receipts = [
        saver.erase_history("bob-1"),
        saver.erase_subject("alice", metadata_key="user_id", store_namespaces=[NS]),
    ]
    for r in receipts:
        verify_receipt(r.to_json(), [signer.public_key])
        assert entry(r)["status"] == "applied" and entry(r)["detail"]["journal_mode"] == mode
    # Nothing of alice anywhere in the files, the journal included.
    for path in (db, journal(db)):
        assert count(path, MARKER.encode()) + count(path, OTHER.encode()) == 0, path.name
    # Zeroing the journal between transactions harmed none of them.
    graph = build_graph(saver, store)
    for i in range(5):
        graph.invoke(human(f"carol {i} " + "c" * 2000), cfg("carol-1"))
    assert saver.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with sqlite3.connect(db) as other:
        assert other.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_exclusive_locking_mode_keeps_a_delete_journal(saver_in: Any, signer: Signer) -> None:
    """Under ``locking_mode=EXCLUSIVE`` even ``DELETE`` keeps the journal (header zeroed,
    pre-images kept): the file is zeroed like a ``PERSIST`` one."""
    db, saver, store = saver_in("delete")
    store.conn.close()  # the exclusive connection must be the only one
    saver.conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    saver.conn.execute("SELECT count(*) FROM checkpoints").fetchone()
    r = saver.erase_thread("alice-1")
    e = entry(r)
    assert e["status"] == "applied" and e["detail"]["zeroed_bytes"] > 0
    assert count(journal(db), MARKER.encode()) == 0


def test_vacuum_in_persist_mode_leaves_no_replaced_page_in_the_journal(
    saver_in: Any, signer: Signer
) -> None:
    """``residue_scan="vacuum"`` removes earlier versions of rows: VACUUM journals the
    pages it replaces, which PERSIST would keep in the -journal."""
    db, saver, store = saver_in("persist", residue_scan="vacuum")
    store.conn.execute("PRAGMA secure_delete = OFF")
    old = [os.urandom(24).hex() for _ in range(40)]
    for i, m in enumerate(old):
        store.put(("notes",), f"k{i}", {"note": m})
    for i in range(len(old)):
        store.put(("notes",), f"k{i}", {"note": "v2 " + os.urandom(24).hex()})
    assert sum(count(db, m.encode()) + count(journal(db), m.encode()) for m in old) > 0
    r = saver.erase_thread("alice-1", store_namespaces=[NS])
    scan = entry(r, "residue_scan")
    assert scan["status"] == "applied" and scan["detail"]["journal_cleared"] is True
    for path in (db, journal(db)):
        assert sum(count(path, m.encode()) for m in old) == 0, path.name


def test_a_writer_holding_the_lock_makes_it_partial(tmp_path: Path) -> None:
    """The journal is only touched under the write lock: while another connection
    writes, it is left as it is and the entry says ``partial`` and why."""
    from erasure_receipts._backends.sqlite import journal_residue

    db = tmp_path / "p.db"
    conn = sqlite3.connect(db, timeout=0.05)
    conn.execute("PRAGMA journal_mode = PERSIST")
    conn.execute("CREATE TABLE t (v BLOB)")
    conn.execute("INSERT INTO t VALUES (?)", (b"secret-pre-image " * 400,))
    conn.commit()
    conn.execute("DELETE FROM t")
    conn.commit()
    before = journal(db).read_bytes()
    assert before.count(b"secret-pre-image") > 0
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        e = journal_residue(conn, "persist")
    finally:
        other.execute("ROLLBACK")
    assert e["status"] == "partial" and "write lock" in e["detail"]["reason"]
    assert journal(db).read_bytes() == before  # untouched, not half-zeroed
    e = journal_residue(conn, "persist")
    assert e["status"] == "applied" and e["detail"]["zeroed_bytes"] == len(before)
    assert count(journal(db), b"secret-pre-image") == 0
    mem = journal_residue(sqlite3.connect(":memory:"), "memory")
    assert mem["status"] == "not_applicable"


def test_wal_receipts_keep_their_checkpoint_entry(tmp_path: Path, signer: Signer) -> None:
    with (
        SqliteStore.from_conn_string(str(tmp_path / "w.db")) as store,
        AttestingSqliteSaver.from_conn_string(str(tmp_path / "w.db"), signer=signer,
                                              store=store) as saver,
    ):  # fmt: skip
        store.setup()
        fill(saver, store, filler=1)
        r = saver.erase_thread("alice-1")
    actions = [x["action"] for x in r.predicate["residue"]]
    assert actions == ["sqlite.secure_delete", "sqlite.wal_checkpoint",
                       "sqlite.rollback_journal", "sqlite.live_page_free_space"]  # fmt: skip
    assert entry(r, "sqlite.wal_checkpoint")["status"] == "applied"
    assert entry(r)["status"] == "not_applicable"
    assert entry(r)["detail"] == {"journal_mode": "wal", "journal_bytes_before": 0,
                                  "zeroed_bytes": 0, "journal_bytes_after": 0}  # fmt: skip


def test_store_in_another_file_and_async_saver(tmp_path: Path, signer: Signer) -> None:
    db, sdb = tmp_path / "a.db", tmp_path / "store.db"

    async def go() -> Any:
        with SqliteStore.from_conn_string(str(sdb)) as store:
            store.setup()
            store.conn.execute("PRAGMA journal_mode = PERSIST")
            store.put(NS, "k", {"v": MARKER + " " + "z" * 2000})
            async with AsyncAttestingSqliteSaver.from_conn_string(
                str(db), signer=signer, store=store
            ) as saver:
                await saver.setup()
                await saver.conn.execute("PRAGMA journal_mode = PERSIST")
                graph = build_graph(saver, store)
                for text in TURNS:
                    await graph.ainvoke(human(text + " " + "x" * 300), cfg("alice-1"))
                return await saver.aerase_thread("alice-1", store_namespaces=[NS])

    r = asyncio.run(go())
    assert entry(r)["status"] == "applied" and entry(r)["detail"]["journal_mode"] == "persist"
    s = entry(r, "sqlite.rollback_journal.store")
    assert s["status"] == "applied" and s["detail"]["database"] == str(sdb)
    for path in (db, journal(db), sdb, journal(sdb)):
        assert count(path, MARKER.encode()) == 0, path.name


CRASH = textwrap.dedent(
    """
    import os, sys
    from erasure_receipts import AttestingSqliteSaver, Signer
    from erasure_receipts._backends.sqlite import residue  # internals: where scrub looks
    from langgraph.checkpoint.base import empty_checkpoint

    def die(*a, **k):
        os._exit(17)  # committed; the -journal still holds the pre-images

    residue.journal_residue = die
    with AttestingSqliteSaver.from_conn_string(
        sys.argv[1], signer=Signer.from_seed(bytes(range(32)))
    ) as s:
        s.setup()
        s.conn.execute("PRAGMA journal_mode = PERSIST")
        for i in range(40):
            cp = empty_checkpoint(); cp["id"] = f"1ef{i:029d}"
            cp["channel_values"] = {"v": sys.argv[2] + " " + "x" * 2000}
            s.put({"configurable": {"thread_id": "t-crash", "checkpoint_ns": ""}}, cp, {}, {})
        s.erase_thread("t-crash")
    """
)


def test_recovery_after_a_crash_clears_the_journal_too(tmp_path: Path, signer: Signer) -> None:
    """The process dies after the commit, before the journal was cleared; the receipt
    issued by recovery in another process (its connection also in PERSIST mode) clears
    and records it."""
    db = tmp_path / "c.db"
    proc = subprocess.run([sys.executable, "-c", CRASH, str(db), MARKER],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 17, proc.stderr
    assert count(journal(db), MARKER.encode()) > 0  # what SQLite left behind
    conn = sqlite3.connect(db, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = PERSIST")
    s = AttestingSqliteSaver(conn, signer=signer)
    s.is_setup = True  # set up by the crashed process; LangGraph's setup would turn WAL on
    [r] = s.recover_receipts(min_age_seconds=0)
    conn.close()
    e = entry(r)
    assert e["detail"]["journal_mode"] == "persist"
    assert e["status"] == "applied" and e["detail"]["zeroed_bytes"] > 0, e
    assert count(journal(db), MARKER.encode()) == 0
    verify_receipt(r.to_json(), [signer.public_key])
