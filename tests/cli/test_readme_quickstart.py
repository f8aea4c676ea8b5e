"""The README's opening: the example, then the CLI on the files it kept, as written."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _block(after: str) -> list[str]:
    """The commands of the README's first ```bash block after ``after``."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(after)
    body = re.search(r"```bash\n(.*?)```", text[start:], re.S)
    assert body is not None
    return [line for line in body.group(1).splitlines() if line and not line.startswith("#")]


def test_the_example_keeps_its_files_for_the_cli_commands_the_readme_gives(
    tmp_path: Path,
) -> None:
    commands = _block("Give the example a new directory")
    assert [c.split()[:2] for c in commands] == [
        [".venv/bin/python", "examples/erase_thread.py"],
        [".venv/bin/receipt", "verify"],
        [".venv/bin/receipt", "erase"],
    ]
    bindir = Path(sys.executable).parent
    for command in commands:
        argv = command.split()
        argv[0] = str(bindir / Path(argv[0]).name)
        if argv[1].startswith("examples/"):
            argv[1] = str(ROOT / argv[1])
        run = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, (command, run.stdout[-2000:], run.stderr[-2000:])
    demo = tmp_path / "demo"
    assert (demo / "receipt-signing.key").stat().st_mode & 0o077 == 0
    with sqlite3.connect(demo / "app.db") as conn:  # both threads erased, rows and all
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)
    assert len(list((demo / "receipts").glob("*.json"))) == 2
    again = subprocess.run([sys.executable, str(ROOT / "examples/erase_thread.py"), "demo"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert again.returncode == 1 and "holds an earlier run" in again.stderr
    assert "Traceback" not in again.stderr
