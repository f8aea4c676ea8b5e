"""Command output that cannot mislead: an erasure into a full stdout loses no receipt, `verify
--json` usage errors are still one document, and control characters in file names cannot
forge a line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from erasure_receipts import AttestingSqliteSaver, Signer, verify_receipt
from test_journal_recovery import put

CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]


def recover_args(db: Path, key: Path, archive: Path) -> list[str]:
    return [str(db), "--key", str(key), "--archive", str(archive), "--min-age", "0"]


def test_cli_erase_to_a_full_stdout_loses_nothing(tmp_path: Path, signer: Signer) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    db, key, archive = tmp_path / "a.db", tmp_path / "k.pem", tmp_path / "archive"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
        put(s, "t")
    with open("/dev/full", "wb") as full:
        res = subprocess.run([*CLI, "erase", str(db), "--thread", "t", "--key", str(key)],
                             stdout=full, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert res.returncode == 3 and "Traceback" not in res.stderr
    assert "receipt recover" in res.stderr
    rec = subprocess.run(
        [*CLI, "recover", *recover_args(db, key, archive)], capture_output=True, text=True
    )
    assert rec.returncode == 0, rec.stderr
    assert "1 exported" in rec.stderr
    [path] = archive.iterdir()
    assert verify_receipt(path.read_bytes(), [signer.public_key]).thread_id == "t"


def test_verify_json_usage_errors_still_print_one_document(tmp_path: Path) -> None:
    res = subprocess.run([*CLI, "verify", str(tmp_path / "x.json"), "--json"],
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 2
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and doc["exit_code"] == 2 and "key" in doc["error"]


def test_control_characters_in_file_names_cannot_forge_output(tmp_path: Path) -> None:
    pub = tmp_path / "pub.pem"
    pub.write_bytes(Signer.generate().public_pem())
    evil = tmp_path / "a.json\nOK    payroll.json: thread 'bob' erased"
    evil.write_bytes(b"{}")
    res = subprocess.run([*CLI, "verify", str(evil), "--key", str(pub)],
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 1
    assert len(res.stdout.splitlines()) == 1 and res.stdout.startswith("FAIL")
    assert "\\n" in res.stdout
