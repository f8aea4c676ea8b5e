"""Thread erasures with a store: vectors behind a foreign-key cascade, a writer racing the sweep,
a store in another file or in memory, and an async saver sharing the store's connection."""

from __future__ import annotations

import asyncio
import sqlite3
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
)
from scenario import MARKER, marker_in_files, raw_rows
from test_journal_recovery import NS, cfg, put


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
