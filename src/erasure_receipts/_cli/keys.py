"""``receipt keygen``, ``keygen-commitment`` and ``trust add|list``: signing keys,
commitment keys and trust files."""

from __future__ import annotations

import os
import stat
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ..errors import (
    Error,
    InputError,
)
from ..signing import Signer
from ..trust import TrustFile, window_text
from ..verify import _display
from ..verify import read_input as _read_input
from ._app import (
    JsonFlag,
    Verbose,
    _check_out,
    _check_time,
    _Group,
    _instant,
    _password,
    _read_trust,
    _write_out,
    app,
)
from ._base import _die, _emit_json, _run
from .verify_fast import EXIT_INVALID, EXIT_IO, EXIT_USAGE

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


# -- trust files ----------------------------------------------------------------------


class TrustRole(StrEnum):
    signer = "signer"
    approver = "approver"


trust_app = typer.Typer(
    cls=_Group,
    help="Create and inspect trust files for `receipt verify --trust` (RECEIPT_SPEC.md 7).",
    no_args_is_help=True,
)
app.add_typer(trust_app, name="trust")


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
    from ..signing import PublicKey

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
    tf = TrustFile()
    mode = 0o644
    if os.path.lexists(file):
        tf, _ = _read_trust(file)
        with_mode = os.stat(file).st_mode
        mode = stat.S_IMODE(with_mode)
        clash = tf.conflict(key, nb, na, role_name)
        if clash is not None and clash[0] == "role_conflict":
            tk = clash[1]
            _die(
                f"key {key.key_id[:16]} is already trusted in {_display(str(file))} as "
                f"{tk.name!r} with role {tk.role}; one key cannot be both signer and "
                "approver (four eyes need two keys)",
                EXIT_INVALID,
                reason="role_conflict",
            )
        if clash is not None:
            tk = clash[1]
            _die(
                f"key {key.key_id[:16]} is already trusted in {_display(str(file))} as "
                f"{tk.name!r} for {window_text(tk.not_before, tk.not_after)}, which overlaps "
                f"{window_text(nb, na)}; refusing a duplicate",
                EXIT_INVALID,
                reason="duplicate_key",
            )
    tf = tf.add(key, name, nb, na, role_name)
    try:
        n = len(tf.store())  # never write a file verify would reject
    except Error as exc:
        _die(f"the resulting trust file would be invalid: {exc.message}", EXIT_USAGE,
             reason="bad_trust_file")  # fmt: skip
    if not file.parent.is_dir():
        _die(f"cannot write {_display(str(file))}: {file.parent} is not a directory", EXIT_IO,
             reason="unwritable")  # fmt: skip
    try:
        tf.write(file, mode=mode)
    except OSError as exc:
        _die(f"cannot write {_display(str(file))}: {exc.strerror or exc}", EXIT_IO,
             reason="unwritable")  # fmt: skip
    typer.echo(
        f"added key {key.key_id} ({name!r}, {window_text(nb, na)}, {role_name}) to "
        f"{_display(str(file))}; {n} key(s) trusted"
    )


@trust_app.command("list")
def trust_list(
    file: Annotated[Path, typer.Argument(help="trust file")],
    as_json: JsonFlag = False,
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
        window = window_text(r["not_before"], r["not_after"])
        typer.echo(f"{r['key_id']}  {r['name'] or '-'}  {window}  {r['role']}")


@app.command("keygen-commitment")
def keygen_commitment(
    out: Annotated[Path, typer.Option("--out", help="key file to create (mode 0600)")],
    verbose: Verbose = False,
) -> None:
    """Generate a commitment key for privacy-mode receipts (--privacy commitments).

    Keep it secret, and keep it: receipts carry only HMAC commitments made with it, and
    without it nobody can show which id a receipt erased (receipt open).
    """
    from ..privacy import CommitmentKey

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
