"""A retention sweep never stops on one bad thread; `receipt recover` never stops on one
bad journal row.

* A thread id over 4,096 characters (LangGraph stores it; a receipt cannot name it) and a
  thread whose rows make the erasure fail for real (a trigger refusing their deletion)
  are counted as failed; the idle threads before and after them are erased, one receipt
  each; ``receipt retention`` exits 1 (not 2), on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from erasure_receipts import AttestingSqliteSaver, Signer, verify_receipt
from test_retention_review import _key, _pg_old_threads, _pg_threads, cli, old_sqlite_db

AGE = timedelta(days=30)
LONG = "x" * 4097 + "-long"  # compressible: PostgreSQL's btree index takes it too
STUCK = "stuck"
GOOD = ["a", "m", "z"]  # before and after the bad ones in primary-key order


def _receipt_threads(archive: Path, signer: Signer) -> list[str]:
    out = []
    for p in sorted(archive.glob("*.json")):
        v = verify_receipt(p.read_bytes(), [signer.public_key])
        out.append(v.thread_id)
    return sorted(out)


# -- SQLite -----------------------------------------------------------------------------------


def _sqlite_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = old_sqlite_db(tmp_path / "app.db", monkeypatch, [*GOOD, LONG, STUCK])
    with sqlite3.connect(db) as conn:  # the erasure of "stuck" fails inside its transaction
        conn.execute(
            "CREATE TRIGGER keep_stuck BEFORE DELETE ON checkpoints "
            f"WHEN OLD.thread_id = '{STUCK}' BEGIN SELECT RAISE(ABORT, 'held by policy'); END"
        )
    return db


def _sqlite_threads(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}


def test_sqlite_sweeps_go_on_past_a_long_id_and_a_failing_thread(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _sqlite_db(tmp_path, monkeypatch)
    archive = tmp_path / "receipts"
    events: list[Any] = []
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        pruned = saver.prune_histories(AGE)
        assert pruned.threads == len(GOOD) and pruned.failed == 2, pruned
        result = saver.erase_idle_threads(AGE, progress=events.append)
    assert not result.ok and result.failed == 2
    assert result.threads == result.receipts == len(GOOD)
    failures = dict(result.failures)
    assert set(failures) == {LONG, STUCK}
    assert "4102 characters, over the 4096" in failures[LONG]
    assert "held by policy" in failures[STUCK]
    assert {(e.thread_id, e.outcome) for e in events} == {
        *((t, "erased") for t in GOOD),
        (LONG, "failed"),
        (STUCK, "failed"),
    }
    assert _sqlite_threads(db) == {LONG, STUCK}  # the bad ones are left, reported
    assert _receipt_threads(archive, signer).count("a") == 2  # history, then whole thread
    assert set(_receipt_threads(archive, signer)) == set(GOOD)


def test_sqlite_cli_retention_exits_1_and_erases_the_others(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _sqlite_db(tmp_path, monkeypatch)
    archive, key = tmp_path / "receipts", _key(tmp_path, signer)
    run = cli("retention", db, "--idle", "30d", "--key", key, "--archive", archive, "--json")
    assert run.exit_code == 1, (run.stdout, run.stderr)
    doc = json.loads(run.stdout)
    assert doc["idle"]["failed"] == 2 and doc["idle"]["threads"] == len(GOOD)
    assert {f["thread_id"] for f in doc["idle"]["failures"]} == {LONG, STUCK}
    assert _sqlite_threads(db) == {LONG, STUCK}
    # Text output: one line per failure, the long id cut short.
    (tmp_path / "again").mkdir()
    db2 = _sqlite_db(tmp_path / "again", monkeypatch)
    text = cli("retention", db2, "--idle", "30d", "--key", key, "--archive", tmp_path / "r2")
    assert text.exit_code == 1, (text.stdout, text.stderr)
    assert "3 threads erased" in text.stdout
    errors = [ln for ln in text.stderr.splitlines() if ln.startswith("receipt: error: thread")]
    assert len(errors) == 2 and all(len(ln) < 400 for ln in errors)


# -- PostgreSQL --------------------------------------------------------------------------------


def _pg_db(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from pg_helpers import connect

    _pg_old_threads(dsn, monkeypatch, [*GOOD, LONG, STUCK])
    with connect(dsn) as c:
        c.execute(
            "CREATE FUNCTION keep_stuck() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "RAISE EXCEPTION 'held by policy'; END $$"
        )
        c.execute(
            "CREATE TRIGGER keep_stuck BEFORE DELETE ON checkpoints FOR EACH ROW "
            f"WHEN (OLD.thread_id = '{STUCK}') EXECUTE FUNCTION keep_stuck()"
        )


def test_pg_sweeps_go_on_past_a_long_id_and_a_failing_thread(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from erasure_receipts import AttestingPostgresSaver

    _pg_db(pg_db, monkeypatch)
    archive = tmp_path / "receipts"
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, archive=archive) as saver:
        saver.setup()
        pruned = saver.prune_histories(AGE)
        assert pruned.threads == len(GOOD) and pruned.failed == 2, pruned
        result = saver.erase_idle_threads(AGE)
    assert result.threads == result.receipts == len(GOOD) and result.failed == 2
    failures = dict(result.failures)
    assert set(failures) == {LONG, STUCK} and "held by policy" in failures[STUCK]
    assert _pg_threads(pg_db) == {LONG, STUCK}
    assert set(_receipt_threads(archive, signer)) == set(GOOD)


def test_pg_cli_retention_exits_1_and_erases_the_others(
    pg_db: str, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pg_db(pg_db, monkeypatch)
    archive, key = tmp_path / "receipts", _key(tmp_path, signer)
    run = cli("retention", pg_db, "--idle", "30d", "--history", "30d", "--key", key,
              "--archive", archive, "--json")  # fmt: skip
    assert run.exit_code == 1, (run.stdout, run.stderr)
    doc = json.loads(run.stdout)
    assert doc["idle"]["failed"] == 2 and doc["idle"]["threads"] == len(GOOD)
    assert doc["history"]["failed"] == 2
    assert _pg_threads(pg_db) == {LONG, STUCK}
