"""Batched retention sweeps on PostgreSQL (real server): several sweeping processes on
one database split the idle threads through the database (claims), every idle thread
erased exactly once and listed in exactly one verifying receipt - checked from the
receipts and from the rows; `receipt retention DSN --workers N`; a worker killed with
SIGKILL mid-sweep, then a re-run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from erasure_receipts import AttestingPostgresSaver, Signer, verify_receipt
from pg_helpers import connect
from test_history_graphs import cfg, chat_graph, checkpoint_clock, human

THREADS = 360
IDLE = {f"t{i:04d}" for i in range(0, THREADS, 2)}  # 180
SEED = bytes(range(32))
CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()", "retention"]


def build(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with AttestingPostgresSaver.from_conn_string(dsn, signer=Signer.from_seed(SEED)) as s:
        s.setup()
        graph = chat_graph(s)
        with checkpoint_clock(monkeypatch, datetime.now(UTC) - timedelta(days=40)):
            for t in sorted(IDLE):
                graph.invoke(human("an old conversation"), cfg(t))
        for i in range(THREADS):
            if f"t{i:04d}" not in IDLE:
                graph.invoke(human("a recent one"), cfg(f"t{i:04d}"))


def threads_with_rows(dsn: str) -> set[str]:
    with connect(dsn) as conn:
        return {
            r[0]
            for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
            for r in conn.execute(f"SELECT DISTINCT thread_id FROM {table}")
        }


def listed(archive: Path) -> list[str]:
    out: list[str] = []
    for p in archive.glob("*.json"):
        scope = json.loads(p.read_bytes())["statement"]["predicate"]["scope"]
        out += scope["threads"] if "threads" in scope else [scope["thread_id"]]
    return out


def assert_exactly_once(dsn: str, archive: Path, signer: Signer) -> None:
    assert sorted(listed(archive)) == sorted(IDLE)  # each in exactly one receipt
    assert threads_with_rows(dsn) == {f"t{i:04d}" for i in range(THREADS)} - IDLE
    ids = set()
    for p in archive.glob("*.json"):
        r = verify_receipt(p.read_bytes(), [signer.public_key])
        ids.add(r.receipt_id)
    assert len(ids) == len(list(archive.glob("*.json")))
    with AttestingPostgresSaver.from_conn_string(dsn, signer=signer) as saver:
        assert saver.pending_erasures() == []
        assert all(saver.is_erased(t) for t in IDLE)


SWEEP = """
import json, os, signal, sys, time
from datetime import timedelta
from erasure_receipts import AttestingPostgresSaver, Signer
dsn, archive, go = sys.argv[1], sys.argv[2], float(sys.argv[3])
with AttestingPostgresSaver.from_conn_string(dsn, signer=Signer.from_seed(bytes(range(32))),
                                             archive=archive) as saver:
    time.sleep(max(0.0, go - time.time()))  # every sweeper starts at the same moment
    r = saver.erase_idle_threads(timedelta(days=30), batch=int(os.environ.get("BATCH", "12")))
    print(json.dumps(r.to_json()))
"""


@pytest.mark.parametrize("n", [2, 4])
def test_concurrent_sweepers_erase_every_idle_thread_exactly_once(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    build(pg_db, monkeypatch)
    archive = tmp_path / "receipts"
    go = time.time() + 3
    procs = [subprocess.Popen([sys.executable, "-c", SWEEP, pg_db, str(archive), str(go)],
                              stdout=subprocess.PIPE, text=True) for _ in range(n)]  # fmt: skip
    docs = []
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0
        docs.append(json.loads(out))
    assert all(d["failed"] == 0 for d in docs)
    assert sum(d["threads"] for d in docs) == len(IDLE)  # nobody erased one twice
    assert sum(1 for d in docs if d["threads"]) >= 2  # they shared the work
    assert sum(d["receipts"] for d in docs) == len(list(archive.glob("*.json")))
    assert_exactly_once(pg_db, archive, signer)


def test_cli_workers(pg_db: str, signer: Signer, tmp_path: Path,
                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    build(pg_db, monkeypatch)
    key, archive = tmp_path / "k.pem", tmp_path / "receipts"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    run = subprocess.run([*CLI, pg_db, "--idle", "30d", "--key", str(key), "--archive",
                          str(archive), "--workers", "3", "--json"],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["ok"] and doc["idle"]["threads"] == doc["totals"]["threads"] == len(IDLE)
    assert len(doc["workers"]) == 3
    assert sum(w["threads"] for w in doc["workers"]) == len(IDLE)
    assert doc["totals"]["receipts"] == len(list(archive.glob("*.json"))) < len(IDLE)
    kinds = {json.loads(p.read_bytes())["statement"]["predicate"]["kind"]
             for p in archive.glob("*.json")}  # fmt: skip
    assert kinds == {"subject"}
    assert_exactly_once(pg_db, archive, signer)
    text = subprocess.run([*CLI, pg_db, "--idle", "30d", "--key", str(key), "--archive",
                           str(archive), "--workers", "2"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert text.returncode == 0, text.stderr
    assert "0 threads erased" in text.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--history", "30d"], "--idle only"),
        (["--dry-run"], "--idle only"),
    ],
)
def test_cli_workers_usage(pg_db: str, signer: Signer, tmp_path: Path, args: list[str],
                           message: str) -> None:  # fmt: skip
    key = tmp_path / "k.pem"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as s:
        s.setup()
    run = subprocess.run([*CLI, pg_db, "--idle", "30d", "--key", str(key), "--archive",
                          str(tmp_path / "r"), "--workers", "2", *args],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 2 and message in run.stderr


def test_a_killed_sweeper_and_the_others_then_a_rerun(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three sweepers; one is killed with SIGKILL once receipts appear (its claims end
    with its connection); the others finish; a re-run recovers whatever it committed
    without a receipt; every idle thread in exactly one receipt."""
    build(pg_db, monkeypatch)
    archive = tmp_path / "receipts"
    go = time.time() + 3
    env = {**os.environ, "BATCH": "6"}
    procs = [subprocess.Popen([sys.executable, "-c", SWEEP, pg_db, str(archive), str(go)],
                              stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(3)]  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while (len(list(archive.glob("*.json"))) if archive.exists() else 0) < 4:
            assert time.monotonic() < deadline
            time.sleep(0.002)
        os.kill(procs[0].pid, signal.SIGKILL)
    finally:
        for p in procs:
            p.communicate(timeout=300)
    assert procs[0].returncode == -signal.SIGKILL
    assert procs[1].returncode == procs[2].returncode == 0
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, archive=archive) as saver:
        result = saver.erase_idle_threads(timedelta(days=30), batch=True)
    assert result.ok
    assert_exactly_once(pg_db, archive, signer)


def test_sqlite_refuses_workers(tmp_path: Path, signer: Signer) -> None:
    key = tmp_path / "k.pem"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    db = tmp_path / "app.db"
    run = subprocess.run([*CLI, str(db), "--idle", "30d", "--key", str(key), "--archive",
                          str(tmp_path / "r"), "--workers", "2"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 2 and "PostgreSQL" in run.stderr


async def test_async_pooled_saver_batched_sweep(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The async saver on a pool: claims held on a connection of their own, released
    (closed) after each batch; two sweeps on the same pool at once."""
    import asyncio

    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    from erasure_receipts import AsyncAttestingPostgresSaver

    build(pg_db, monkeypatch)
    archive = tmp_path / "receipts"
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(pg_db, kwargs=kwargs, min_size=1, max_size=4,
                                   open=False) as pool:  # fmt: skip
        one = AsyncAttestingPostgresSaver(pool, signer=signer, archive=archive)
        two = AsyncAttestingPostgresSaver(pool, signer=signer, archive=archive)
        await one.setup()
        a, b = await asyncio.gather(
            one.aerase_idle_threads(timedelta(days=30), batch=10),
            two.aerase_idle_threads(timedelta(days=30), batch=10),
        )
    assert a.ok and b.ok and a.threads + b.threads == len(IDLE)
    assert_exactly_once(pg_db, archive, signer)
    with connect(pg_db) as conn:  # no claim is left behind
        (n,) = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s",
            (1162039637,),
        ).fetchone()
    assert n == 0


def claims_held(dsn: str) -> int:
    from erasure_receipts._backends.postgres.journal import CLAIM_CLASS

    with connect(dsn) as conn:
        (n,) = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s",
            (CLAIM_CLASS,),
        ).fetchone()
    return int(n)


def test_a_page_is_claimed_at_once_and_no_claim_outlives_its_use(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweeper claims the selected threads a chunk of two batches at a time, in one
    round trip, before it looks at them (another sweeper passes over the chunk at once
    instead of colliding with it batch after batch), and every claim ends: after its
    batch, at the end of its chunk for a thread the per-thread checks skip (here a
    retained one), and for the rest of a chunk once ``limit=`` is reached - while the
    sweeper's connection stays open."""
    from erasure_receipts._backends.postgres import journal

    build(pg_db, monkeypatch)
    claimed: list[int] = []
    real = journal.claim_threads

    def spy(session: Any, threads: list[str], holder: Any = None) -> Any:
        claimed.append(len(threads))
        return real(session, threads, holder)

    monkeypatch.setattr(journal, "claim_threads", spy)
    until = datetime.now(UTC) + timedelta(days=30)
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer,
                                                 archive=tmp_path / "r") as saver:  # fmt: skip
        saver.defer("t0000", basis="GDPR Art. 17(3)(e): legal claims", until=until)
        first = saver.erase_idle_threads(timedelta(days=30), batch=12, limit=100)
        assert (first.threads, first.limited) == (100, True)
        assert claims_held(pg_db) == 0  # the page's other 80 were let go
        rest = saver.erase_idle_threads(timedelta(days=30), batch=12)
        assert rest.threads == len(IDLE) - 101 and rest.skipped == {"deferred": 1}
        assert claims_held(pg_db) == 0  # including the retained thread's
    # batches of 12: chunks of 24 up to the limit's (t0000, retained, is in the first),
    # then the 80 left (79 and t0000); each thread claimed once per sweep
    assert claimed == [24] * 5 + [24, 24, 24, 8]
    assert threads_with_rows(pg_db) == {f"t{i:04d}" for i in range(THREADS)} - IDLE | {"t0000"}


def _pooled(pg_db: str, max_size: int = 4) -> object:
    from psycopg_pool import ConnectionPool

    return ConnectionPool(pg_db, kwargs={"autocommit": True, "prepare_threshold": 0},
                          min_size=1, max_size=max_size)  # fmt: skip


def test_on_a_pool_one_claim_connection_serves_the_whole_sweep(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a pool the claims are held on a connection of their own: one for the whole
    sweep, closed at its end - also when the per-thread checks skip most threads (the
    queue then fills across many chunks) and when a chunk claims nothing (another
    sweeper holds it). Not one per chunk, which a sweep could multiply until the
    server refuses connections."""
    import warnings

    from erasure_receipts._backends.postgres import journal
    from erasure_receipts._ops import history

    build(pg_db, monkeypatch)
    monkeypatch.setattr(history, "MAX_PASSES", 2)
    tokens: list[Any] = []
    real = journal.claim_threads

    def spy(session: Any, threads: list[str], holder: Any = None) -> Any:
        got, token = real(session, threads, holder)
        tokens.append(token)
        return got, token

    monkeypatch.setattr(journal, "claim_threads", spy)
    idle = sorted(IDLE)
    held = idle[:24]  # the sweeper's first chunk (batch=12): "another sweeper" holds it
    keep = set(idle[24::24])  # then one erasable thread per chunk of 24
    until = datetime.now(UTC) + timedelta(days=30)
    with connect(pg_db) as other, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        other.execute(
            "SELECT pg_advisory_lock(%s, hashtext(t)) FROM unnest(%s::text[]) AS t",
            (journal.CLAIM_CLASS, held),
        )
        with _pooled(pg_db, max_size=2) as pool:  # type: ignore[attr-defined]
            saver = AttestingPostgresSaver(pool, signer=signer, archive=tmp_path / "r")
            for t in idle[24:]:
                if t not in keep:
                    saver.defer(t, basis="GDPR Art. 17(3)(e): legal claims", until=until)
            result = saver.erase_idle_threads(timedelta(days=30), batch=12)
    assert result.threads == len(keep) and result.skipped["claimed"] == len(held)
    assert len(tokens) > 2 and len({id(t) for t in tokens}) == 1  # one connection
    assert tokens[0].closed
    assert not [w for w in seen if issubclass(w.category, ResourceWarning)]
    assert claims_held(pg_db) == 0


def test_claims_interrupted_while_being_released_end_with_the_sweep(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt while a batch's claims are released (here: after the first
    of the two chunks its threads came from) leaves no claim behind on the saver's
    still-open connection: what was not released yet is released when the sweep ends."""
    from erasure_receipts._backends.postgres import journal

    build(pg_db, monkeypatch)
    real = journal.release_claims
    sizes: list[int] = []

    def interrupted(session: Any, threads: Any, token: Any, last: bool = True) -> None:
        real(session, threads, token, last)
        sizes.append(len(threads))
        if len(threads) == 11 and sizes.count(11) == 1:  # the flush spanning two chunks
            raise KeyboardInterrupt  # (11 + 1), once

    monkeypatch.setattr(journal, "release_claims", interrupted)
    until = datetime.now(UTC) + timedelta(days=30)
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer,
                                                 archive=tmp_path / "r") as saver:  # fmt: skip
        saver.defer("t0000", basis="GDPR Art. 17(3)(e): legal claims", until=until)
        with pytest.raises(KeyboardInterrupt):
            saver.erase_idle_threads(timedelta(days=30), batch=12)
        assert 11 in sizes
        assert claims_held(pg_db) == 0


def test_a_later_pass_looks_only_at_the_threads_passed_over(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another sweeper holds one idle thread through the first pass; the second pass
    erases it and looks at nothing else, so the retained threads the first pass skipped
    are counted once, not once per pass."""
    from erasure_receipts._backends.postgres import journal
    from erasure_receipts._ops.sweep_batch import Batcher

    build(pg_db, monkeypatch)
    with connect(pg_db) as other:
        other.execute("SELECT pg_advisory_lock(%s, hashtext('t0004'))", (journal.CLAIM_CLASS,))
        real = Batcher.start_pass

        def start_pass(self: Batcher) -> None:  # the other sweeper lets it go
            other.execute(
                "SELECT pg_advisory_unlock(%s, hashtext('t0004'))", (journal.CLAIM_CLASS,)
            )
            real(self)
            assert self.revisit == {"t0004"}

        monkeypatch.setattr(Batcher, "start_pass", start_pass)
        until = datetime.now(UTC) + timedelta(days=30)
        with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer,
                                                     archive=tmp_path / "r") as saver:  # fmt: skip
            for t in ("t0000", "t0002"):
                saver.defer(t, basis="GDPR Art. 17(3)(e): legal claims", until=until)
            result = saver.erase_idle_threads(timedelta(days=30), batch=12)
    assert result.skipped == {"deferred": 2}
    assert result.threads == len(IDLE) - 2
    assert threads_with_rows(pg_db) == {f"t{i:04d}" for i in range(THREADS)} - IDLE | {
        "t0000", "t0002"}  # fmt: skip
