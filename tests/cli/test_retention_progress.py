"""`receipt retention` progress: on a terminal a bar whose total is what the sweep will
do (``--limit N``: N) with rate and ETA; without one, a progress line on stderr every
few seconds; ``--json`` stays one document on stdout."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from erasure_receipts import Signer
from erasure_receipts._cli import retention as app_module  # internals: the sweep bar
from on_a_tty import run_on_a_tty
from test_retention_thread_skips import _key, cli, old_sqlite_db, sqlite_threads

CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
THREADS = [f"t{i:02d}" for i in range(12)]


def _on_a_tty(args: list[str]) -> tuple[int, bytes, bytes]:
    proc, tty = run_on_a_tty([*CLI, *args])
    return proc.returncode, proc.stdout, tty


def test_bar_total_is_the_limit_with_rate_and_eta(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = old_sqlite_db(tmp_path / "app.db", monkeypatch, THREADS)
    key, archive = _key(tmp_path, signer), tmp_path / "receipts"
    code, out, tty = _on_a_tty(["retention", str(db), "--idle", "30d", "--limit", "5",
                                "--key", str(key), "--archive", str(archive)])  # fmt: skip
    assert code == 0, (out, tty)
    assert b"5 threads erased" in out
    draws = re.findall(rb"\r\[[#-]{30}\] (\d+)/(\d+) [\d.]+/s ETA (\d+:\d\d:\d\d|\?)", tty)
    assert draws and {int(t) for _, t, _ in draws} == {5}, tty  # never "/12"
    assert int(draws[-1][0]) == 5  # the bar ends full
    assert len(sqlite_threads(db)) == len(THREADS) - 5
    # No limit: the total is every candidate; --json keeps stdout one document.
    code, out, tty = _on_a_tty(["retention", str(db), "--idle", "30d", "--key", str(key),
                                "--archive", str(archive), "--json"])  # fmt: skip
    assert code == 0
    assert json.loads(out)["idle"]["threads"] == len(THREADS) - 5
    assert f"{len(THREADS) - 5}/{len(THREADS) - 5} ".encode() in tty


def test_progress_lines_without_a_terminal(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = old_sqlite_db(tmp_path / "app.db", monkeypatch, THREADS)
    key, archive = _key(tmp_path, signer), tmp_path / "receipts"
    # Default interval (seconds): a short sweep prints no progress line.
    dry = cli("retention", db, "--idle", "30d", "--dry-run", "--limit", "3")
    assert dry.exit_code == 0 and "threads, " not in dry.stderr and "\r" not in dry.stderr
    monkeypatch.setattr(app_module._SweepBar, "interval", 0.0)  # a "long" sweep
    run = cli("retention", db, "--idle", "30d", "--history", "30d", "--key", key,
              "--archive", archive, "--json")  # fmt: skip
    assert run.exit_code == 0, (run.stdout, run.stderr)
    doc = json.loads(run.stdout)  # one document, nothing else on stdout
    assert doc["idle"]["threads"] == len(THREADS)
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("retention --idle 30d: ")]
    assert len(lines) == len(THREADS) and "\r" not in run.stderr
    assert lines[-1].startswith(f"retention --idle 30d: {len(THREADS)}/{len(THREADS)} threads, ")
    assert re.search(r", [\d.]+/s ETA \d+:\d\d:\d\d$", lines[0])
    # With --limit the line counts toward the limit.
    monkeypatch.setattr(app_module._SweepBar, "interval", 0.0)
    db2 = old_sqlite_db(tmp_path / "two.db", monkeypatch, THREADS)
    run = cli("retention", db2, "--idle", "30d", "--limit", "4", "--key", key,
              "--archive", tmp_path / "r2")  # fmt: skip
    assert run.exit_code == 0
    counts = re.findall(r"^retention --idle 30d: (\d+)/(\d+) threads", run.stderr, re.M)
    assert counts == [(str(i), "4") for i in range(1, 5)]
