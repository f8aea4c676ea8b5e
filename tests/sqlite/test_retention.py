"""Retention sweeps on SQLite: erase_idle_threads / prune_histories and `receipt
retention` - exactly the idle threads, one receipt each, resumable after kill -9.

The CI slice is 1,000 threads of which 100 are idle (bench/history_bench.py runs the
10,000 / 1,000 version). Idle threads are made by real graph runs whose checkpoint ids
carry a time 40 days ago (uuid6, see ``checkpoint_clock``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from erasure_receipts import AsyncAttestingSqliteSaver, AttestingSqliteSaver, Signer, verify_receipt
from erasure_receipts._backends import sqlite as sqlite_backend
from faults import inject
from on_a_tty import run_on_a_tty
from test_history_graphs import CHAT_TURNS, cfg, chat_graph, checkpoint_clock, human

THREADS = 1000
IDLE = {f"t{i:05d}" for i in range(0, THREADS, 10)}  # 100, interleaved with active ones
CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
SEED = bytes(range(32))


def _build(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    signer = Signer.from_seed(SEED)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        graph = chat_graph(saver)
        with checkpoint_clock(monkeypatch, datetime.now(UTC) - timedelta(days=40)):
            for t in sorted(IDLE):
                graph.invoke(human("an old conversation"), cfg(t))
        for i in range(THREADS):
            if f"t{i:05d}" not in IDLE:
                graph.invoke(human("a recent one"), cfg(f"t{i:05d}"))
        saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("retention") / "template.db"
    with pytest.MonkeyPatch.context() as m:
        _build(db, m)
    return db


@pytest.fixture
def db(template: Path, tmp_path: Path) -> Path:
    target = tmp_path / "app.db"
    shutil.copy(template, target)
    return target


def checkpoints_per_thread(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT thread_id, count(*) FROM checkpoints GROUP BY thread_id"))


def archived(archive: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_bytes()) for p in sorted(archive.glob("*.json"))]


def test_idle_sweep_erases_exactly_the_idle_threads(
    db: Path, signer: Signer, tmp_path: Path
) -> None:
    archive = tmp_path / "receipts"
    before = checkpoints_per_thread(db)
    assert len(before) == THREADS
    events: list[Any] = []
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        assert saver.count_idle_threads(timedelta(days=30)) == len(IDLE)
        dry = saver.erase_idle_threads(timedelta(days=30), dry_run=True)
        assert dry.threads == len(IDLE) and dry.receipts == 0 and dry.rows > 0
        assert checkpoints_per_thread(db) == before and not archive.exists()

        result = saver.erase_idle_threads(timedelta(days=30), progress=events.append)

        assert result.ok and result.threads == result.receipts == len(IDLE)
        assert result.rows == dry.rows and result.bytes == dry.bytes
        assert {e.thread_id for e in events} == IDLE and {e.outcome for e in events} == {"erased"}
        after = checkpoints_per_thread(db)
        assert set(after) == set(before) - IDLE
        assert all(after[t] == before[t] for t in after)  # active threads untouched
        assert all(saver.is_erased(t) for t in IDLE)
        receipts = archived(archive)
        assert sorted(
            r["statement"]["predicate"]["scope"]["thread_id"] for r in receipts
        ) == sorted(IDLE)
        for path in archive.glob("*.json"):
            verify_receipt(path.read_bytes(), [signer.public_key])
        # Run again: nothing left to do, nothing issued twice.
        again = saver.erase_idle_threads(timedelta(days=30))
        assert again.threads == again.receipts == 0
        assert len(list(archive.glob("*.json"))) == len(IDLE)
        # A limit stops early; the rest is for the next run.
        assert saver.erase_idle_threads(timedelta(days=0), limit=3).threads == 3


SWEEP = """
import os, signal, sys, time
from datetime import timedelta
from erasure_receipts import AttestingSqliteSaver, Signer
from erasure_receipts._backends import sqlite as b
db, archive, mode, crash_after = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
pause = float(sys.argv[5])
if crash_after:
    # kill -9 right after the commit of that erasure, before its receipt exists
    original, calls = b.record_statement, [0]
    def record(*args):
        calls[0] += 1
        if calls[0] == crash_after:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args)
    b.record_statement = record
with AttestingSqliteSaver.from_conn_string(db, signer=Signer.from_seed(bytes(range(32))),
                                           archive=archive) as saver:
    sweep = saver.erase_idle_threads if mode == "idle" else saver.prune_histories
    sweep(timedelta(days=30), progress=lambda e: time.sleep(pause))
"""


def _assert_exactly_once(db: Path, archive: Path, signer: Signer) -> None:
    receipts = archived(archive)
    threads = [r["statement"]["predicate"]["scope"]["thread_id"] for r in receipts]
    assert sorted(threads) == sorted(IDLE)  # exactly one receipt per idle thread
    assert set(checkpoints_per_thread(db)) == {f"t{i:05d}" for i in range(THREADS)} - IDLE
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        assert saver.pending_erasures() == []
        assert len(saver.journal_receipts()) == len(IDLE)
    for path in archive.glob("*.json"):
        verify_receipt(path.read_bytes(), [signer.public_key])


@pytest.mark.parametrize("pause", [0.01, 0.0005])
def test_sweep_killed_with_sigkill_then_rerun(
    db: Path, signer: Signer, tmp_path: Path, pause: float
) -> None:
    archive = tmp_path / "receipts"
    proc = subprocess.Popen(
        [sys.executable, "-c", SWEEP, str(db), str(archive), "idle", "0", str(pause)]
    )
    try:
        deadline = time.monotonic() + 120
        while len(list(archive.glob("*.json"))) < 30:
            assert proc.poll() is None, "the sweep ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)  # wherever it is: in a transaction, signing, ...
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    done = len(list(archive.glob("*.json")))
    assert 30 <= done < len(IDLE)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        result = saver.erase_idle_threads(timedelta(days=30))
    assert result.ok and result.threads + done + result.recovered >= len(IDLE)
    _assert_exactly_once(db, archive, signer)


def test_sweep_killed_between_commit_and_receipt_then_rerun(
    db: Path, signer: Signer, tmp_path: Path
) -> None:
    archive = tmp_path / "receipts"
    proc = subprocess.run([sys.executable, "-c", SWEEP, str(db), str(archive), "idle", "40", "0"],
                          timeout=300)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL
    assert len(list(archive.glob("*.json"))) == 39
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        (pending,) = saver.pending_erasures()  # committed, no receipt
        result = saver.erase_idle_threads(timedelta(days=30))
    assert result.recovered == 1 and result.threads == len(IDLE) - 40
    assert result.receipts == len(IDLE) - 39
    assert pending.receipt_id in {p.stem for p in archive.glob("*.json")}
    _assert_exactly_once(db, archive, signer)


def test_thread_that_became_active_is_skipped(
    db: Path, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Selected as idle, then written to before its turn: the check under the write lock
    skips it (nothing erased, no receipt)."""
    victim = "t00500"
    original = sqlite_backend.idle_threads
    other = sqlite3.connect(db, check_same_thread=False)

    def select_then_write(*args: Any) -> Any:
        page = original(*args)
        if any(t == victim for t, *_ in page):
            from langgraph.checkpoint.sqlite import SqliteSaver

            chat_graph(SqliteSaver(other)).invoke(human("I'm back"), cfg(victim))
        return page

    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer,
                                               archive=tmp_path / "r") as saver:  # fmt: skip
        inject(monkeypatch, saver, idle_threads=select_then_write)
        result = saver.erase_idle_threads(timedelta(days=30))
        assert result.skipped == {"became_active": 1}
        assert result.threads == len(IDLE) - 1 and not saver.is_erased(victim)
        assert len(list(saver.list(cfg(victim)))) == 8
    other.close()


def test_prune_histories_sweep(db: Path, signer: Signer, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    archive = tmp_path / "receipts"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        graph = chat_graph(saver)
        with checkpoint_clock(monkeypatch, datetime.now(UTC) - timedelta(days=10)):
            for t in ("h1", "h2", "h3"):
                for text in CHAT_TURNS:
                    graph.invoke(human(text), cfg(t))
        result = saver.prune_histories(timedelta(days=7))
        # the 100 idle one-turn threads have history too (4 checkpoints each)
        assert result.ok and result.threads == result.receipts == len(IDLE) + 3
        assert all(len(list(saver.list(cfg(t)))) == 1 for t in ("h1", "h2", "h3", "t00000"))
        kinds = {r["statement"]["predicate"]["kind"] for r in archived(archive)}
        assert kinds == {"history"}
        again = saver.prune_histories(timedelta(days=7))
        assert again.threads == 0 and again.skipped == {"nothing_to_remove": len(IDLE) + 3}
        out = graph.invoke(human("hello again"), cfg("h1"))
        assert "noted: hello again" in [m.content for m in out["messages"]]


async def test_async_sweeps(db: Path, signer: Signer, tmp_path: Path) -> None:
    archive = tmp_path / "receipts"
    async with AsyncAttestingSqliteSaver.from_conn_string(str(db), signer=signer,
                                                          archive=archive) as saver:  # fmt: skip
        assert await saver.acount_idle_threads(timedelta(days=30)) == len(IDLE)
        pruned = await saver.aprune_histories(timedelta(days=30), limit=10)
        assert pruned.threads == 10 and pruned.limited
        erased = await saver.aerase_idle_threads(timedelta(days=30))
        assert erased.ok and erased.threads == len(IDLE)
    assert len(archived(archive)) == len(IDLE) + 10


def _key(tmp_path: Path, signer: Signer) -> Path:
    key = tmp_path / "signer.pem"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    return key


def test_cli_retention(db: Path, signer: Signer, tmp_path: Path) -> None:
    archive, key = tmp_path / "receipts", _key(tmp_path, signer)
    before = checkpoints_per_thread(db)
    time.sleep(1.1)  # every thread's latest checkpoint is then older than --history 1s
    dry = subprocess.run([*CLI, "retention", str(db), "--idle", "30d", "--history", "1s",
                          "--dry-run", "--json"], capture_output=True, text=True)  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    doc = json.loads(dry.stdout)
    assert doc["dry_run"] and doc["idle"]["threads"] == len(IDLE)
    assert doc["history"]["threads"] == THREADS  # every thread has history older than 1 s
    assert checkpoints_per_thread(db) == before
    run = subprocess.run(
        [
            *CLI,
            "retention",
            str(db),
            "--idle",
            "30d",
            "--key",
            str(key),
            "--archive",
            str(archive),
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["ok"] and doc["totals"]["threads"] == doc["totals"]["receipts"] == len(IDLE)
    assert doc["totals"]["rows"] > 0 and doc["totals"]["bytes"] > 0
    assert len(archived(archive)) == len(IDLE)
    usage = subprocess.run([*CLI, "retention", str(db), "--idle", "30days"], capture_output=True,
                           text=True)  # fmt: skip
    assert usage.returncode == 2
    missing = subprocess.run([*CLI, "retention", str(db), "--idle", "30d"], capture_output=True,
                             text=True)  # fmt: skip
    assert missing.returncode == 2 and "--key" in missing.stderr


def test_cli_retention_progress_bar_on_a_tty(db: Path, signer: Signer, tmp_path: Path) -> None:
    archive, key = tmp_path / "receipts", _key(tmp_path, signer)
    proc, tty = run_on_a_tty([*CLI, "retention", str(db), "--idle", "30d", "--key", str(key),
                              "--archive", str(archive)])  # fmt: skip
    assert proc.returncode == 0
    assert b"\r[" in tty and f"{len(IDLE)}/{len(IDLE)}".encode() in tty
    out = proc.stdout.decode()
    assert f"{len(IDLE)} threads erased" in out and f"{len(IDLE)} receipts" in out
    piped = subprocess.run([*CLI, "retention", str(db), "--idle", "30d", "--key", str(key),
                            "--archive", str(archive)], capture_output=True)  # fmt: skip
    assert piped.returncode == 0 and b"\r[" not in piped.stderr
    assert b"0 threads erased" in piped.stdout
