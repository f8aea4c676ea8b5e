"""``receipt defer`` and ``receipt deferrals`` (RECEIPT_SPEC.md 9.14) on a real SQLite
file and the real PostgreSQL server: the deferral receipt verifies, ``receipt
retention`` skips the retained thread and, once a deferral has ended, erases its scope
with a receipt naming it; ``show``, ``verify`` and ``index`` read both; bad input is
one error line with the documented exit code."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from erasure_receipts import AttestingPostgresSaver, AttestingSqliteSaver, Signer, verify_receipt
from erasure_receipts.app import app
from test_history_graphs import CHAT_TURNS, cfg, chat_graph, human


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


def _chat(saver: Any, *threads: str) -> None:
    graph = chat_graph(saver)
    for t in threads:
        for turn in CHAT_TURNS[:2]:
            graph.invoke(human(turn), cfg(t))


def _rows(db: Path, thread: str) -> list[Any]:
    with sqlite3.connect(db) as conn:
        return (
            conn.execute(
                "SELECT * FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id", (thread,)
            ).fetchall()
            + conn.execute(
                "SELECT * FROM writes WHERE thread_id = ? ORDER BY checkpoint_id, task_id, idx",
                (thread,),
            ).fetchall()
        )


def _ended_deferral(db: str, signer: Signer, thread: str) -> str:
    """A deferral made (through the API) by a clock in 2020, so it has ended by now."""
    past = datetime(2020, 1, 1, tzinfo=UTC)
    opener = AttestingPostgresSaver if "=" in db else AttestingSqliteSaver
    with opener.from_conn_string(db, signer=signer, clock=lambda: past) as saver:
        d = saver.defer(thread, basis="kept for an audit", until=past + timedelta(days=30))
    return d.receipt_id


def test_defer_retention_verify_show_index(
    tmp_path: Path, signer: Signer, key: Path, pub_pem: Path
) -> None:
    db, archive = tmp_path / "app.db", tmp_path / "receipts"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        _chat(saver, "kept", "other", "ended")
    ended = _ended_deferral(str(db), signer, "ended")

    until = (datetime.now(UTC) + timedelta(days=365)).date().isoformat()
    res = cli("defer", db, "--thread", "kept", "--basis", "GDPR Art. 17(3)(b)", "--until",
              until, "--code", "gdpr-17-3-b", "--key", key, "--archive", archive,
              "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["kind"], doc["status"], doc["until"]) == (
        "thread",
        "retained",
        f"{until}T00:00:00Z",
    )
    path = archive / f"{doc['receipt_id']}.json"
    v = verify_receipt(path, [signer.public_key])
    assert v.status == "retained"

    res = cli("deferrals", db, "--json")
    assert res.exit_code == 0, res.stderr
    listed = {d["receipt_id"]: d for d in json.loads(res.stdout)["deferrals"]}
    assert listed[doc["receipt_id"]]["state"] == "open"
    assert listed[ended]["state"] == "open"

    before = _rows(db, "kept")
    res = cli("retention", db, "--idle", "0s", "--key", key, "--archive", archive, "--json")
    assert res.exit_code == 0, res.stderr
    idle = json.loads(res.stdout)["idle"]
    assert idle["deferrals"] == 1 and idle["skipped"] == {"deferred": 1}
    assert idle["threads"] == 2  # "ended" (its deferral is over) and "other"
    assert _rows(db, "kept") == before
    assert _rows(db, "ended") == [] and _rows(db, "other") == []

    res = cli("deferrals", db)
    assert res.exit_code == 0
    lines = res.stdout.strip().splitlines()
    assert any(line.startswith("executed ") and ended in line for line in lines), lines
    assert any(line.startswith("open ") and "'kept'" in line for line in lines), lines

    erased = [
        p for p in archive.glob("*.json")
        if json.loads(p.read_bytes())["statement"]["predicate"].get("deferral_of") == ended
    ]  # fmt: skip
    assert len(erased) == 1
    res = cli("verify", path, erased[0], "--key", pub_pem)
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "RETAINED, not erased" in res.stdout and f"carries out deferral {ended}" in res.stdout
    res = cli("show", path)
    assert res.exit_code == 0 and "retained     until" in res.stdout
    assert "basis        'GDPR Art. 17(3)(b)' (code gdpr-17-3-b)" in res.stdout
    res = cli("index", archive, "--key", pub_pem, "--format", "ndjson")
    assert res.exit_code == 0, res.stderr
    records = [json.loads(line) for line in res.stdout.splitlines()]
    rec = {r["receipt_id"]: r for r in records}
    assert rec[doc["receipt_id"]]["deferral_code"] == "gdpr-17-3-b"
    assert rec[doc["receipt_id"]]["status"] == "retained"
    assert rec[erased[0].stem]["deferral_of"] == ended


def test_bad_input(tmp_path: Path, signer: Signer, key: Path) -> None:
    db, archive = tmp_path / "app.db", tmp_path / "receipts"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        _chat(saver, "t1")
    common = ["--key", key, "--archive", archive]
    one_error(cli("defer", db, "--thread", "t1", "--basis", "b", "--until", "2020-01-01",
                  *common), 2, "not in the future")  # fmt: skip
    one_error(cli("defer", db, "--thread", "t1", "--basis", " ", "--until", "2099-01-01",
                  *common), 2, "basis")  # fmt: skip
    one_error(cli("defer", db, "--thread", "t1", "--basis", "b", "--until", "soon",
                  *common), 2, "neither a date")  # fmt: skip
    one_error(cli("defer", db, "--thread", "t1", "--basis", "b", "--until", "2099-01-01",
                  "--code", "no spaces", *common), 2, "code")  # fmt: skip
    one_error(cli("defer", db, "--thread", "missing", "--basis", "b", "--until", "2099-01-01",
                  *common), 1, "nothing to defer")  # fmt: skip
    one_error(cli("defer", db, "--basis", "b", "--until", "2099-01-01", *common), 2,
              "exactly one of")  # fmt: skip
    one_error(cli("defer", db, "--thread", "t1", "--history", "t1", "--basis", "b", "--until",
                  "2099-01-01", *common), 2, "exactly one of")  # fmt: skip
    one_error(cli("deferrals", db, "--state", "closed"), 2, "--state")
    res = cli("defer", db, "--thread", "missing", "--basis", "b", "--until", "2099-01-01",
              *common, "--json")  # fmt: skip
    assert res.exit_code == 1 and json.loads(res.stdout)["reason"] == "nothing_to_defer"
    assert json.loads(cli("deferrals", db, "--json").stdout)["deferrals"] == []
    assert not list(archive.glob("*.json"))


def test_postgres(pg_db: str, signer: Signer, key: Path, tmp_path: Path) -> None:
    archive = tmp_path / "receipts"
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        _chat(saver, "kept", "ended")
    ended = _ended_deferral(pg_db, signer, "ended")
    res = cli("defer", pg_db, "--history", "kept", "--basis", "AI Act Art. 19 logs",
              "--until", "2099-01-01T00:00:00Z", "--key", key, "--archive", archive,
              "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["kind"] == "history"
    res = cli("retention", pg_db, "--history", "0s", "--key", key, "--archive", archive,
              "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    hist = json.loads(res.stdout)["history"]
    # "kept"'s history is retained; "ended"'s thread deferral has ended, but only an
    # idle sweep carries out a thread deferral: until then it still retains the thread
    assert hist["skipped"].get("deferred") == 2 and hist["deferrals"] == 0, hist
    res = cli("retention", pg_db, "--idle", "0s", "--key", key, "--archive", archive, "--json")
    idle = json.loads(res.stdout)["idle"]
    assert idle["deferrals"] == 1 and idle["skipped"] == {"deferred": 1}, idle
    states = {x["receipt_id"]: x["state"] for x in
              json.loads(cli("deferrals", pg_db, "--json").stdout)["deferrals"]}  # fmt: skip
    assert states == {ended: "executed", d["receipt_id"]: "open"}


def test_a_retained_thread_is_erased_from_the_cli_only_on_purpose(
    tmp_path: Path, signer: Signer, key: Path, pub_pem: Path
) -> None:
    """The refusal names the CLI's way out; --override-deferral erases and the receipt
    names the deferral; release-deferral ends one without erasing anything."""
    db, archive = tmp_path / "app.db", tmp_path / "receipts"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        _chat(saver, "kept", "released")
    until = (datetime.now(UTC) + timedelta(days=365)).date().isoformat()
    ids = {}
    for t in ("kept", "released"):
        res = cli("defer", db, "--thread", t, "--until", until, "--basis", "audit", "--key", key,
                  "--archive", archive, "--json")  # fmt: skip
        assert res.exit_code == 0, res.stderr
        ids[t] = json.loads(res.stdout)["receipt_id"]
    before = _rows(db, "kept")
    res = cli("erase", db, "--thread", "kept", "--key", key, "--archive", archive)
    one_error(res, 1, "retained", "--override-deferral", "release-deferral")
    assert _rows(db, "kept") == before

    res = cli("erase", db, "--thread", "kept", "--key", key, "--archive", archive,
              "--override-deferral", "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    erased = json.loads(res.stdout)["receipt"]
    assert _rows(db, "kept") == []
    v = verify_receipt(json.dumps(erased).encode(), [signer.public_key])
    assert erased["statement"]["predicate"]["deferral_of"] == ids["kept"], v

    one_error(cli("release-deferral", db, "no-such-id", "--reason", "x"), 1, "no-such-id")
    one_error(cli("release-deferral", db, ids["released"], "--reason", " "), 2, "--reason")
    res = cli("release-deferral", db, ids["released"], "--reason", "hold lifted", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["deferral"]["state"] == "released"
    assert _rows(db, "released") != []  # released, not erased
    res = cli("erase", db, "--thread", "released", "--key", key, "--archive", archive)
    assert res.exit_code == 0, res.stderr
    assert _rows(db, "released") == []
    one_error(
        cli("erase", db, "--namespace", "users.alice", "--key", key, "--override-deferral"),
        2,
        "--override-deferral",
    )
