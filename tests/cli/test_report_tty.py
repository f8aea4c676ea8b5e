"""`receipt report` draws a progress bar only when stderr is a terminal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from on_a_tty import run_on_a_tty
from test_cli_tty import _corpus

CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]


def test_report_progress_bar_on_a_tty_only(tmp_path: Path) -> None:
    d, pub = _corpus(tmp_path, 12)
    proc, tty_err = run_on_a_tty([*CLI, "report", str(d), "--key", str(pub), "-o",
                                  str(tmp_path / "r.html")], timeout=120)  # fmt: skip
    assert proc.returncode == 0, tty_err
    assert b"\r[" in tty_err and b"12/12" in tty_err
    assert (tmp_path / "r.html").stat().st_size > 0

    piped = subprocess.run([*CLI, "report", str(d), "--key", str(pub), "--json"],
                           capture_output=True, timeout=120)  # fmt: skip
    assert piped.returncode == 0
    assert b"\r[" not in piped.stderr
    counts = json.loads(piped.stdout)["receipts"]
    assert (counts["verified"], counts["duplicates"]) == (1, 11)  # 12 copies of one receipt
