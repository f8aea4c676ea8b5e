"""Two sweeps at once never attest an erasure twice.

Sweep A erases its first idle thread and, after the commit, takes its time to sign
(a signer that waits for the test - an HSM that is slow to answer). Sweep B runs from
start to end meanwhile, on the same database: its recovery step sees A's open journal
entry and must leave it alone (A holds its lease), then it erases the other idle
threads. Then A finishes. Every idle thread has exactly one receipt across both
archives and one closed journal entry. Two real processes on one PostgreSQL database
and on one SQLite file; two threads with their own connections on SQLite. A killed
sweep's entries are still recovered by the next sweep (the lease dies with its owner).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    Signer,
    verify_receipt,
)
from test_retention_thread_skips import _pg_old_threads, old_sqlite_db

SEED = bytes(range(32))
IDLE = [f"t{i}" for i in range(6)]

SWEEP = """
import json, os, sys, time
from datetime import timedelta
from erasure_receipts import Signer
target, archive, gate = sys.argv[1], sys.argv[2], sys.argv[3]
calls = [0]

class SlowSigner(Signer):
    __slots__ = ()

    def sign(self, message):
        calls[0] += 1
        if gate != "-" and calls[0] == 1:  # the first receipt: after its commit
            open(gate + ".signing", "w").close()
            deadline = time.monotonic() + 120
            while not os.path.exists(gate + ".go") and time.monotonic() < deadline:
                time.sleep(0.01)
        return super().sign(message)

signer = SlowSigner.from_seed(bytes(range(32)))
if not os.path.exists(target):  # a DSN
    from erasure_receipts import AttestingPostgresSaver as Saver
else:
    from erasure_receipts import AttestingSqliteSaver as Saver
with Saver.from_conn_string(target, signer=signer, archive=archive) as saver:
    result = saver.erase_idle_threads(timedelta(days=30))
print(json.dumps(result.to_json()))
"""


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "sweep A never reached its signature"
        time.sleep(0.01)


def _two_sweeps(target: str, tmp_path: Path) -> list[dict[str, Any]]:
    gate = tmp_path / "gate"
    a = subprocess.Popen([sys.executable, "-c", SWEEP, target, str(tmp_path / "archive-a"),
                          str(gate)], stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        _wait_for(Path(f"{gate}.signing"), a)
        b = subprocess.run([sys.executable, "-c", SWEEP, target, str(tmp_path / "archive-b"),
                            "-"], capture_output=True, text=True, timeout=300)  # fmt: skip
        assert b.returncode == 0, b.stderr
    finally:
        Path(f"{gate}.go").touch()
        out, _ = a.communicate(timeout=300)
    assert a.returncode == 0
    return [json.loads(out), json.loads(b.stdout)]


def _receipts_per_thread(tmp_path: Path) -> Counter[str]:
    signer = Signer.from_seed(SEED)
    seen: Counter[str] = Counter()
    for archive in ("archive-a", "archive-b"):
        for p in (tmp_path / archive).glob("*.json"):
            seen[verify_receipt(p.read_bytes(), [signer.public_key]).thread_id] += 1
    return seen


def _check(results: list[dict[str, Any]], journal: list[tuple[str, bool]],
           tmp_path: Path) -> None:  # fmt: skip
    a, b = results
    assert a["recovered"] == 0 and b["recovered"] == 0, results  # B left A's entry alone
    assert a["receipts"] + b["receipts"] == len(IDLE), results
    assert a["failed"] == b["failed"] == 0
    assert _receipts_per_thread(tmp_path) == Counter({t: 1 for t in IDLE})
    assert Counter(t for t, _ in journal) == Counter({t: 1 for t in IDLE})
    assert all(closed for _, closed in journal)


def _sqlite_journal(db: Path) -> list[tuple[str, bool]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT thread_id, receipt_sha256 IS NOT NULL FROM erasure_journal")
        return [(t, bool(c)) for t, c in rows]


def _pg_journal(dsn: str) -> list[tuple[str, bool]]:
    from pg_helpers import connect

    with connect(dsn) as c:
        rows = c.execute("SELECT thread_id, receipt_sha256 IS NOT NULL FROM erasure_journal")
        return [(t, bool(closed)) for t, closed in rows.fetchall()]


def _no_lease_held(db: Path) -> None:
    """The database's one lease file, and no byte of it locked by any process."""
    from erasure_receipts._backends.sqlite import lease_file

    (lease,) = db.parent.glob("erasure-lease-*")
    assert str(lease) == lease_file(str(db))
    probe = (
        "import fcntl, os, sys; "
        "fcntl.lockf(os.open(sys.argv[1], os.O_RDWR), fcntl.LOCK_EX | fcntl.LOCK_NB)"
    )
    subprocess.run([sys.executable, "-c", probe, str(lease)], check=True, timeout=60)


def test_two_sweep_processes_on_one_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = old_sqlite_db(tmp_path / "app.db", monkeypatch, IDLE)
    results = _two_sweeps(str(db), tmp_path)
    _check(results, _sqlite_journal(db), tmp_path)
    assert not list(tmp_path.glob("app.db-lease-*"))  # every lease released
    _no_lease_held(db)


def test_two_sweep_processes_on_one_postgres_database(
    pg_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pg_old_threads(pg_db, monkeypatch, IDLE)
    results = _two_sweeps(pg_db, tmp_path)
    _check(results, _pg_journal(pg_db), tmp_path)


@pytest.mark.parametrize("a_is_async", [False, True])
def test_two_sweep_threads_with_their_own_connections(
    a_is_async: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In one process (the async saver's erasure runs on aiosqlite's own thread)."""
    db = old_sqlite_db(tmp_path / "app.db", monkeypatch, IDLE)
    signing, go = threading.Event(), threading.Event()
    calls = [0]

    class SlowSigner(Signer):
        __slots__ = ()

        def sign(self, message: bytes) -> bytes:
            calls[0] += 1
            if calls[0] == 1:
                signing.set()
                assert go.wait(120)
            return super().sign(message)

    results: list[dict[str, Any]] = []

    def sweep_a() -> None:
        if a_is_async:
            asyncio.run(async_sweep_a())
            return
        with AttestingSqliteSaver.from_conn_string(
            str(db), signer=SlowSigner.from_seed(SEED), archive=tmp_path / "archive-a"
        ) as saver:
            results.insert(0, saver.erase_idle_threads(timedelta(days=30)).to_json())

    async def async_sweep_a() -> None:
        async with AsyncAttestingSqliteSaver.from_conn_string(
            str(db), signer=SlowSigner.from_seed(SEED), archive=tmp_path / "archive-a"
        ) as saver:
            result = await saver.aerase_idle_threads(timedelta(days=30))
            results.insert(0, result.to_json())

    a = threading.Thread(target=sweep_a)
    a.start()
    try:
        assert signing.wait(120)
        with AttestingSqliteSaver.from_conn_string(
            str(db), signer=Signer.from_seed(SEED), archive=tmp_path / "archive-b"
        ) as saver:
            # An explicit recovery leaves the running erasure's entry alone too.
            assert len(saver.pending_erasures()) == 1
            assert saver.recover_receipts(min_age_seconds=0) == []
            results.append(saver.erase_idle_threads(timedelta(days=30)).to_json())
    finally:
        go.set()
        a.join(120)
    _check(results, _sqlite_journal(db), tmp_path)


KILLED = SWEEP.replace("        return super().sign(message)",
                       "        os.kill(os.getpid(), 9)")  # fmt: skip


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_killed_sweeps_entry_is_recovered_by_the_next(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        target = str(old_sqlite_db(tmp_path / "app.db", monkeypatch, IDLE))
    else:
        target = request.getfixturevalue("pg_db")
        _pg_old_threads(target, monkeypatch, IDLE)
    gate = tmp_path / "gate"
    Path(f"{gate}.go").touch()
    killed = subprocess.run([sys.executable, "-c", KILLED, target, str(tmp_path / "archive-a"),
                             str(gate)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert killed.returncode == -signal.SIGKILL
    b = subprocess.run([sys.executable, "-c", SWEEP, target, str(tmp_path / "archive-b"), "-"],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert b.returncode == 0, b.stderr
    doc = json.loads(b.stdout)
    assert doc["recovered"] == 1 and doc["receipts"] == len(IDLE)
    assert _receipts_per_thread(tmp_path) == Counter({t: 1 for t in IDLE})
    journal = _sqlite_journal(Path(target)) if backend == "sqlite" else _pg_journal(target)
    assert Counter(t for t, _ in journal) == Counter({t: 1 for t in IDLE})
    if backend == "sqlite":
        assert not list(tmp_path.glob("app.db-lease-*"))
        _no_lease_held(Path(target))
    assert os.path.exists(f"{gate}.signing")


def test_pg_leases_are_released_with_a_connection_pool(
    pg_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a pool, each call may get another connection: every lease is still released
    on the connection that holds it (none is left in ``pg_locks``)."""
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from erasure_receipts import AttestingPostgresSaver
    from erasure_receipts._backends.postgres import LEASE_CLASS
    from pg_helpers import connect

    _pg_old_threads(pg_db, monkeypatch, IDLE)
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(pg_db, kwargs=kwargs, min_size=3, max_size=3) as pool:
        saver = AttestingPostgresSaver(pool, signer=Signer.from_seed(SEED),
                                       archive=tmp_path / "archive-a")  # fmt: skip
        saver.setup()
        result = saver.erase_idle_threads(timedelta(days=30))
        assert result.receipts == len(IDLE) and result.ok
        with connect(pg_db) as c:
            held = c.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                "AND classid = %s AND objsubid = 2",
                (LEASE_CLASS,),
            ).fetchone()
        assert held == (0,)
    assert _receipts_per_thread(tmp_path) == Counter({t: 1 for t in IDLE})
