"""The ``receipt`` operator commands (typer): keygen, show, export, digest, erase,
recover, trust add|list.

``receipt verify`` is dispatched before this module is imported (see ``cli.py``); the
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
import json
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from . import __version__
from .cli import EXIT_INVALID, EXIT_IO, EXIT_USAGE, _read_input, verify_main
from .errors import (
    ConfigurationError,
    ErasureError,
    ErasureIncompleteError,
    Error,
    InputError,
    KeyFormatError,
    NothingToEraseError,
)
from .receipt import Receipt, write_durably
from .signing import Signer
from .verify import _display

__all__ = ["app"]

EXIT_CODES = """\
exit codes:
  0 success
  1 operation failed or refused, or receipt invalid
  2 usage error (bad option, malformed key, bad namespace, insecure key file)
  3 I/O error (file unreadable/unwritable, output exists, not a LangGraph database)"""

_DEFAULT_REASON = {EXIT_INVALID: "failed", EXIT_USAGE: "usage", EXIT_IO: "unreadable"}
_MAX_KEY_BYTES = 1 << 20


class _Run:
    """Output settings of the current invocation (reset for each one)."""

    def __init__(self) -> None:
        self.json = False
        self.verbose = False


_run = _Run()


def _emit_json(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _die(message: str, code: int, *, reason: str | None = None, **extra: Any) -> NoReturn:
    """One ``receipt: error:`` line on stderr (and, with --json, the failure document)."""
    typer.echo(f"receipt: error: {message}", err=True)
    if _run.json:
        doc = {"ok": False, "exit_code": code, "error": message}
        _emit_json({**doc, "reason": reason or _DEFAULT_REASON.get(code, "failed"), **extra})
    raise typer.Exit(code)


class _Group(TyperGroup):
    """The ``receipt`` group: usage errors honour ``--json``, and an unexpected exception
    is one error line (exit 1) with a traceback only under ``--verbose``."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        _run.json = _run.verbose = False  # a new invocation (tests run many per process)
        return super().main(*args, **kwargs)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        head = args[: args.index("--")] if "--" in args else args
        _run.json = _run.json or "--json" in head
        _run.verbose = _run.verbose or "--verbose" in head or "-v" in head
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort):
            raise
        except typer.TyperException as exc:  # click's UsageError and friends
            if not _run.json:
                raise
            _die(exc.format_message(), getattr(exc, "exit_code", EXIT_USAGE), reason="usage")
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise  # a closed stdout is the entry point's business
            _internal_error(exc)
        except Exception as exc:
            _internal_error(exc)


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


def _load_receipt(path: Path) -> Receipt:
    try:
        return Receipt.from_json(_read_input(str(path)))
    except InputError as exc:
        _die(exc.message, EXIT_IO, reason=exc.reason)
    except Error as exc:
        _die(
            f"{_display(str(path))}: [{exc.reason}] {exc.message}", EXIT_INVALID, reason=exc.reason
        )


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
        if os.name == "posix" and st.st_mode & 0o077 and not allow_insecure:
            _die(
                f"private key {shown} is accessible by others (mode "
                f"{stat.S_IMODE(st.st_mode):04o}); run `chmod 600 {shown}`, or pass "
                "--allow-insecure-key",
                EXIT_USAGE,
                reason="insecure_key",
            )
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            data = fh.read(_MAX_KEY_BYTES + 1)
    except OSError as exc:
        _die(f"cannot read {shown}: {exc.strerror or exc}", EXIT_IO)
    finally:
        if fd >= 0:
            os.close(fd)
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
    """Refuse, before doing anything, an output file that exists or cannot be created."""
    shown = _display(str(out))
    if os.path.lexists(out):
        _die(f"{shown} already exists; refusing to overwrite it", EXIT_IO, reason="output_exists")
    parent = out.parent
    if not parent.is_dir():
        _die(f"cannot write {shown}: {parent} is not a directory", EXIT_IO, reason="unwritable")
    if not os.access(parent, os.W_OK | os.X_OK):
        _die(f"cannot write {shown}: directory not writable", EXIT_IO, reason="unwritable")


def _check_archive(archive: Path) -> None:
    """Refuse, before anything is deleted, an archive directory receipts cannot go to."""
    import tempfile

    shown = _display(str(archive))
    if archive.exists() and not archive.is_dir():
        _die(f"--archive {shown} exists and is not a directory", EXIT_IO, reason="unwritable")
    try:
        archive.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".receipt-probe.", dir=archive)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        _die(f"--archive {shown} is not writable: {exc.strerror or exc}", EXIT_IO,
             reason="unwritable")  # fmt: skip


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def verify(ctx: typer.Context) -> None:
    """Verify receipts: receipt verify FILE... --key PUB.pem | --trust TRUSTFILE [--json]."""
    args = list(ctx.args)
    raise typer.Exit(verify_main(["--verbose", *args] if _run.verbose else args))


_BAD_NAME = (
    "use a plain file name: not empty, not starting with '.', without '/', '\\', '..' "
    "or control characters"
)


def _check_key_name(name: str) -> None:
    seps = {"/", "\\", os.sep, os.altsep or "/"}
    if (
        not name
        or name.startswith(".")
        or ".." in name
        or any(s in name for s in seps)
        or not name.isprintable()
        or len(name) > 200
        or Path(name).name != name
    ):
        _die(f"bad --name {name!r}: {_BAD_NAME}", EXIT_USAGE)


@app.command()
def keygen(
    out: Annotated[Path, typer.Option("--out", help="directory for the key files")],
    name: Annotated[
        str, typer.Option(help="file name stem (a plain name: no '/', '\\', '..', leading '.')")
    ] = "receipt-signing",
    password_env: Annotated[
        str | None, typer.Option(help="encrypt the private key with this env var's value")
    ] = None,
    verbose: Verbose = False,
) -> None:
    """Generate an Ed25519 signing key: NAME.key (mode 0600) and NAME.pub.pem in --out."""
    _check_key_name(name)
    password = _password(password_env)
    priv, pub = out / f"{name}.key", out / f"{name}.pub.pem"
    if os.path.lexists(out) and not out.is_dir():
        _die(f"--out {_display(str(out))} is not a directory", EXIT_IO, reason="unwritable")
    for p in (priv, pub):
        if os.path.lexists(p):
            _die(f"{_display(str(p))} already exists; refusing to overwrite a key", EXIT_IO,
                 reason="output_exists")  # fmt: skip
    signer = Signer.generate()
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_durably(priv, signer.private_pem(password), mode=0o600)
        write_durably(pub, signer.public_pem())
    except FileExistsError as exc:
        _die(f"{exc}; refusing to overwrite a key", EXIT_IO, reason="output_exists")
    except OSError as exc:
        _die(f"cannot write keys to {_display(str(out))}: {exc.strerror or exc}", EXIT_IO,
             reason="unwritable")  # fmt: skip
    typer.echo(f"key id   {signer.key_id}")
    typer.echo(f"private  {priv}  (mode 0600, keep secret)")
    typer.echo(f"public   {pub}  (give this to auditors)")


@app.command()
def show(
    file: Annotated[Path, typer.Argument(help="receipt file or DSSE envelope")],
    as_json: Annotated[bool, typer.Option("--json", help="print the statement as JSON")] = False,
    verbose: Verbose = False,
) -> None:
    """Summarise a receipt for a human. Does NOT verify it: use `receipt verify`."""
    _run.json = as_json
    r = _load_receipt(file)
    if as_json:
        typer.echo(json.dumps(r.statement, indent=2, ensure_ascii=False))
        return
    p = r.predicate
    pre, post = p["pre_state"], p["post_state"]
    lines = [
        f"receipt      {p['receipt_id']}  (NOT verified; run `receipt verify`)",
        f"status       {p['status']}",
        f"thread       {p['scope']['thread_id']!r} (all checkpoint namespaces)",
        "store ns     "
        + (", ".join("/".join(ns) for ns in p["scope"]["store_namespaces"]) or "(none)"),
        f"tombstone    {'yes' if p['scope']['tombstone'] else 'no'}",
        f"issued at    {p['issued_at']}",
        f"backend      {p['backend']['kind']} via {p['backend']['saver']}"
        f" (store: {p['backend']['store'] or 'none'})",
        f"pre digest   {pre['digest']['sha256']} ({pre['leaves']} rows)",
        f"post digest  {post['digest']['sha256']} ({post['leaves']} rows)",
    ]
    for t, c in sorted(pre["tables"].items()):
        after = post["tables"].get(t, {}).get("rows", "?")  # unverified: may be inconsistent
        lines.append(f"  {t:<14} {c['rows']:>8} rows {c['bytes']:>12} bytes -> {after} rows")
    lines.append("methods      " + ", ".join(f"{k}={v}" for k, v in sorted(p["methods"].items())))
    lines.append("checks       " + ", ".join(f"{c['name']}={c['result']}" for c in p["checks"]))
    for res in p["residue"]:
        detail = ", ".join(f"{k}={v}" for k, v in res["detail"].items())
        lines.append(f"residue      {res['action']}: {res['status']} ({detail})")
    lines.append("out of scope " + ", ".join(o["id"] for o in p["out_of_scope"]))
    signers = ", ".join(s.keyid[:16] for s in r.signatures)
    lines.append(f"signed by    {signers}")
    typer.echo("\n".join(lines))


class ExportFormat(StrEnum):
    dsse = "dsse"
    statement = "statement"


@app.command()
def export(
    file: Annotated[Path, typer.Argument(help="receipt file")],
    fmt: Annotated[ExportFormat, typer.Option("--format", help="output format")] = (
        ExportFormat.dsse
    ),
    out: Annotated[Path | None, typer.Option("--out", help="write here instead of stdout")] = None,
    verbose: Verbose = False,
) -> None:
    """Export a receipt as a standard DSSE envelope (or its canonical statement)."""
    r = _load_receipt(file)
    if out is not None:
        _check_out(out)
    if fmt is ExportFormat.dsse:
        data = (json.dumps(r.to_dsse(), indent=2) + "\n").encode("utf-8")
    else:
        data = r.payload
    if out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    try:
        write_durably(out, data)
    except FileExistsError:
        _die(f"{_display(str(out))} already exists; refusing to overwrite it", EXIT_IO,
             reason="output_exists")  # fmt: skip
    except OSError as exc:
        _die(f"cannot write {_display(str(out))}: {exc.strerror or exc}", EXIT_IO,
             reason="unwritable")  # fmt: skip


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


def _probe_database(db: Path) -> bool:
    """Exit 3 unless ``db`` is an SQLite file with LangGraph's ``checkpoints`` table.

    Read-only (``mode=ro``): a file that is not a LangGraph database is never given
    tables, triggers or another journal mode. Returns whether it has a ``store`` table.
    """
    import sqlite3

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
            tables = {
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
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
    db: Path, signer: Signer, archive: Path | None, *, read_only: bool = False
) -> Iterator[Any]:
    """The attesting saver on an existing LangGraph database, with its SqliteStore if it
    has one; library errors are mapped to exit codes. ``read_only`` connections use a
    ``mode=ro`` URI (for ``digest``)."""
    import sqlite3

    from langgraph.store.sqlite import SqliteStore

    from .savers import AttestingSqliteSaver

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
            yield AttestingSqliteSaver(conn, signer=signer, store=store, archive=archive)
    finally:
        for c in conns:
            c.close()


@contextmanager
def _mapped_errors(db: Path) -> Iterator[None]:
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
    except ConfigurationError as exc:
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


StoreNs = Annotated[
    list[str] | None,
    typer.Option(
        "--store-ns", help="store namespace prefix to erase, e.g. users/alice; repeatable"
    ),
]
AllowInsecureKey = Annotated[
    bool,
    typer.Option(
        "--allow-insecure-key",
        help="use a private key file that group/others can access (refused by default)",
    ),
]
PasswordEnv = Annotated[str | None, typer.Option(help="env var holding the private key's password")]


@app.command()
def digest(
    db: Annotated[Path, typer.Argument(help="SQLite database file")],
    thread: Annotated[str, typer.Option("--thread", help="thread id")],
    store_ns: StoreNs = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    verbose: Verbose = False,
) -> None:
    """Preview (read-only): the pre-deletion digest and row counts an erasure would record."""
    _run.json = as_json
    namespaces = _namespaces(store_ns or [])
    with _open_saver(db, Signer.generate(), None, read_only=True) as saver:
        d = saver.digest_thread(thread, namespaces)
    tables = {k: v.to_json() for k, v in d.tables.items()}
    if as_json:
        _emit_json({"thread_id": thread, "digest": d.digest, "tables": tables})
        return
    typer.echo(f"thread  {thread!r}\ndigest  {d.digest} ({d.leaves} rows)")
    for t, c in sorted(tables.items()):
        typer.echo(f"  {t:<14} {c['rows']:>8} rows {c['bytes']:>12} bytes")


@app.command()
def erase(
    db: Annotated[Path, typer.Argument(help="SQLite database file")],
    thread: Annotated[str, typer.Option("--thread", help="thread id to erase")],
    key: Annotated[Path, typer.Option("--key", help="Ed25519 private key (PEM, mode 0600)")],
    store_ns: StoreNs = None,
    archive: Annotated[
        Path | None, typer.Option("--archive", help="directory to archive the receipt in")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="also write the receipt here")] = None,
    no_tombstone: Annotated[
        bool, typer.Option("--no-tombstone", help="allow the thread id to be reused")
    ] = False,
    allow_empty: Annotated[
        bool,
        typer.Option(
            "--allow-empty",
            help="attest an empty scope instead of refusing (exit 1) when nothing is stored",
        ),
    ] = False,
    residue_scan: Annotated[
        bool | None,
        typer.Option(
            "--residue-scan/--no-residue-scan",
            help="scan the database files for copies of the erased rows afterwards "
            "(VACUUM if any) and record the result in the receipt",
        ),
    ] = None,
    password_env: PasswordEnv = None,
    allow_insecure_key: AllowInsecureKey = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="print one JSON document (the receipt inside)")
    ] = False,
    verbose: Verbose = False,
) -> None:
    """Erase a thread (and store namespaces) from a SQLite database and sign a receipt.

    Refuses (exit 1) a scope with no stored rows unless --allow-empty. --out and
    --archive are checked before anything is deleted.
    """
    _run.json = as_json
    signer = _load_signer(key, password_env, allow_insecure_key)
    namespaces = _namespaces(store_ns or [])
    if out is not None:
        _check_out(out)
    _probe_database(db)
    if archive is not None:
        _check_archive(archive)
    kwargs: dict[str, Any] = {"store_namespaces": namespaces, "tombstone": not no_tombstone}
    if allow_empty:
        kwargs["allow_empty"] = True
    if residue_scan is not None:
        kwargs["residue_scan"] = residue_scan
    with _open_saver(db, signer, archive) as saver:
        receipt = saver.erase_thread(thread, **kwargs)
    pre = receipt.predicate["pre_state"]
    summary = (
        f"erased thread {thread!r}: {pre['leaves']} rows, "
        f"pre digest {receipt.pre_digest}, receipt {receipt.receipt_id}"
    )
    written = [str(archive / f"{receipt.receipt_id}.json")] if archive is not None else []
    if out is not None:
        try:
            receipt.save(out)
        except OSError as exc:
            # The data is gone; the receipt must not be: it goes to stdout instead.
            msg = f"cannot write {_display(str(out))} ({exc.strerror or exc})"
            if as_json:
                _die(f"{msg}; the receipt is in this document", EXIT_IO, reason="unwritable",
                     receipt_id=receipt.receipt_id, written_to=written,
                     receipt=json.loads(receipt.to_json()))  # fmt: skip
            sys.stdout.buffer.write(receipt.to_json())
            sys.stdout.flush()
            _die(f"{msg}; the receipt was printed on stdout", EXIT_IO, reason="unwritable")
        written.insert(0, str(out))
    if as_json:
        _emit_json({
            "ok": True, "exit_code": 0, "receipt_id": receipt.receipt_id, "thread_id": thread,
            "status": receipt.predicate["status"], "pre_digest": receipt.pre_digest,
            "rows": pre["leaves"], "tables": pre["tables"], "written_to": written,
            "receipt": json.loads(receipt.to_json()),
        })  # fmt: skip
        return
    if out is None and archive is None:
        typer.echo(summary, err=True)
        try:
            sys.stdout.buffer.write(receipt.to_json())
            sys.stdout.flush()
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise
            _die(
                f"cannot write the receipt to stdout ({exc.strerror or exc}); it is kept in "
                "the database's erasure journal: `receipt recover DB --key KEY --archive DIR`",
                EXIT_IO,
                reason="unwritable",
            )
        return
    typer.echo(summary)
    for path in written:
        typer.echo(f"written to {path}")


@app.command()
def recover(
    db: Annotated[Path, typer.Argument(help="SQLite database file")],
    key: Annotated[Path, typer.Option("--key", help="Ed25519 private key (PEM, mode 0600)")],
    archive: Annotated[Path, typer.Option("--archive", help="directory of archived receipts")],
    password_env: PasswordEnv = None,
    min_age: Annotated[
        float,
        typer.Option(
            help="only entries older than this many seconds (younger ones may "
            "still be signing in a running process; they are counted as skipped)"
        ),
    ] = 300.0,
    allow_insecure_key: AllowInsecureKey = False,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    verbose: Verbose = False,
) -> None:
    """Issue receipts for erasures that committed but never got one (crash, full disk)."""
    _run.json = as_json
    if min_age < 0:
        _die("--min-age must be >= 0", EXIT_USAGE)
    signer = _load_signer(key, password_env, allow_insecure_key)
    _probe_database(db)
    _check_archive(archive)
    failure: ErasureError | None = None
    with _open_saver(db, signer, archive) as saver:
        skipped = sum(1 for p in saver.pending_erasures() if p.age_seconds <= min_age)
        try:
            receipts = saver.recover_receipts(min_age_seconds=min_age)
        except ErasureIncompleteError as exc:
            receipts, failure = list(exc.recovered), exc
        except ErasureError as exc:
            receipts, failure = [], exc
        stored = saver.journal_receipts()
    # Receipts the journal holds but the archive lacks (e.g. one printed to a stdout
    # that failed): write them out, so the archive is complete after every run.
    recovered = [
        {"receipt_id": r.receipt_id, "thread_id": r.thread_id,
         "path": str(archive / f"{r.receipt_id}.json")}
        for r in receipts
    ]  # fmt: skip
    exported: list[str] = []
    skip_doc = {"count": skipped, "min_age_seconds": min_age}
    for r in stored:
        path = archive / f"{r.receipt_id}.json"
        if not path.exists():
            try:
                r.save(path)
            except OSError as exc:
                _die(f"cannot write {_display(str(path))}: {exc.strerror or exc}", EXIT_IO,
                     reason="unwritable", recovered=recovered, exported=exported,
                     skipped=skip_doc)  # fmt: skip
            exported.append(r.receipt_id)
    if not as_json:
        for r in receipts:
            typer.echo(f"{r.receipt_id}  thread {r.thread_id!r}  written to {archive}")
    typer.echo(
        f"{len(receipts)} receipt(s) recovered, {len(exported)} exported from the journal",
        err=True,
    )
    if skipped:
        entries = "entry" if skipped == 1 else "entries"
        typer.echo(
            f"{skipped} journal {entries} skipped: younger than --min-age {min_age:g} s (it may "
            "still be signing in a running process); run again later or with a smaller "
            "--min-age",
            err=True,
        )
    if failure is not None:
        _die(f"[{failure.reason}] {failure.message}", EXIT_INVALID, reason=failure.reason,
             recovered=recovered, exported=exported, skipped=skip_doc)  # fmt: skip
    if as_json:
        _emit_json({"ok": True, "exit_code": 0, "recovered": recovered, "exported": exported,
                    "skipped": skip_doc})  # fmt: skip


# -- trust files ----------------------------------------------------------------------

trust_app = typer.Typer(
    help="Create and inspect trust files for `receipt verify --trust` (RECEIPT_SPEC.md 7).",
    no_args_is_help=True,
)
app.add_typer(trust_app, name="trust")


def _check_time(option: str, value: str | None) -> str | None:
    from datetime import datetime

    from .receipt import is_time

    if value is None:
        return None
    try:
        ok = is_time(value) and bool(datetime.fromisoformat(value[:-1] + "+00:00"))
    except ValueError:
        ok = False
    if not ok:
        _die(f"bad {option} {value!r}: use UTC like 2026-01-31T00:00:00Z", EXIT_USAGE)
    return value


def _instant(t: str | None, default: str) -> str:
    """A window bound as sortable text (fraction padded); ``default`` for an open end."""
    if t is None:
        return default
    base, _, frac = t[:-1].partition(".")
    return f"{base}.{frac.ljust(6, '0')}"


def _window(nb: str | None, na: str | None) -> str:
    return f"[{nb or 'any time'}, {na or 'open'})"


def _read_trust(file: Path) -> tuple[list[dict[str, Any]], list[Any]]:
    """(raw key entries, TrustedKey per entry in file order); exits 3/2 on failure."""
    from .canonical import parse_strict
    from .verify import TrustStore

    shown = _display(str(file))
    try:
        data = _read_input(str(file))
        TrustStore.from_json(data)  # the verifier's own rules
        entries: list[dict[str, Any]] = parse_strict(data)["keys"]
        keys = [next(iter(TrustStore.from_json(_trust_doc([e])))) for e in entries]
    except InputError as exc:
        _die(exc.message, EXIT_IO, reason=exc.reason)
    except Error as exc:
        _die(f"{shown}: {exc.message}", EXIT_USAGE, reason="bad_trust_file")
    return entries, keys


def _trust_doc(entries: list[dict[str, Any]]) -> bytes:
    doc = {"trust_version": 1, "keys": entries}
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


@trust_app.command("add")
def trust_add(
    pub: Annotated[Path, typer.Argument(help="Ed25519 public key (PEM)")],
    name: Annotated[str, typer.Option("--name", help="a name for the key (reported by verify)")],
    file: Annotated[Path, typer.Option("--file", help="trust file to create or extend")],
    not_before: Annotated[
        str | None, typer.Option("--not-before", help="trusted for receipts issued from TIME (UTC)")
    ] = None,
    not_after: Annotated[
        str | None, typer.Option("--not-after", help="trusted for receipts issued before TIME")
    ] = None,
    verbose: Verbose = False,
) -> None:
    """Add a public key to a trust file (created if missing), optionally for a time window.

    Refuses (exit 1) the same key with a window that overlaps one it already has.
    """
    from .signing import PublicKey
    from .verify import TrustStore

    if not name or not name.isprintable():
        _die(f"bad --name {name!r}: a non-empty printable name is required", EXIT_USAGE)
    nb, na = _check_time("--not-before", not_before), _check_time("--not-after", not_after)
    if nb is not None and na is not None and _instant(nb, "") >= _instant(na, ""):
        _die(f"--not-before {nb} is not before --not-after {na}", EXIT_USAGE)
    try:
        key = PublicKey.from_pem(_read_input(str(pub)))
    except InputError as exc:
        _die(exc.message, EXIT_IO, reason=exc.reason)
    except Error as exc:
        _die(f"{_display(str(pub))}: {exc.message}", EXIT_USAGE, reason="bad_key")
    entries: list[dict[str, Any]] = []
    mode = 0o644
    if os.path.lexists(file):
        entries, trusted = _read_trust(file)
        with_mode = os.stat(file).st_mode
        mode = stat.S_IMODE(with_mode)
        lo, hi = _instant(nb, ""), _instant(na, "~")
        for tk in trusted:
            if tk.key.key_id == key.key_id and (
                _instant(tk.not_before, "") < hi and lo < _instant(tk.not_after, "~")
            ):
                _die(
                    f"key {key.key_id[:16]} is already trusted in {_display(str(file))} as "
                    f"{tk.name!r} for {_window(tk.not_before, tk.not_after)}, which overlaps "
                    f"{_window(nb, na)}; refusing a duplicate",
                    EXIT_INVALID,
                    reason="duplicate_key",
                )
    entry: dict[str, Any] = {"name": name, "ed25519": key.b64()}
    entry.update({k: v for k, v in (("not_before", nb), ("not_after", na)) if v is not None})
    data = _trust_doc([*entries, entry])
    try:
        n = len(TrustStore.from_json(data))  # never write a file verify would reject
    except Error as exc:
        _die(f"the resulting trust file would be invalid: {exc.message}", EXIT_USAGE,
             reason="bad_trust_file")  # fmt: skip
    if not file.parent.is_dir():
        _die(f"cannot write {_display(str(file))}: {file.parent} is not a directory", EXIT_IO,
             reason="unwritable")  # fmt: skip
    try:
        write_durably(file, data, exist_ok=True, mode=mode)
    except OSError as exc:
        _die(f"cannot write {_display(str(file))}: {exc.strerror or exc}", EXIT_IO,
             reason="unwritable")  # fmt: skip
    typer.echo(
        f"added key {key.key_id} ({name!r}, {_window(nb, na)}) to {_display(str(file))}; "
        f"{n} key(s) trusted"
    )


@trust_app.command("list")
def trust_list(
    file: Annotated[Path, typer.Argument(help="trust file")],
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    verbose: Verbose = False,
) -> None:
    """List a trust file's keys: key id, name and validity window, in file order."""
    _run.json = as_json
    _, trusted = _read_trust(file)
    rows = [
        {"key_id": tk.key.key_id, "name": tk.name, "not_before": tk.not_before,
         "not_after": tk.not_after}
        for tk in trusted
    ]  # fmt: skip
    if as_json:
        _emit_json({"file": _display(str(file)), "keys": rows})
        return
    for r in rows:
        typer.echo(f"{r['key_id']}  {r['name'] or '-'}  {_window(r['not_before'], r['not_after'])}")


# -- legal hold ---------------------------------------------------------------------------


def _read_record(path: Path) -> bytes:
    """A row record (ROW.json): like ``_read_input``, with the record size limit."""
    from .proof import MAX_RECORD_BYTES

    shown = _display(str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb", buffering=0) as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                _die(f"cannot read {shown}: not a regular file", EXIT_IO)
            data = fh.read(MAX_RECORD_BYTES + 1)
    except OSError as exc:
        _die(f"cannot read {shown}: {exc.strerror or exc}", EXIT_IO)
    if len(data) > MAX_RECORD_BYTES:
        _die(f"{shown}: over the {MAX_RECORD_BYTES}-byte row record limit", EXIT_INVALID,
             reason="malformed_record")  # fmt: skip
    return data


@app.command()
def prove(
    row: Annotated[Path, typer.Argument(help="row record (ROW.json) kept from export_leaves")],
    receipt: Annotated[Path, typer.Option("--receipt", help="the erasure's receipt file")],
    key: Annotated[
        list[Path] | None,
        typer.Option("--key", help="trusted Ed25519 public key (PEM); repeatable"),
    ] = None,
    trust: Annotated[
        Path | None, typer.Option("--trust", help="trust file (keys with validity windows)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    verbose: Verbose = False,
) -> None:
    """Legal hold: prove a kept row was inside an erasure (receipt + RFC 9162 inclusion)."""
    from .errors import VerificationError
    from .proof import LeafRecord, verify_leaf_record
    from .signing import PublicKey
    from .verify import TrustStore

    _run.json = as_json
    if not key and trust is None:
        _die("give the trusted key with --key PUB.pem or --trust TRUSTFILE", EXIT_USAGE)
    trusted: list[Any] = []
    for k in key or []:
        try:
            trusted.append(PublicKey.from_pem(_read_input(str(k))))
        except InputError as exc:
            _die(exc.message, EXIT_IO, reason=exc.reason)
        except Error as exc:
            _die(f"{_display(str(k))}: bad key: {exc.message}", EXIT_USAGE, reason="bad_key")
    if trust is not None:
        trusted += _read_trust(trust)[1]
    shown = _display(str(row))
    try:
        receipt_bytes = _read_input(str(receipt))
    except InputError as exc:
        _die(exc.message, EXIT_IO, reason=exc.reason)
    except Error as exc:
        _die(f"{_display(str(receipt))}: [{exc.reason}] {exc.message}", EXIT_INVALID,
             reason=exc.reason)  # fmt: skip
    record_bytes = _read_record(row)
    try:
        record = LeafRecord.from_json(record_bytes)
        proven = verify_leaf_record(record, receipt_bytes, TrustStore(trusted))
    except VerificationError as exc:
        _die(f"{shown}: [{exc.reason}] {exc.message}", EXIT_INVALID, reason=exc.reason)
    v = proven.receipt
    if as_json:
        _emit_json(
            {"ok": True, "exit_code": 0, "file": shown, "receipt_id": v.receipt_id,
             "thread_id": v.thread_id, "issued_at": v.issued_at, "pre_digest": v.pre_digest,
             "key_id": v.key_id, "table": proven.table,
             "primary_key": record.to_dict()["primary_key"], "index": proven.index,
             "tree_size": proven.tree_size}
        )  # fmt: skip
        return
    typer.echo(
        f"OK    {shown}: {proven.table} row {proven.primary_key!r} is leaf {proven.index} of "
        f"{proven.tree_size} in the pre-state of receipt {v.receipt_id} (thread "
        f"{v.thread_id!r}, erased {v.issued_at}, key {v.key_id[:16]})"
    )
