"""The ``receipt`` operator commands (typer): keygen, show, export, digest, erase.

``receipt verify`` is dispatched before this module is imported (see ``cli.py``); the
``verify`` command below only exists so that ``receipt --help`` lists it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from .cli import EXIT_INVALID, EXIT_IO, EXIT_USAGE, _read_input, verify_main
from .errors import Error, InputError, KeyFormatError
from .receipt import Receipt, write_durably
from .signing import Signer

__all__ = ["app"]

app = typer.Typer(
    name="receipt",
    help="Provable deletion for LangGraph threads: create, inspect and verify erasure receipts.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _die(message: str, code: int) -> NoReturn:
    typer.echo(f"receipt: error: {message}", err=True)
    raise typer.Exit(code)


def _load_receipt(path: Path) -> Receipt:
    try:
        return Receipt.from_json(_read_input(str(path)))
    except InputError as exc:
        _die(exc.message, EXIT_IO)
    except Error as exc:
        _die(f"{path}: [{exc.reason}] {exc.message}", EXIT_INVALID)


def _load_signer(path: Path, password_env: str | None) -> Signer:
    password = None
    if password_env:
        value = os.environ.get(password_env)
        if value is None:
            _die(f"environment variable {password_env} is not set", EXIT_USAGE)
        password = value.encode("utf-8")
    try:
        return Signer.from_pem(_read_input(str(path)), password=password)
    except InputError as exc:
        _die(exc.message, EXIT_IO)
    except KeyFormatError as exc:
        _die(f"{path}: {exc.message}", EXIT_USAGE)


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
)
def verify(ctx: typer.Context) -> None:
    """Verify receipts: receipt verify FILE... --key PUB.pem | --trust TRUSTFILE [--json]."""
    raise typer.Exit(verify_main(ctx.args))


@app.command()
def keygen(
    out: Annotated[Path, typer.Option("--out", help="directory for the key files")],
    name: Annotated[str, typer.Option(help="file name stem")] = "receipt-signing",
    password_env: Annotated[
        str | None, typer.Option(help="encrypt the private key with this env var's value")
    ] = None,
) -> None:
    """Generate an Ed25519 signing key: NAME.key (mode 0600) and NAME.pub.pem."""
    priv, pub = out / f"{name}.key", out / f"{name}.pub.pem"
    for p in (priv, pub):
        if p.exists():
            _die(f"{p} already exists; refusing to overwrite a key", EXIT_USAGE)
    password = None
    if password_env:
        if password_env not in os.environ:
            _die(f"environment variable {password_env} is not set", EXIT_USAGE)
        password = os.environ[password_env].encode("utf-8")
    signer = Signer.generate()
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_durably(priv, signer.private_pem(password), mode=0o600)
        write_durably(pub, signer.public_pem())
    except FileExistsError as exc:
        _die(f"{exc}; refusing to overwrite a key", EXIT_USAGE)
    except OSError as exc:
        _die(f"cannot write keys to {out}: {exc.strerror or exc}", EXIT_IO)
    typer.echo(f"key id   {signer.key_id}")
    typer.echo(f"private  {priv}  (mode 0600, keep secret)")
    typer.echo(f"public   {pub}  (give this to auditors)")


@app.command()
def show(
    file: Annotated[Path, typer.Argument(help="receipt file or DSSE envelope")],
    as_json: Annotated[bool, typer.Option("--json", help="print the statement as JSON")] = False,
) -> None:
    """Summarise a receipt for a human. Does NOT verify it: use `receipt verify`."""
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
) -> None:
    """Export a receipt as a standard DSSE envelope (or its canonical statement)."""
    r = _load_receipt(file)
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
        _die(f"{out} already exists", EXIT_USAGE)
    except OSError as exc:
        _die(f"cannot write {out}: {exc.strerror or exc}", EXIT_IO)


def _namespaces(values: list[str]) -> list[tuple[str, ...]]:
    out = []
    for v in values:
        parts = tuple(v.split("/"))
        if not all(parts):
            _die(f"bad store namespace {v!r}: use slash-separated non-empty parts", EXIT_USAGE)
        out.append(parts)
    return out


@contextmanager
def _open_saver(db: Path, signer: Signer, archive: Path | None) -> Iterator[Any]:
    """The attesting saver on an existing database, with its SqliteStore if it has one."""
    import sqlite3

    from langgraph.store.sqlite import SqliteStore

    from .savers import AttestingSqliteSaver

    if not db.is_file():
        _die(f"{db}: no such database file", EXIT_IO)
    try:
        conn = sqlite3.connect(db, check_same_thread=False)
        has_store = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='store'"
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        _die(f"{db}: not a usable SQLite database ({exc})", EXIT_IO)
    store = None
    if has_store:
        store = SqliteStore(sqlite3.connect(db, check_same_thread=False, isolation_level=None))
    try:
        yield AttestingSqliteSaver(conn, signer=signer, store=store, archive=archive)
    finally:
        conn.close()
        if store is not None:
            store.conn.close()


StoreNs = Annotated[
    list[str] | None,
    typer.Option(
        "--store-ns", help="store namespace prefix to erase, e.g. users/alice; repeatable"
    ),
]


@app.command()
def digest(
    db: Annotated[Path, typer.Argument(help="SQLite database file")],
    thread: Annotated[str, typer.Option("--thread", help="thread id")],
    store_ns: StoreNs = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Preview: the pre-deletion digest and row counts an erasure would record now."""
    with _open_saver(db, Signer.generate(), None) as saver:
        try:
            d = saver.digest_thread(thread, _namespaces(store_ns or []))
        except ValueError as exc:
            _die(str(exc), EXIT_USAGE)
    tables = {k: v.to_json() for k, v in d.tables.items()}
    if as_json:
        typer.echo(json.dumps({"thread_id": thread, "digest": d.digest, "tables": tables}))
        return
    typer.echo(f"thread  {thread!r}\ndigest  {d.digest} ({d.leaves} rows)")
    for t, c in sorted(tables.items()):
        typer.echo(f"  {t:<14} {c['rows']:>8} rows {c['bytes']:>12} bytes")


@app.command()
def erase(
    db: Annotated[Path, typer.Argument(help="SQLite database file")],
    thread: Annotated[str, typer.Option("--thread", help="thread id to erase")],
    key: Annotated[Path, typer.Option("--key", help="Ed25519 private key (PEM)")],
    store_ns: StoreNs = None,
    archive: Annotated[
        Path | None, typer.Option("--archive", help="directory to archive the receipt in")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="also write the receipt here")] = None,
    no_tombstone: Annotated[
        bool, typer.Option("--no-tombstone", help="allow the thread id to be reused")
    ] = False,
    password_env: Annotated[
        str | None, typer.Option(help="env var holding the private key's password")
    ] = None,
) -> None:
    """Erase a thread (and store namespaces) from a SQLite database and sign a receipt."""
    from .errors import ErasureError

    signer = _load_signer(key, password_env)
    if out is not None and out.exists():
        _die(f"{out} already exists", EXIT_USAGE)
    with _open_saver(db, signer, archive) as saver:
        try:
            receipt = saver.erase_thread(
                thread, store_namespaces=_namespaces(store_ns or []), tombstone=not no_tombstone
            )
        except ValueError as exc:
            _die(str(exc), EXIT_USAGE)
        except ErasureError as exc:
            _die(f"[{exc.reason}] {exc.message}", EXIT_INVALID)
    summary = (
        f"erased thread {thread!r}: {receipt.predicate['pre_state']['leaves']} rows, "
        f"pre digest {receipt.pre_digest}, receipt {receipt.receipt_id}"
    )
    if out is not None:
        try:
            receipt.save(out)
        except OSError as exc:
            # The data is gone; the receipt must not be: fall back to stdout.
            sys.stdout.buffer.write(receipt.to_json())
            _die(f"cannot write {out} ({exc}); the receipt was printed on stdout", EXIT_IO)
    if out is None and archive is None:
        typer.echo(summary, err=True)
        try:
            sys.stdout.buffer.write(receipt.to_json())
            sys.stdout.flush()
        except OSError as exc:
            _die(
                f"cannot write the receipt to stdout ({exc.strerror or exc}); it is kept in "
                "the database's erasure journal: `receipt recover DB --key KEY --archive DIR`",
                EXIT_IO,
            )
        return
    typer.echo(summary)
    for path in (out, archive / f"{receipt.receipt_id}.json" if archive else None):
        if path is not None:
            typer.echo(f"written to {path}")


@app.command()
def recover(
    db: Annotated[Path, typer.Argument(help="SQLite database file")],
    key: Annotated[Path, typer.Option("--key", help="Ed25519 private key (PEM)")],
    archive: Annotated[Path, typer.Option("--archive", help="directory of archived receipts")],
    password_env: Annotated[
        str | None, typer.Option(help="env var holding the private key's password")
    ] = None,
    min_age: Annotated[
        float,
        typer.Option(
            help="only entries older than this many seconds (younger ones may "
            "still be signing in a running process)"
        ),
    ] = 300.0,
) -> None:
    """Issue receipts for erasures that committed but never got one (crash, full disk)."""
    from .errors import ErasureError, ErasureIncompleteError

    signer = _load_signer(key, password_env)
    failure: ErasureError | None = None
    with _open_saver(db, signer, archive) as saver:
        try:
            receipts = saver.recover_receipts(min_age_seconds=min_age)
        except ErasureIncompleteError as exc:
            receipts, failure = list(exc.recovered), exc
        except ErasureError as exc:
            receipts, failure = [], exc
        stored = saver.journal_receipts()
    # Receipts the journal holds but the archive lacks (e.g. one printed to a stdout
    # that failed): write them out, so the archive is complete after every run.
    exported = 0
    try:
        archive.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _die(f"cannot create {archive}: {exc.strerror or exc}", EXIT_IO)
    for r in stored:
        path = archive / f"{r.receipt_id}.json"
        if not path.exists():
            try:
                r.save(path)
            except OSError as exc:
                _die(f"cannot write {path}: {exc.strerror or exc}", EXIT_IO)
            exported += 1
    for r in receipts:
        typer.echo(f"{r.receipt_id}  thread {r.thread_id!r}  written to {archive}")
    typer.echo(
        f"{len(receipts)} receipt(s) recovered, {exported} exported from the journal",
        err=True,
    )
    if failure is not None:
        _die(f"[{failure.reason}] {failure.message}", EXIT_INVALID)
