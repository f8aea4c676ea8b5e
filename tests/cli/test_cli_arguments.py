"""Command-line arguments: no fragment of a DSN's password (``postgresql://u:hun@ter2@host/db``,
an un-encoded ``@``) in any message, and ids or needles that are not UTF-8
(``--needle $'\\xff'``) a usage error, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import test_subject_authorization
from erasure_receipts.app import app
from test_subject_authorization import SIGNER, _threads

db = test_subject_authorization.db  # the fixture, shared

# -- DSN passwords with an un-encoded '@' ---------------------------------------------------


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://u:hun@ter2@127.0.0.1:1/db",
        "postgresql://u:hun@ter2@127.0.0.1:1/db?connect_timeout=2",
        "host=127.0.0.1 port=1 dbname=db user=u password=hun@ter2",
        "host=127.0.0.1 port=1 dbname=db user=u password='hun@ter2 x'",
    ],
)
def test_dsn_password_never_printed(dsn: str) -> None:
    pytest.importorskip("psycopg")
    res = subprocess.run(
        [sys.executable, "-c", "from erasure_receipts.cli import main; main()", "digest", dsn,
         "--thread", "t", "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 3, res.stderr
    doc = json.loads(res.stdout)
    assert doc["ok"] is False
    for fragment in ("hun", "ter2"):
        assert fragment not in res.stdout and fragment not in res.stderr, (fragment, res.stderr)


# -- invalid UTF-8 on the command line ------------------------------------------------------


def test_invalid_utf8_needle_is_a_usage_error(db: Path, tmp_path: Path) -> None:
    key = tmp_path / "k.pem"
    key.write_bytes(SIGNER.private_pem())
    key.chmod(0o600)
    before = _threads(db)
    cmd = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
    # As a shell passes $'\xff': raw bytes, decoded by Python with surrogateescape.
    runs = [
        [*cmd, "locate", str(db), b"\xff"],
        [*cmd, "erase", str(db), "--key", str(key), "--subject", "alice", "--thread",
         "alice-1", "--needle", b"x\xff"],
        [*cmd, "erase", str(db), "--key", str(key), "--subject", b"al\xffice", "--thread",
         "alice-1"],
        [*cmd, "erase", str(db), "--key", str(key), "--thread", b"alice-\xff"],
        [*cmd, "digest", str(db), "--subject", "alice", "--thread", b"\xff"],
        [*cmd, "authorize", "--request-id", "R", "--not-after", "2099-01-01T00:00:00Z",
         "--key", str(key), "--subject", b"\xff", "--thread", "a", "--out",
         str(tmp_path / "auth.json")],
    ]  # fmt: skip
    for args in runs:
        res = subprocess.run(args, capture_output=True, timeout=60)
        err = res.stderr.decode("utf-8", "replace")
        assert res.returncode == 2, (args, err)
        assert "not valid UTF-8" in err and len(err.strip().splitlines()) == 1, err
    assert _threads(db) == before
    assert not (tmp_path / "auth.json").exists()
    # In-process (CliRunner) with a lone surrogate, --json: one failure document.
    res = CliRunner().invoke(app, ["locate", str(db), "\udcff", "--json"])
    assert res.exit_code == 2 and json.loads(res.stdout)["ok"] is False
