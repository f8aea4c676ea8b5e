"""A target in another database: measured in the erasure transaction, journaled with
the deletion, swept after the checkpoints' commit (method ``sweep``); a process killed
(``kill -9``) between the commit and the sweep is completed by recovery - exactly one
receipt, the target's rows 0. SQLite files, and a PostgreSQL database as the other one.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from erasure_receipts import (
    AttestingSqliteSaver,
    ConfigurationError,
    Receipt,
    Signer,
    SqlTarget,
    verify_receipt,
)
from scenario import raw_rows
from test_targets import BYSTANDERS, LEDGER, THREAD, grants, run_chats


@pytest.fixture
def two_files(tmp_path: Path) -> tuple[Path, Path]:
    db, ledger = tmp_path / "app.db", tmp_path / "ledger.db"
    with sqlite3.connect(ledger) as c:
        c.execute(LEDGER)
    return db, ledger


def test_other_sqlite_file_swept_after_the_commit(
    two_files: tuple[Path, Path], signer: Signer
) -> None:
    db, ledger = two_files
    target = SqlTarget("refund_grants", "thread_id", database=str(ledger))
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, targets=[target]) as saver:
        run_chats(ledger, saver, [THREAD, *BYSTANDERS])
        others = {t: grants(ledger, t) for t in BYSTANDERS}
        preview = saver.digest_thread(THREAD)
        receipt = saver.erase_thread(THREAD)
    assert grants(ledger, THREAD) == []
    assert {t: grants(ledger, t) for t in BYSTANDERS} == others
    p = receipt.statement["predicate"]
    assert p["methods"]["target:refund_grants"] == "sweep"
    assert p["targets"][0]["database"] == str(ledger)
    assert p["pre_state"]["digest"]["sha256"] == preview.digest
    assert p["pre_state"]["tables"]["target:refund_grants"]["rows"] == 2
    swept = [c for c in p["checks"] if c["name"] == "target_swept_after_commit"]
    assert len(swept) == 1 and "2 row(s) deleted after the commit" in swept[0]["detail"]
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_other_database_that_cannot_be_opened_is_refused_first(
    two_files: tuple[Path, Path], tmp_path: Path, signer: Signer
) -> None:
    db, ledger = two_files
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        run_chats(ledger, saver, [THREAD])
        cps = raw_rows(db, "checkpoints", "thread_id = ?", (THREAD,))
        missing = SqlTarget("refund_grants", "thread_id", database=str(tmp_path / "no" / "x.db"))
        with pytest.raises(ConfigurationError, match="cannot be opened"):
            saver.erase_thread(THREAD, targets=[missing])
        typo = SqlTarget("refund_grants", "thread_id", database=str(tmp_path / "ledgr.db"))
        with pytest.raises(ConfigurationError, match="cannot be opened"):
            saver.erase_thread(THREAD, targets=[typo])
        assert not (tmp_path / "ledgr.db").exists()  # no empty database made for a typo
        wrong = SqlTarget("nope", "thread_id", database=str(ledger))
        with pytest.raises(ConfigurationError, match="does not exist"):
            saver.erase_thread(THREAD, targets=[wrong])
    assert raw_rows(db, "checkpoints", "thread_id = ?", (THREAD,)) == cps
    assert len(grants(ledger, THREAD)) == 2


KILL_BEFORE_SWEEP = """
import os, sys
from erasure_receipts import AttestingSqliteSaver, Signer, SqlTarget
from erasure_receipts._backends import targets as parts

def die(self):
    os.kill(os.getpid(), 9)

parts.OtherDatabasePart.sweep = die
db, database, archive, thread = sys.argv[1:5]
target = SqlTarget("refund_grants", "thread_id", database=database)
with AttestingSqliteSaver.from_conn_string(
    db, signer=Signer.from_seed(bytes(range(32))), archive=archive, targets=[target]
) as saver:
    saver.erase_thread(thread)
print("not killed")
"""


def kill_between_commit_and_sweep(db: Path, database: str, archive: Path) -> None:
    killed = subprocess.run(
        [sys.executable, "-c", KILL_BEFORE_SWEEP, str(db), database, str(archive), THREAD],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr


@pytest.mark.parametrize("same_targets", [True, False])
def test_kill_9_between_commit_and_sweep_then_recovery(
    two_files: tuple[Path, Path], tmp_path: Path, signer: Signer, same_targets: bool
) -> None:
    """Recovery with the saver's targets, or without (the journaled table target is
    rebuilt from the journal entry): one receipt, the target's rows 0."""
    db, ledger = two_files
    archive = tmp_path / "archive"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        run_chats(ledger, saver, [THREAD, BYSTANDERS[0]])
    other = grants(ledger, BYSTANDERS[0])
    kill_between_commit_and_sweep(db, str(ledger), archive)
    # Committed (checkpoints gone), not swept (the grant rows are still there).
    assert raw_rows(db, "checkpoints", "thread_id = ?", (THREAD,)) == []
    assert len(grants(ledger, THREAD)) == 2
    assert not list(archive.glob("*.json"))
    targets = [SqlTarget("refund_grants", "thread_id", database=str(ledger))] * same_targets
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, archive=archive, targets=targets
    ) as saver:
        assert len(saver.pending_erasures()) == 1
        recovered = saver.recover_receipts(min_age_seconds=0)
        assert len(recovered) == 1
        assert saver.recover_receipts(min_age_seconds=0) == []
        assert saver.pending_erasures() == []
    assert grants(ledger, THREAD) == []
    assert grants(ledger, BYSTANDERS[0]) == other
    files = list(archive.glob("*.json"))
    assert len(files) == 1
    receipt = Receipt.from_json(files[0].read_bytes())
    p = receipt.statement["predicate"]
    assert p["pre_state"]["tables"]["target:refund_grants"]["rows"] == 2
    assert p["post_state"]["tables"]["target:refund_grants"]["rows"] == 0
    names = [c["name"] for c in p["checks"]]
    assert "issued_from_journal" in names and "target_swept_after_commit" in names
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_postgres_database_as_the_other_one(pg_db: str, tmp_path: Path, signer: Signer) -> None:
    from pg_helpers import connect, count

    with connect(pg_db) as c:
        c.execute(
            "CREATE TABLE refund_grants (grant_id text PRIMARY KEY, thread_id text NOT NULL, "
            "amount_cents integer, reason text, payload bytea, consumed integer)"
        )
        for i, t in enumerate([THREAD, THREAD, BYSTANDERS[0]]):
            c.execute(
                "INSERT INTO refund_grants VALUES (%s, %s, %s, %s, %s, 1)",
                (f"g-{i}", t, 100 + i, "refund", b"\x00\x01"),
            )
    db = tmp_path / "app.db"
    target = SqlTarget("refund_grants", "thread_id", database=pg_db)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, targets=[target]) as saver:
        scratch = tmp_path / "scratch.db"  # the graph's own ledger; the PG one is the target
        with sqlite3.connect(scratch) as c:
            c.execute(LEDGER)
        run_chats(scratch, saver, [THREAD])
        receipt = saver.erase_thread(THREAD)
    assert count(pg_db, "refund_grants", "thread_id = %s", (THREAD,)) == 0
    assert count(pg_db, "refund_grants", "thread_id = %s", (BYSTANDERS[0],)) == 1
    p = receipt.statement["predicate"]
    assert p["methods"]["target:refund_grants"] == "sweep"
    assert p["pre_state"]["tables"]["target:refund_grants"]["rows"] == 2
    verify_receipt(receipt.to_json(), [signer.public_key])
