"""`receipt digest` / `receipt erase` against real SQLite files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import AttestingSqliteSaver, Signer, verify_receipt
from scenario import TURNS, build_graph, human, marker_in_files, raw_rows

CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def app_db(tmp_path: Path, signer: Signer) -> Path:
    db = tmp_path / "app.db"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        graph = build_graph(saver, store)
        for text in TURNS:
            graph.invoke(human(text), {"configurable": {"thread_id": "alice"}})
        graph.invoke(human("hi"), {"configurable": {"thread_id": "bob"}})
    return db


def test_digest_then_erase(app_db: Path, tmp_path: Path, signer: Signer) -> None:
    key = tmp_path / "k.pem"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)  # a group/world-readable key is refused
    d = run("digest", str(app_db), "--thread", "alice", "--store-ns", "users/alice", "--json")
    assert d.returncode == 0, d.stderr
    preview = json.loads(d.stdout)
    assert preview["tables"]["store"]["rows"] == 1
    e = run("erase", str(app_db), "--thread", "alice", "--key", str(key),
            "--store-ns", "users/alice", "--archive", str(tmp_path / "r"))  # fmt: skip
    assert e.returncode == 0, e.stderr
    [path] = (tmp_path / "r").iterdir()
    v = verify_receipt(path.read_bytes(), [signer.public_key])
    assert v.pre_digest == preview["digest"] and v.thread_id == "alice"
    assert raw_rows(app_db, "checkpoints", "thread_id = ?", ("alice",)) == []
    assert raw_rows(app_db, "store", "prefix = ?", ("users.alice",)) == []
    assert raw_rows(app_db, "checkpoints", "thread_id = ?", ("bob",))
    assert marker_in_files(app_db)["app.db"] == 0
    # Without --archive/--out the receipt itself is the result, on stdout.
    again = run("erase", str(app_db), "--thread", "bob", "--key", str(key))
    assert again.returncode == 0
    assert verify_receipt(again.stdout.encode(), [signer.public_key]).thread_id == "bob"


def test_erase_errors(app_db: Path, tmp_path: Path, signer: Signer, pub_pem: Path) -> None:
    key = tmp_path / "k.pem"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)  # a group/world-readable key is refused
    assert run("erase", str(tmp_path / "missing.db"), "--thread", "x", "--key", str(key)
               ).returncode == 3  # fmt: skip
    for mode in (0o644, 0o600):  # the public key, as keygen writes it or locked down
        pub_pem.chmod(mode)
        res = run("erase", str(app_db), "--thread", "alice", "--key", str(pub_pem))
        assert res.returncode == 2 and "is a public key, not a private key" in res.stderr
        assert "chmod" not in res.stderr and res.stderr.count("\n") == 1
    assert run("erase", str(app_db), "--thread", "x", "--key", str(key),
               "--store-ns", "a//b").returncode == 2  # fmt: skip
    notdb = tmp_path / "not.db"
    notdb.write_bytes(b"definitely not sqlite" * 100)
    res = run("erase", str(notdb), "--thread", "x", "--key", str(key))
    assert res.returncode == 3 and "Traceback" not in res.stderr
    # Nothing was erased by any of the failed invocations.
    assert raw_rows(app_db, "checkpoints", "thread_id = ?", ("alice",))
