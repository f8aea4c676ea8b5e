"""``receipt digest|erase DB --namespace users.alice`` (RECEIPT_SPEC.md 9.7): SQLite
files and the real PostgreSQL server; show, verify and index read the receipt."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.postgres import PostgresStore
from langgraph.store.sqlite import SqliteStore
from typer.testing import CliRunner, Result

from erasure_receipts import Signer, verify_receipt
from erasure_receipts.app import app
from pg_helpers import count

ALICE = ("users", "alice")


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


@pytest.fixture
def app_db(tmp_path: Path) -> Path:
    db = tmp_path / "app.db"
    SqliteSaver(sqlite3.connect(db, check_same_thread=False)).setup()
    with SqliteStore.from_conn_string(str(db)) as store:
        store.setup()
        store.put(ALICE, "a", {"v": 1})
        store.put((*ALICE, "prefs"), "b", {"v": 2})
        store.put(("users", "alicia"), "c", {"v": 3})
    return db


def store_rows(db: Path, where: str, params: tuple[Any, ...] = ()) -> list[Any]:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT * FROM store WHERE {where} ORDER BY 1, 2", params).fetchall()


def test_digest_erase_show_verify_index(
    app_db: Path, key: Path, pub_pem: Path, signer: Signer, tmp_path: Path
) -> None:
    alicia = store_rows(app_db, "prefix = 'users.alicia'")
    d = cli("digest", app_db, "--namespace", "users.alice", "--json")
    assert d.exit_code == 0, d.stderr
    preview = json.loads(d.stdout)
    assert preview["namespace"] == ["users", "alice"] and preview["tables"]["store"]["rows"] == 2
    out = tmp_path / "r.json"
    e = cli("erase", app_db, "--key", key, "--namespace", "users.alice", "--out", out, "--json")
    assert e.exit_code == 0, e.stderr
    doc = json.loads(e.stdout)
    assert doc["namespace"] == ["users", "alice"] and doc["rows"] == 2
    assert doc["pre_digest"] == preview["digest"]
    assert store_rows(app_db, "prefix LIKE 'users.alice%' AND prefix <> 'users.alicia'") == []
    assert store_rows(app_db, "prefix = 'users.alicia'") == alicia
    v = verify_receipt(out.read_bytes(), [signer.public_key])
    assert v.thread_id == "users.alice"
    res = cli("verify", out, "--key", pub_pem)
    assert res.exit_code == 0 and "store namespace 'users.alice' erased (2 rows)" in res.stdout
    res = cli("verify", out, "--key", pub_pem, "--json")
    assert json.loads(res.stdout)["results"][0]["kind"] == "namespace"
    shown = cli("show", out)
    assert shown.exit_code == 0 and "namespace    'users/alice'" in shown.stdout
    assert "refuses puts" in shown.stdout
    idx = cli("index", out, "--key", pub_pem)
    assert idx.exit_code == 0, idx.stderr
    record = json.loads(idx.stdout.splitlines()[0])
    assert record["kind"] == "namespace" and record["scope_id"] == "users.alice"
    assert record["thread_id"] is None and record["rows_store"] == 2
    # erased again: nothing there (exit 1), unless --allow-empty
    one_error(cli("erase", app_db, "--key", key, "--namespace", "users.alice"), 1, "holds no items")
    ok = cli("erase", app_db, "--key", key, "--namespace", "users.alice", "--allow-empty", "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["rows"] == 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--namespace", "users..alice"], "bad namespace"),
        (["--namespace", "users.alice."], "bad namespace"),
        (["--namespace", "users.alice", "--thread", "t"], "--thread"),
        (["--namespace", "users.alice", "--store-ns", "users/bob"], "--store-ns"),
        (["--namespace", "users.alice", "--subject", "alice"], "--subject"),
    ],
)
def test_usage_errors_change_nothing(app_db: Path, key: Path, args: list[str], needle: str) -> None:
    before = store_rows(app_db, "1")
    one_error(cli("erase", app_db, "--key", key, *args), 2, needle)
    assert store_rows(app_db, "1") == before


def test_pg_cli_namespace(pg_db: str, key: Path, signer: Signer, tmp_path: Path) -> None:
    from erasure_receipts import AttestingPostgresSaver

    with PostgresStore.from_conn_string(pg_db) as store:
        store.setup()
        store.put(ALICE, "a", {"v": 1})
        store.put((*ALICE, "x"), "b", {"v": 2})
        store.put(("users", "alicia"), "c", {"v": 3})
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
    d = cli("digest", pg_db, "--namespace", "users.alice", "--json")
    assert d.exit_code == 0, d.stderr
    out = tmp_path / "r.json"
    e = cli("erase", pg_db, "--key", key, "--namespace", "users.alice", "--out", out)
    assert e.exit_code == 0, e.stderr
    r = verify_receipt(out.read_bytes(), [signer.public_key])
    assert r.pre_digest == json.loads(d.stdout)["digest"]
    alice = ("prefix = %s OR left(prefix, 12) = %s", ("users.alice", "users.alice."))
    assert count(pg_db, "store", *alice) == 0
    assert count(pg_db, "store", "prefix = 'users.alicia'", ()) == 1
    assert count(pg_db, "erasure_store_tombstones", "prefix = 'users.alice'", ()) == 1
