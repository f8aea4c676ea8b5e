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
from test_retention_thread_skips import _key, _pg_old_threads, _pg_threads, cli, old_sqlite_db

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


# -- receipt recover: one unparsable journal row -------------------------------------------

BAD = {  # receipt id -> (issued_at, entry, statement) written as a damaged row would be
    "00000000-bad0-4000-8000-00000000000a": ("2020-01-01T00:00:00Z", "{not json", None),
    "00000000-bad0-4000-8000-00000000000b": ("yesterday", "{}", None),
    "00000000-bad0-4000-8000-00000000000c": ("2020-01-01T00:00:00Z", "{}", "{bad"),
}
INSERT = ("INSERT INTO erasure_journal (receipt_id, thread_id, issued_at, entry, statement) "
          "VALUES (%s, 'x', %s, %s, %s)")  # fmt: skip
NOT_UTF8 = "00000000-bad0-4000-8000-00000000000d"  # SQLite only: its entry is bytes ff fe


def _erase_and_lose_receipts(saver: Any, threads: list[str]) -> list[str]:
    """Real erasures whose receipts are then lost, as after a crash between commit and
    signature (the journal keeps the measurement, no statement, no receipt)."""
    from test_history_graphs import cfg, chat_graph, human

    graph = chat_graph(saver)
    ids = []
    for t in threads:
        graph.invoke(human(f"hello {t}"), cfg(t))
        ids.append(saver.erase_thread(t).receipt_id)
    return ids


def _check_recover_run(run: Any, good: list[str], bad: list[str], archive: Path,
                       signer: Signer) -> None:  # fmt: skip
    assert run.exit_code == 1, (run.stdout, run.stderr)
    doc = json.loads(run.stdout)
    assert sorted(r["receipt_id"] for r in doc["recovered"]) == sorted(good)
    assert sorted(doc["unparsable"]) == sorted(bad)
    for rid in bad:
        assert rid in doc["error"] and "unparsable journal entry" in doc["error"]
    for rid in good:
        v = verify_receipt((archive / f"{rid}.json").read_bytes(), [signer.public_key])
        assert v.receipt_id == rid


def test_sqlite_recover_names_unparsable_rows_and_recovers_the_others(
    tmp_path: Path, signer: Signer
) -> None:
    db, archive, key = tmp_path / "app.db", tmp_path / "receipts", _key(tmp_path, signer)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        good = _erase_and_lose_receipts(saver, ["a", "b"])
        kept = _erase_and_lose_receipts(saver, ["c"])[0]
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE erasure_journal SET statement = NULL, receipt_sha256 = NULL, "
                     f"receipt = NULL WHERE receipt_id IN ('{good[0]}', '{good[1]}')")  # fmt: skip
        conn.execute("UPDATE erasure_journal SET receipt = '{damaged' WHERE receipt_id = ?",
                     (kept,))  # fmt: skip
        for rid, (t, entry, statement) in BAD.items():
            conn.execute(INSERT.replace("%s", "?"), (rid, t, entry, statement))
        conn.execute("INSERT INTO erasure_journal (receipt_id, thread_id, issued_at, entry) "
                     "VALUES (?, 'x', '2020-01-01T00:00:00Z', CAST(X'7bfffe' AS TEXT))",
                     (NOT_UTF8,))  # fmt: skip
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        pending = {p.receipt_id: p.age_seconds for p in saver.pending_erasures()}
        assert set(pending) == {*good, *BAD, NOT_UTF8}
        assert pending["00000000-bad0-4000-8000-00000000000b"] == float("inf")
        assert [r.receipt_id for r in saver.journal_receipts()] == []  # damaged one skipped
    run = cli("recover", db, "--key", key, "--archive", archive, "--min-age", "0", "--json")
    _check_recover_run(run, good, [*BAD, NOT_UTF8], archive, signer)
    with sqlite3.connect(db) as conn:  # the damaged rows are left as they were
        left = {r[0] for r in conn.execute(
            "SELECT receipt_id FROM erasure_journal WHERE receipt_sha256 IS NULL")}  # fmt: skip
    assert left == {*BAD, NOT_UTF8}
    text = cli("recover", db, "--key", key, "--archive", archive, "--min-age", "0")
    assert text.exit_code == 1 and all(rid in text.stderr for rid in BAD)
    # A sweep's recovery names them as a failure and goes on.
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as s:
        result = s.erase_idle_threads(timedelta(0))
    assert result.failed == 1 and result.failures[0][0] == "(journal)"
    assert all(rid in result.failures[0][1] for rid in BAD)


def test_pg_recover_names_unparsable_rows_and_recovers_the_others(
    pg_db: str, signer: Signer, tmp_path: Path
) -> None:
    from erasure_receipts import AttestingPostgresSaver
    from erasure_receipts.errors import ErasureIncompleteError
    from pg_helpers import connect

    archive, key = tmp_path / "receipts", _key(tmp_path, signer)
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        good = _erase_and_lose_receipts(saver, ["a", "b"])
    with connect(pg_db) as c:
        c.execute("UPDATE erasure_journal SET statement = NULL, receipt_sha256 = NULL, "
                  "receipt = NULL WHERE receipt_id = ANY(%s)", (good,))  # fmt: skip
        for rid, (t, entry, statement) in BAD.items():
            c.execute(INSERT, (rid, t, entry, statement))
    with (
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, archive=archive) as saver,
        pytest.raises(ErasureIncompleteError) as caught,
    ):
        saver.recover_receipts(min_age_seconds=0)
    assert sorted(caught.value.unparsable) == sorted(BAD)
    assert sorted(r.receipt_id for r in caught.value.recovered) == sorted(good)
    archive2 = tmp_path / "again"
    run = cli("recover", pg_db, "--key", key, "--archive", archive2, "--min-age", "0", "--json")
    assert run.exit_code == 1, (run.stdout, run.stderr)
    doc = json.loads(run.stdout)
    assert sorted(doc["unparsable"]) == sorted(BAD) and doc["recovered"] == []
    assert sorted(doc["exported"]) == sorted(good)  # issued above, written out again here
