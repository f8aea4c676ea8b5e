"""Operator commands: exit codes, key handling, --json, trust files,
non-LangGraph databases, erasing nothing, preflight checks, recovery reporting.

Every test runs the real CLI (in process through typer's CliRunner, or as a subprocess)
against real SQLite files, and asserts exit codes, stdout/stderr and file bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import jsonschema
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.sqlite import SqliteStore
from typer.testing import CliRunner, Result

import erasure_receipts
from erasure_receipts import (
    AttestingSqliteSaver,
    ErasureIncompleteError,
    Signer,
    TrustStore,
    verify_receipt,
)
from erasure_receipts._cli import _app as app_module  # internals: the typer app's module
from erasure_receipts._engine import eraser as attesting  # internals: where the flow signs
from erasure_receipts.app import app
from erasure_receipts.errors import NothingToEraseError
from scenario import TURNS, build_graph, human, raw_rows

ROOT = Path(__file__).parents[2]
CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
TRUST_SCHEMA = json.loads((ROOT / "schemas" / "trust.schema.json").read_text())


def cli(*args: Any, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def one_error(res: Result, code: int, *needles: str) -> str:
    """Exit ``code`` with exactly one ``receipt: error:`` line, no usage box/traceback."""
    assert res.exit_code == code, (res.exit_code, res.stdout, res.stderr, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("receipt: error: "), res.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def one_json(text: str) -> dict[str, Any]:
    doc = json.loads(text)  # raises on anything but exactly one document
    assert isinstance(doc, dict)
    return doc


@pytest.fixture
def app_db(tmp_path: Path, signer: Signer) -> Path:
    db = tmp_path / "app.db"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        graph = build_graph(saver, store)
        for text in TURNS[:2]:
            graph.invoke(human(text), {"configurable": {"thread_id": "alice"}})
        graph.invoke(human("hi"), {"configurable": {"thread_id": "bob"}})
    return db


@pytest.fixture
def key(tmp_path: Path, signer: Signer) -> Path:
    path = tmp_path / "k.pem"
    path.write_bytes(signer.private_pem())
    path.chmod(0o600)
    return path


def tombstones(db: Path) -> list[tuple[Any, ...]]:
    return raw_rows(db, "erasure_tombstones", "1", ())


# -- 1. one exit-code table; no usage box or traceback for I/O errors ------------------


def test_exit_code_table_in_help_and_docstring() -> None:
    res = cli("--help")
    assert res.exit_code == 0
    for line in ("0 success", "1 operation failed", "2 usage error", "3 I/O error"):
        assert line in res.stdout, res.stdout
        assert line in (app_module.__doc__ or "")
    assert "--allow-insecure-key" in (app_module.__doc__ or "")


@pytest.mark.parametrize("cmd", ["show", "export", "digest", "erase", "recover"])
def test_unreadable_input_is_exit_3_with_one_line(cmd: str, tmp_path: Path, key: Path) -> None:
    extra = {
        "show": [], "export": [], "digest": ["--thread", "t"],
        "erase": ["--thread", "t", "--key", key],
        "recover": ["--key", key, "--archive", tmp_path / "arch"],
    }[cmd]  # fmt: skip
    for target in (tmp_path / "missing", tmp_path):  # missing, and a directory
        one_error(cli(cmd, target, *extra), 3)
    assert not (tmp_path / "arch").exists()


@pytest.mark.parametrize("cmd", ["erase", "recover"])
def test_unreadable_key_is_exit_3(cmd: str, app_db: Path, tmp_path: Path) -> None:
    before = sha(app_db)
    args = ["--thread", "alice"] if cmd == "erase" else ["--archive", tmp_path / "a"]
    one_error(cli(cmd, app_db, "--key", tmp_path / "nokey.pem", *args), 3, "nokey.pem")
    assert sha(app_db) == before


def test_internal_error_has_no_traceback_unless_verbose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "r.json"
    f.write_text("{}")

    def boom(data: bytes) -> Any:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(erasure_receipts.receipt.Receipt, "from_json", staticmethod(boom))
    one_error(cli("show", f), 1, "internal error", "kaboom", "--verbose")
    for args in (["--verbose", "show", f], ["show", f, "--verbose"]):
        res = cli(*args)
        assert res.exit_code == 1
        assert "Traceback" in res.stderr and "kaboom" in res.stderr


# -- 2. keygen --------------------------------------------------------------------------


def test_keygen_refuses_an_empty_password(tmp_path: Path) -> None:
    out = tmp_path / "keys"
    res = cli("keygen", "--out", out, "--password-env", "RK_PW", env={"RK_PW": ""})
    one_error(res, 2, "RK_PW", "empty")
    assert not out.exists()


@pytest.mark.parametrize(
    "name", ["", ".hidden", "a/b", "../evil", "..", "a\\b", "x..y", "/abs", "a\nb", "a\x00b"]
)
def test_keygen_refuses_path_like_names(name: str, tmp_path: Path) -> None:
    out = tmp_path / "keys"
    out.mkdir()
    before = listing(tmp_path)
    one_error(cli("keygen", "--out", out, "--name", name), 2, "--name")
    assert listing(tmp_path) == before


def test_keygen_output_errors_are_exit_3(tmp_path: Path) -> None:
    out = tmp_path / "keys"
    assert cli("keygen", "--out", out).exit_code == 0
    priv = out / "receipt-signing.key"
    before = sha(priv)
    one_error(cli("keygen", "--out", out), 3, "refusing to overwrite")
    assert sha(priv) == before
    blocker = tmp_path / "file"
    blocker.write_text("x")
    one_error(cli("keygen", "--out", blocker), 3)
    # A dangling symlink where the key would go is not followed out of --out.
    link_dir = tmp_path / "l"
    link_dir.mkdir()
    (link_dir / "n.key").symlink_to(tmp_path / "elsewhere.key")
    one_error(cli("keygen", "--out", link_dir, "--name", "n"), 3)
    assert not (tmp_path / "elsewhere.key").exists()


# -- 3. private keys readable by others are refused (like ssh) -------------------------


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_insecure_private_key_is_refused(
    mode: int, app_db: Path, key: Path, tmp_path: Path
) -> None:
    key.chmod(mode)
    before = sha(app_db)
    one_error(cli("erase", app_db, "--thread", "alice", "--key", key), 2, "chmod 600")
    one_error(cli("recover", app_db, "--key", key, "--archive", tmp_path / "a"), 2, "chmod 600")
    assert sha(app_db) == before and raw_rows(app_db, "checkpoints", "thread_id = 'alice'", ())
    res = cli("erase", app_db, "--thread", "alice", "--key", key, "--allow-insecure-key")
    assert res.exit_code == 0, res.stderr
    assert raw_rows(app_db, "checkpoints", "thread_id = 'alice'", ()) == []
    assert "--allow-insecure-key" in cli("erase", "--help", env={"COLUMNS": "200"}).stdout


def test_keygen_key_is_accepted_by_erase(app_db: Path, tmp_path: Path) -> None:
    assert cli("keygen", "--out", tmp_path / "keys").exit_code == 0
    key = tmp_path / "keys" / "receipt-signing.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    res = cli("erase", app_db, "--thread", "alice", "--key", key)
    assert res.exit_code == 0, res.stderr


# -- 4. --version, python -m ----------------------------------------------------------


def test_version_and_python_dash_m(tmp_path: Path) -> None:
    res = cli("--version")
    assert res.exit_code == 0 and res.stdout == f"receipt {erasure_receipts.__version__}\n"
    for argv in ([*CLI, "--version"], [sys.executable, "-m", "erasure_receipts", "--version"]):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == f"receipt {erasure_receipts.__version__}\n"
    proc = subprocess.run([sys.executable, "-m", "erasure_receipts", "show", tmp_path / "no"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 3 and proc.stderr.startswith("receipt: error: ")
    proc = subprocess.run([sys.executable, "-m", "erasure_receipts", "verify", "--help"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0 and "usage: receipt verify" in proc.stdout


# -- 5. --json for erase and recover ----------------------------------------------------


def test_erase_json_success(app_db: Path, key: Path, tmp_path: Path, signer: Signer) -> None:
    out = tmp_path / "r.json"
    res = cli("erase", app_db, "--thread", "alice", "--key", key, "--store-ns", "users/alice",
              "--out", out, "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    doc = one_json(res.stdout)
    assert doc["ok"] is True and doc["exit_code"] == 0
    v = verify_receipt(out.read_bytes(), [signer.public_key])
    assert doc["receipt_id"] == v.receipt_id and doc["thread_id"] == "alice"
    assert doc["status"] == v.status and doc["pre_digest"] == v.pre_digest
    assert doc["rows"] > 0 and doc["tables"]["store"]["rows"] == 1
    assert doc["written_to"] == [str(out)]
    # The receipt itself is in the document, byte-for-byte equal to the file's JSON.
    assert doc["receipt"] == json.loads(out.read_bytes())
    # Without --out/--archive the receipt is only in the document (still one document).
    res = cli("erase", app_db, "--thread", "bob", "--key", key, "--json")
    doc = one_json(res.stdout)
    assert res.exit_code == 0 and doc["written_to"] == []
    r = json.dumps(doc["receipt"]).encode()
    assert verify_receipt(r, [signer.public_key]).thread_id == "bob"


def test_erase_json_failures(app_db: Path, key: Path, tmp_path: Path) -> None:
    cases: list[tuple[list[Any], int, str]] = [
        ([tmp_path / "missing.db", "--thread", "x", "--key", key], 3, "unreadable"),
        ([app_db, "--thread", "x", "--key", key, "--store-ns", "a//b"], 2, "usage"),
        ([app_db, "--key", key], 2, "usage"),  # click's own usage error: --thread missing
        ([app_db, "--thread", "x", "--key", key, "--bogus"], 2, "usage"),
        ([app_db, "--thread", "x", "--key", tmp_path / "nokey"], 3, "unreadable"),
    ]
    before = sha(app_db)
    for args, code, reason in cases:
        res = cli("erase", *args, "--json")
        assert res.exit_code == code, (args, res.stderr)
        doc = one_json(res.stdout)
        assert doc["ok"] is False and doc["exit_code"] == code, doc
        assert doc["reason"] == reason and doc["error"], doc
        assert res.stderr.startswith("receipt: error: ")
    assert sha(app_db) == before


def test_recover_json(tmp_path: Path, signer: Signer, key: Path) -> None:
    db, archive = tmp_path / "a.db", tmp_path / "archive"
    _pending_erasure(db, signer, archive)
    res = cli("recover", db, "--key", key, "--archive", archive, "--min-age", "0", "--json")
    assert res.exit_code == 0, res.stderr
    doc = one_json(res.stdout)
    assert doc["ok"] is True and doc["exit_code"] == 0
    [rec] = doc["recovered"]
    assert (archive / f"{rec['receipt_id']}.json").exists() and rec["thread_id"] == "t"
    assert rec["path"] == str(archive / f"{rec['receipt_id']}.json")
    assert doc["exported"] == [] and doc["skipped"] == {"count": 0, "min_age_seconds": 0.0}
    res = cli("recover", db, "--key", key, "--archive", tmp_path / "missing-dir" / "x",
              "--json", "--min-age", "0")  # fmt: skip
    assert res.exit_code == 0  # a new archive directory is created
    doc = one_json(res.stdout)
    assert doc["recovered"] == [] and len(doc["exported"]) == 1
    res = cli("recover", tmp_path / "nope.db", "--key", key, "--archive", archive, "--json")
    doc = one_json(res.stdout)
    assert res.exit_code == 3 and doc["ok"] is False and doc["exit_code"] == 3


# -- 6. trust add / trust list ----------------------------------------------------------


def _pub(tmp_path: Path, seed: int) -> tuple[Path, Signer]:
    s = Signer.from_seed(bytes([seed]) * 32)
    p = tmp_path / f"pub{seed}.pem"
    p.write_bytes(s.public_pem())
    return p, s


def test_trust_add_creates_and_extends(tmp_path: Path) -> None:
    trust = tmp_path / "trust.json"
    p1, s1 = _pub(tmp_path, 1)
    p2, s2 = _pub(tmp_path, 2)
    res = cli("trust", "add", p1, "--name", "old", "--not-after", "2026-07-01T00:00:00Z",
              "--file", trust)  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert s1.key_id in res.stdout
    res = cli("trust", "add", p2, "--name", "new", "--not-before", "2026-07-01T00:00:00Z",
              "--file", trust)  # fmt: skip
    assert res.exit_code == 0, res.stderr
    doc = json.loads(trust.read_bytes())
    jsonschema.Draft202012Validator(TRUST_SCHEMA).validate(doc)
    assert doc["keys"] == [
        {"name": "old", "ed25519": s1.public_key.b64(), "not_after": "2026-07-01T00:00:00Z"},
        {"name": "new", "ed25519": s2.public_key.b64(), "not_before": "2026-07-01T00:00:00Z"},
    ]
    store = TrustStore.from_json(trust.read_bytes())
    assert [k.name for k in store] == ["old", "new"]
    # The same key again, in a window that does not overlap its first one: allowed.
    res = cli("trust", "add", p1, "--name", "old-again", "--not-before", "2027-01-01T00:00:00Z",
              "--file", trust)  # fmt: skip
    assert res.exit_code == 0, res.stderr
    listed = cli("trust", "list", trust)
    assert listed.exit_code == 0
    lines = listed.stdout.strip().splitlines()
    assert len(lines) == 3 and s1.key_id in lines[0] and "old" in lines[0]
    assert "2026-07-01T00:00:00Z" in lines[1] and s2.key_id in lines[1]
    as_json = one_json(cli("trust", "list", trust, "--json").stdout)
    assert [k["key_id"] for k in as_json["keys"]] == [s1.key_id, s2.key_id, s1.key_id]


def test_trust_add_refusals_leave_the_file_unchanged(tmp_path: Path) -> None:
    trust = tmp_path / "trust.json"
    p1, _ = _pub(tmp_path, 1)
    assert cli("trust", "add", p1, "--name", "a", "--file", trust).exit_code == 0
    before = sha(trust)
    one_error(cli("trust", "add", p1, "--name", "b", "--file", trust), 1, "already trusted")
    one_error(cli("trust", "add", p1, "--name", "b", "--not-before", "2030-01-01T00:00:00Z",
                  "--file", trust), 1, "overlap")  # fmt: skip
    for bad in ("2026-01-01", "2026-01-01T00:00:00+01:00", "yesterday", "2026-13-45T99:00:00Z"):
        one_error(cli("trust", "add", p1, "--name", "b", "--not-before", bad,
                      "--file", trust), 2, "--not-before")  # fmt: skip
    one_error(cli("trust", "add", p1, "--name", "b", "--not-before", "2027-01-01T00:00:00Z",
                  "--not-after", "2026-01-01T00:00:00Z", "--file", trust), 2)  # fmt: skip
    one_error(cli("trust", "add", p1, "--name", "", "--file", trust), 2, "--name")
    priv = tmp_path / "priv.pem"
    priv.write_bytes(Signer.generate().private_pem())
    one_error(cli("trust", "add", priv, "--name", "x", "--file", trust), 2)
    one_error(cli("trust", "add", tmp_path / "none.pem", "--name", "x", "--file", trust), 3)
    assert sha(trust) == before
    broken = tmp_path / "broken.json"
    broken.write_text('{"trust_version": 2, "keys": []}')
    p2, _ = _pub(tmp_path, 2)
    one_error(cli("trust", "add", p2, "--name", "x", "--file", broken), 2, "broken.json")
    assert broken.read_text() == '{"trust_version": 2, "keys": []}'
    one_error(cli("trust", "list", tmp_path / "nothing.json"), 3)
    one_error(cli("trust", "list", broken), 2)


def test_trust_file_from_trust_add_verifies_receipts(
    tmp_path: Path, app_db: Path, key: Path, signer: Signer, pub_pem: Path
) -> None:
    trust = tmp_path / "trust.json"
    assert cli("trust", "add", pub_pem, "--name", "ops", "--file", trust).exit_code == 0
    archive = tmp_path / "r"
    assert cli("erase", app_db, "--thread", "alice", "--key", key, "--archive", archive
               ).exit_code == 0  # fmt: skip
    proc = subprocess.run([*CLI, "verify", str(archive), "--trust", str(trust), "--json"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stdout
    assert one_json(proc.stdout)["results"][0]["key_name"] == "ops"


# -- 7. databases that are not LangGraph databases --------------------------------------


def _foreign_dbs(tmp_path: Path) -> list[Path]:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"definitely not sqlite" * 100)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as c:
        c.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        c.execute("INSERT INTO notes (body) VALUES ('keep me')")
    c.close()
    return [empty, junk, other]


@pytest.mark.parametrize("cmd", ["digest", "erase", "recover"])
def test_foreign_database_is_untouched(cmd: str, tmp_path: Path, key: Path) -> None:
    dbs = _foreign_dbs(tmp_path)
    archive = tmp_path / "archive"
    for db in dbs:
        before, files = sha(db), listing(tmp_path)
        extra = {"digest": ["--thread", "t"], "erase": ["--thread", "t", "--key", key],
                 "recover": ["--key", key, "--archive", archive]}[cmd]  # fmt: skip
        one_error(cli(cmd, db, *extra), 3, "not a LangGraph database")
        assert sha(db) == before, db
        assert listing(tmp_path) == files, db
    with sqlite3.connect(dbs[2]) as c:
        assert [r[0] for r in c.execute("SELECT name FROM sqlite_master")] == ["notes"]
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    c.close()


def test_digest_is_read_only(app_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[Any, dict[str, Any]]] = []
    real = sqlite3.connect

    def spy(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        seen.append((database, kwargs))
        return real(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", spy)
    before = sha(app_db)
    res = cli("digest", app_db, "--thread", "alice", "--store-ns", "users/alice", "--json")
    assert res.exit_code == 0, res.stderr
    assert one_json(res.stdout)["tables"]["store"]["rows"] == 1
    assert sha(app_db) == before
    assert seen and all(
        str(db).startswith("file:") and "mode=ro" in str(db) and kw.get("uri") for db, kw in seen
    ), seen


def test_digest_of_a_plain_langgraph_database_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "plain.db"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                  empty_checkpoint(), {}, {})  # fmt: skip
    before = sha(db)
    res = cli("digest", db, "--thread", "t", "--json")
    assert res.exit_code == 0, res.stderr
    assert one_json(res.stdout)["tables"]["checkpoints"]["rows"] == 1
    assert sha(db) == before
    with sqlite3.connect(db) as c:
        names = {r[0] for r in c.execute("SELECT name FROM sqlite_master")}
    c.close()
    assert not any(n.startswith("erasure_") for n in names)


# -- 8. erasing nothing -------------------------------------------------------------------


def test_erase_unknown_thread_is_refused(app_db: Path, key: Path) -> None:
    res = cli("erase", app_db, "--thread", "no-such-thread", "--key", key)
    one_error(res, 1, "no-such-thread", "no stored rows")
    assert res.stdout == "" and tombstones(app_db) == []
    res = cli("erase", app_db, "--thread", "alice", "--key", key)
    assert res.exit_code == 0, res.stderr
    first = json.loads(res.stdout)["statement"]["predicate"]["receipt_id"]
    res = cli("erase", app_db, "--thread", "alice", "--key", key, "--json")
    assert res.exit_code == 1
    doc = one_json(res.stdout)
    assert doc["reason"] == "nothing_to_erase" and doc["previous_receipt_id"] == first
    assert first in res.stderr and "already erased" in res.stderr


def test_erase_allow_empty(app_db: Path, key: Path, signer: Signer) -> None:
    res = cli("erase", app_db, "--thread", "ghost", "--key", key, "--allow-empty", "--json")
    assert res.exit_code == 0, res.stderr
    doc = one_json(res.stdout)
    assert doc["rows"] == 0
    assert verify_receipt(json.dumps(doc["receipt"]).encode(), [signer.public_key])


def test_erase_flags_reach_the_saver(
    app_db: Path, key: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []

    def fake(self: Any, thread_id: str, **kwargs: Any) -> Any:
        calls.append(kwargs)
        raise NothingToEraseError(thread_id, "rcpt-earlier")

    monkeypatch.setattr(AttestingSqliteSaver, "erase_thread", fake)
    res = cli("erase", app_db, "--thread", "t", "--key", key, "--allow-empty",
              "--residue-scan", "--json")  # fmt: skip
    assert res.exit_code == 1
    assert calls[-1]["allow_empty"] is True and calls[-1]["residue_scan"] is True
    doc = one_json(res.stdout)
    assert doc == {
        "ok": False, "exit_code": 1, "error": doc["error"], "reason": "nothing_to_erase",
        "thread_id": "t", "previous_receipt_id": "rcpt-earlier",
    }  # fmt: skip
    assert "rcpt-earlier" in doc["error"]
    res = cli("erase", app_db, "--thread", "t", "--key", key, "--no-residue-scan")
    one_error(res, 1, "rcpt-earlier")
    assert calls[-1]["residue_scan"] is False


# -- 9. --archive / --out are checked before anything is deleted --------------------------


def test_archive_and_out_preflight(app_db: Path, key: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    before = sha(app_db)
    for opt, path in [
        ("--archive", blocker),  # an existing file
        ("--archive", blocker / "sub"),  # cannot be created
        ("--out", blocker),  # exists
        ("--out", tmp_path / "nodir" / "r.json"),  # directory missing
        ("--out", blocker / "r.json"),  # "directory" is a file
    ]:
        res = cli("erase", app_db, "--thread", "alice", "--key", key, opt, path)
        one_error(res, 3, str(path))
        assert res.stdout == ""
        assert raw_rows(app_db, "checkpoints", "thread_id = 'alice'", ())
        assert tombstones(app_db) == []
    assert sha(app_db) == before
    assert blocker.read_text() == "x"


def test_recover_archive_preflight(tmp_path: Path, signer: Signer, key: Path) -> None:
    db, archive = tmp_path / "a.db", tmp_path / "archive"
    _pending_erasure(db, signer, archive)
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    for path in (blocker, blocker / "sub"):
        one_error(cli("recover", db, "--key", key, "--archive", path, "--min-age", "0"), 3)
    res = cli("recover", db, "--key", key, "--archive", archive, "--min-age", "0")
    assert res.exit_code == 0 and "1 receipt(s) recovered" in res.stderr


# -- 10. recover says what it skipped -----------------------------------------------------


def _pending_erasure(db: Path, signer: Signer, archive: Path) -> None:
    """An erasure that committed without a receipt (signing failed after the commit)."""
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as s:
        cp = empty_checkpoint()
        s.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {}, {})
        with (
            mock.patch.object(attesting, "sign_and_archive", side_effect=OSError("disk full")),
            pytest.raises(ErasureIncompleteError),
        ):
            s.erase_thread("t")
    assert not any(archive.iterdir()) if archive.exists() else True


def test_recover_reports_young_entries(tmp_path: Path, signer: Signer, key: Path) -> None:
    db, archive = tmp_path / "a.db", tmp_path / "archive"
    _pending_erasure(db, signer, archive)
    res = cli("recover", db, "--key", key, "--archive", archive, "--min-age", "3600")
    assert res.exit_code == 0, res.stderr
    assert "0 receipt(s) recovered" in res.stderr
    assert "1 journal entry skipped" in res.stderr and "--min-age 3600" in res.stderr
    res = cli("recover", db, "--key", key, "--archive", archive, "--min-age", "3600", "--json")
    doc = one_json(res.stdout)
    assert doc["skipped"] == {"count": 1, "min_age_seconds": 3600.0}
    assert doc["recovered"] == []
    res = cli("recover", db, "--key", key, "--archive", archive, "--min-age", "0")
    assert res.exit_code == 0 and "1 receipt(s) recovered" in res.stderr
    assert "skipped" not in res.stderr
    assert os.listdir(archive)


def test_malformed_or_wrongly_encrypted_key_is_usage_error(
    app_db: Path, tmp_path: Path, pub_pem: Path, signer: Signer
) -> None:
    pub_pem.chmod(0o600)  # not refused for its mode: for not being a private key
    before = sha(app_db)
    one_error(cli("erase", app_db, "--thread", "alice", "--key", pub_pem), 2, "private key")
    enc = tmp_path / "enc.key"
    enc.write_bytes(signer.private_pem(b"right"))
    enc.chmod(0o600)
    res = cli("erase", app_db, "--thread", "alice", "--key", enc, "--password-env", "PW",
              env={"PW": "wrong"})  # fmt: skip
    one_error(res, 2, "wrong password")
    res = cli("erase", app_db, "--thread", "alice", "--key", enc, "--password-env", "PW",
              env={"PW": ""})  # fmt: skip
    one_error(res, 2, "empty")
    assert sha(app_db) == before
