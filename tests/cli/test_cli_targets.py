"""``receipt erase --target``: an application table erased with the thread or subject
in the same receipt; ``receipt show``, ``verify`` and ``index`` name the targets; bad
``--target`` values are one line and exit 2, before anything is deleted."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from erasure_receipts import AttestingSqliteSaver, Signer, verify_receipt
from scenario import raw_rows
from test_targets import BYSTANDERS, LEDGER, THREAD, grants, run_chats

CLI = [sys.executable, "-m", "erasure_receipts"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def ledger_app(tmp_path: Path, signer: Signer) -> tuple[Path, Path]:
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as c:
        c.execute(LEDGER)
        c.execute("CREATE TABLE tickets (id TEXT PRIMARY KEY, user_id TEXT, body TEXT)")
        c.executemany("INSERT INTO tickets VALUES (?, ?, ?)",
                      [("t1", "carol", "hi"), ("t2", "dave", "yo")])  # fmt: skip
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        run_chats(db, saver, [THREAD, *BYSTANDERS])
    key = tmp_path / "k.pem"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    return db, key


def test_erase_with_target_then_show_verify_index(
    ledger_app: tuple[Path, Path], tmp_path: Path, signer: Signer, pub_pem: Path
) -> None:
    db, key = ledger_app
    archive = tmp_path / "r"
    e = run("erase", str(db), "--thread", THREAD, "--key", str(key),
            "--target", "refund_grants:thread_id", "--archive", str(archive))  # fmt: skip
    assert e.returncode == 0, e.stderr
    assert grants(db, THREAD) == [] and len(grants(db, BYSTANDERS[0])) == 2
    [path] = archive.iterdir()
    v = verify_receipt(path.read_bytes(), [signer.public_key])
    assert v.statement["predicate"]["targets"][0]["name"] == "refund_grants"
    show = run("show", str(path))
    assert show.returncode == 0, show.stderr
    assert (
        "target:refund_grants: table 'refund_grants' by 'thread_id' (same database), "
        "keyed by thread, atomic-transaction" in show.stdout
    )
    assert "target:refund_grants" in show.stdout.split("methods", 1)[1]
    ver = run("verify", str(path), "--key", str(pub_pem))
    assert ver.returncode == 0, ver.stderr
    assert "targets refund_grants (sql, atomic-transaction)" in ver.stdout
    ver_json = run("verify", str(path), "--key", str(pub_pem), "--json")
    assert json.loads(ver_json.stdout)["results"][0]["targets"] == [
        {"name": "refund_grants", "type": "sql", "method": "atomic-transaction"}
    ]
    idx = run("index", str(path), "--key", str(pub_pem))
    assert idx.returncode == 0, idx.stderr
    record = json.loads(idx.stdout.splitlines()[0])
    assert record["targets"] == "refund_grants"
    assert record["rows_targets"] == 2
    assert record["rows"] == record["rows_checkpoints"] + record["rows_store"] + 2


def test_subject_keyed_target(ledger_app: tuple[Path, Path], tmp_path: Path) -> None:
    db, key = ledger_app
    e = run("erase", str(db), "--subject", "carol", "--thread", THREAD, "--key", str(key),
            "--target", "refund_grants:thread_id", "--target", "tickets:user_id:subject",
            "--out", str(tmp_path / "r.json"))  # fmt: skip
    assert e.returncode == 0, e.stderr
    assert raw_rows(db, "tickets", "user_id = ?", ("carol",)) == []
    assert raw_rows(db, "tickets", "user_id = ?", ("dave",))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("refund_grants", "use TABLE:KEY_COLUMN[:thread|subject]"),
        ("refund_grants:thread_id:user", 'key= must be "thread" or "subject"'),
        ("refund grants:thread_id", "plain SQL identifier"),
        ("missing:thread_id", "table 'missing' in the saver's database does not exist"),
        ("refund_grants:nope", "has no column 'nope'"),
    ],
)
def test_bad_target_values(ledger_app: tuple[Path, Path], value: str, message: str) -> None:
    db, key = ledger_app
    res = run("erase", str(db), "--thread", THREAD, "--key", str(key), "--target", value)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("receipt: error: ") and message in lines[0]
    assert raw_rows(db, "checkpoints", "thread_id = ?", (THREAD,))
    assert len(grants(db, THREAD)) == 2


def test_target_with_namespace_is_refused(ledger_app: tuple[Path, Path]) -> None:
    db, key = ledger_app
    res = run("erase", str(db), "--namespace", "users.carol", "--key", str(key),
              "--target", "refund_grants:thread_id")  # fmt: skip
    assert res.returncode == 2 and "--target" in res.stderr
