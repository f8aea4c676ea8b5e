"""Privacy mode: a subject receipt that is not personal data itself.

No raw subject id, thread id, store namespace, needle or database path occurs anywhere
in the receipt file (byte search); it verifies with the public key alone; ``receipt
open`` proves each id with the commitment key. The journal keeps commitments once the
statement is journaled; tombstones keep raw thread ids (the triggers compare them).
Driven through the CLI (``receipt keygen-commitment``, ``erase --subject``, ``open``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import AttestingSqliteSaver, Signer, verify_receipt
from erasure_receipts.privacy import CommitmentKey
from test_subject import EMAIL, NAME, NAMESPACES, SUBJECT, SUPPORT, THREADS, build, populate

CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


def raw_values(db: Path) -> list[str]:
    """Everything identifying that must not be in a privacy-mode receipt."""
    namespaces = [".".join(ns) for ns in NAMESPACES] + ["/".join(ns) for ns in NAMESPACES]
    return [SUBJECT, EMAIL, NAME, *THREADS, SUPPORT, *namespaces, str(db), db.parent.name]


@pytest.fixture
def setup(tmp_path: Path, signer: Signer) -> tuple[Path, Path, Path]:
    db = tmp_path / "app.db"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        populate(build(saver, store))
    key = tmp_path / "signing.key"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    pub = tmp_path / "signing.pub.pem"
    pub.write_bytes(signer.public_pem())
    return db, key, pub


def test_cli_privacy_mode_end_to_end(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    db, key, pub = setup
    ck = tmp_path / "commitment.key"
    made = run("keygen-commitment", "--out", str(ck))
    assert made.returncode == 0, made.stderr
    assert stat.S_IMODE(os.stat(ck).st_mode) == 0o600
    assert run("keygen-commitment", "--out", str(ck)).returncode == 3  # never overwrites
    commitment = CommitmentKey.from_file(ck)
    assert commitment.key_id in made.stdout

    # Preview (read-only) lists the threads it would erase, each with its counts.
    ns_args = [a for ns in NAMESPACES for a in ("--store-ns", "/".join(ns))]
    d = run("digest", str(db), "--subject", SUBJECT, "--metadata-key", "user_id",
            "--thread", SUPPORT, *ns_args, "--commitment-key", str(ck), "--json")  # fmt: skip
    assert d.returncode == 0, d.stderr
    preview = json.loads(d.stdout)
    assert preview["threads"] == sorted([*THREADS, SUPPORT])
    assert set(preview["units"]) == {f"thread:{t}" for t in preview["threads"]} | {"store"}

    out = tmp_path / "r.json"
    private = ["--privacy", "commitments", "--commitment-key", str(ck)]
    e = run("erase", str(db), "--subject", SUBJECT, "--metadata-key", "user_id",
            "--thread", SUPPORT, *ns_args, "--needle", EMAIL, *private, "--key", str(key),
            "--out", str(out), "--json")  # fmt: skip
    assert e.returncode == 0, e.stderr
    doc = json.loads(e.stdout)
    assert doc["threads"] == sorted(commitment.commit("thread", t) for t in [*THREADS, SUPPORT])
    data = out.read_bytes()
    for value in raw_values(db):
        assert value.encode() not in data, value
        assert json.dumps(value)[1:-1].encode() not in data, value  # nor JSON-escaped
    receipt = verify_receipt(data, [Signer.from_seed(bytes(range(32))).public_key])
    assert receipt.thread_id == commitment.commit("subject", SUBJECT)
    assert (
        json.loads(data)["statement"]["predicate"]["pre_state"]["digest"]["sha256"]
        == (preview["digest"])
    )
    v = run("verify", str(out), "--key", str(pub))  # the auditor: public key only
    assert v.returncode == 0, v.stdout + v.stderr

    # receipt open: each id proven with the commitment key (and the signature checked).
    claims = [a for t in [*THREADS, SUPPORT] for a in ("--thread", t)]
    claims += [*ns_args, "--subject", SUBJECT, "--needle", EMAIL, "--database", str(db)]
    o = run("open", str(out), "--commitment-key", str(ck), *claims, "--key", str(pub), "--json")
    assert o.returncode == 0, o.stdout + o.stderr
    opened = json.loads(o.stdout)
    assert opened["signature"] == "verified" and all(c["found"] for c in opened["claims"])
    assert len(opened["claims"]) == 6 + 3 + 3
    assert (
        run(
            "open", str(out), "--commitment-key", str(ck), "--thread", "bob-chat-1", "--no-verify"
        ).returncode
        == 1
    )
    assert (
        run(
            "open", str(out), "--commitment-key", str(ck), "--subject", "bob", "--key", str(pub)
        ).returncode
        == 1
    )
    other = tmp_path / "other.key"
    CommitmentKey.generate().to_file(other)
    wrong = run(
        "open", str(out), "--commitment-key", str(other), "--thread", THREADS[0], "--no-verify"
    )
    assert wrong.returncode == 1 and "not this receipt's" in wrong.stderr
    assert run("open", str(out), "--thread", THREADS[0], "--no-verify").returncode == 2  # key
    assert run("open", str(out), "--commitment-key", str(ck), "--no-verify").returncode == 2

    # The database: the journal keeps commitments only; tombstones keep raw thread ids.
    with sqlite3.connect(db) as conn:
        [(tid, entry, statement, kept)] = conn.execute(
            "SELECT thread_id, entry, statement, receipt FROM erasure_journal"
        ).fetchall()
        tombstones = sorted(r[0] for r in conn.execute("SELECT thread_id FROM erasure_tombstones"))
    assert tid == commitment.commit("subject", SUBJECT)
    for text in (entry, statement, kept):
        for value in raw_values(db):
            assert value not in text, value
    assert tombstones == sorted([*THREADS, SUPPORT])


def test_store_in_another_file_privacy_residue(tmp_path: Path, signer: Signer) -> None:
    """A SqliteStore in another database file is named in the residue details: in
    privacy mode by its commitment, never its path."""
    db, store_db = tmp_path / "app.db", tmp_path / "memories-of-alice.db"
    key = CommitmentKey.generate()
    with (
        SqliteStore.from_conn_string(str(store_db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        populate(build(saver, store))
        r = saver.erase_subject(
            SUBJECT, metadata_key="user_id", threads=[SUPPORT], store_namespaces=NAMESPACES,
            needles=[EMAIL], privacy="commitments", commitment_key=key,
        )  # fmt: skip
    data = r.to_json()
    for value in [*raw_values(db), str(store_db), store_db.name]:
        assert value.encode() not in data, value
    details = [x["detail"] for x in r.predicate["residue"] if "database" in x.get("detail", {})]
    assert details and all(
        d["database"] == key.commit("database", str(store_db.resolve())) for d in details
    )
    verify_receipt(data, [signer.public_key])


def test_open_a_receipt_without_privacy(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """Without privacy mode ids are in clear; needles are still only salted commitments,
    which ``open`` checks against a candidate value."""
    db, key, _ = setup
    out = tmp_path / "r.json"
    e = run("erase", str(db), "--subject", SUBJECT, "--metadata-key", "user_id",
            "--thread", SUPPORT, "--needle", EMAIL, "--key", str(key), "--out", str(out),
            "--store-ns", "users/alice", "--store-ns", "memories/alice/prefs",
            "--store-ns", "crm/contacts/alice")  # fmt: skip
    assert e.returncode == 0, e.stderr
    assert EMAIL.encode() not in out.read_bytes() and SUPPORT.encode() in out.read_bytes()
    assert (
        run("open", str(out), "--thread", SUPPORT, "--needle", EMAIL, "--no-verify").returncode == 0
    )
    assert (
        run("open", str(out), "--needle", "someone.else@example.com", "--no-verify").returncode == 1
    )


def test_cli_subject_usage_and_refusal(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    db, key, _ = setup
    base = ["erase", str(db), "--key", str(key)]
    assert run(*base, "--subject", SUBJECT).returncode == 2  # no threads, no metadata key
    assert run(*base, "--thread", "a", "--thread", "b").returncode == 2
    assert run(*base, "--thread", "a", "--needle", "x").returncode == 2  # needs --subject
    assert run(*base, "--subject", SUBJECT, "--metadata-key", "user_id",
               "--privacy", "commitments").returncode == 2  # fmt: skip
    refused = run(*base, "--subject", SUBJECT, "--metadata-key", "user_id", "--needle", EMAIL,
                  "--json")  # fmt: skip
    assert refused.returncode == 1
    doc = json.loads(refused.stdout)
    assert doc["reason"] == "needles_found" and SUPPORT in doc["error"]
    assert any(loc.get("thread_id") == SUPPORT for loc in doc["locations"])
    assert EMAIL not in refused.stdout + refused.stderr
    nobody = run(*base, "--subject", "nobody", "--metadata-key", "user_id")
    assert nobody.returncode == 1 and "no checkpoint has metadata" in nobody.stderr
    # The thread form is unchanged.
    one = run(*base, "--thread", THREADS[0], "--json")
    assert one.returncode == 0 and json.loads(one.stdout)["thread_id"] == THREADS[0]
