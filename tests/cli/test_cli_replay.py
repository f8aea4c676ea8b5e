"""`receipt replay` against real SQLite files: restore a pre-erasure copy, replay."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import AttestingSqliteSaver, Signer, verify_receipt
from scenario import TURNS, build_graph, human, raw_rows

CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def restored(tmp_path: Path, signer: Signer) -> dict[str, Path]:
    """alice erased through the CLI after a backup copy; the copy restored over the file."""
    db, copy, archive = tmp_path / "app.db", tmp_path / "copy.db", tmp_path / "receipts"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        graph = build_graph(saver, store)
        for text in TURNS:
            graph.invoke(human(text), {"configurable": {"thread_id": "alice"}})
        graph.invoke(human("hi"), {"configurable": {"thread_id": "bob"}})
    with closing(sqlite3.connect(db)) as src, closing(sqlite3.connect(copy)) as dst:
        src.backup(dst)
    key, pub = tmp_path / "k.pem", tmp_path / "pub.pem"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    pub.write_bytes(signer.public_pem())
    e = run("erase", str(db), "--thread", "alice", "--key", str(key), "--store-ns",
            "users/alice", "--archive", str(archive))  # fmt: skip
    assert e.returncode == 0, e.stderr
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(copy, db)
    return {"db": db, "archive": archive, "key": key, "pub": pub}


def test_dry_run_then_replay_then_nothing_left(restored: dict[str, Path], signer: Signer) -> None:
    db, archive, key, pub = (restored[k] for k in ("db", "archive", "key", "pub"))
    assert raw_rows(db, "checkpoints", "thread_id = ?", ("alice",))  # came back
    common = [str(db), "--archive", str(archive), "--key", str(key), "--verify-key", str(pub)]
    dry = run("replay", *common, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    doc = json.loads(dry.stdout)
    assert (doc["checked"], doc["reappeared"], doc["re_erased"], doc["dry_run"]) == (1, 1, 0, True)
    assert raw_rows(db, "checkpoints", "thread_id = ?", ("alice",))  # unchanged

    done = run("replay", *common)
    assert done.returncode == 0, done.stderr
    assert "re_erased" in done.stdout and "1 re-erased" in done.stdout
    assert raw_rows(db, "checkpoints", "thread_id = ?", ("alice",)) == []
    assert raw_rows(db, "store", "prefix = ?", ("users.alice",)) == []
    assert raw_rows(db, "checkpoints", "thread_id = ?", ("bob",))
    new = [p for p in archive.iterdir() if "replay_of" in p.read_text()]
    assert len(new) == 1
    v = verify_receipt(new[0].read_bytes(), [signer.public_key])
    assert v.thread_id == "alice"

    again = run("replay", *common, "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["re_erased"] == 0


def test_usage_and_untrusted(restored: dict[str, Path], tmp_path: Path) -> None:
    db, archive, key = restored["db"], restored["archive"], restored["key"]
    both = run("replay", str(db), "--key", str(key), "--verify-key", str(restored["pub"]))
    assert both.returncode == 2 and "--archive" in both.stderr
    no_trust = run("replay", str(db), "--archive", str(archive), "--key", str(key))
    assert no_trust.returncode == 2 and "--trust" in no_trust.stderr
    other = tmp_path / "other.pem"
    other.write_bytes(Signer.generate().public_pem())
    untrusted = run("replay", str(db), "--archive", str(archive), "--key", str(key),
                    "--verify-key", str(other))  # fmt: skip
    assert untrusted.returncode == 1 and "not used" in untrusted.stderr
    assert raw_rows(db, "checkpoints", "thread_id = ?", ("alice",))  # nothing was done
    missing = run("replay", str(db), "--archive", str(tmp_path / "nope"), "--key", str(key),
                  "--verify-key", str(restored["pub"]))  # fmt: skip
    assert missing.returncode == 3


def test_trust_file_and_a_receipt_signed_by_another_key(
    restored: dict[str, Path], signer: Signer, tmp_path: Path
) -> None:
    db, archive, key, pub = (restored[k] for k in ("db", "archive", "key", "pub"))
    trust = tmp_path / "trust.json"
    added = run("trust", "add", str(pub), "--name", "ops", "--file", str(trust))
    assert added.returncode == 0, added.stderr
    # A receipt for bob signed by a key the trust file does not hold, in the same archive.
    stranger, elsewhere = Signer.generate(), tmp_path / "elsewhere.db"
    with AttestingSqliteSaver.from_conn_string(
        str(elsewhere), signer=stranger, archive=archive
    ) as other:
        graph = build_graph(other, None)  # type: ignore[arg-type]
        graph.invoke(human("hi"), {"configurable": {"thread_id": "bob"}})
        foreign = other.erase_thread("bob")
    bob = raw_rows(db, "checkpoints", "thread_id = ?", ("bob",))
    assert bob and raw_rows(db, "checkpoints", "thread_id = ?", ("alice",))

    res = run("replay", str(db), "--archive", str(archive), "--key", str(key),
              "--trust", str(trust), "--json")  # fmt: skip
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["ok"], doc["exit_code"], doc["checked"], doc["re_erased"]) == (False, 1, 1, 1)
    [rejected] = doc["rejected"]
    assert foreign.receipt_id in rejected["source"]
    assert [i["scope"] for i in doc["items"]] == ["alice"]  # bob's receipt never used
    assert f"not used: {rejected['source']}" in res.stderr and foreign.receipt_id in res.stderr
    assert raw_rows(db, "checkpoints", "thread_id = ?", ("bob",)) == bob
    assert raw_rows(db, "checkpoints", "thread_id = ?", ("alice",)) == []
    # Without the foreign receipt every receipt verifies against the trust file: exit 0.
    (archive / f"{foreign.receipt_id}.json").unlink()
    again = run("replay", str(db), "--archive", str(archive), "--key", str(key),
                "--trust", str(trust), "--json")  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["postdated"] == 1


def test_replay_from_a_receipt_log(tmp_path: Path, signer: Signer) -> None:
    from erasure_receipts import ReceiptLog

    db, copy, logdir = tmp_path / "app.db", tmp_path / "copy.db", tmp_path / "log"
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, archive=ReceiptLog(logdir, signer=signer)
    ) as saver:
        graph = build_graph(saver, None)  # type: ignore[arg-type]
        for text in ("hello", "thanks"):
            graph.invoke(human(text), {"configurable": {"thread_id": "alice"}})
        with closing(sqlite3.connect(db)) as src, closing(sqlite3.connect(copy)) as dst:
            src.backup(dst)
        original = saver.erase_thread("alice")
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(copy, db)
    key, pub = tmp_path / "k.pem", tmp_path / "pub.pem"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    pub.write_bytes(signer.public_pem())
    common = [str(db), "--log", str(logdir), "--key", str(key), "--verify-key", str(pub)]

    dry = run("replay", *common, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert (json.loads(dry.stdout)["reappeared"], ReceiptLog(logdir).size) == (1, 1)
    assert raw_rows(db, "checkpoints", "thread_id = ?", ("alice",))

    done = run("replay", *common, "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["checked"], doc["re_erased"]) == (1, 1)
    assert raw_rows(db, "checkpoints", "thread_id = ?", ("alice",)) == []
    assert ReceiptLog(logdir).size == 2  # the new receipt was appended to the log
    entries = [data for _, data in ReceiptLog(logdir).entries()]
    v = verify_receipt(entries[-1], [signer.public_key])
    assert v.statement["predicate"]["replay_of"] == original.receipt_id
    assert v.receipt_id == doc["items"][0]["new_receipt_id"]
    missing = run("replay", str(db), "--log", str(tmp_path / "nolog"), "--key", str(key),
                  "--verify-key", str(pub))  # fmt: skip
    assert missing.returncode == 3 and missing.stderr.startswith("receipt: error:"), missing
