"""`receipt report` draws a progress bar only when stderr is a terminal."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from test_cli_tty import _corpus

CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]


def test_report_progress_bar_on_a_tty_only(tmp_path: Path) -> None:
    d, pub = _corpus(tmp_path, 12)
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([*CLI, "report", str(d), "--key", str(pub), "-o",
                               str(tmp_path / "r.html")],
                              stdout=subprocess.PIPE, stderr=slave, timeout=120)  # fmt: skip
        os.close(slave)
        tty_err = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            tty_err += chunk
    finally:
        os.close(master)
    assert proc.returncode == 0, tty_err
    assert b"\r[" in tty_err and b"12/12" in tty_err
    assert (tmp_path / "r.html").stat().st_size > 0

    piped = subprocess.run([*CLI, "report", str(d), "--key", str(pub), "--json"],
                           capture_output=True, timeout=120)  # fmt: skip
    assert piped.returncode == 0
    assert b"\r[" not in piped.stderr
    counts = json.loads(piped.stdout)["receipts"]
    assert (counts["verified"], counts["duplicates"]) == (1, 11)  # 12 copies of one receipt
