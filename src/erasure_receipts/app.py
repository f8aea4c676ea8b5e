"""The ``receipt`` operator commands (typer): keygen, show, export, digest, erase,
recover, authorize, trust add|list, log append|verify|prove|checkpoint, index,
retention.

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
import re
import stat
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from . import __version__
from .cli import EXIT_INVALID, EXIT_IO, EXIT_USAGE, _read_arg, _read_input, verify_main
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
        self.outputs: list[_Output] = []  # files reserved by _check_out, see _Group.main


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
        _run.outputs = []
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
    help" keeps the help page."""
    if type(exc).__name__ == "NoArgsIsHelpError":
        raise exc
    message = " ".join(exc.format_message().split())  # one line, whatever the library wraps
    code = getattr(exc, "exit_code", EXIT_INVALID)
    opening = isinstance(exc.__cause__ or exc.__context__, OSError)  # a file type's open()
    if type(exc).__name__ == "FileError" or (
        code == EXIT_USAGE and (opening or _PATH_CHECK.search(message))
    ):
        _die(message, EXIT_IO, reason="unreadable")
    ctx = getattr(exc, "ctx", None)
    if ctx is not None and code == EXIT_USAGE:
        message += f" (see `{ctx.command_path} --help`)"
    _die(message, code, reason="usage" if code == EXIT_USAGE else None)


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
    from .attesting import check_archive
    from .errors import ConfigurationError

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
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _die(f"cannot write keys to {_display(str(out))}: {exc.strerror or exc}", EXIT_IO,
             reason="unwritable")  # fmt: skip
    _check_out(priv)
    _check_out(pub)  # both files exist before either is written: never half a key pair
    signer = Signer.generate()
    try:
        _write_out(priv, signer.private_pem(password), mode=0o600)
        _write_out(pub, signer.public_pem())
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
    kind, scope = p.get("kind", "thread"), p["scope"]
    lines = [
        f"receipt      {p['receipt_id']}  (NOT verified; run `receipt verify`)",
        f"kind         {kind}" + ("" if "kind" in p else " (no kind member: a thread receipt)"),
        f"status       {p['status']}"
        + (" - EMPTY SCOPE: no rows existed, nothing was deleted" if not pre["leaves"] else ""),
        *_show_scope(p),
        "store ns     " + (", ".join("/".join(ns) for ns in scope["store_namespaces"]) or "(none)"),
        f"tombstone    {'yes' if scope['tombstone'] else 'no'}",
        f"issued at    {p['issued_at']}",
        f"backend      {p['backend']['kind']} via {p['backend']['saver']}"
        f" (store: {p['backend']['store'] or 'none'})",
        f"pre digest   {pre['digest']['sha256']} ({pre['leaves']} rows"
        + (" removed)" if kind == "history" else ")"),
        f"post digest  {post['digest']['sha256']} ({post['leaves']} rows)",
    ]
    for t, c in sorted(pre["tables"].items()):
        after = post["tables"].get(t, {}).get("rows", "?")  # unverified: may be inconsistent
        lines.append(f"  {t:<14} {c['rows']:>8} rows {c['bytes']:>12} bytes -> {after} rows")
    lines += _show_kind_members(p)
    lines.append("methods      " + ", ".join(f"{k}={v}" for k, v in sorted(p["methods"].items())))
    lines.append("checks       " + ", ".join(f"{c['name']}={c['result']}" for c in p["checks"]))
    for res in p["residue"]:
        detail = ", ".join(f"{k}={v}" for k, v in res["detail"].items())
        lines.append(f"residue      {res['action']}: {res['status']} ({detail})")
    lines.append("out of scope " + ", ".join(o["id"] for o in p["out_of_scope"]))
    if "request" in p:  # RECEIPT_SPEC.md 9.6
        rq = p["request"]
        when = "".join(f", {k.replace('_', ' ')} {rq[k]}" for k in ("received_at", "due") if rq[k])
        lines.append(f"request      {rq['id']!r} (basis {rq['basis']!r}){when}")
    if "authorization" in p:
        a = p["authorization"]
        keys = ", ".join(s["keyid"][:16] for s in a["signatures"])
        lines.append(f"authorized   until {a['statement']['not_after']} by key {keys} "
                     "(approver checked by `receipt verify --trust`)")  # fmt: skip
    signers = ", ".join(s.keyid[:16] for s in r.signatures)
    lines.append(f"signed by    {signers}")
    typer.echo("\n".join(lines))


def _show_scope(p: dict[str, Any]) -> list[str]:
    """``receipt show``: what the scope names, by kind (RECEIPT_SPEC.md 9.1)."""
    scope, kind = p["scope"], p.get("kind", "thread")
    if kind == "subject":
        found = scope["discovery"]
        lines = [
            f"subject      {scope['subject']!r}",
            f"threads      {len(scope['threads'])}: "
            + ", ".join(repr(t) for t in scope["threads"]),
            "discovery    "
            + (f"metadata key {found['metadata_key']!r}" if found else "none (threads named)"),
        ]
    elif kind == "history":
        lines = [
            f"thread       {scope['thread_id']!r} (history: every checkpoint except the "
            f"{scope['keep']} of each namespace; the thread lives on)"
        ]
    else:
        lines = [f"thread       {scope['thread_id']!r} (all checkpoint namespaces)"]
    if "privacy" in scope:
        lines.append(
            f"privacy      ids are {scope['privacy']['mode']} commitments "
            f"(commitment key id {scope['privacy']['key_id'][:16]}; `receipt open` checks ids)"
        )
    return lines


def _show_kind_members(p: dict[str, Any]) -> list[str]:
    """``receipt show``: the kept state (history), units (subject) and needles."""
    lines: list[str] = []
    if "kept_state" in p:
        k = p["kept_state"]
        lines.append(f"kept digest  {k['digest']['sha256']} ({k['leaves']} rows kept)")
        for t, c in sorted(k["tables"].items()):
            lines.append(f"  {t:<14} {c['rows']:>8} rows {c['bytes']:>12} bytes kept")
        cps = ", ".join(f"{c['checkpoint_ns']!r}/{c['checkpoint_id']}" for c in k["checkpoints"])
        lines.append(f"kept cps     {cps or '(none)'}")
    for u in p.get("units") or ():
        lines.append(f"unit         {u['name']!r}: {u['leaves']} rows, {u['digest']['sha256']}")
    if "needles" in p:
        n = p["needles"]
        lines.append(
            f"needles      {len(n['values'])} value(s) ({n['commitment']}"
            f"{', salted' if n['salt'] else ', keyed'}), searched {n['searched']}, "
            f"{n['occurrences_after']} occurrence(s) after, forms {', '.join(n['forms'])}"
        )
    return lines


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
        _write_out(out, data)
    except FileExistsError:
        _die(f"{_display(str(out))} already exists; refusing to overwrite it", EXIT_IO,
             reason="output_exists")  # fmt: skip
    except OSError as exc:
        _die(f"cannot write {_display(str(out))}: {exc.strerror or exc}", EXIT_IO,
             reason="unwritable")  # fmt: skip


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
    PostgreSQL DSN of a database with LangGraph's tables, see ``app_postgres``).

    Read-only (``mode=ro``): a file that is not a LangGraph database is never given
    tables, triggers or another journal mode. Returns whether it has a ``store`` table.
    """
    import sqlite3

    from . import app_postgres

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
    db: Path | str,
    signer: Signer,
    archive: Path | None,
    *,
    read_only: bool = False,
    recovering: bool = False,
    vacuum: bool | str = False,
) -> Iterator[Any]:
    """The attesting saver on an existing LangGraph database, with its SqliteStore if it
    has one; library errors are mapped to exit codes. ``read_only`` connections use a
    ``mode=ro`` URI (for ``digest``). A PostgreSQL DSN opens the Postgres saver instead
    (``app_postgres.open_saver``: read-only connections, ``recovering`` installs nothing
    in a database without an erasure journal, ``vacuum`` as the saver's)."""
    import sqlite3

    from . import app_postgres

    if app_postgres.is_dsn(db):
        with app_postgres.open_saver(str(db), signer, archive, read_only=read_only,
                                     recovering=recovering, vacuum=vacuum) as pg_saver:  # fmt: skip
            yield pg_saver
        return

    from langgraph.store.sqlite import SqliteStore

    from .savers import AttestingSqliteSaver

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
            yield AttestingSqliteSaver(conn, signer=signer, store=store, archive=archive)
    finally:
        for c in conns:
            c.close()


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
    from . import app_postgres

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
Threads = Annotated[
    list[str] | None,
    typer.Option(
        "--thread",
        help="thread id (one; with --subject: repeatable, added to the threads found)",
    ),
]
SubjectId = Annotated[
    str | None, typer.Option("--subject", help="data subject: erase all of its threads")
]
MetadataKey = Annotated[
    str | None,
    typer.Option(
        "--metadata-key",
        help="with --subject: also every thread whose checkpoint metadata has KEY == subject "
        "(e.g. user_id)",
    ),
]
Needles = Annotated[
    list[str] | None,
    typer.Option(
        "--needle",
        help="with --subject: a value that must be gone from the whole database afterwards "
        "(e.g. an email; refused, with its locations, if found); repeatable",
    ),
]
NeedlesFile = Annotated[
    str | None,
    typer.Option(
        "--needles-file",
        help="read values to search for from this file ('-': standard input), one per "
        "line, UTF-8 (they stay out of ps and shell history)",
    ),
]
PrivacyMode = Annotated[
    str | None,
    typer.Option("--privacy", help="'commitments': no raw id, namespace or path in the receipt"),
]
CommitmentKeyFile = Annotated[
    Path | None,
    typer.Option("--commitment-key", help="commitment key file (receipt keygen-commitment)"),
]


@app.command()
def digest(
    db: Annotated[str, typer.Argument(help=DB_HELP)],
    threads: Threads = None,
    store_ns: StoreNs = None,
    subject: SubjectId = None,
    metadata_key: MetadataKey = None,
    commitment_key: CommitmentKeyFile = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    verbose: Verbose = False,
) -> None:
    """Preview (read-only): the pre-deletion digest and row counts an erasure would record
    (with --subject: the threads it would erase, each with its digest and counts)."""
    _run.json = as_json
    _check_unicode(thread=threads, subject=subject, metadata_key=metadata_key)
    namespaces = _namespaces(store_ns or [])
    if subject is not None:
        _digest_subject(db, subject, threads or [], metadata_key, namespaces, commitment_key)
        return
    thread = _one_thread(threads, metadata_key=metadata_key, commitment_key=commitment_key)
    with _open_saver(db, Signer.generate(), None, read_only=True) as saver:
        d = saver.digest_thread(thread, namespaces)
    tables = {k: v.to_json() for k, v in d.tables.items()}
    if as_json:
        _emit_json({"thread_id": thread, "digest": d.digest, "tables": tables})
        return
    typer.echo(f"thread  {thread!r}\ndigest  {d.digest} ({d.leaves} rows)")
    for t, c in sorted(tables.items()):
        typer.echo(f"  {t:<14} {c['rows']:>8} rows {c['bytes']:>12} bytes")


RequestId = Annotated[
    str | None,
    typer.Option("--request-id", help="the request behind the erasure (e.g. a ticket id)"),
]
Basis = Annotated[
    str | None,
    typer.Option(
        "--basis",
        help="legal basis: gdpr-art17-1a .. gdpr-art17-1f, retention:POLICY, user-deletion, "
        "or free text (with --request-id)",
    ),
]
Requester = Annotated[str | None, typer.Option("--requester", help="who asked")]
ReceivedAt = Annotated[
    str | None, typer.Option("--received-at", help="when the request arrived (UTC)")
]
Due = Annotated[str | None, typer.Option("--due", help="when the erasure is due (UTC)")]
AuthFile = Annotated[
    Path | None,
    typer.Option("--authorization", help="an approver's AUTH.json from `receipt authorize`"),
]


def _request_context(
    request_id: str | None,
    basis: str | None,
    requester: str | None,
    received_at: str | None,
    due: str | None,
    authorization: Path | None,
) -> dict[str, Any]:
    """``request=``/``authorization=`` for the saver from the erase options (exit 2 on a
    bad value, 3 on an unreadable AUTH.json); empty without --request-id."""
    from .request import Authorization, RequestContext

    given = {"--basis": basis, "--requester": requester, "--received-at": received_at,
             "--due": due, "--authorization": authorization}  # fmt: skip
    if request_id is None:
        extra = [k for k, v in given.items() if v is not None]
        if extra:
            _die(f"{', '.join(extra)} need(s) --request-id", EXIT_USAGE)
        return {}
    if basis is None:
        _die("--request-id needs --basis (e.g. gdpr-art17-1a, retention:POLICY)", EXIT_USAGE)
    try:
        context = RequestContext(
            request_id, basis, requester, _check_time("--received-at", received_at),
            _check_time("--due", due),
        )  # fmt: skip
    except (ValueError, TypeError) as exc:
        _die(f"bad request context: {exc}", EXIT_USAGE)
    out: dict[str, Any] = {"request": context}
    if authorization is not None:
        shown = _display(str(authorization))
        try:
            out["authorization"] = Authorization.from_json(_read_input(str(authorization)))
        except InputError as exc:
            _die(exc.message, EXIT_IO, reason=exc.reason)
        except Error as exc:
            _die(f"{shown}: not an authorization: [{exc.reason}] {exc.message}", EXIT_USAGE,
                 reason="bad_authorization")  # fmt: skip
    return out


@app.command()
def erase(
    db: Annotated[str, typer.Argument(help=DB_HELP)],
    key: Annotated[Path, typer.Option("--key", help="Ed25519 private key (PEM, mode 0600)")],
    threads: Threads = None,
    store_ns: StoreNs = None,
    subject: SubjectId = None,
    metadata_key: MetadataKey = None,
    needle: Needles = None,
    needles_file: NeedlesFile = None,
    privacy: PrivacyMode = None,
    commitment_key: CommitmentKeyFile = None,
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
    vacuum: VacuumMode = None,
    request_id: RequestId = None,
    basis: Basis = None,
    requester: Requester = None,
    received_at: ReceivedAt = None,
    due: Due = None,
    authorization: AuthFile = None,
    password_env: PasswordEnv = None,
    allow_insecure_key: AllowInsecureKey = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="print one JSON document (the receipt inside)")
    ] = False,
    verbose: Verbose = False,
) -> None:
    """Erase a thread (and store namespaces) from a SQLite or PostgreSQL database and sign
    a receipt.

    Refuses (exit 1) a scope with no stored rows unless --allow-empty, and an
    --authorization for another scope or request, or past its not-after. --out and
    --archive are checked before anything is deleted.
    """
    _run.json = as_json
    signer = _load_signer(key, password_env, allow_insecure_key)
    context = _request_context(request_id, basis, requester, received_at, due, authorization)
    namespaces = _namespaces(store_ns or [])
    if needles_file is not None:
        if subject is None:
            _die("--needles-file needs --subject", EXIT_USAGE)
        needle = [*(needle or []), *_needles_file(needles_file)]
    thread, by_subject = _erase_target(
        threads, subject, metadata_key, needle, privacy, commitment_key
    )
    vacuum_mode = _vacuum_mode(vacuum, db)
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
    kwargs.update(context)
    with _open_saver(db, signer, archive, vacuum=vacuum_mode) as saver:
        if by_subject is None:
            receipt = saver.erase_thread(thread, **kwargs)
        else:
            receipt = _erase_subject(saver, by_subject, kwargs)
    pre = receipt.predicate["pre_state"]
    summary = (
        f"erased {_erased_what(receipt)}: {pre['leaves']} rows, "
        f"pre digest {receipt.pre_digest}, receipt {receipt.receipt_id}"
    )
    written = [str(archive / f"{receipt.receipt_id}.json")] if archive is not None else []
    if out is not None:
        try:
            _write_out(out, receipt.to_json())
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
            **_subject_fields(receipt),
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
    db: Annotated[str, typer.Argument(help=DB_HELP)],
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
    commitment_key: Annotated[
        Path | None,
        typer.Option(
            "--commitment-key",
            help="commitment key of privacy-mode erasures (their journal entries are sealed "
            "with it)",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    verbose: Verbose = False,
) -> None:
    """Issue receipts for erasures that committed but never got one (crash, full disk)."""
    _run.json = as_json
    if min_age < 0:
        _die("--min-age must be >= 0", EXIT_USAGE)
    signer = _load_signer(key, password_env, allow_insecure_key)
    sealed = {}
    if commitment_key is not None:  # privacy-mode journal entries open with it
        sealed["commitment_key"] = _commitment_key_file(commitment_key)
    _probe_database(db)
    _check_archive(archive)
    failure: ErasureError | None = None
    with _open_saver(db, signer, archive, recovering=True) as saver:
        skipped = sum(1 for p in saver.pending_erasures() if p.age_seconds <= min_age)
        try:
            receipts = saver.recover_receipts(min_age_seconds=min_age, **sealed)
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
        unparsable = failure.unparsable if isinstance(failure, ErasureIncompleteError) else []
        _die(f"[{failure.reason}] {failure.message}", EXIT_INVALID, reason=failure.reason,
             recovered=recovered, exported=exported, skipped=skip_doc,
             unparsable=unparsable)  # fmt: skip
    if as_json:
        _emit_json({"ok": True, "exit_code": 0, "recovered": recovered, "exported": exported,
                    "skipped": skip_doc})  # fmt: skip


# -- four-eyes authorization (RECEIPT_SPEC.md 9.6) ---------------------------------------


class AuthKind(StrEnum):
    thread = "thread"
    history = "history"
    subject = "subject"


@app.command()
def authorize(
    request_id: Annotated[
        str, typer.Option("--request-id", help="the request (ticket) the erasure must carry")
    ],
    not_after: Annotated[
        str, typer.Option("--not-after", help="last time (UTC) an erasure may start with it")
    ],
    key: Annotated[
        Path, typer.Option("--key", help="the approver's Ed25519 private key (PEM, mode 0600)")
    ],
    out: Annotated[Path, typer.Option("--out", help="authorization file to write (AUTH.json)")],
    threads: Annotated[
        list[str] | None,
        typer.Option(
            "--thread",
            help="thread id (thread and history erasures; with --subject: an explicit thread "
            "the erasure must name, repeatable)",
        ),
    ] = None,
    subject: Annotated[
        str | None, typer.Option("--subject", help="data subject id (subject erasures)")
    ] = None,
    metadata_key: Annotated[
        str | None,
        typer.Option(
            "--metadata-key",
            help="with --subject: the metadata key the erasure may discover threads by",
        ),
    ] = None,
    store_ns: StoreNs = None,
    kind: Annotated[
        AuthKind | None,
        typer.Option(help="erasure kind (default: thread with --thread, subject with --subject)"),
    ] = None,
    commitment_key: Annotated[
        Path | None,
        typer.Option(
            "--commitment-key",
            help="privacy mode: authorize the commitments the receipt will carry (the "
            "erasure's commitment key file)",
        ),
    ] = None,
    password_env: PasswordEnv = None,
    allow_insecure_key: AllowInsecureKey = False,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    verbose: Verbose = False,
) -> None:
    """Approve one erasure (four eyes): sign the request id, the exact scope and a deadline.

    The operator passes AUTH.json to `receipt erase --authorization`; the saver refuses,
    before deleting anything, another scope or request id, or a time after --not-after.
    Auditors check the approver with `receipt verify --trust` (key with role approver).
    """
    from datetime import UTC, datetime

    from .request import authorize as sign_authorization
    from .request import erasure_scope

    _run.json = as_json
    _check_unicode(thread=threads, subject=subject, metadata_key=metadata_key)
    if not threads and subject is None:
        _die("give exactly one of --thread ID or --subject ID", EXIT_USAGE)
    k = kind.value if kind is not None else ("subject" if subject is not None else "thread")
    if (k == "subject") != (subject is not None):
        if k != "subject" and subject is not None and threads:
            _die("give exactly one of --thread ID or --subject ID (--thread with --subject "
                 "names the subject's explicit threads)", EXIT_USAGE)  # fmt: skip
        _die(f"--kind {k} needs {'--subject' if k == 'subject' else '--thread'}", EXIT_USAGE)
    if k == "subject" and not threads and metadata_key is None:
        _die("--subject needs --thread ID (repeatable) and/or --metadata-key KEY: the "
             "authorization names the threads the erasure may erase", EXIT_USAGE)  # fmt: skip
    if k != "subject" and (len(threads or ()) != 1 or metadata_key is not None):
        _die("a thread or history authorization names one --thread (--metadata-key only "
             "with --subject)", EXIT_USAGE)  # fmt: skip
    thread = threads[0] if k != "subject" and threads else None
    na = _check_time("--not-after", not_after)
    assert na is not None
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if _instant(na, "") < _instant(now, ""):
        _die(f"--not-after {na} is in the past (now {now})", EXIT_USAGE)
    signer = _load_signer(key, password_env, allow_insecure_key)
    _check_out(out)
    commit = None
    if commitment_key is not None:
        from .privacy import CommitmentKey

        try:
            ck = CommitmentKey.from_file(commitment_key, allow_insecure=allow_insecure_key)
            commit = ck.commit
        except OSError as exc:
            _die(f"cannot read {_display(str(commitment_key))}: {exc.strerror or exc}", EXIT_IO)
        except Error as exc:
            _die(f"{_display(str(commitment_key))}: {exc.message}", EXIT_USAGE, reason="bad_key")
    target = subject if k == "subject" else thread
    assert target is not None
    bound: dict[str, Any] = {}
    if k == "subject":
        bound = {"threads": threads or [], "discovery": metadata_key}
    scope = erasure_scope(k, target, _namespaces(store_ns or []), commit=commit, **bound)
    try:
        auth = sign_authorization(signer, request_id=request_id, scope=scope, not_after=na)
    except (ValueError, TypeError) as exc:
        _die(str(exc), EXIT_USAGE)
    try:
        _write_out(out, auth.to_json())
    except FileExistsError:
        _die(f"{_display(str(out))} already exists; refusing to overwrite it", EXIT_IO,
             reason="output_exists")  # fmt: skip
    except OSError as exc:
        _die(f"cannot write {_display(str(out))}: {exc.strerror or exc}", EXIT_IO,
             reason="unwritable")  # fmt: skip
    if as_json:
        _emit_json({
            "ok": True, "exit_code": 0, "request_id": auth.request_id, "scope": auth.scope,
            "not_after": auth.not_after, "key_id": signer.key_id, "written_to": str(out),
            "authorization": auth.to_dict(),
        })  # fmt: skip
        return
    what = f"subject {subject!r}" if k == "subject" else f"thread {thread!r}"
    if k == "subject":
        what += f", threads {', '.join(repr(t) for t in threads or []) or 'none'}"
        what += f", discovery by {metadata_key!r}" if metadata_key is not None else ""
    nss = ", ".join("/".join(ns) for ns in store_ns or []) or "none"
    if commit is not None:
        what += " (as commitments)"
    typer.echo(
        f"authorized request {auth.request_id!r}: {k} erasure of {what} (store namespaces "
        f"{nss}) until {auth.not_after}; approver key {signer.key_id}"
    )
    typer.echo(f"written to {_display(str(out))}")


# -- trust files ----------------------------------------------------------------------


class TrustRole(StrEnum):
    signer = "signer"
    approver = "approver"


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
    from .trust import trust_file_bytes

    return trust_file_bytes(entries)


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
    role: Annotated[
        TrustRole,
        typer.Option(
            "--role",
            help="signer: signs receipts; approver: signs erasure authorizations "
            "(`receipt authorize`); one key cannot have both roles",
        ),
    ] = TrustRole.signer,
    verbose: Verbose = False,
) -> None:
    """Add a public key to a trust file (created if missing), optionally for a time window.

    Refuses (exit 1) the same key with a window that overlaps one it already has, or
    with the other role (four eyes: a receipt signer cannot also be an approver).
    """
    from .signing import PublicKey
    from .verify import TrustStore

    if not name or not name.isprintable():
        _die(f"bad --name {name!r}: a non-empty printable name is required", EXIT_USAGE)
    role_name = role.value
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
            if tk.key.key_id == key.key_id and tk.role != role_name:
                _die(
                    f"key {key.key_id[:16]} is already trusted in {_display(str(file))} as "
                    f"{tk.name!r} with role {tk.role}; one key cannot be both signer and "
                    "approver (four eyes need two keys)",
                    EXIT_INVALID,
                    reason="role_conflict",
                )
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
    if role_name != "signer":  # the default is left out (files stay as they were)
        entry["role"] = role_name
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
        f"added key {key.key_id} ({name!r}, {_window(nb, na)}, {role_name}) to "
        f"{_display(str(file))}; {n} key(s) trusted"
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
         "not_after": tk.not_after, "role": tk.role}
        for tk in trusted
    ]  # fmt: skip
    if as_json:
        _emit_json({"file": _display(str(file)), "keys": rows})
        return
    for r in rows:
        window = _window(r["not_before"], r["not_after"])
        typer.echo(f"{r['key_id']}  {r['name'] or '-'}  {window}  {r['role']}")


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
             "tree_size": proven.tree_size, "unit": proven.unit}
        )  # fmt: skip
        return
    scope = "thread" if proven.unit is None else "subject"
    where = "the pre-state" if proven.unit is None else f"unit {proven.unit!r}"
    typer.echo(
        f"OK    {shown}: {proven.table} row {proven.primary_key!r} is leaf {proven.index} of "
        f"{proven.tree_size} in {where} of receipt {v.receipt_id} ({scope} "
        f"{v.thread_id!r}, erased {v.issued_at}, key {v.key_id[:16]})"
    )


# -- receipt logs and the dashboard feed --------------------------------------------------

log_app = typer.Typer(
    help="Receipt logs: append-only, C2SP-checkpoint-signed, with RFC 9162 proofs "
    "(RECEIPT_SPEC.md, Receipt log).",
    no_args_is_help=True,
)
app.add_typer(log_app, name="log")

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
    from .signing import PublicKey
    from .verify import TrustStore

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


@log_app.command("append")
def log_append(
    log: Annotated[Path, typer.Argument(help="log directory (created if missing)")],
    receipts: Annotated[list[Path], typer.Argument(help="receipt files to append")],
    key: Annotated[Path, typer.Option("--key", help="the log's Ed25519 private key (PEM)")],
    origin: Annotated[
        str | None, typer.Option(help="origin line of a new log, e.g. example.com/erasures")
    ] = None,
    password_env: PasswordEnv = None,
    allow_insecure_key: AllowInsecureKey = False,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    verbose: Verbose = False,
) -> None:
    """Append receipt files (their exact bytes) to a log under one new signed checkpoint.

    A receipt already in the log is not added again (its index is reported); a different
    receipt with the same receipt id is refused (exit 1).
    """
    from .log import ReceiptLog

    _run.json = as_json
    signer = _load_signer(key, password_env, allow_insecure_key)
    datas = []
    for r in receipts:
        try:
            data = _read_input(str(r))
            Receipt.from_json(data)
        except InputError as exc:
            _die(exc.message, EXIT_IO, reason=exc.reason)
        except Error as exc:
            _die(f"{_display(str(r))}: [{exc.reason}] {exc.message}", EXIT_INVALID,
                 reason=exc.reason)  # fmt: skip
        datas.append(data)
    with _log_errors():
        rl = ReceiptLog(log, signer, origin=origin)
        before = rl.size
        indexes = rl.append_many(datas)
        note = rl.checkpoint()
    entries = [
        {"file": _display(str(r)), "index": i, "new": i >= before}
        for r, i in zip(receipts, indexes, strict=True)
    ]
    size = max([before - 1, *indexes]) + 1
    if as_json:
        _emit_json({"ok": True, "exit_code": 0, "log": _display(str(log)), "origin": rl.origin,
                    "tree_size": size, "entries": entries,
                    "checkpoint": note.decode("utf-8")})  # fmt: skip
        return
    for e in entries:
        typer.echo(
            f"{e['file']}  entry {e['index']}" + ("" if e["new"] else " (already in the log)")
        )
    added = sum(1 for e in entries if e["new"])
    typer.echo(f"{added} appended, {len(entries) - added} already present; {size} entries in "
               f"{_display(str(log))}", err=True)  # fmt: skip


@log_app.command("verify")
def log_verify(
    log: Annotated[Path, typer.Argument(help="log directory")],
    key: KeyOption = None,
    trust: TrustOption = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option("--checkpoint", help="an older checkpoint of this log: prove consistency"),
    ] = None,
    jobs: JobsOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print failures only")] = False,
    verbose: Verbose = False,
) -> None:
    """Audit a log: recompute the tree from every stored receipt, check every checkpoint
    and the signed head (by a trusted key), verify every receipt, and with --checkpoint
    prove the log extends that older checkpoint. Exit 1 names the first bad entry."""
    from .cli import default_jobs
    from .log import MAX_NOTE, verify_log

    _run.json = as_json
    trusted = _trusted(key, trust)
    old = None
    if checkpoint is not None:
        try:
            old = _read_input(str(checkpoint))
        except InputError as exc:
            _die(exc.message, EXIT_IO, reason=exc.reason)
        except Error as exc:
            _die(f"{_display(str(checkpoint))}: {exc.message}", EXIT_INVALID,
                 reason="bad_checkpoint")  # fmt: skip
        if len(old) > MAX_NOTE:
            _die(f"{_display(str(checkpoint))}: not a checkpoint (over {MAX_NOTE} bytes)",
                 EXIT_INVALID, reason="bad_checkpoint")  # fmt: skip
    check = _receipt_checker(log, trusted, jobs if jobs is not None else default_jobs())
    with _log_errors():
        report = verify_log(log, trusted, old_checkpoint=old, check_receipts=check)
    shown = _display(str(log))
    code = 0 if report.ok else EXIT_INVALID
    if report.tail_bytes and report.ok:
        typer.echo(
            f"{shown}: {report.tail_bytes} bytes ({report.uncommitted} complete entry "
            "records) after the last checkpoint record: an interrupted append, not part of "
            "the log (the next append removes them)",
            err=True,
        )
    if as_json:
        _emit_json({**report.to_json(), "log": shown, "exit_code": code})
        raise typer.Exit(code)
    problems = sorted(report.problems, key=lambda p: (p.index is None, p.index or 0))
    for p in problems:
        at = f"entry {p.index}: " if p.index is not None else ""
        typer.echo(f"FAIL  {shown}: {at}[{p.reason}] {p.message}")
    if report.ok and not quiet:
        root = report.root.hex() if report.root else "-"
        typer.echo(
            f"OK    {shown}: {report.tree_size} entries, root {root}, checkpoint of "
            f"{report.origin!r} signed by a trusted key, {report.receipts_verified} receipts "
            "verified"
        )
        if report.consistency is not None:
            c = report.consistency
            typer.echo(
                f"OK    consistent with the old checkpoint (size {c.old_size}): RFC 9162 "
                f"proof of {len(c.path)} hashes to size {c.new_size}"
            )
    if not report.ok:
        first = report.first_bad_index
        typer.echo(
            f"{shown}: {len(problems)} problem(s)"
            + (f"; first bad entry: {first}" if first is not None else ""),
            err=True,
        )
    raise typer.Exit(code)


def _receipt_checker(log: Path, trusted: Any, jobs: int) -> Any:
    """The ``check_receipts`` of ``verify_log``: every entry through ``verify_receipt``,
    in ``jobs`` processes for large logs."""
    from .cli import BATCH, PARALLEL_MIN, fork_map
    from .index import _read_entry
    from .verify import verify_receipt

    directory = str(log)

    def check(span: tuple[int, int, int]) -> tuple[int, str, str] | None:
        i, offset, length = span
        try:
            verify_receipt(_read_entry(directory, offset, length), trusted)
        except Error as exc:
            return (i, exc.reason, exc.message)
        except Exception as exc:  # a bug must not hide the other entries' verdicts
            return (i, "internal_error", repr(exc))
        return None

    def run(spans: list[tuple[int, int, int]]) -> list[tuple[int, str, str] | None]:
        if len(spans) >= BATCH:
            from .canonical import use_orjson

            use_orjson()
        if jobs > 1 and len(spans) >= PARALLEL_MIN:
            return list(fork_map(check, spans, jobs))
        return [check(s) for s in spans]

    return run


@log_app.command("prove")
def log_prove(
    log: Annotated[Path, typer.Argument(help="log directory")],
    receipt: Annotated[Path, typer.Argument(help="receipt file (its exact bytes)")],
    key: KeyOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the proof as JSON")] = False,
    verbose: Verbose = False,
) -> None:
    """Print the RFC 9162 inclusion proof of a receipt in the log (against the latest
    checkpoint); with --key, the checkpoint's signature is checked too."""
    from .log import Checkpoint, ReceiptLog

    _run.json = as_json
    try:
        data = _read_input(str(receipt))
    except InputError as exc:
        _die(exc.message, EXIT_IO, reason=exc.reason)
    except Error as exc:
        _die(f"{_display(str(receipt))}: [{exc.reason}] {exc.message}", EXIT_INVALID,
             reason=exc.reason)  # fmt: skip
    trusted = _trusted(key, None) if key else None
    shown = _display(str(log))
    with _log_errors():
        rl = ReceiptLog(log)
        index = rl.index_of(data)
        if index is None:
            _die(f"{_display(str(receipt))} is not in the log {shown} (its exact bytes are "
                 f"not an entry of its {rl.size} entries)", EXIT_INVALID,
                 reason="not_in_log")  # fmt: skip
        proof = rl.inclusion_proof(index)
        if trusted is not None:
            Checkpoint.parse(proof.checkpoint).verify_trusted(trusted)
    if not proof.verify(data):  # pragma: no cover - inclusion_proof checks it already
        _die("the inclusion proof does not verify", EXIT_INVALID, reason="not_in_log")
    if as_json:
        _emit_json({"ok": True, "exit_code": 0, "log": shown, "file": _display(str(receipt)),
                    "checkpoint_verified": trusted is not None, **proof.to_json()})  # fmt: skip
        return
    typer.echo(
        f"{_display(str(receipt))} is entry {proof.index} of {proof.tree_size} in {shown} "
        f"(root {proof.root.hex()}; checkpoint signature "
        f"{'verified' if trusted is not None else 'not checked: pass --key'})"
    )
    typer.echo(f"leaf hash   {proof.leaf_hash.hex()}")
    for i, h in enumerate(proof.audit_path):
        typer.echo(f"path[{i:>2}]    {h.hex()}")
    typer.echo("checkpoint")
    typer.echo(proof.checkpoint.decode("utf-8"), nl=False)


@log_app.command("checkpoint")
def log_checkpoint(
    log: Annotated[Path, typer.Argument(help="log directory")],
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    verbose: Verbose = False,
) -> None:
    """Print the log's latest signed checkpoint (C2SP tlog-checkpoint note): keep it, and
    later pass it to `receipt log verify --checkpoint` to prove the log only grew."""
    from .log import Checkpoint, ReceiptLog, verifier_key

    _run.json = as_json
    with _log_errors():
        rl = ReceiptLog(log)
        note = rl.checkpoint()
        cp = Checkpoint.parse(note)
    if as_json:
        vkey = verifier_key(rl.origin, rl.public_key) if rl.public_key is not None else None
        _emit_json({"ok": True, "exit_code": 0, "log": _display(str(log)), "origin": cp.origin,
                    "tree_size": cp.size, "root": cp.root.hex(),
                    "checkpoint": note.decode("utf-8"), "verifier_key": vkey})  # fmt: skip
        return
    sys.stdout.buffer.write(note)
    sys.stdout.flush()


class IndexFormat(StrEnum):
    ndjson = "ndjson"
    csv = "csv"


@app.command("index")
def index_cmd(
    paths: Annotated[list[str], typer.Argument(help="receipt files, directories or logs")],
    key: KeyOption = None,
    trust: TrustOption = None,
    fmt: Annotated[IndexFormat, typer.Option("--format", help="output format")] = (
        IndexFormat.ndjson
    ),
    rejected: Annotated[
        Path | None,
        typer.Option("--rejected", help="also write the rejected receipts here (NDJSON)"),
    ] = None,
    jobs: JobsOption = None,
    verbose: Verbose = False,
) -> None:
    """Dashboard feed: one flat record per verified receipt (schemas/index-record.schema.json)
    on stdout; receipts that do not verify are never records: they are listed on stderr
    (and in --rejected FILE). Exit 1 if any was rejected, 3 if any could not be read."""
    from .cli import default_jobs
    from .index import build, csv_header, csv_row, index_items

    trusted = _trusted(key, trust)
    skip = [str(p) for p in [*(key or []), *([trust] if trust else [])]]
    if rejected is not None:
        _check_out(rejected)
    with _log_errors():
        items = index_items(paths, skip)
    if not items:
        _die("no receipts found", EXIT_USAGE)
    out = sys.stdout
    if fmt is IndexFormat.csv:
        out.write(csv_header())
    rejects: list[dict[str, Any]] = []
    n = 0
    for res in build(items, trusted, jobs if jobs is not None else default_jobs()):
        rec = res.get("record")
        if rec is None:
            r = res["rejected"]
            rejects.append(r)
            typer.echo(f"REJECTED  {r['source']}: [{r['reason']}] {r['message']}", err=True)
            continue
        n += 1
        out.write(
            csv_row(rec) if fmt is IndexFormat.csv else json.dumps(rec, ensure_ascii=False) + "\n"
        )
    out.flush()
    if rejected is not None:
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rejects).encode("utf-8")
        try:
            _write_out(rejected, data)
        except OSError as exc:
            _die(f"cannot write {_display(str(rejected))}: {exc.strerror or exc}", EXIT_IO,
                 reason="unwritable")  # fmt: skip
    typer.echo(f"{n} indexed, {len(rejects)} rejected", err=True)
    unreadable = any(r["reason"] == "unreadable" for r in rejects)
    raise typer.Exit(EXIT_IO if unreadable else EXIT_INVALID if rejects else 0)


# -- erasure per person: --subject, locate, open, keygen-commitment ---------------------


def _one_thread(threads: list[str] | None, **subject_only: Any) -> str:
    """The one ``--thread`` of a thread erasure or digest; subject-only options refused."""
    given = [f"--{k.replace('_', '-')}" for k, v in subject_only.items() if v]
    if given:
        _die(f"{', '.join(given)} need(s) --subject", EXIT_USAGE)
    if not threads:
        _die("give --thread ID (or --subject ID for every thread of a data subject)", EXIT_USAGE)
    if len(threads) > 1:
        _die("--thread is given once, unless with --subject (one receipt for several threads)",
             EXIT_USAGE)  # fmt: skip
    return threads[0]


def _commitment_key_file(path: Path) -> Any:
    from .privacy import CommitmentKey

    try:
        return CommitmentKey.from_file(path)
    except KeyFormatError as exc:
        _die(f"{_display(str(path))}: {exc.message}", EXIT_USAGE, reason=exc.reason)
    except OSError as exc:
        _die(f"cannot read {_display(str(path))}: {exc.strerror or exc}", EXIT_IO)


def _erase_target(
    threads: list[str] | None,
    subject: str | None,
    metadata_key: str | None,
    needles: list[str] | None,
    privacy: str | None,
    commitment_key: Path | None,
) -> tuple[str | None, dict[str, Any] | None]:
    """``(thread, None)`` for a thread erasure, or ``(None, erase_subject arguments)``."""
    _check_unicode(thread=threads, subject=subject, metadata_key=metadata_key, needle=needles)
    if subject is None:
        thread = _one_thread(threads, metadata_key=metadata_key, needle=needles,
                             privacy=privacy, commitment_key=commitment_key)  # fmt: skip
        return thread, None
    if privacy not in (None, "commitments"):
        _die(f"--privacy takes 'commitments', not {privacy!r}", EXIT_USAGE)
    if (privacy is None) != (commitment_key is None):
        _die("--privacy commitments and --commitment-key KEYFILE go together", EXIT_USAGE)
    if not threads and metadata_key is None:
        _die("--subject needs --metadata-key KEY (e.g. user_id) and/or --thread ID", EXIT_USAGE)
    out: dict[str, Any] = {"subject_id": subject, "threads": threads or [],
                           "metadata_key": metadata_key, "needles": needles or []}  # fmt: skip
    if commitment_key is not None:
        out.update(privacy="commitments", commitment_key=_commitment_key_file(commitment_key))
    return None, out


def _erase_subject(saver: Any, by_subject: dict[str, Any], kwargs: dict[str, Any]) -> Receipt:
    from .engine import NeedlesFoundError

    try:
        receipt: Receipt = saver.erase_subject(**by_subject, **kwargs)
    except NothingToEraseError as exc:
        _die(exc.message, EXIT_INVALID, reason=exc.reason)
    except NeedlesFoundError as exc:
        _die(f"[{exc.reason}] {exc.message}", EXIT_INVALID, reason=exc.reason,
             locations=exc.locations)  # fmt: skip
    return receipt


def _erased_what(receipt: Receipt) -> str:
    scope = receipt.predicate["scope"]
    if "subject" not in scope:
        return f"thread {scope['thread_id']!r}"
    return f"subject {scope['subject']!r} ({len(scope['threads'])} threads)"


def _subject_fields(receipt: Receipt) -> dict[str, Any]:
    """``erase --json`` members of a subject receipt (as the receipt names them)."""
    scope = receipt.predicate["scope"]
    if "subject" not in scope:
        return {}
    return {"subject": scope["subject"], "threads": scope["threads"]}


def _reader(saver: Any) -> Any:
    """A saver for the read-only subject operations. On a PostgreSQL database without
    this library's schema, ``_open_saver(read_only=True)`` yields a bare measuring
    object; the Postgres saver on that read-only connection installs nothing for them."""
    if hasattr(saver, "locate"):
        return saver
    from langgraph.store.postgres import PostgresStore

    from .postgres import AttestingPostgresSaver

    store = PostgresStore(saver.conn) if saver.has_store else None
    return AttestingPostgresSaver(saver.conn, signer=Signer.generate(), store=store)


def _digest_subject(
    db: str,
    subject: str,
    threads: list[str],
    metadata_key: str | None,
    namespaces: list[tuple[str, ...]],
    commitment_key: Path | None,
) -> None:
    if not threads and metadata_key is None:
        _die("--subject needs --metadata-key KEY (e.g. user_id) and/or --thread ID", EXIT_USAGE)
    key = _commitment_key_file(commitment_key) if commitment_key is not None else None
    with _open_saver(db, Signer.generate(), None, read_only=True) as saver:
        try:
            d = _reader(saver).digest_subject(
                subject, threads=threads, metadata_key=metadata_key,
                store_namespaces=namespaces, commitment_key=key,
            )  # fmt: skip
        except NothingToEraseError as exc:
            _die(exc.message, EXIT_INVALID, reason=exc.reason)
    units = {
        name: {"digest": u.digest, "rows": u.leaves,
               "tables": {k: v.to_json() for k, v in u.tables.items()}}
        for name, u in sorted(d.units.items())
    }  # fmt: skip
    tables = {k: v.to_json() for k, v in d.tables.items()}
    if _run.json:
        _emit_json({"subject": subject, "threads": list(d.threads), "digest": d.digest,
                    "rows": d.leaves, "tables": tables, "units": units})  # fmt: skip
        return
    typer.echo(f"subject {subject!r}: {len(d.threads)} thread(s)")
    typer.echo(f"digest  {d.digest} ({d.leaves} rows)")
    for name, u in units.items():
        typer.echo(f"  {name:<44} {u['rows']:>8} rows  {u['digest']}")


def _needles_file(path: str) -> list[str]:
    """The values of a ``--needles-file`` (``-``: stdin): one per line, UTF-8, empty
    lines skipped. Exit 3 if it cannot be read, 2 if it is not UTF-8 or holds none."""
    shown = "standard input" if path == "-" else _display(path)
    try:
        data = _read_arg(path)
    except InputError as exc:
        _die(exc.message, EXIT_IO, reason=exc.reason)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        _die(f"--needles-file {shown}: line {line} is not valid UTF-8 text", EXIT_USAGE)
    lines = text.removeprefix("\ufeff").split("\n")  # only LF (CRLF) ends a line
    values = [v.removesuffix("\r") for v in lines if v.removesuffix("\r")]
    if not values:
        _die(f"--needles-file {shown}: no values (one per line)", EXIT_USAGE)
    return values


def _describe_location(loc: Any) -> str:
    fields = {k: v for k, v in loc.to_json().items() if k not in ("needle", "form", "table")}
    where = " ".join(f"{k}={v!r}" for k, v in fields.items() if k not in ("column", "via"))
    via = "" if loc.via == "sql" else f" (via {loc.via})"
    return f"#{loc.needle} {loc.form:<18} {loc.table}.{loc.column}  {where}{via}"


@app.command("locate")
def locate_cmd(
    db: Annotated[str, typer.Argument(help=DB_HELP)],
    needles: Annotated[
        list[str] | None, typer.Argument(help="values to find (an email, a name, ...)")
    ] = None,
    needles_file: NeedlesFile = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    verbose: Verbose = False,
) -> None:
    """Find every stored copy of a value (read-only): every row of the checkpoint tables
    and the store, by raw byte search, also in JSON's \\uXXXX-escaped forms.

    One line per location (#N is the value's position on the command line). Exit 0
    whether or not anything is found; the count is on stderr (or in --json).
    """
    _run.json = as_json
    needles = list(needles or [])
    if needles_file is not None:
        needles += _needles_file(needles_file)
    if not needles:
        _die("name the values to find: VALUE... or --needles-file F", EXIT_USAGE)
    _check_unicode(value=needles)
    if any(not n for n in needles):
        _die("a value to find must not be empty", EXIT_USAGE)
    with _open_saver(db, Signer.generate(), None, read_only=True) as saver:
        found = _reader(saver).locate(needles)
    if as_json:
        _emit_json({"ok": True, "exit_code": 0, "found": len(found),
                    "locations": [loc.to_json() for loc in found]})  # fmt: skip
        return
    for loc in found:
        typer.echo(_describe_location(loc))
    typer.echo(f"{len(found)} location(s) of {len(needles)} value(s)", err=True)


@app.command("keygen-commitment")
def keygen_commitment(
    out: Annotated[Path, typer.Option("--out", help="key file to create (mode 0600)")],
    verbose: Verbose = False,
) -> None:
    """Generate a commitment key for privacy-mode receipts (--privacy commitments).

    Keep it secret, and keep it: receipts carry only HMAC commitments made with it, and
    without it nobody can show which id a receipt erased (receipt open).
    """
    from .privacy import CommitmentKey

    key = CommitmentKey.generate()
    try:
        key.to_file(out)
    except FileExistsError:
        _die(f"{_display(str(out))} already exists; refusing to overwrite a key", EXIT_IO,
             reason="output_exists")  # fmt: skip
    except OSError as exc:
        _die(f"cannot write {_display(str(out))}: {exc.strerror or exc}", EXIT_IO,
             reason="unwritable")  # fmt: skip
    typer.echo(f"key id   {key.key_id}")
    typer.echo(f"key      {out}  (mode 0600: keep it secret, never hand it out with receipts)")


def _open_claims(
    p: dict[str, Any], key: Any, claims: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    """For each ``(what, id)``: the value the predicate ``p`` would carry for it, and
    whether it does (privacy mode: the commitment under ``key``; otherwise the id)."""
    import base64

    from .privacy import needle_commitment

    scope = p["scope"]

    def commit(label: str, value: str) -> str:
        return value if key is None else str(key.commit(label, value))

    needles = p.get("needles") or {}
    threads = scope["threads"] if "threads" in scope else [scope["thread_id"]]
    out = []
    for what, value in claims:
        if what == "thread":
            c = commit("thread", value)
            found = c in threads
        elif what == "subject":
            c = commit("subject", value)
            found = c == scope.get("subject")
        elif what == "store-ns":
            parts = _namespaces([value])[0]
            c = commit("store_namespace", ".".join(parts))
            found = ([c] if key is not None else list(parts)) in scope["store_namespaces"]
        elif what == "database":
            c = commit("database", value)
            found = c == p["backend"]["database"]
        else:  # needle
            salt = needles.get("salt")
            if key is not None:
                c = key.needle(value)
            elif salt is not None:
                c = needle_commitment(base64.b64decode(salt), value)
            else:
                c = ""
            found = bool(c) and c in needles.get("values", [])
        out.append({"what": what, "value": value, "committed_as": c, "found": found})
    return out


@app.command("open")
def open_receipt(
    file: Annotated[Path, typer.Argument(help="receipt file")],
    commitment_key: CommitmentKeyFile = None,
    thread: Annotated[
        list[str] | None, typer.Option("--thread", help="a thread id it erased; repeatable")
    ] = None,
    subject: Annotated[str | None, typer.Option("--subject", help="the data subject")] = None,
    store_ns: Annotated[
        list[str] | None,
        typer.Option("--store-ns", help="a store namespace prefix (users/alice); repeatable"),
    ] = None,
    database: Annotated[
        str | None, typer.Option("--database", help="database path (or PostgreSQL label)")
    ] = None,
    needle: Annotated[
        list[str] | None, typer.Option("--needle", help="a value it searched for; repeatable")
    ] = None,
    key: KeyOption = None,
    trust: TrustOption = None,
    no_verify: Annotated[
        bool,
        typer.Option(
            "--no-verify",
            help="open a receipt without verifying it (the output says NOT verified)",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    verbose: Verbose = False,
) -> None:
    """Show an auditor that the given ids are the ones a receipt names.

    A privacy-mode receipt carries HMAC commitments only: with its commitment key this
    recomputes them (the key must be the receipt's, by key id). The receipt is verified
    first with --key or --trust, and the ids are looked up in the verified statement;
    --no-verify skips that (and says so). Exit 0 if every id given is in the receipt, 1
    if one is not (or the key is not the receipt's, or the receipt does not verify), 2
    without --key, --trust or --no-verify.
    """
    _run.json = as_json
    _check_unicode(thread=thread, subject=subject, needle=needle)
    claims = [("thread", t) for t in thread or []] + [("store-ns", n) for n in store_ns or []]
    claims += [("needle", n) for n in needle or []]
    claims += [(w, v) for w, v in (("subject", subject), ("database", database)) if v]
    if not claims:
        _die("name what to show: --thread, --subject, --store-ns, --database or --needle",
             EXIT_USAGE)  # fmt: skip
    checked = bool(key) or trust is not None
    if checked == no_verify:
        _die("--no-verify and --key/--trust exclude each other" if checked else
             "give --key PUB.pem or --trust TRUSTFILE to verify the receipt before opening "
             "it, or --no-verify to open it unverified", EXIT_USAGE)  # fmt: skip
    receipt = _load_receipt(file)
    predicate = receipt.predicate
    signature = "NOT verified (--no-verify)"
    if checked:
        from .verify import verify_receipt

        try:
            verified = verify_receipt(receipt, _trusted(key, trust))
        except Error as exc:
            _die(f"{_display(str(file))}: does not verify: [{exc.reason}] {exc.message}",
                 EXIT_INVALID, reason=exc.reason)  # fmt: skip
        predicate = verified.statement["predicate"]  # only what the signature binds
        signature = "verified"
    privacy = predicate["scope"].get("privacy")
    ck = None
    if privacy is not None:
        if commitment_key is None:
            _die("this receipt carries commitments: give its --commitment-key", EXIT_USAGE)
        ck = _commitment_key_file(commitment_key)
        if ck.key_id != privacy["key_id"]:
            mine, theirs = ck.key_id[:16], privacy["key_id"][:16]
            _die(f"the commitment key (id {mine}...) is not this receipt's (id {theirs}...)",
                 EXIT_INVALID, reason="wrong_commitment_key")  # fmt: skip
    results = _open_claims(predicate, ck, claims)
    ok = all(r["found"] for r in results)
    code = 0 if ok else EXIT_INVALID
    if as_json:
        _emit_json({"ok": ok, "exit_code": code, "receipt_id": receipt.receipt_id,
                    "signature": signature, "claims": results})  # fmt: skip
    else:
        typer.echo(f"receipt {receipt.receipt_id} (signature {signature})")
        for r in results:
            verdict = "is in this receipt" if r["found"] else "is NOT in this receipt"
            typer.echo(f"  {r['what']} {r['value']!r} {verdict}: {r['committed_as']}")
    raise typer.Exit(code)


# -- retention sweeps (history.py) -------------------------------------------------------

_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _duration(option: str, value: str) -> Any:
    """``30d``, ``12h``, ``90m``, ``3600s``, ``2w`` as a ``timedelta``; exit 2 otherwise."""
    import re
    from datetime import timedelta

    m = re.fullmatch(r"\s*(\d{1,9})\s*([smhdw])\s*", value)
    if m is None:
        _die(f"{option} {value!r}: use a number and a unit (s, m, h, d, w), e.g. 30d", EXIT_USAGE)
    return timedelta(seconds=int(m.group(1)) * _DURATION_UNITS[m.group(2)])


def _short(thread_id: str) -> str:
    from .history import _short as short

    return short(thread_id)


class _SweepBar:
    """The progress of one sweep on stderr: a bar with rate and ETA on a terminal,
    otherwise one line every ``interval`` seconds (so a long sweep under cron or CI
    shows it is alive; a short one prints nothing). stdout is never written.

    With ``limit`` the unit is what the limit counts (threads erased or pruned) and the
    total is at most ``limit``; otherwise every thread looked at, of all candidates."""

    interval = 5.0
    """Seconds between progress lines without a terminal."""

    def __init__(self, label: str, candidates: int, limit: int | None) -> None:
        self.label, self.limit, self.done = label, limit, 0
        self.total = candidates if limit is None else min(limit, candidates)
        self.tty = sys.stderr.isatty()
        self.start = self.last = time.monotonic()
        self.shown = -1  # the count last drawn
        if self.tty and self.total > 1:
            sys.stderr.write(f"{label}\n")

    def _rate_eta(self, now: float) -> str:
        elapsed = now - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = "?"
        if rate > 0:
            left = max(0, round((self.total - self.done) / rate))
            eta = f"{left // 3600}:{left // 60 % 60:02d}:{left % 60:02d}"
        return f"{rate:.1f}/s ETA {eta}"

    def __call__(self, event: Any) -> None:
        if self.limit is not None and not event.outcome.endswith(("erased", "pruned")):
            return  # skipped or failed: not counted by --limit
        self.done = min(self.done + 1, self.total)
        now = time.monotonic()
        if self.tty:
            if self.total > 1 and (now - self.last >= 0.1 or self.done == self.total):
                self._draw(now)
        elif now - self.last >= self.interval:
            sys.stderr.write(f"{self.label}: {self.done}/{self.total} threads, "
                             f"{self._rate_eta(now)}\n")  # fmt: skip
            sys.stderr.flush()
            self.last = now

    def _draw(self, now: float) -> None:
        width = 30
        filled = width * self.done // self.total
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(f"\r[{bar}] {self.done}/{self.total} {self._rate_eta(now)}\x1b[K")
        sys.stderr.flush()
        self.last, self.shown = now, self.done

    def close(self) -> None:
        if self.tty and self.total > 1:
            if self.shown != self.done:  # the final count, never a bar left mid-way
                self._draw(time.monotonic())
            sys.stderr.write("\n")
            sys.stderr.flush()


@app.command()
def retention(
    db: Annotated[str, typer.Argument(help=DB_HELP)],
    idle: Annotated[
        str | None,
        typer.Option(
            "--idle",
            help="erase threads whose latest checkpoint is older than "
            "this (30d, 12h, 90m, 3600s, 2w): one receipt each",
        ),
    ] = None,
    history: Annotated[
        str | None,
        typer.Option(
            "--history",
            help="erase the history (keep the latest state) of threads "
            "whose latest checkpoint is older than this",
        ),
    ] = None,
    key: Annotated[
        Path | None,
        typer.Option("--key", help="Ed25519 private key (PEM, mode 0600); not for --dry-run"),
    ] = None,
    archive: Annotated[
        Path | None, typer.Option("--archive", help="directory the receipts are written to")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=0, help="at most this many threads per sweep")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="measure what would be erased; change nothing")
    ] = False,
    vacuum: VacuumMode = None,
    password_env: PasswordEnv = None,
    allow_insecure_key: AllowInsecureKey = False,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    verbose: Verbose = False,
) -> None:
    """Retention: erase idle threads and/or the history of older threads, one signed
    receipt per thread into --archive.

    Threads are selected by the time of their latest checkpoint (inside its uuid6 id),
    from the checkpoints primary key. Resumable: run it again after an interruption and it
    issues the receipts of committed erasures first, then continues; nothing is erased or
    attested twice. Exit 1 if any thread failed (the others are done).
    """
    _run.json = as_json
    if idle is None and history is None:
        _die("give --idle and/or --history", EXIT_USAGE)
    idle_age = None if idle is None else _duration("--idle", idle)
    history_age = None if history is None else _duration("--history", history)
    vacuum_mode = _vacuum_mode(vacuum, db)
    signer = Signer.generate()
    if not dry_run:
        if key is None or archive is None:
            _die("--key and --archive are required (except with --dry-run)", EXIT_USAGE)
        signer = _load_signer(key, password_env, allow_insecure_key)
    _probe_database(db)
    if archive is not None and not dry_run:
        _check_archive(archive)
    results: dict[str, Any] = {"idle": None, "history": None}
    with _open_saver(db, signer, None if dry_run else archive, read_only=dry_run,
                     vacuum=False if dry_run else vacuum_mode) as saver:  # fmt: skip
        for mode, age in (("idle", idle_age), ("history", history_age)):
            if age is None:
                continue
            bar = _SweepBar(f"retention --{mode} {idle if mode == 'idle' else history}",
                            saver.count_idle_threads(age), limit)  # fmt: skip
            sweep = saver.erase_idle_threads if mode == "idle" else saver.prune_histories
            try:
                results[mode] = sweep(age, limit=limit, dry_run=dry_run, progress=bar)
            finally:
                bar.close()
    done = [r for r in results.values() if r is not None]
    totals = {k: sum(getattr(r, k) for r in done) for k in ("threads", "rows", "bytes", "receipts")}
    failed = sum(r.failed for r in done)
    code = EXIT_INVALID if failed else 0
    if as_json:
        _emit_json({
            "ok": not failed, "exit_code": code, "dry_run": dry_run,
            "archive": None if archive is None or dry_run else str(archive),
            "idle": None if results["idle"] is None else results["idle"].to_json(),
            "history": None if results["history"] is None else results["history"].to_json(),
            "totals": totals,
        })  # fmt: skip
        raise typer.Exit(code)
    verb = {"idle": "erased", "history": "pruned"}
    for mode, r in results.items():
        if r is None:
            continue
        what = f"would be {verb[mode]}" if dry_run else verb[mode]
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(r.skipped.items())) or "none"
        typer.echo(f"{mode:<8} before {r.cutoff}: {r.threads} threads {what}, {r.rows} rows, "
                   f"{r.bytes} bytes, {r.receipts} receipts ({r.recovered} recovered); "
                   f"skipped: {skipped}")  # fmt: skip
        for tid, msg in r.failures:
            typer.echo(f"receipt: error: thread {_short(tid)}: {msg}", err=True)
    where = "" if dry_run or archive is None else f" in {archive}"
    typer.echo(f"total    {totals['threads']} threads, {totals['rows']} rows, "
               f"{totals['bytes']} bytes, {totals['receipts']} receipts{where}")  # fmt: skip
    if failed:
        _die(f"{failed} thread(s) failed; the others are done (run again to retry)",
             EXIT_INVALID, reason="erasure_incomplete")  # fmt: skip
