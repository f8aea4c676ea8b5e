"""``receipt redact DB --thread T --needles-file F --key K --archive DIR`` on SQLite files
and the real PostgreSQL server: exit codes, one error line, --json, the receipt verifies."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from erasure_receipts import AttestingPostgresSaver, AttestingSqliteSaver, Signer, verify_receipt
from erasure_receipts.app import app
from test_history_graphs import CARD, CHAT_TURNS, cfg, chat_graph, human

T = "alice-chat"


def cli(*args: Any, stdin: str | None = None) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args], input=stdin)


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
def chat_db(tmp_path: Path, signer: Signer) -> Path:
    db = tmp_path / "chat.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        g = chat_graph(saver)
        for turn in CHAT_TURNS:
            g.invoke(human(turn), cfg(T))
        g.invoke(human("bob-only-secret"), cfg("bob"))
    return db


def needles(tmp_path: Path, *values: str) -> Path:
    path = tmp_path / "needles.txt"
    path.write_text("".join(f"{v}\n" for v in values), encoding="utf-8")
    return path


def holding(db: Path, value: str) -> int:
    with sqlite3.connect(db) as conn:
        return sum(
            conn.execute(
                f"SELECT count(*) FROM {t} WHERE instr(CAST({c} AS BLOB), ?) > 0",
                (value.encode(),),
            ).fetchone()[0]
            for t, c in (("checkpoints", "checkpoint"), ("writes", "value"))
        )


def checkpoints(db: Path) -> list[Any]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? ORDER BY 1", (T,)
        ).fetchall()


def test_redact_archives_a_verifiable_receipt(
    tmp_path: Path, key: Path, chat_db: Path, signer: Signer
) -> None:
    ids = checkpoints(chat_db)
    archive = tmp_path / "receipts"
    res = cli("redact", chat_db, "--thread", T, "--needles-file", needles(tmp_path, CARD),
              "--key", key, "--archive", archive)  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert "redacted thread 'alice-chat'" in res.stdout and "checkpoint(s) kept" in res.stdout
    assert holding(chat_db, CARD) == 0 and checkpoints(chat_db) == ids
    files = list(archive.iterdir())
    assert len(files) == 1
    v = verify_receipt(files[0].read_bytes(), [signer.public_key])
    assert v.status == "redacted"


def test_json_and_stdin(tmp_path: Path, key: Path, chat_db: Path, signer: Signer) -> None:
    res = cli("redact", chat_db, "--thread", T, "--needles-file", "-", "--key", key, "--json",
              "--replacement", "<gone>", stdin=f"{CARD}\n")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["ok"] is True and doc["status"] == "redacted" and doc["rows"] > 0
    assert doc["checkpoints"] == len(checkpoints(chat_db))
    verify_receipt(json.dumps(doc["receipt"]).encode(), [signer.public_key])
    assert holding(chat_db, CARD) == 0 and holding(chat_db, "<gone>") > 0


@pytest.mark.parametrize(
    ("thread", "values", "code", "words", "reason"),
    [
        ("no-such-thread", [CARD], 1, ["no stored rows"], "nothing_to_erase"),
        (T, ["bob-only-secret"], 1, ["holds none of the needles"], "nothing_to_redact"),
        (T, ["abc"], 2, ["at least 4"], "needle_too_short"),
        (T, ["alice-chat"], 1, ["nothing was changed", "column='thread_id'"], "needles_found"),
    ],
)
def test_refusals_change_nothing(
    tmp_path: Path, key: Path, chat_db: Path,
    thread: str, values: list[str], code: int, words: list[str], reason: str,
) -> None:  # fmt: skip
    before = chat_db.read_bytes()
    args = ["redact", chat_db, "--thread", thread, "--needles-file", needles(tmp_path, *values),
            "--key", key, "--archive", tmp_path / "a"]  # fmt: skip
    one_error(cli(*args), code, *words)
    res = cli(*args, "--json")
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and doc["exit_code"] == code and doc["reason"] == reason
    assert chat_db.read_bytes() == before
    assert not list((tmp_path / "a").glob("*.json"))


def test_an_empty_needles_file_is_a_usage_error(tmp_path: Path, key: Path, chat_db: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    one_error(cli("redact", chat_db, "--thread", T, "--needles-file", empty, "--key", key), 2,
              "no values")  # fmt: skip
    one_error(cli("redact", chat_db, "--thread", T, "--needles-file", tmp_path / "nope",
                  "--key", key), 3)  # fmt: skip


def test_postgres(pg_db: str, tmp_path: Path, key: Path, signer: Signer) -> None:
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        saver.setup()
        g = chat_graph(saver)
        for turn in CHAT_TURNS:
            g.invoke(human(turn), cfg(T))
    res = cli("redact", pg_db, "--thread", T, "--needles-file", needles(tmp_path, CARD),
              "--key", key, "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["receipt"]["statement"]["predicate"]["backend"]["kind"] == "postgres"
    verify_receipt(json.dumps(doc["receipt"]).encode(), [signer.public_key])
    with AttestingPostgresSaver.from_conn_string(pg_db, signer=signer) as saver:
        states = list(chat_graph(saver).get_state_history(cfg(T)))
        assert len(states) == doc["checkpoints"]
        assert all(CARD not in repr(s.values) for s in states)


def test_an_encrypted_thread_is_refused_naming_its_sealed_rows(
    tmp_path: Path, key: Path, signer: Signer
) -> None:
    """``receipt redact`` takes no key store: on a thread written with ``encryption=`` it
    cannot see into the sealed rows, so it names them and changes nothing (never 'holds
    none of the needles')."""
    from erasure_receipts import Encryption, KeyStore, LocalKeyWrapper

    db = tmp_path / "enc.db"
    keys = KeyStore(tmp_path / "keys.sqlite", LocalKeyWrapper.generate(tmp_path / "kek"))
    conn = sqlite3.connect(db, check_same_thread=False)
    g = chat_graph(AttestingSqliteSaver(conn, signer=signer, encryption=Encryption(keys)))
    for turn in CHAT_TURNS:
        g.invoke(human(turn), cfg(T))
    conn.close()
    keys.close()
    before = db.read_bytes()
    res = cli("redact", db, "--thread", T, "--needles-file", needles(tmp_path, CARD),
              "--key", key)  # fmt: skip
    one_error(res, 1, "redaction refused, nothing was changed", "table='checkpoints'")
    assert "holds none" not in res.stderr
    assert db.read_bytes() == before
