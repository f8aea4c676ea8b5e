"""`receipt verify` draws a progress bar only when stderr is a terminal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from on_a_tty import run_on_a_tty
from receipt_factory import TRUSTED, make_receipt

CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]


def _corpus(tmp_path: Path, n: int) -> tuple[Path, Path]:
    d = tmp_path / "receipts"
    d.mkdir()
    for i in range(n):
        (d / f"r{i:03d}.json").write_bytes(make_receipt().to_json())
    pub = tmp_path / "pub.pem"
    pub.write_bytes(TRUSTED.public_pem())
    return d, pub


def test_progress_bar_on_a_tty_only(tmp_path: Path) -> None:
    d, pub = _corpus(tmp_path, 12)
    proc, tty_err = run_on_a_tty([*CLI, "verify", str(d), "--key", str(pub), "--quiet"],
                                 timeout=60)  # fmt: skip
    assert proc.returncode == 0
    assert b"\r[" in tty_err and b"12/12" in tty_err
    assert proc.stdout == b""  # --quiet: nothing on stdout when everything verifies

    piped = subprocess.run([*CLI, "verify", str(d), "--key", str(pub)],
                           capture_output=True, timeout=60)  # fmt: skip
    assert piped.returncode == 0
    assert b"\r[" not in piped.stderr
    assert piped.stdout.count(b"\nOK ") + piped.stdout.startswith(b"OK ") == 12
