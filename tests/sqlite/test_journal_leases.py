"""Leases on journal entries: taken before anything irreversible, whatever the database
file's name, and held for the whole erasure even when a pool recycles its connections.

* A database file name of 230 characters (SQLite accepts it: its ``-wal``/``-journal``
  names still fit NAME_MAX) erases, sweeps and sweeps a store in another file.
* A lease that cannot be taken (another process holds the database's lease file)
  fails the erasure before the store outside the database is swept: nothing is lost.
* PostgreSQL with a pool that closes connections older than ``max_lifetime`` while the
  erasure is signing: a recovery in another process leaves the entry alone, so the
  erasure has exactly one receipt.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import AttestingSqliteSaver, Signer, verify_receipt
from erasure_receipts._backends.sqlite import lease_file
from erasure_receipts.errors import ErasureIncompleteError

SEED = bytes(range(32))
LONG = "c" * 227 + ".db"  # 230 characters: "-wal" and "-journal" still fit NAME_MAX
NS = ("users", "alice")


def _put(saver: Any, thread_id: str) -> None:
    cfg = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    c = empty_checkpoint()
    c["id"] = str(uuid6())
    saver.put(cfg, c, {"source": "input", "step": -1}, {})


def _rows(db: Path, sql: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(sql).fetchone()[0])


def _store(path: Path) -> tuple[sqlite3.Connection, SqliteStore]:
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    for i in range(3):
        store.put(NS, f"mem{i}", {"fact": f"alice secret {i}"})
    return conn, store


STORE_ROWS = "SELECT count(*) FROM store WHERE prefix = 'users.alice'"


def test_long_database_file_name_erases_and_sweeps(tmp_path: Path) -> None:
    db = tmp_path / LONG
    assert len(db.name) == 230
    signer = Signer.from_seed(SEED)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        saver.setup()
        for t in ("t1", "t2"):
            _put(saver, t)
        saver.delete_thread("t1")
        assert saver.last_receipt is not None and saver.last_receipt.thread_id == "t1"
        result = saver.erase_idle_threads(timedelta(seconds=0))
        assert result.ok and result.failed == 0 and result.receipts == 1, result.failures
    assert _rows(db, "SELECT count(*) FROM checkpoints") == 0
    assert _rows(db, "SELECT count(*) FROM erasure_journal WHERE receipt_sha256 IS NULL") == 0
    assert _rows(db, "SELECT count(*) FROM erasure_journal") == 2
    # One lease file per database, of a fixed length whatever the database's name.
    (lease,) = tmp_path.glob("erasure-lease-*")
    assert lease == Path(lease_file(str(db)))
    assert len(lease.name) == len(Path(lease_file(str(tmp_path / "a.db"))).name) < 64
    assert not list(tmp_path.glob("*.db-lease-*"))  # no file per receipt


def test_long_database_file_name_with_a_store_in_another_file(tmp_path: Path) -> None:
    db = tmp_path / LONG
    store_db = tmp_path / "store.db"
    sconn, store = _store(store_db)
    try:
        signer = Signer.from_seed(SEED)
        with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as s:
            s.setup()
            _put(s, "alice:chat")
            receipt = s.erase_thread("alice:chat", store_namespaces=[NS])
            assert verify_receipt(receipt.to_json(), [signer.public_key]).thread_id
        assert _rows(store_db, STORE_ROWS) == 0  # swept, with its receipt
        assert _rows(db, "SELECT count(*) FROM checkpoints") == 0
        assert _rows(db, "SELECT count(*) FROM erasure_journal WHERE receipt_sha256 IS NULL") == 0
    finally:
        sconn.close()


HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.lockf(fd, fcntl.LOCK_EX)  # the whole file: every lease of the database
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.01)
"""


def test_a_lease_taken_elsewhere_fails_the_erasure_before_the_store_is_swept(
    tmp_path: Path,
) -> None:
    db = tmp_path / "app.db"
    store_db = tmp_path / "store.db"
    sconn, store = _store(store_db)
    ready, done = tmp_path / "held", tmp_path / "done"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, lease_file(str(db)), str(ready),
                               str(done)])  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert holder.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        signer = Signer.from_seed(SEED)
        with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as s:
            s.setup()
            _put(s, "alice:chat")
            with pytest.raises(ErasureIncompleteError) as info:
                s.erase_thread("alice:chat", store_namespaces=[NS])
            assert "lease" in str(info.value) and "nothing was deleted" in str(info.value)
            assert s.last_receipt is None
        assert _rows(store_db, STORE_ROWS) == 3  # untouched: nothing irreversible ran
        assert _rows(db, "SELECT count(*) FROM checkpoints") == 1
        assert _rows(db, "SELECT count(*) FROM erasure_journal") == 0
        done.touch()
        holder.wait(timeout=60)
        # Once the holder is gone the same erasure goes through.
        with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as s:
            s.erase_thread("alice:chat", store_namespaces=[NS])
        assert _rows(store_db, STORE_ROWS) == 0
        assert _rows(db, "SELECT count(*) FROM erasure_journal WHERE receipt_sha256 IS NULL") == 0
    finally:
        done.touch()
        holder.wait(timeout=60)
        sconn.close()


def test_a_removed_lease_file_is_made_again_and_still_excludes(tmp_path: Path) -> None:
    """Negative: this process keeps its lease file open; once it is removed, the next
    lease is taken on the file other processes now open at the path, not the old one."""
    db = tmp_path / "app.db"
    signer = Signer.from_seed(SEED)
    ready, done = tmp_path / "held", tmp_path / "done"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
        s.setup()
        for t in ("t1", "t2"):
            _put(s, t)
        s.delete_thread("t1")
        Path(lease_file(str(db))).unlink()
        holder = subprocess.Popen([sys.executable, "-c", HOLD, lease_file(str(db)),
                                   str(ready), str(done)])  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not ready.exists():
                assert holder.poll() is None and time.monotonic() < deadline
                time.sleep(0.01)
            with pytest.raises(ErasureIncompleteError, match="lease"):
                s.delete_thread("t2")
        finally:
            done.touch()
            holder.wait(timeout=60)
        s.delete_thread("t2")
    assert _rows(db, "SELECT count(*) FROM checkpoints") == 0


RECOVER = """
import json, sys
from erasure_receipts import AttestingPostgresSaver, Signer
with AttestingPostgresSaver.from_conn_string(
    sys.argv[1], signer=Signer.from_seed(bytes(range(32))), archive=sys.argv[2]
) as saver:
    print(json.dumps([r.receipt_id for r in saver.recover_receipts(min_age_seconds=0)]))
"""


def _recovering_signer(pg_db: str, tmp_path: Path, recovered: list[str]) -> Signer:
    class RecoverWhileSigning(Signer):
        """Signs after a recovery in another process ran (as a sweep there would)."""

        __slots__ = ()

        def sign(self, message: bytes) -> bytes:
            time.sleep(1.2)  # every connection of the pool is past its max_lifetime now
            out = subprocess.run([sys.executable, "-c", RECOVER, pg_db,
                                  str(tmp_path / "archive-b")],
                                 capture_output=True, text=True, timeout=300)  # fmt: skip
            assert out.returncode == 0, out.stderr
            recovered.extend(json.loads(out.stdout))
            return super().sign(message)

    return RecoverWhileSigning.from_seed(SEED)


def _one_receipt_each(pg_db: str, tmp_path: Path, recovered: list[str]) -> None:
    from pg_helpers import connect

    assert recovered == []  # both entries were leased by their erasure throughout
    signer = Signer.from_seed(SEED)
    seen: Counter[str] = Counter()
    for archive in ("archive-a", "archive-b"):
        for p in (tmp_path / archive).glob("*.json"):
            seen[verify_receipt(p.read_bytes(), [signer.public_key]).thread_id] += 1
    assert seen == Counter({"t1": 1, "t2": 1})
    with connect(pg_db) as c:
        journal = c.execute(
            "SELECT thread_id, receipt_sha256 IS NOT NULL FROM erasure_journal"
        ).fetchall()
        left = c.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2"
        ).fetchone()
    assert sorted(journal) == [("t1", True), ("t2", True)]
    assert left == (0,)  # every lease connection closed


def test_pg_pool_recycling_the_lease_connection_does_not_end_the_lease(
    pg_db: str, tmp_path: Path
) -> None:
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from erasure_receipts import AttestingPostgresSaver

    recovered: list[str] = []
    signer = _recovering_signer(pg_db, tmp_path, recovered)
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(pg_db, kwargs=kwargs, min_size=1, max_size=2, max_lifetime=1.0) as pool:
        saver = AttestingPostgresSaver(pool, signer=signer, archive=tmp_path / "archive-a")
        saver.setup()
        for t in ("t1", "t2"):
            _put(saver, t)
        time.sleep(1.2)  # the connection phase one gets is closed when it is returned
        saver.delete_thread("t1")
        saver.erase_thread("t2")
    _one_receipt_each(pg_db, tmp_path, recovered)


async def test_pg_async_pool_recycling_the_lease_connection_does_not_end_the_lease(
    pg_db: str, tmp_path: Path
) -> None:
    """The same with an async pool whose parameters come from async callables."""
    import asyncio

    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    from erasure_receipts import AsyncAttestingPostgresSaver

    async def conninfo() -> str:
        return pg_db

    async def kwargs() -> dict[str, Any]:
        return {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}

    recovered: list[str] = []
    signer = _recovering_signer(pg_db, tmp_path, recovered)
    async with AsyncConnectionPool(conninfo, kwargs=kwargs, min_size=1, max_size=2,  # type: ignore[arg-type]
                                   max_lifetime=1.0, open=False) as pool:  # fmt: skip
        saver = AsyncAttestingPostgresSaver(pool, signer=signer, archive=tmp_path / "archive-a")
        await saver.setup()
        for t in ("t1", "t2"):
            cfg = {"configurable": {"thread_id": t, "checkpoint_ns": ""}}
            c = empty_checkpoint()
            c["id"] = str(uuid6())
            await saver.aput(cfg, c, {"source": "input", "step": -1}, {})
        await asyncio.sleep(1.2)
        await saver.adelete_thread("t1")
        await saver.aerase_thread("t2")
    _one_receipt_each(pg_db, tmp_path, recovered)


def test_pg_recovery_still_completes_an_entry_whose_erasure_is_gone(
    pg_db: str, tmp_path: Path
) -> None:
    """Negative: with a pool, recovery leases on its own connection too, and an open
    entry nobody holds (its erasure died after the commit) is completed once."""
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from erasure_receipts import AttestingPostgresSaver

    class Dies(Signer):
        __slots__ = ()

        def sign(self, message: bytes) -> bytes:
            raise OSError("signer unreachable")

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(pg_db, kwargs=kwargs, min_size=1, max_size=2, max_lifetime=1.0) as pool:
        saver = AttestingPostgresSaver(pool, signer=Dies.from_seed(SEED))
        saver.setup()
        _put(saver, "t1")
        with pytest.raises(ErasureIncompleteError):
            saver.delete_thread("t1")
        healthy = AttestingPostgresSaver(pool, signer=Signer.from_seed(SEED),
                                         archive=tmp_path / "archive")  # fmt: skip
        (receipt,) = healthy.recover_receipts(min_age_seconds=0)
        assert receipt.thread_id == "t1"
        assert healthy.recover_receipts(min_age_seconds=0) == []
    assert len(list((tmp_path / "archive").glob("*.json"))) == 1
    assert os.path.isdir(tmp_path / "archive")
