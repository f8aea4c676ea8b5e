"""Concurrency and crash safety against a real PostgreSQL server (the CI slice).

The full versions (>= 20 race repetitions, >= 50 crash trials) are in
``bench/erase_postgres.py``; these run the same code a few times so CI stays fast.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import psycopg

from erasure_receipts import AttestingPostgresSaver, Signer, verify_receipt
from pg_race import crash_once, populate, race_once


def test_pg_race_writers_and_erasure(pg_db: str) -> None:
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=Signer.generate()) as saver:
        saver.setup()
    for rep in range(2):  # even: attesting target writer; odd: plain PostgresSaver
        res = race_once(pg_db, rep, others=8)
        assert res.lost_elsewhere == 0, res
        assert res.surviving_target == 0, res
        assert res.counted_mismatch == 0, res
        assert res.target[3], "the target writer was never refused"
        assert all(o[1] > 0 for o in res.others), res.others
        assert verify_receipt(
            res.receipt.to_json(), [Signer.from_seed(bytes(range(32))).public_key]
        )


def test_pg_crash_kill_9_then_recover(pg_db: str, tmp_path: Path) -> None:
    populate(pg_db, "calibrate", 150)
    with AttestingPostgresSaver.from_conn_string(
        pg_db, signer=Signer.generate(), archive=tmp_path / "cal"
    ) as saver:
        t0 = time.perf_counter()
        saver.erase_thread("calibrate")
        duration = time.perf_counter() - t0
    rng = random.Random(6)
    outcomes = []
    for trial in range(6):
        res = crash_once(pg_db, trial, tmp_path / "receipts", steps=150,
                         max_delay=duration * 1.5 + 0.05, rng=rng)  # fmt: skip
        assert res.ok, res
        outcomes.append(res.outcome)
    assert set(outcomes) <= {"intact", "erased"}
    with psycopg.connect(pg_db) as conn:
        row = conn.execute("SELECT count(*) FROM erasure_journal WHERE receipt IS NULL").fetchone()
    assert row is not None and row[0] == 0
