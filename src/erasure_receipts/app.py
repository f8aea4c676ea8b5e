"""The ``receipt`` operator commands (typer): keygen, show, export, digest, erase.

``receipt verify`` is dispatched before this module is imported (see ``cli.py``); the
``verify`` command below only exists so that ``receipt --help`` lists it.
"""

from __future__ import annotations

import json
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, NoReturn

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
        lines.append(f"  {t:<14} {c['rows']:>8} rows {c['bytes']:>12} bytes -> "
                     f"{post['tables'][t]['rows']} rows")  # fmt: skip
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
