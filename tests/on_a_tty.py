"""Run a command with its stderr on a pseudo-terminal (progress bars draw only on a tty)."""

from __future__ import annotations

import os
import pty
import subprocess


def run_on_a_tty(
    cmd: list[str], timeout: float = 300
) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
    """``cmd`` with stdout piped and stderr on a pty; returns the process and all it wrote
    to the terminal."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=slave, timeout=timeout)
        os.close(slave)
        tty = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the pty is closed once the child's side is gone
                break
            if not chunk:
                break
            tty += chunk
    finally:
        os.close(master)
    return proc, tty
