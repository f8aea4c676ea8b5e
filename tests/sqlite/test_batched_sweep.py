"""Batched retention sweeps on SQLite (``erase_idle_threads(batch=...)``): exactly the
idle threads, each in exactly one verifying ``subject`` receipt whose units bind its
rows, per-thread inclusion proofs, the in-transaction re-check, the adaptive batch size,
and kill -9 of a real sweeping process at chosen and at random points, then a re-run.
"""

from __future__ import annotations

import json
import os
import random
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

from erasure_receipts import AttestingSqliteSaver, ConfigurationError, Signer, verify_receipt
from erasure_receipts._ops import sweep_batch
from faults import inject
from test_history_graphs import cfg, chat_graph, checkpoint_clock, human

THREADS = 600
IDLE = {f"t{i:05d}" for i in range(0, THREADS, 3)}  # 200, interleaved with active ones
SEED = bytes(range(32))
CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]


def _build(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with AttestingSqliteSaver.from_conn_string(str(db), signer=Signer.from_seed(SEED)) as saver:
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
    db = tmp_path_factory.mktemp("batched") / "template.db"
    with pytest.MonkeyPatch.context() as m:
        _build(db, m)
    return db


@pytest.fixture
def db(template: Path, tmp_path: Path) -> Path:
    target = tmp_path / "app.db"
    shutil.copy(template, target)
    return target


def rows_per_thread(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        out: dict[str, int] = {}
        for table in ("checkpoints", "writes"):
            for t, n in conn.execute(f"SELECT thread_id, count(*) FROM {table} GROUP BY 1"):
                out[t] = out.get(t, 0) + n
        return out


def receipts(archive: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_bytes()) for p in sorted(archive.glob("*.json"))]


def scope_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_bytes())["statement"]["predicate"]["scope"]  # type: ignore[no-any-return]


def erased_threads(archive: Path) -> list[str]:
    """Every thread named by a receipt of the archive (a batch lists several)."""
    out: list[str] = []
    for r in receipts(archive):
        scope = r["statement"]["predicate"]["scope"]
        out += scope["threads"] if "threads" in scope else [scope["thread_id"]]
    return out


def assert_exactly_once(db: Path, archive: Path, signer: Signer) -> None:
    """Every idle thread in exactly one verifying receipt; its rows gone; every active
    thread untouched; no open journal entry."""
    assert sorted(erased_threads(archive)) == sorted(IDLE)
    left = rows_per_thread(db)
    assert set(left) == {f"t{i:05d}" for i in range(THREADS)} - IDLE
    for path in archive.glob("*.json"):
        verify_receipt(path.read_bytes(), [signer.public_key])
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        assert saver.pending_erasures() == []


def test_batched_sweep_erases_the_idle_threads_in_few_receipts(
    db: Path, signer: Signer, tmp_path: Path
) -> None:
    archive = tmp_path / "receipts"
    before = rows_per_thread(db)
    events: list[Any] = []
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        result = saver.erase_idle_threads(timedelta(days=30), batch=True, progress=events.append)
    assert result.ok and result.threads == len(IDLE)
    assert result.receipts == len(list(archive.glob("*.json"))) < len(IDLE) // 4
    assert result.rows == sum(before[t] for t in IDLE)
    assert_exactly_once(db, archive, signer)
    erased = [e for e in events if e.outcome == "erased"]
    assert sorted(e.thread_id for e in erased) == sorted(IDLE)
    assert {e.rows for e in erased} == {before[next(iter(IDLE))]}
    by_receipt = {r["statement"]["predicate"]["receipt_id"]: r for r in receipts(archive)}
    for e in erased:  # the event names the batch receipt that lists the thread
        pred = by_receipt[e.receipt_id]["statement"]["predicate"]
        assert pred["kind"] == "subject"
        assert pred["scope"]["subject"].startswith("retention:idle:before:")
        assert pred["scope"]["discovery"] is None
        (unit,) = [u for u in pred["units"] if u["name"] == f"thread:{e.thread_id}"]
        assert unit["leaves"] == e.rows
    # The same sweep again: nothing left to do, nothing issued twice.
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        again = saver.erase_idle_threads(timedelta(days=30), batch=True)
    assert again.threads == again.receipts == 0
    assert_exactly_once(db, archive, signer)


def test_one_thread_is_proven_into_its_batch_receipt(
    db: Path, signer: Signer, tmp_path: Path
) -> None:
    archive, thread = tmp_path / "receipts", "t00300"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        (record, *_) = saver.export_leaves(thread)
        result = saver.erase_idle_threads(timedelta(days=30), batch=64)
    assert result.ok and result.threads == len(IDLE)
    (path,) = [p for p in archive.glob("*.json") if thread in scope_of(p)["threads"]]
    row = tmp_path / "row.json"
    data = record.to_json()
    row.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    pub = tmp_path / "pub.pem"
    pub.write_bytes(signer.public_pem())
    ok = subprocess.run([*CLI, "prove", str(row), "--receipt", str(path), "--key", str(pub)],
                        capture_output=True, text=True, timeout=60)  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    other = next(p for p in archive.glob("*.json") if p != path)  # not in that batch
    bad = subprocess.run([*CLI, "prove", str(row), "--receipt", str(other), "--key", str(pub),
                          "--json"], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 1 and json.loads(bad.stdout)["reason"] == "wrong_thread"


def test_thread_that_became_active_is_dropped_from_its_batch(
    db: Path, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Selected as idle, written to before its batch's transaction: the check under the
    write lock drops it; the batch is erased without it, and it keeps every row."""
    victim, archive = "t00030", tmp_path / "receipts"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        real = saver._eraser.journal.idle_threads

        def select_then_write(conn: Any, *args: Any) -> Any:
            page = real(conn, *args)
            if any(t == victim for t, *_ in page):
                from langgraph.checkpoint.base.id import uuid6

                conn.execute(  # its latest checkpoint now has a current id
                    "UPDATE checkpoints SET checkpoint_id = ? WHERE thread_id = ? AND "
                    "checkpoint_id = (SELECT max(checkpoint_id) FROM checkpoints "
                    "WHERE thread_id = ?)", (str(uuid6()), victim, victim))  # fmt: skip
                conn.commit()
            return page

        inject(monkeypatch, saver, idle_threads=select_then_write)
        events: list[Any] = []
        result = saver.erase_idle_threads(timedelta(days=30), batch=True, progress=events.append)
    assert result.ok and result.threads == len(IDLE) - 1
    assert result.skipped == {"became_active": 1}
    assert [e.outcome for e in events if e.thread_id == victim] == ["became_active"]
    assert victim not in erased_threads(archive)
    assert victim in rows_per_thread(db)


def test_batch_size_follows_the_time_budget(
    db: Path, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "receipts"
    monkeypatch.setattr(sweep_batch, "BUDGET_SECONDS", 1e-6)  # every batch over budget
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        saver.erase_idle_threads(timedelta(days=30), batch=True)
    sizes = sorted(len(r["statement"]["predicate"]["scope"]["threads"]) for r in receipts(archive))
    assert sizes[-1] == sweep_batch.FIRST_BATCH and sizes.count(1) >= len(sizes) - 2
    assert sorted(erased_threads(archive)) == sorted(IDLE)


def test_batch_size_grows_to_the_largest_allowed(
    db: Path, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "receipts"
    monkeypatch.setattr(sweep_batch, "BUDGET_SECONDS", 1000.0)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        saver.erase_idle_threads(timedelta(days=30), batch=50)
    sizes = [len(r["statement"]["predicate"]["scope"]["threads"]) for r in receipts(archive)]
    assert max(sizes) == 50 and sum(sizes) == len(IDLE)  # 16, 32, 50, 50, 50, 2


def test_batch_size_counts_the_transaction_not_the_signing_after_it(
    db: Path, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writers wait only for a batch's transaction: a slow signature or archive write
    after the commit does not shrink the batches (it did when the whole batch was timed)."""
    from erasure_receipts._engine.eraser import Eraser

    archive = tmp_path / "receipts"
    monkeypatch.setattr(sweep_batch, "BUDGET_SECONDS", 0.3)
    real = Eraser._sign

    def slow_sign(self: Eraser, statement_json: str) -> Any:
        time.sleep(0.4)  # over the budget by itself, after the commit
        return real(self, statement_json)

    monkeypatch.setattr(Eraser, "_sign", slow_sign)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        saver.erase_idle_threads(timedelta(days=30), batch=True)
        assert 0 < saver._eraser.phase_one_seconds < 0.3
    sizes = [len(r["statement"]["predicate"]["scope"]["threads"]) for r in receipts(archive)]
    assert sorted(sizes) == [16, 32, 64, len(IDLE) - 112]  # doubling, never shrinking


def test_failed_batch_is_erased_thread_by_thread(
    db: Path, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch whose transaction fails (here: a read of its re-check) is rolled back and
    its threads erased one receipt each; nothing is lost or listed twice."""
    archive, calls = tmp_path / "receipts", [0]
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        real = saver._eraser.journal.run_in_flight

        def flaky(conn: Any, thread_id: str) -> bool:
            calls[0] += 1
            if calls[0] == 2:  # inside the first batch's transaction
                raise OSError("disk hiccup")
            return bool(real(conn, thread_id))

        inject(monkeypatch, saver, run_in_flight=flaky)
        result = saver.erase_idle_threads(timedelta(days=30), batch=True)
    assert result.ok and result.threads == len(IDLE)
    assert_exactly_once(db, archive, signer)


@pytest.mark.parametrize("bad", [0, -1, 1001, "yes", 2.5])
def test_bad_batch_argument_is_refused(db: Path, signer: Signer, bad: Any) -> None:
    with (
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver,
        pytest.raises(ConfigurationError, match="batch="),
    ):
        saver.erase_idle_threads(timedelta(days=30), batch=bad)


def test_dry_run_with_batch_changes_nothing(db: Path, signer: Signer) -> None:
    before = rows_per_thread(db)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        result = saver.erase_idle_threads(timedelta(days=30), batch=True, dry_run=True)
    assert result.threads == len(IDLE) and result.receipts == 0
    assert rows_per_thread(db) == before


SWEEP = """
import os, signal, sys
from datetime import timedelta
from erasure_receipts import AttestingSqliteSaver, Signer
from erasure_receipts._backends import sqlite as b
db, archive, point, nth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if point != "none":
    # kill -9 at the nth call of one step of the flow
    original, calls = getattr(b, point), [0]
    def hooked(*args, **kwargs):
        calls[0] += 1
        if calls[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)
    setattr(b, point, hooked)
with AttestingSqliteSaver.from_conn_string(db, signer=Signer.from_seed(bytes(range(32))),
                                           archive=archive) as saver:
    saver.erase_idle_threads(timedelta(days=30), batch=int(os.environ.get("BATCH", "24")))
"""


def _rerun(db: Path, archive: Path, signer: Signer) -> Any:
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        return saver.erase_idle_threads(timedelta(days=30), batch=True)


@pytest.mark.parametrize(
    ("point", "nth"),
    [
        ("latest_checkpoint", 53),  # inside the third batch's transaction: rolled back
        ("record_statement", 2),  # after the second batch's commit, before its receipt
        ("mark_issued", 4),  # after the fourth receipt is archived, before it is marked
    ],
)
def test_batched_sweep_killed_at_a_point_then_rerun(
    db: Path, signer: Signer, tmp_path: Path, point: str, nth: int
) -> None:
    archive = tmp_path / "receipts"
    proc = subprocess.run([sys.executable, "-c", SWEEP, str(db), str(archive), point, str(nth)],
                          timeout=300)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL
    result = _rerun(db, archive, signer)
    assert result.ok
    # Killed after a commit: the re-run issues that batch's receipt from the journal
    # first (after the archive write: the same receipt again, the same file).
    assert result.recovered == (0 if point == "latest_checkpoint" else 1)
    assert_exactly_once(db, archive, signer)


def test_batched_sweep_killed_at_random_times_then_rerun(
    db: Path, signer: Signer, tmp_path: Path
) -> None:
    """Killed three times wherever it happens to be (a transaction, the residue step,
    signing, the archive write), each time after some progress; then run to the end."""
    archive, rng = tmp_path / "receipts", random.Random(20)
    env = {**os.environ, "BATCH": "8"}
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", SWEEP, str(db), str(archive), "none", "0"],
                                env=env)  # fmt: skip
        try:
            start = len(erased_threads(archive)) if archive.exists() else 0
            deadline = time.monotonic() + 120
            while (len(list(archive.glob("*.json"))) if archive.exists() else 0) <= start // 8:
                assert proc.poll() is None, "the sweep ended before it could be killed"
                assert time.monotonic() < deadline
                time.sleep(0.002)
            time.sleep(rng.uniform(0, 0.05))
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(timeout=60)
    result = _rerun(db, archive, signer)
    assert result.ok
    assert_exactly_once(db, archive, signer)


def test_cli_retention_batch(db: Path, signer: Signer, tmp_path: Path) -> None:
    key, archive = tmp_path / "k.pem", tmp_path / "receipts"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    base = [*CLI, "retention", str(db), "--key", str(key), "--archive", str(archive)]
    usage = subprocess.run([*base, "--history", "30d", "--batch"], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert usage.returncode == 2 and "--batch applies to --idle" in usage.stderr
    run = subprocess.run([*base, "--idle", "30d", "--batch", "--json"], capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["idle"]["threads"] == len(IDLE)
    assert doc["totals"]["receipts"] == len(list(archive.glob("*.json"))) < len(IDLE)
    assert_exactly_once(db, archive, signer)


def _thread_rows(db: Path, tid: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return [
            row
            for table in ("checkpoints", "writes")
            for row in conn.execute(
                f"SELECT * FROM {table} WHERE thread_id = ? ORDER BY 2, 3, 4", (tid,)
            )
        ]


def test_batched_sweep_keeps_a_deferred_thread_and_a_deferral_recorded_late(
    db: Path, signer: Signer, tmp_path: Path
) -> None:
    """A retained idle thread stays out of every batch (raw rows byte-identical); one
    retained after it was queued fails its batch, which is redone per thread, and is
    kept too. Every other idle thread is erased exactly once."""
    archive = tmp_path / "receipts"
    kept, late, *_ = sorted(IDLE)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        saver.defer(kept, basis="legal hold", until=datetime.now(UTC) + timedelta(days=90))
    archive_deferral = set(archive.glob("*.json"))
    before_kept, before_late = _thread_rows(db, kept), _thread_rows(db, late)
    queued: list[str] = []
    real = sweep_batch.Batcher.offer

    def offer(self: Any, tid: str, latest: str) -> None:
        real(self, tid, latest)
        queued.append(tid)
        if tid == late:  # retained between the queue and the batch's transaction
            with AttestingSqliteSaver.from_conn_string(
                str(db), signer=signer, archive=tmp_path / "late"
            ) as other:
                other.defer(late, basis="late hold", until=datetime.now(UTC) + timedelta(days=9))

    with (
        pytest.MonkeyPatch.context() as m,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver,
    ):
        m.setattr(sweep_batch.Batcher, "offer", offer)
        result = saver.erase_idle_threads(timedelta(days=30), batch=True)
    assert kept not in queued and late in queued
    assert result.skipped.get("deferred", 0) >= 2
    assert _thread_rows(db, kept) == before_kept and _thread_rows(db, late) == before_late
    erasures = [p for p in archive.glob("*.json") if p not in archive_deferral]
    named = [
        t for p in erasures for t in (scope_of(p).get("threads") or [scope_of(p)["thread_id"]])
    ]
    assert sorted(named) == sorted(IDLE - {kept, late})
    for p in erasures:
        verify_receipt(p.read_bytes(), [signer.public_key])


def test_batched_sweep_looks_up_deferrals_per_page_not_per_thread(
    db: Path, signer: Signer, tmp_path: Path
) -> None:
    """With deferrals on record but none retaining an idle thread, a batched sweep asks
    once per page of selected threads (and once in each batch's transaction), not once
    per thread; every idle thread is still erased and the retained one is kept."""
    archive = tmp_path / "receipts"
    active = next(f"t{i:05d}" for i in range(THREADS) if f"t{i:05d}" not in IDLE)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        saver.defer(active, basis="legal hold", until=datetime.now(UTC) + timedelta(days=90))
    deferral_files = set(archive.glob("*.json"))
    looked_up: list[str] = []
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        saver.conn.set_trace_callback(
            lambda sql: looked_up.append(sql) if "JOIN erasure_deferral_threads" in sql else None
        )
        result = saver.erase_idle_threads(timedelta(days=30), batch=True)
        saver.conn.set_trace_callback(None)
    batches = len(set(archive.glob("*.json")) - deferral_files)
    assert result.threads == len(IDLE) and result.ok
    assert 0 < len(looked_up) <= 2 + batches < len(IDLE) // 2
    assert active in rows_per_thread(db)
