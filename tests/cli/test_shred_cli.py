"""``receipt shred DB --subject S --keystore KS --master-key MK --key K --archive DIR``
(RECEIPT_SPEC.md 9.16) on SQLite files and the real PostgreSQL server; verify, show and
index read the receipt; bad input is one line and the documented exit code."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from typer.testing import CliRunner, Result

from erasure_receipts import (
    AttestingPostgresSaver,
    AttestingSqliteSaver,
    Encryption,
    KeyShreddedError,
    KeyStore,
    LocalKeyWrapper,
    Signer,
    verify_receipt,
)
from erasure_receipts.app import app
from on_a_tty import run_on_a_tty
from pg_server import fresh_database
from test_encryption_sqlite import build, cfg


def cli(*args: Any) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def one_error(res: Result, code: int, *needles: str) -> None:
    assert res.exit_code == code, (res.exit_code, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("receipt: error: "), res.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


@pytest.fixture
def key(tmp_path: Path, signer: Signer) -> Path:
    path = tmp_path / "k.pem"
    path.write_bytes(signer.private_pem())
    path.chmod(0o600)
    return path


def write(saver: Any) -> None:
    graph = build(saver)
    for thread, user in (("alice-1", "alice"), ("alice-2", "alice"), ("bob-1", "bob")):
        graph.invoke({"messages": [HumanMessage(content="hi")]}, cfg(thread, user))


@pytest.fixture
def app_db(tmp_path: Path, signer: Signer) -> Path:
    kek = LocalKeyWrapper.generate(tmp_path / "master.key")
    with KeyStore(tmp_path / "keys.sqlite", kek) as keys:
        db = tmp_path / "app.db"
        conn = sqlite3.connect(db, check_same_thread=False)
        write(AttestingSqliteSaver(conn, signer=signer, encryption=Encryption(keys)))
        conn.close()
    return db


def test_cli_shred_sqlite(app_db: Path, key: Path, signer: Signer, tmp_path: Path) -> None:
    ks, mk, archive = tmp_path / "keys.sqlite", tmp_path / "master.key", tmp_path / "receipts"
    res = cli("shred", app_db, "--subject", "alice", "--keystore", ks, "--master-key", mk,
              "--key", key, "--archive", archive, "--backup-retention", "P14D",
              "--json")  # fmt: skip
    assert res.exit_code == 0, (res.stdout, res.stderr)
    doc = json.loads(res.stdout)
    assert doc["ok"] and doc["threads"] == ["alice-1", "alice-2"]
    assert doc["key_store"] == {"kind": "sqlite", "scrub": "applied", "backup_retention": "P14D"}
    path = Path(doc["written_to"][0])
    verify_receipt(path, [signer.public_key])
    pub = tmp_path / "pub.pem"
    pub.write_bytes(signer.public_pem())
    res = cli("verify", path, "--key", pub)
    assert res.exit_code == 0
    assert "SHREDDED: the data key destroyed" in res.stdout, res.stdout
    assert "erased (" not in res.stdout  # key-store rows, not the data
    shown = cli("show", path)
    assert "kind         shred" in shown.stdout and "P14D" in shown.stdout
    indexed = cli("index", path, "--key", pub)
    assert indexed.exit_code == 0 and '"kind": "shred"' in indexed.stdout

    with KeyStore(ks, LocalKeyWrapper.from_file(mk)) as keys:
        conn = sqlite3.connect(app_db, check_same_thread=False)
        saver = AttestingSqliteSaver(conn, signer=signer, encryption=Encryption(keys))
        with pytest.raises(KeyShreddedError):
            saver.get_tuple(cfg("alice-1", None))
        assert saver.get_tuple(cfg("bob-1", None)) is not None
        conn.close()

    # Again: no key left (exit 1); a thread under a subject's key (exit 2); text output.
    again = cli("shred", app_db, "--subject", "alice", "--keystore", ks, "--master-key", mk,
                "--key", key, "--archive", archive)  # fmt: skip
    one_error(again, 1, "no_data_key", "already shredded")
    bound = cli("shred", app_db, "--thread", "bob-1", "--keystore", ks, "--master-key", mk,
                "--key", key, "--archive", archive)  # fmt: skip
    one_error(bound, 2, "shred_subject shreds it")
    ok = cli("shred", app_db, "--subject", "bob", "--keystore", ks, "--master-key", mk,
             "--key", key, "--archive", archive)  # fmt: skip
    assert ok.exit_code == 0 and "shredded the data key of subject 'bob'" in ok.stdout


def test_cli_shred_bad_input(app_db: Path, key: Path, tmp_path: Path) -> None:
    ks, mk, archive = tmp_path / "keys.sqlite", tmp_path / "master.key", tmp_path / "receipts"
    base = ["shred", app_db, "--keystore", ks, "--key", key, "--archive", archive]
    one_error(cli(*base, "--master-key", mk), 2, "exactly one of --subject and --thread")
    one_error(cli(*base, "--subject", "a", "--thread", "t", "--master-key", mk), 2)
    one_error(cli(*base, "--subject", "alice"), 2, "--master-key")
    other = tmp_path / "other.key"
    LocalKeyWrapper.generate(other)
    one_error(cli(*base, "--subject", "alice", "--master-key", other), 1, "ciphertext_rejected")
    bad = tmp_path / "bad.key"
    bad.write_text("not a key\n")
    one_error(cli(*base, "--subject", "alice", "--master-key", bad), 2, "not a key-encryption key")
    one_error(cli("shred", app_db, "--keystore", tmp_path / "none.sqlite", "--key", key,
                  "--archive", archive, "--subject", "alice", "--master-key", mk), 3,
              "no key store")  # fmt: skip
    # Nothing was destroyed by any of these.
    with KeyStore(ks, LocalKeyWrapper.from_file(mk)) as keys:
        assert keys.has_key("subject:alice")
    assert not archive.exists() or not list(archive.iterdir())


@pytest.fixture
def keys_db(pg_dsn: str) -> Iterator[str]:
    with fresh_database(pg_dsn, "k") as dsn:
        yield dsn


def test_cli_shred_postgres(
    pg_db: str, keys_db: str, key: Path, signer: Signer, tmp_path: Path
) -> None:
    mk = tmp_path / "master.key"
    kek = LocalKeyWrapper.generate(mk)
    with (
        KeyStore.postgres(keys_db, kek) as keys,
        AttestingPostgresSaver.from_conn_string(
            pg_db, signer=signer, encryption=Encryption(keys)
        ) as saver,
    ):
        saver.setup()
        write(saver)
    res = cli("shred", pg_db, "--subject", "alice", "--keystore", keys_db, "--master-key", mk,
              "--key", key, "--archive", tmp_path / "receipts", "--json")  # fmt: skip
    assert res.exit_code == 0, (res.stdout, res.stderr)
    doc = json.loads(res.stdout)
    assert doc["key_store"]["kind"] == "postgres" and doc["threads"] == ["alice-1", "alice-2"]
    verify_receipt(Path(doc["written_to"][0]), [signer.public_key])
    same = cli("shred", pg_db, "--subject", "bob", "--keystore", pg_db, "--master-key", mk,
               "--key", key, "--archive", tmp_path / "receipts")  # fmt: skip
    one_error(same, 2, "must not be the data database")


# -- receipt encrypt: migrating a plaintext database ------------------------------------


def test_cli_encrypt_migrates_a_plaintext_database(
    tmp_path: Path, signer: Signer, key: Path
) -> None:
    from erasure_receipts.shredding import SEALED_TYPE
    from test_encryption_sqlite import MARKER, raw_bytes

    db = tmp_path / "plain.db"
    conn = sqlite3.connect(db, check_same_thread=False)
    graph = build(AttestingSqliteSaver(conn, signer=signer))
    for thread, user in (("alice-1", "alice"), ("bob-1", "bob"), ("anon-1", None)):
        graph.invoke({"messages": [HumanMessage(content=f"secret {MARKER}")]}, cfg(thread, user))
    conn.commit()
    conn.close()
    assert MARKER.encode() in raw_bytes(db)
    mk = tmp_path / "master.key"
    LocalKeyWrapper.generate(mk)
    ks = tmp_path / "keys.sqlite"

    res = cli("encrypt", db, "--keystore", ks, "--master-key", mk, "--json")
    assert res.exit_code == 0, (res.stdout, res.stderr)
    doc = json.loads(res.stdout)
    assert doc["checkpoints"] > 0 and doc["writes"] > 0 and doc["threads"] == 3
    assert doc["already_sealed"] == 0
    assert MARKER.encode() not in raw_bytes(db)  # sealed, and the file VACUUMed
    with sqlite3.connect(db) as raw:
        types = {
            t for (t,) in raw.execute("SELECT type FROM checkpoints UNION SELECT type FROM writes")
        }
    raw.close()
    assert types == {SEALED_TYPE}

    with KeyStore(ks, LocalKeyWrapper.from_file(mk)) as keys:
        assert keys.threads_of("subject:alice") == ["alice-1"]  # from the metadata's user_id
        assert keys.threads_of("thread:anon-1") == ["anon-1"]
        conn = sqlite3.connect(db, check_same_thread=False)
        saver = AttestingSqliteSaver(conn, signer=signer, encryption=Encryption(keys))
        g = build(saver)
        assert MARKER in g.get_state(cfg("alice-1", "alice")).values["messages"][0].content
        g.invoke({"messages": [HumanMessage(content="more")]}, cfg("alice-1", "alice"))
        assert len(list(g.get_state_history(cfg("alice-1", "alice")))) >= 4
        saver.shred_subject("alice")
        with pytest.raises(KeyShreddedError):
            g.get_state(cfg("alice-1", "alice"))
        assert g.get_state(cfg("bob-1", "bob")).values["messages"]
        conn.close()

    again = cli("encrypt", db, "--keystore", ks, "--master-key", mk, "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["checkpoints"] == 0
    assert json.loads(again.stdout)["already_sealed"] > 0

    one_error(cli("encrypt", db, "--keystore", ks), 2, "--master-key")
    one_error(cli("encrypt", db, "--keystore", db, "--master-key", mk), 2,
              "must not be the data database")  # fmt: skip
    other = tmp_path / "other.txt"
    other.write_text("not a database")
    res = cli("encrypt", other, "--keystore", ks, "--master-key", mk)
    assert res.exit_code == 3, res.stderr


def test_cli_encrypt_leaves_store_items_plaintext_and_a_shred_refuses_them(
    tmp_path: Path, signer: Signer, key: Path
) -> None:
    """``receipt encrypt`` does not seal store items: it says so and counts them (the
    store table's raw bytes unchanged); a shred whose subject's store namespace still
    holds such an item refuses in one line naming it, and destroys nothing. Once the
    item is sealed (re-written through the encrypting store) the shred goes through."""
    from langgraph.store.sqlite import SqliteStore

    from test_encryption_sqlite import MARKER

    db = tmp_path / "plain.db"
    conn = sqlite3.connect(db, check_same_thread=False)
    build(AttestingSqliteSaver(conn, signer=signer)).invoke(
        {"messages": [HumanMessage(content="hi")]}, cfg("alice-1", "alice")
    )
    conn.commit()
    conn.close()
    sconn = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
    raw_store = SqliteStore(sconn)
    raw_store.setup()
    raw_store.put(("users", "alice"), "profile", {"email": f"alice@{MARKER}"})
    store_rows = sconn.execute("SELECT prefix, key, value FROM store").fetchall()
    mk, ks = tmp_path / "master.key", tmp_path / "keys.sqlite"
    LocalKeyWrapper.generate(mk)

    res = cli("encrypt", db, "--keystore", ks, "--master-key", mk)
    assert res.exit_code == 0, res.stderr
    assert "1 store item(s) (table store) stay plaintext" in res.stdout
    doc = json.loads(cli("encrypt", db, "--keystore", ks, "--master-key", mk, "--json").stdout)
    assert doc["store_items_plaintext"] == 1
    assert sconn.execute("SELECT prefix, key, value FROM store").fetchall() == store_rows

    # The application goes on with the encrypting store: the namespace is the subject's.
    keys = KeyStore(ks, LocalKeyWrapper.from_file(mk))
    store = Encryption(keys).wrap_store(raw_store, lambda ns: ns[1])
    store.put(("users", "alice"), "prefs", {"tone": "dry"})
    assert keys.namespaces_of("subject:alice") == ["users.alice"]

    archive = tmp_path / "receipts"
    args = ("shred", db, "--subject", "alice", "--keystore", ks, "--master-key", mk,
            "--key", key, "--archive", archive)  # fmt: skip
    one_error(cli(*args), 1, "plaintext_row", "nothing was destroyed",
              "store item 'users.alice'/'profile'")  # fmt: skip
    assert keys.has_key("subject:alice")
    assert not list(archive.glob("*.json")) if archive.exists() else True
    assert sconn.execute("SELECT prefix, key, value FROM store").fetchall()[0] == store_rows[0]

    store.put(("users", "alice"), "profile", {"email": "alice@example.org"})  # now sealed
    res = cli(*args)
    assert res.exit_code == 0, res.stderr
    assert "no longer decrypt" in res.stdout
    keys.close()
    sconn.close()


def test_cli_shred_master_key_env(
    app_db: Path, key: Path, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ks, mk, archive = tmp_path / "keys.sqlite", tmp_path / "master.key", tmp_path / "receipts"
    base = ["shred", app_db, "--subject", "alice", "--keystore", ks, "--key", key,
            "--archive", archive, "--master-key-env", "ERS_KEK"]  # fmt: skip
    monkeypatch.delenv("ERS_KEK", raising=False)
    one_error(cli(*base), 2, "environment variable ERS_KEK is not set")
    monkeypatch.setenv("ERS_KEK", "")
    one_error(cli(*base), 2, "environment variable ERS_KEK is not set")
    monkeypatch.setenv("ERS_KEK", "not a key")
    one_error(cli(*base), 2, "$ERS_KEK: not a key-encryption key")
    one_error(cli(*base, "--master-key", mk), 2, "exactly one of --master-key FILE")
    with KeyStore(ks, LocalKeyWrapper.from_file(mk)) as keys:
        assert keys.has_key("subject:alice")  # none of these destroyed anything
    assert not archive.exists() or not list(archive.iterdir())

    monkeypatch.setenv("ERS_KEK", mk.read_text())
    res = cli(*base, "--json")
    assert res.exit_code == 0, (res.stdout, res.stderr)
    doc = json.loads(res.stdout)
    assert doc["threads"] == ["alice-1", "alice-2"]
    verify_receipt(Path(doc["written_to"][0]), [signer.public_key])
    with KeyStore(ks, LocalKeyWrapper.from_file(mk)) as keys:
        assert not keys.has_key("subject:alice") and keys.has_key("subject:bob")
        conn = sqlite3.connect(app_db, check_same_thread=False)
        saver = AttestingSqliteSaver(conn, signer=signer, encryption=Encryption(keys))
        with pytest.raises(KeyShreddedError):
            saver.get_tuple(cfg("alice-2", None))
        assert saver.get_tuple(cfg("bob-1", None)) is not None
        conn.close()


def test_cli_encrypt_postgres(
    pg_db: str, keys_db: str, signer: Signer, key: Path, tmp_path: Path
) -> None:
    """``receipt encrypt DSN``: a plaintext PostgreSQL database written by a plain
    ``PostgresSaver`` is migrated (JSON counts; the store item counted, left plaintext);
    the encrypting saver reads it and a shred goes through; again seals nothing; a key
    store in the data database, a database that is not LangGraph's and a server that
    cannot be reached are one line and exit 2, 3, 3."""
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    from pg_helpers import all_raw_text
    from test_encryption_sqlite import MARKER

    with (
        PostgresSaver.from_conn_string(pg_db) as plain,
        PostgresStore.from_conn_string(pg_db) as raw_store,
    ):
        plain.setup()
        raw_store.setup()
        graph = build(plain)
        for thread, user in (("alice-1", "alice"), ("bob-1", "bob"), ("anon-1", None)):
            graph.invoke({"messages": [HumanMessage(content=f"secret {MARKER}")]},
                         cfg(thread, user))  # fmt: skip
        raw_store.put(("users", "bob"), "profile", {"email": "bob@example.org"})
        before = graph.get_state(cfg("alice-1", "alice")).values
    mk = tmp_path / "master.key"
    LocalKeyWrapper.generate(mk)

    res = cli("encrypt", pg_db, "--keystore", keys_db, "--master-key", mk, "--json")
    assert res.exit_code == 0, (res.stdout, res.stderr)
    doc = json.loads(res.stdout)
    assert doc["checkpoints"] > 0 and doc["blobs"] > 0 and doc["writes"] > 0
    assert (doc["threads"], doc["already_sealed"], doc["store_items_plaintext"]) == (3, 0, 1)
    assert doc["vacuumed"] is True and res.stderr == ""  # no progress line off a terminal
    assert MARKER not in all_raw_text(pg_db)
    with KeyStore.postgres(keys_db, LocalKeyWrapper.from_file(mk)) as keys:
        assert keys.threads_of("subject:alice") == ["alice-1"]
        assert keys.threads_of("thread:anon-1") == ["anon-1"]
        with AttestingPostgresSaver.from_conn_string(
            pg_db, signer=signer, encryption=Encryption(keys)
        ) as saver:
            saver.setup()
            assert build(saver).get_state(cfg("alice-1", "alice")).values == before

    again = cli("encrypt", pg_db, "--keystore", keys_db, "--master-key", mk)
    assert again.exit_code == 0, again.stderr
    assert again.stdout.startswith("encrypted 0 checkpoint(s) (inline values moved to sealed "
                                   "blobs), 0 blob(s) and 0 write(s) of 0 thread(s) (")  # fmt: skip
    assert "1 store item(s) (table store) stay plaintext" in again.stdout
    res = cli("shred", pg_db, "--subject", "alice", "--keystore", keys_db, "--master-key", mk,
              "--key", key, "--archive", tmp_path / "receipts", "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["threads"] == ["alice-1"]

    one_error(cli("encrypt", pg_db, "--keystore", pg_db, "--master-key", mk), 2,
              "must not be the data database")  # fmt: skip
    one_error(cli("encrypt", keys_db, "--keystore", tmp_path / "ks.sqlite", "--master-key", mk),
              3, "not a LangGraph database")  # fmt: skip
    gone = "postgresql:///nowhere?host=/nonexistent-socket-dir"
    one_error(cli("encrypt", gone, "--keystore", tmp_path / "ks.sqlite", "--master-key", mk),
              3, "cannot connect")  # fmt: skip


def test_cli_encrypt_postgres_progress_on_a_tty_only(
    pg_db: str, keys_db: str, tmp_path: Path
) -> None:
    """The progress line goes to stderr when it is a terminal, as for SQLite."""
    import sys

    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(pg_db) as plain:
        plain.setup()
        write(plain)
    mk = tmp_path / "master.key"
    LocalKeyWrapper.generate(mk)
    cmd = [sys.executable, "-c", "from erasure_receipts.cli import main; main()",
           "encrypt", pg_db, "--keystore", keys_db, "--master-key", str(mk)]  # fmt: skip
    proc, tty_err = run_on_a_tty(cmd, timeout=120)
    assert proc.returncode == 0, tty_err
    assert b"\rencrypting " in tty_err and b" rows (" in tty_err
    assert proc.stdout.startswith(b"encrypted ") and b"encrypting" not in proc.stdout
