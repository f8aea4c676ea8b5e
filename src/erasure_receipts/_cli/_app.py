"""The ``receipt`` typer app and what its operator commands share (options, keys,
output files, databases). The commands are one module per group: ``keys`` (keygen,
keygen-commitment, trust add|list), ``inspect`` (show, export, index, prove, open),
``erase`` (digest, erase, recover, locate, authorize), ``retention`` and ``log`` (log
append|verify|prove|checkpoint), registered in order by ``commands``.

``receipt verify`` is dispatched before this module is imported (see ``verify_fast``); the
``verify`` command below only exists so that ``receipt --help`` lists it.

Exit codes (every command):

  0 success
  1 operation failed or refused (nothing to erase, erasure incomplete, duplicate
    trusted key), or a receipt is invalid
  2 usage error (bad option or value, malformed key, bad namespace, bad key name,
    private key readable by others)
  3 I/O error (a file could not be read or written, an output already exists, or
    the database is not a LangGraph database)

Diagnostics go to stderr as one ``receipt: error: ...`` line; no tracebacks unless
``--verbose`` (global, ``receipt --verbose CMD``, or per command). An unexpected
internal error exits 1.

A private key (``--key``) that is group- or world-accessible is refused, like ssh does
(``chmod 600 KEY``); ``--allow-insecure-key`` overrides that on purpose.

``--json`` (erase, recover, digest, show, trust list) prints exactly one JSON document
on stdout, also on failure::

  {"ok": false, "exit_code": N, "error": "<message>", "reason": "<code>", ...}

``erase --json`` on success::

  {"ok": true, "exit_code": 0, "receipt_id": ..., "thread_id": ..., "status": ...,
   "pre_digest": ..., "rows": N, "tables": {table: {"rows", "bytes"}},
   "written_to": [paths], "receipt": {the receipt file's JSON}}

``recover --json``::

  {"ok": bool, "exit_code": N, "recovered": [{"receipt_id", "thread_id", "path"}],
   "exported": [receipt ids], "skipped": {"count": N, "min_age_seconds": S}}
  (plus "error"/"reason" when ok is false)
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from .. import __version__
from ..errors import (
    ConfigurationError,
    Error,
    InputError,
    KeyFormatError,
)
from ..receipt import write_durably
from ..signing import Signer
from ..trust import TrustFile
from ..trust import _instant as _instant
from ..verify import TrustedKey, _display
from ..verify import read_input as _read_input
from ._base import EXIT_CODES, _die, _mapped_errors, _Output, _run
from .verify_fast import EXIT_INVALID, EXIT_IO, EXIT_USAGE, verify_main

_MAX_KEY_BYTES = 1 << 20


class _Group(TyperGroup):
    """The ``receipt`` group: usage errors honour ``--json``, and an unexpected exception
    is one error line (exit 1) with a traceback only under ``--verbose``."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        _run.json = _run.verbose = False  # a new invocation (tests run many per process)
        _run.outputs = []
        _run.command = "receipt"
        try:
            return super().main(*args, **kwargs)
        finally:  # whatever ended the command: outputs it reserved but never wrote go
            for output in _run.outputs:
                output.discard()
            _run.outputs = []

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except typer.TyperException as exc:  # the global options: `receipt --bogus`
            head = args[: args.index("--")] if "--" in args else args
            _run.json = _run.json or "--json" in head
            _usage_error(exc)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """A group given no command prints its help page as the diagnostic it is: on
        stderr (stdout carries only results), exit 2. Click would build the page into its
        exception, and typer's rich help prints it to stdout while doing so."""
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            with redirect_stdout(sys.stderr):
                text = ctx.get_help()
            if text:
                sys.stderr.write(text + "\n")
            raise SystemExit(EXIT_USAGE)
        return list(super().parse_args(ctx, args))

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        head = args[: args.index("--")] if "--" in args else args
        _run.json = _run.json or "--json" in head
        _run.verbose = _run.verbose or "--verbose" in head or "-v" in head
        name, command, rest = super().resolve_command(ctx, args)
        if name:
            _run.command = f"{ctx.command_path} {name}"
        return name, command, rest

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort):
            raise
        except typer.TyperException as exc:  # click's UsageError and friends
            _usage_error(exc)
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise  # a closed stdout is the entry point's business
            _internal_error(exc)
        except Exception as exc:
            _internal_error(exc)


_PATH_CHECK = re.compile(
    r" '.*' (does not exist|is a file|is a directory|is not readable|is not writable)\.$"
)


def _usage_error(exc: typer.TyperException) -> NoReturn:
    """A parsing error of click/typer (missing or unknown option, bad value or choice) as
    one ``receipt: error:`` line, exit 2, instead of their usage box. A path option's own
    file check (``exists=``, ``readable=``: missing, unreadable, a directory) and a file
    option that cannot be opened are I/O errors: exit 3. Only "no arguments, show the
    help" keeps the help page (see :meth:`_Group.parse_args`)."""
    if type(exc).__name__ == "NoArgsIsHelpError":
        raise exc
    message = " ".join(exc.format_message().split())  # one line, whatever the library wraps
    code = getattr(exc, "exit_code", EXIT_INVALID)
    opening = isinstance(exc.__cause__ or exc.__context__, OSError)  # a file type's open()
    if type(exc).__name__ == "FileError" or (
        code == EXIT_USAGE and (opening or _PATH_CHECK.search(message))
    ):
        _die(message, EXIT_IO, reason="unreadable")
    _die(message, code, reason="usage" if code == EXIT_USAGE else None)  # names the --help


def _internal_error(exc: BaseException) -> NoReturn:
    if _run.verbose:
        import traceback

        traceback.print_exception(exc)
        hint = ""
    else:
        hint = " (run with --verbose for a traceback)"
    _die(
        f"internal error: {type(exc).__name__}: {exc}{hint}", EXIT_INVALID, reason="internal_error"
    )


app = typer.Typer(
    name="receipt",
    cls=_Group,
    help="Provable deletion for LangGraph threads: create, inspect and verify erasure receipts.",
    epilog="\b\n" + EXIT_CODES,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _set_verbose(value: bool) -> bool:
    if value:
        _run.verbose = True
    return value


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"receipt {__version__}")
        raise typer.Exit(0)


Verbose = Annotated[
    bool,
    typer.Option(
        "--verbose", "-v", callback=_set_verbose, help="print tracebacks for internal errors"
    ),
]


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="print the version"),
    ] = False,
    verbose: Verbose = False,
) -> None:
    """Provable deletion for LangGraph threads: create, inspect and verify erasure receipts."""


def _password(password_env: str | None) -> bytes | None:
    if not password_env:
        return None
    value = os.environ.get(password_env)
    if value is None:
        _die(f"environment variable {password_env} is not set", EXIT_USAGE)
    if not value:
        _die(f"environment variable {password_env} is empty; refusing an empty password",
             EXIT_USAGE)  # fmt: skip
    return value.encode("utf-8")


def _read_private_key(path: Path, allow_insecure: bool) -> bytes:
    """The key file's bytes; refused (like ssh) if group or others can access it."""
    shown = _display(str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        _die(f"cannot read {shown}: {exc.strerror or exc}", EXIT_IO)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            _die(f"cannot read {shown}: not a regular file", EXIT_IO)
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            data = fh.read(_MAX_KEY_BYTES + 1)
    except OSError as exc:
        _die(f"cannot read {shown}: {exc.strerror or exc}", EXIT_IO)
    finally:
        if fd >= 0:
            os.close(fd)
    if data.lstrip().startswith(b"-----BEGIN PUBLIC KEY-----"):  # before its mode: 0644 is fine
        _die(f"{shown} is a public key, not a private key: --key takes the signing key "
             "(`receipt keygen` writes it next to the .pub.pem)", EXIT_USAGE,
             reason="bad_key")  # fmt: skip
    if os.name == "posix" and st.st_mode & 0o077 and not allow_insecure:
        _die(
            f"private key {shown} is accessible by others (mode "
            f"{stat.S_IMODE(st.st_mode):04o}); run `chmod 600 {shown}`, or pass "
            "--allow-insecure-key",
            EXIT_USAGE,
            reason="insecure_key",
        )
    if len(data) > _MAX_KEY_BYTES:
        _die(f"{shown}: not a PEM private key (over {_MAX_KEY_BYTES} bytes)", EXIT_USAGE,
             reason="bad_key")  # fmt: skip
    return data


def _load_signer(path: Path, password_env: str | None, allow_insecure: bool = False) -> Signer:
    password = _password(password_env)
    data = _read_private_key(path, allow_insecure)
    try:
        return Signer.from_pem(data, password=password)
    except KeyFormatError as exc:
        _die(f"{_display(str(path))}: {exc.message}", EXIT_USAGE, reason=exc.reason)


def _check_out(out: Path) -> None:
    """Refuse, before doing anything, an output file that exists or cannot be created: it
    is created now (``_Output``), and written at the end by ``_write_out``."""
    shown = _display(str(out))
    try:
        _run.outputs.append(_Output(out))
    except FileExistsError:
        _die(f"{shown} already exists; refusing to overwrite it", EXIT_IO, reason="output_exists")
    except (FileNotFoundError, NotADirectoryError):
        _die(f"cannot write {shown}: {out.parent} is not a directory", EXIT_IO,
             reason="unwritable")  # fmt: skip
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        _die(f"cannot write {shown}: {getattr(exc, 'strerror', None) or exc}", EXIT_IO,
             reason="unwritable")  # fmt: skip


def _write_out(out: Path, data: bytes, mode: int = 0o644) -> None:
    """Write an output file ``_check_out`` reserved (``OSError`` if that fails)."""
    for output in _run.outputs:
        if output.path == out:
            output.commit(data, mode)
            return
    write_durably(out, data, mode=mode)  # not reserved (a library caller)


def _check_archive(archive: Path) -> None:
    """Refuse, before anything is deleted, an archive directory receipts cannot go to
    (the savers' own preflight, reported as a CLI I/O error)."""
    from .._engine.eraser import check_archive

    try:
        check_archive(archive)
    except ConfigurationError as exc:
        _die(f"--{exc.message}", EXIT_IO, reason="unwritable")


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def verify(ctx: typer.Context) -> None:
    """Verify receipts: receipt verify FILE... --key PUB.pem | --trust TRUSTFILE [--json]."""
    args = list(ctx.args)
    raise typer.Exit(verify_main(["--verbose", *args] if _run.verbose else args))


def _check_unicode(**options: str | list[str] | None) -> None:
    """Exit 2 if an id or value given on the command line is not valid Unicode: bytes
    that are not UTF-8 (``$'\\xff'`` in a shell) reach Python as lone surrogates, which
    no stored UTF-8 text contains, so searching or erasing them would be meaningless."""
    for name, given in options.items():
        values = [given] if isinstance(given, str) else given or []
        for i, v in enumerate(values, 1):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                what = name if name == "value" else "--" + name.replace("_", "-")
                what += f" #{i}" if len(values) > 1 else ""
                _die(f"{what} is not valid UTF-8 text (invalid bytes on the command line); "
                     "give it as UTF-8", EXIT_USAGE)  # fmt: skip


def _namespaces(values: list[str]) -> list[tuple[str, ...]]:
    out = []
    for v in values:
        parts = tuple(v.split("/"))
        if not all(parts):
            _die(f"bad store namespace {v!r}: use slash-separated non-empty parts", EXIT_USAGE)
        out.append(parts)
    return out


def _ro_uri(db: Path) -> str:
    from urllib.parse import quote

    return f"file:{quote(os.path.abspath(db))}?mode=ro"


def _probe_database(db: Path | str) -> bool:
    """Exit 3 unless ``db`` is an SQLite file with LangGraph's ``checkpoints`` table (or a
    PostgreSQL DSN of a database with LangGraph's tables, see ``_cli.postgres``).

    Read-only (``mode=ro``): a file that is not a LangGraph database is never given
    tables, triggers or another journal mode. Returns whether it has a ``store`` table.
    """
    import sqlite3

    from .._backends.sqlite import table_names
    from . import postgres as app_postgres

    if app_postgres.is_dsn(db):
        return app_postgres.probe(str(db)).has_store
    db = Path(db)
    shown = _display(str(db))
    if not db.is_file():
        what = "is a directory" if db.is_dir() else "no such database file"
        _die(f"cannot read {shown}: {what}", EXIT_IO)
    try:
        with open(db, "rb") as fh:
            empty = fh.read(1) == b""
    except OSError as exc:
        _die(f"cannot read {shown}: {exc.strerror or exc}", EXIT_IO)
    reason = "not_langgraph_database"
    if empty:
        _die(f"{shown}: empty file, not a LangGraph database; nothing was changed", EXIT_IO,
             reason=reason)  # fmt: skip
    try:
        conn = sqlite3.connect(_ro_uri(db), uri=True)
        try:
            tables = table_names(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        _die(f"{shown}: not a LangGraph database (not a usable SQLite file: {exc}); nothing was "
             "changed", EXIT_IO, reason=reason)  # fmt: skip
    if "checkpoints" not in tables:
        _die(f"{shown}: not a LangGraph database (no checkpoints table); nothing was changed",
             EXIT_IO, reason=reason)  # fmt: skip
    return "store" in tables


@contextmanager
def _open_saver(
    db: Path | str,
    signer: Signer,
    archive: Any,
    *,
    read_only: bool = False,
    recovering: bool = False,
    vacuum: bool | str = False,
    encryption: Any = None,
) -> Iterator[Any]:
    """The attesting saver on an existing LangGraph database, with its SqliteStore if it
    has one; library errors are mapped to exit codes. ``read_only`` connections use a
    ``mode=ro`` URI (for ``digest``). A PostgreSQL DSN opens the Postgres saver instead
    (``_cli.postgres.open_saver``: read-only connections, ``recovering`` installs nothing
    in a database without an erasure journal, ``vacuum`` as the saver's)."""
    import sqlite3

    from . import postgres as app_postgres

    if app_postgres.is_dsn(db):
        with app_postgres.open_saver(str(db), signer, archive, read_only=read_only,
                                     recovering=recovering, vacuum=vacuum,
                                     encryption=encryption) as pg_saver:  # fmt: skip
            yield pg_saver
        return

    from langgraph.store.sqlite import SqliteStore

    from .._savers.sqlite import AttestingSqliteSaver

    db = Path(db)
    has_store = _probe_database(db)
    target, uri = (_ro_uri(db), True) if read_only else (str(db), False)
    conns: list[sqlite3.Connection] = []
    try:
        with _mapped_errors(db):
            conn = sqlite3.connect(target, uri=uri, check_same_thread=False)
            conns.append(conn)
            store = None
            if has_store:
                sconn = sqlite3.connect(target, uri=uri, check_same_thread=False,
                                        isolation_level=None)  # fmt: skip
                conns.append(sconn)
                store = SqliteStore(sconn)
            yield AttestingSqliteSaver(
                conn, signer=signer, store=store, archive=archive, encryption=encryption
            )
    finally:
        for c in conns:
            c.close()


AllowInsecureKey = Annotated[
    bool,
    typer.Option(
        "--allow-insecure-key",
        help="use a private key file that group/others can access (refused by default)",
    ),
]
PasswordEnv = Annotated[str | None, typer.Option(help="env var holding the private key's password")]
JsonFlag = Annotated[bool, typer.Option("--json", help="print one JSON document")]
VacuumMode = Annotated[
    str | None,
    typer.Option(
        "--vacuum",
        metavar="plain|full",
        help="PostgreSQL: VACUUM (plain) or VACUUM (FULL) the erased tables after each "
        "erasure; the receipt says applied only when verified, else partial with what "
        "held it",
    ),
]


def _vacuum_mode(value: str | None, db: Path | str) -> bool | str:
    """``--vacuum`` as the Postgres saver's ``vacuum=`` (exit 2 on SQLite or a typo)."""
    from . import postgres as app_postgres

    if value is None:
        return False
    if value not in ("plain", "full"):
        _die(f"--vacuum must be plain or full, not {value!r}", EXIT_USAGE)
    if not app_postgres.is_dsn(db):
        _die("--vacuum is for PostgreSQL databases (on SQLite, --residue-scan vacuums when "
             "it finds a copy)", EXIT_USAGE)  # fmt: skip
    return True if value == "plain" else "full"


DB_HELP = (
    "SQLite database file, or PostgreSQL DSN (postgresql://... or libpq key=value; needs "
    "the postgres extra)"
)
CommitmentKeyFile = Annotated[
    Path | None,
    typer.Option("--commitment-key", help="commitment key file (receipt keygen-commitment)"),
]


def _check_time(option: str, value: str | None) -> str | None:
    from datetime import datetime

    from ..receipt import is_time

    if value is None:
        return None
    try:
        ok = is_time(value) and bool(datetime.fromisoformat(value[:-1] + "+00:00"))
    except ValueError:
        ok = False
    if not ok:
        _die(f"bad {option} {value!r}: use UTC like 2026-01-31T00:00:00Z", EXIT_USAGE)
    return value


def _read_trust(file: Path) -> tuple[TrustFile, list[TrustedKey]]:
    """The trust file and its TrustedKey per entry in file order; exits 3/2 on failure."""
    shown = _display(str(file))
    try:
        tf = TrustFile.read(str(file))  # the verifier's own rules
        keys = tf.keys
    except InputError as exc:
        _die(exc.message, EXIT_IO, reason=exc.reason)
    except Error as exc:
        _die(f"{shown}: {exc.message}", EXIT_USAGE, reason="bad_trust_file")
    return tf, keys


JobsOption = Annotated[
    int | None,
    typer.Option(
        "--jobs", "-j", min=1, max=1024, help="processes to verify in (default: all cores)"
    ),
]


@contextmanager
def _log_errors() -> Iterator[None]:
    """A log that cannot be read exits 3; one that is refused (not a log, another key,
    corrupt, a conflicting receipt) exits 1; a malformed key exits 2."""
    try:
        yield
    except InputError as exc:
        _die(exc.message, EXIT_IO, reason=exc.reason)
    except KeyFormatError as exc:
        _die(exc.message, EXIT_USAGE, reason=exc.reason)
    except Error as exc:
        _die(f"[{exc.reason}] {exc.message}", EXIT_INVALID, reason=exc.reason)
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            raise
        _die(f"{exc.strerror or exc}", EXIT_IO, reason="unreadable")


def _trusted(key: list[Path] | None, trust: Path | None) -> Any:
    """A TrustStore from --key files or a --trust file (exactly one of them)."""
    from ..signing import PublicKey
    from ..verify import TrustStore

    if bool(key) == (trust is not None):
        _die("give the trusted key with --key PUB.pem or --trust TRUSTFILE (not both)",
             EXIT_USAGE)  # fmt: skip
    if trust is not None:
        return TrustStore(_read_trust(trust)[1])
    keys = []
    for k in key or []:
        try:
            keys.append(PublicKey.from_pem(_read_input(str(k))))
        except InputError as exc:
            _die(exc.message, EXIT_IO, reason=exc.reason)
        except Error as exc:
            _die(f"{_display(str(k))}: bad key: {exc.message}", EXIT_USAGE, reason="bad_key")
    return TrustStore(keys)


KeyOption = Annotated[
    list[Path] | None,
    typer.Option("--key", help="trusted Ed25519 public key (PEM); repeatable"),
]
TrustOption = Annotated[
    Path | None, typer.Option("--trust", help="trust file (keys with validity windows)")
]


def _commitment_key_file(path: Path) -> Any:
    from ..privacy import CommitmentKey

    try:
        return CommitmentKey.from_file(path)
    except KeyFormatError as exc:
        _die(f"{_display(str(path))}: {exc.message}", EXIT_USAGE, reason=exc.reason)
    except OSError as exc:
        _die(f"cannot read {_display(str(path))}: {exc.strerror or exc}", EXIT_IO)
