"""The ``receipt`` command line (private: the console script is
``erasure_receipts.cli:main``, and ``python -m erasure_receipts`` runs the same).

``receipt verify`` goes to :mod:`.verify_fast` (standard library only: no typer,
LangGraph or database driver); every other command is the typer app of
:mod:`.commands`, one module per command group (:mod:`.keys`, :mod:`.inspect`,
:mod:`.erase`, :mod:`.retention`, :mod:`.log`, PostgreSQL in :mod:`.postgres`) over the
shared parts of :mod:`._app` and :mod:`._base`, imported only when needed.

Exit codes: 0 success / all verified, 1 failed or invalid, 2 usage error, 3 an input
could not be read, or stdout/stderr was closed early (a broken pipe, as in
``receipt verify DIR | head -1``; handled for every command in ``main``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from .verify_fast import EXIT_IO, EXIT_OK, verify_main

__all__ = ["main"]


def _fd_identity(fd: int) -> tuple[int, int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_rdev)


def _run_app(args: list[str]) -> Any:
    """The typer app's exit status, with broken pipes recognised. The app's libraries
    handle EPIPE themselves and exit 1: click (vendored by typer) wraps stdout and stderr
    in a ``PacifyFlushWrapper`` (matched by name: click's location differs between typer
    versions), and rich (help pages) points stdout at devnull. Both mean a broken pipe."""
    from .commands import app

    stdout_before = _fd_identity(1)
    try:
        app(args=args, prog_name="receipt")
    except SystemExit as exc:
        if "PacifyFlushWrapper" in (type(sys.stdout).__name__, type(sys.stderr).__name__):
            raise BrokenPipeError from None
        now = _fd_identity(1)
        if now != stdout_before and now is not None and now == _devnull_identity():
            raise BrokenPipeError from None
        return exc.code
    return EXIT_OK


def _devnull_identity() -> tuple[int, int, int] | None:
    try:
        st = os.stat(os.devnull)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_rdev)


def _broken_pipe() -> int:
    """The reader went away (``| head -1``): no traceback, no more output, exit 3.
    As the Python docs recommend, stdout (and stderr, if it is the closed pipe) is
    pointed at devnull so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return EXIT_IO
    streams = [sys.stdout]
    try:
        sys.stderr.flush()
    except BrokenPipeError:
        streams.append(sys.stderr)
    except (OSError, ValueError, AttributeError):
        pass
    for stream in streams:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)
    return EXIT_IO


def main(argv: Sequence[str] | None = None) -> None:
    """The ``receipt`` console script. Every command's exit status goes through here,
    so a closed stdout is handled once for all of them (exit 3, no traceback)."""
    args = list(sys.argv[1:] if argv is None else argv)
    code: Any
    if sys.stdout is None:  # started with stdout closed (`>&-`): nowhere to report
        sys.exit(EXIT_IO)
    try:
        code = verify_main(args[1:]) if args and args[0] == "verify" else _run_app(args)
        sys.stdout.flush()
    except BrokenPipeError:
        code = _broken_pipe()
    except KeyboardInterrupt:
        code = 130  # like a shell: 128 + SIGINT, and no traceback
    sys.exit(code)
