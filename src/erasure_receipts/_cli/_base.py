"""What every ``receipt`` command shares at the bottom: the invocation's output settings,
the ``receipt: error:`` line with its exit code (and ``--json`` failure document), the
output files reserved before an irreversible step, and library errors mapped to exit codes."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NoReturn

import typer

from ..errors import (
    ConfigurationError,
    ErasureIncompleteError,
    Error,
    InputError,
    KeyFormatError,
    NothingToEraseError,
)
from ..verify import _display
from .verify_fast import EXIT_INVALID, EXIT_IO, EXIT_USAGE

EXIT_CODES = """\
exit codes:
  0 success
  1 operation failed or refused, or receipt invalid
  2 usage error (bad option, malformed key, bad namespace, insecure key file)
  3 I/O error (file unreadable/unwritable, output exists, not a LangGraph database)"""

_DEFAULT_REASON = {EXIT_INVALID: "failed", EXIT_USAGE: "usage", EXIT_IO: "unreadable"}


class _Run:
    """Output settings of the current invocation (reset for each one)."""

    def __init__(self) -> None:
        self.json = False
        self.verbose = False
        self.outputs: list[_Output] = []  # files reserved by _check_out, see _Group.main
        self.command = "receipt"
        """The command line's command (``receipt erase``): a usage error names its help."""


class _Output:
    """An output file, made before any irreversible step and written atomically at the end.

    Asking (``os.access``) is not enough: it says yes, as root, to a directory in /proc,
    and nothing about a name over NAME_MAX or a file system without free inodes. So the
    file itself is created (empty, ``O_EXCL``: the name is ours from now on), and next to
    it, under a short name, the temporary file its content goes to. ``commit`` writes and
    fsyncs that, then renames it over the reservation; an invocation that ends without
    committing removes both (``_Group.main``)."""

    def __init__(self, path: Path) -> None:
        import tempfile

        self.path = path
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, 0o600)
        st = os.fstat(fd)
        os.close(fd)
        self.ident: tuple[int, int] | None = (st.st_dev, st.st_ino)
        try:
            self.fd, self.tmp = tempfile.mkstemp(prefix=".receipt-", suffix=".tmp",
                                                 dir=os.path.dirname(path) or ".")  # fmt: skip
        except BaseException:
            self._remove_reservation()
            raise

    def commit(self, data: bytes, mode: int = 0o644) -> None:
        """Write ``data`` durably as the file (raises ``OSError``; then ``discard``)."""
        if self.ident is None or self.fd < 0:
            raise FileExistsError(f"{self.path} was already written")
        fd, self.fd = self.fd, -1
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        st = os.lstat(self.path)
        if (st.st_dev, st.st_ino) != self.ident:  # replaced meanwhile: not ours to overwrite
            self.ident = None
            raise FileExistsError(f"{self.path} was replaced by another file")
        os.replace(self.tmp, self.path)
        self.ident = None  # the file is the output now, never removed
        dfd = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def discard(self) -> None:
        """Remove the temporary file and, unless committed, the (empty) reservation."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        with suppress(OSError):
            os.unlink(self.tmp)
        self._remove_reservation()

    def _remove_reservation(self) -> None:
        with suppress(OSError):
            st = os.lstat(self.path)
            if self.ident == (st.st_dev, st.st_ino) and st.st_size == 0:
                os.unlink(self.path)
        self.ident = None


_run = _Run()


def _emit_json(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _die(message: str, code: int, *, reason: str | None = None, **extra: Any) -> NoReturn:
    """One ``receipt: error:`` line on stderr (and, with --json, the failure document);
    a usage error names the command's ``--help``."""
    if code == EXIT_USAGE and "--help" not in message:
        message += f" (see `{_run.command} --help`)"
    typer.echo(f"receipt: error: {message}", err=True)
    if _run.json:
        doc = {"ok": False, "exit_code": code, "error": message}
        _emit_json({**doc, "reason": reason or _DEFAULT_REASON.get(code, "failed"), **extra})
    raise typer.Exit(code)


@contextmanager
def _mapped_errors(db: Path | str) -> Iterator[None]:
    """Library and database errors as one error line and the documented exit code."""
    import sqlite3

    try:
        yield
    except NothingToEraseError as exc:
        if exc.previous_receipt_id:
            msg = (
                f"thread {exc.thread_id!r} was already erased (receipt "
                f"{exc.previous_receipt_id}); nothing left to erase"
            )
        else:
            msg = (
                f"thread {exc.thread_id!r} has no stored rows in this scope (unknown thread "
                "id or --store-ns?); nothing was erased (--allow-empty attests an empty scope)"
            )
        _die(msg, EXIT_INVALID, reason=exc.reason, thread_id=exc.thread_id,
             previous_receipt_id=exc.previous_receipt_id)  # fmt: skip
    except InputError as exc:  # NotALangGraphDatabaseError included
        _die(exc.message, EXIT_IO, reason=exc.reason)
    except (ConfigurationError, KeyFormatError) as exc:  # a malformed key is a usage error
        _die(exc.message, EXIT_USAGE, reason=exc.reason)
    except ErasureIncompleteError as exc:
        _die(f"[{exc.reason}] {exc.message}", EXIT_INVALID, reason=exc.reason,
             remaining=exc.remaining)  # fmt: skip
    except Error as exc:
        _die(f"[{exc.reason}] {exc.message}", EXIT_INVALID, reason=exc.reason)
    except ValueError as exc:
        _die(str(exc), EXIT_USAGE)
    except sqlite3.Error as exc:
        _die(f"{_display(str(db))}: database error: {exc}", EXIT_IO, reason="database_error")
