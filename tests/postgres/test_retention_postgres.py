"""Retention sweeps on PostgreSQL (real server): exactly the idle threads, one receipt
each, resumable after kill -9; history sweeps; the async saver."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from erasure_receipts import (
    AsyncAttestingPostgresSaver,
    AttestingPostgresSaver,
    Signer,
    verify_receipt,
)
from pg_helpers import connect
from test_history_graphs import CHAT_TURNS, cfg, chat_graph, checkpoint_clock, human

THREADS = 200
IDLE = {f"t{i:04d}" for i in range(0, THREADS, 10)}  # 20


def build(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with AttestingPostgresSaver.from_conn_string(dsn, signer=Signer.from_seed(bytes(32))) as s:
        s.setup()
        graph = chat_graph(s)
        with checkpoint_clock(monkeypatch, datetime.now(UTC) - timedelta(days=40)):
            for t in sorted(IDLE):
                graph.invoke(human("an old conversation"), cfg(t))
        for i in range(THREADS):
            if f"t{i:04d}" not in IDLE:
                graph.invoke(human("a recent one"), cfg(f"t{i:04d}"))


def threads(dsn: str) -> set[str]:
    with connect(dsn) as conn:
        return {r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}


def receipt_threads(archive: Path) -> list[str]:
    return sorted(
        json.loads(p.read_bytes())["statement"]["predicate"]["scope"]["thread_id"]
        for p in archive.glob("*.json")
    )


SWEEP = """
import os, signal, sys
from datetime import timedelta
from erasure_receipts import AttestingPostgresSaver, Signer
from erasure_receipts._backends import postgres as b
dsn, archive, crash_after = sys.argv[1], sys.argv[2], int(sys.argv[3])
original, calls = b.record_statement, [0]
def record(*args):
    calls[0] += 1
    if calls[0] == crash_after:
        os.kill(os.getpid(), signal.SIGKILL)  # after the commit, before the receipt
    return original(*args)
b.record_statement = record
with AttestingPostgresSaver.from_conn_string(dsn, signer=Signer.from_seed(bytes(range(32))),
                                             archive=archive) as saver:
    saver.erase_idle_threads(timedelta(days=30))
"""


def test_pg_idle_sweep_killed_and_rerun(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(pg_db, monkeypatch)
    archive = tmp_path / "receipts"
    proc = subprocess.run([sys.executable, "-c", SWEEP, pg_db, str(archive), "8"], timeout=300)
    assert proc.returncode == -signal.SIGKILL
    assert len(receipt_threads(archive)) == 7
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, archive=archive) as saver:
        assert saver.count_idle_threads(timedelta(days=30)) == len(IDLE) - 8
        result = saver.erase_idle_threads(timedelta(days=30))
        assert result.ok and result.recovered == 1 and result.threads == len(IDLE) - 8
        assert saver.pending_erasures() == []
        assert all(saver.is_erased(t) for t in IDLE)
        again = saver.erase_idle_threads(timedelta(days=30))
        assert again.threads == again.receipts == 0
    assert receipt_threads(archive) == sorted(IDLE)
    assert threads(pg_db) == {f"t{i:04d}" for i in range(THREADS)} - IDLE
    for p in archive.glob("*.json"):
        verify_receipt(p.read_bytes(), [signer.public_key])


async def test_pg_async_history_and_idle_sweeps(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(pg_db, monkeypatch)
    archive = tmp_path / "receipts"
    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(pg_db, kwargs=kwargs, min_size=1, max_size=4,
                                   open=False) as pool:  # fmt: skip
        saver = AsyncAttestingPostgresSaver(pool, signer=signer, archive=archive)
        await saver.setup()
        graph = chat_graph(saver)
        with checkpoint_clock(monkeypatch, datetime.now(UTC) - timedelta(days=10)):
            for text in CHAT_TURNS:
                await graph.ainvoke(human(text), cfg("h1"))
        dry = await saver.aprune_histories(timedelta(days=7), dry_run=True)
        assert dry.threads == len(IDLE) + 1 and dry.rows > 0
        pruned = await saver.aprune_histories(timedelta(days=7))
        assert pruned.ok and pruned.threads == len(IDLE) + 1 and pruned.rows == dry.rows
        again = await saver.aprune_histories(timedelta(days=7))
        assert again.threads == 0 and again.skipped == {"nothing_to_remove": len(IDLE) + 1}
        out = await graph.ainvoke(human("back again"), cfg("h1"))
        assert "noted: back again" in [m.content for m in out["messages"]]
        erased = await saver.aerase_idle_threads(timedelta(days=30))
        assert erased.ok and erased.threads == len(IDLE)
    kinds = sorted(json.loads(p.read_bytes())["statement"]["predicate"]["kind"]
                   for p in archive.glob("*.json"))  # fmt: skip
    assert kinds.count("history") == len(IDLE) + 1 and kinds.count("thread") == len(IDLE)


def test_pg_cli_retention(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(pg_db, monkeypatch)
    key, archive = tmp_path / "k.pem", tmp_path / "receipts"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    cli = [sys.executable, "-c", "from erasure_receipts.cli import main; main()", "retention"]
    time.sleep(1.1)  # every thread's latest checkpoint is then older than --history 1s
    dry = subprocess.run([*cli, pg_db, "--idle", "30d", "--history", "1s", "--dry-run", "--json"],
                         capture_output=True, text=True)  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    doc = json.loads(dry.stdout)
    assert doc["idle"]["threads"] == len(IDLE) and doc["history"]["threads"] == THREADS
    run = subprocess.run([*cli, pg_db, "--idle", "30d", "--key", str(key), "--archive",
                          str(archive), "--json"], capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["totals"]["threads"] == doc["totals"]["receipts"] == len(IDLE)
    assert receipt_threads(archive) == sorted(IDLE)
