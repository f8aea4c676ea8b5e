"""``receipt redact``: rewrite values out of one thread's rows, every checkpoint kept
(RECEIPT_SPEC.md 9.12)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import NeedlesFoundError, NothingToEraseError
from ._app import (
    DB_HELP,
    AllowInsecureKey,
    PasswordEnv,
    Verbose,
    _check_archive,
    _check_out,
    _check_unicode,
    _load_signer,
    _namespaces,
    _open_saver,
    _probe_database,
    _write_out,
    app,
)
from ._base import _die, _emit_json, _run
from .erase import StoreNs, _needles_file
from .verify_fast import EXIT_INVALID


@app.command()
def redact(
    db: Annotated[str, typer.Argument(help=DB_HELP)],
    key: Annotated[Path, typer.Option("--key", help="Ed25519 private key (PEM, mode 0600)")],
    thread: Annotated[str, typer.Option("--thread", help="the thread to redact")],
    needles_file: Annotated[
        str,
        typer.Option(
            "--needles-file",
            help="the values to redact, one per line, UTF-8 ('-': standard input; they stay "
            "out of ps and shell history)",
        ),
    ],
    replacement: Annotated[
        str, typer.Option("--replacement", help="what each needle becomes")
    ] = "[redacted]",
    store_ns: StoreNs = None,
    archive: Annotated[
        Path | None, typer.Option("--archive", help="directory to archive the receipt in")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="also write the receipt here")] = None,
    residue_scan: Annotated[
        bool | None,
        typer.Option(
            "--residue-scan/--no-residue-scan",
            help="scan the database files for copies of the rows as they were (VACUUM if "
            "any) and record the result in the receipt",
        ),
    ] = None,
    password_env: PasswordEnv = None,
    allow_insecure_key: AllowInsecureKey = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="print one JSON document (the receipt inside)")
    ] = False,
    verbose: Verbose = False,
) -> None:
    """Redact values from a thread and keep its history: every row holding one of the
    values in --needles-file (one per line) is rewritten through the saver's serde, in one
    transaction; every checkpoint stays. Signs a receipt of kind redaction.

    Refuses (exit 1, nothing changed) a thread without rows, a thread holding none of the
    values, and a value the serde cannot rewrite (its locations are named); exit 2 for no
    values or one shorter than the minimum.
    """
    _run.json = as_json
    _check_unicode(thread=thread, replacement=replacement)
    signer = _load_signer(key, password_env, allow_insecure_key)
    needles = _needles_file(needles_file)
    namespaces = _namespaces(store_ns or [])
    if out is not None:
        _check_out(out)
    _probe_database(db)
    if archive is not None:
        _check_archive(archive)
    kwargs: dict[str, Any] = {"replacement": replacement, "store_namespaces": namespaces}
    if residue_scan is not None:
        kwargs["residue_scan"] = residue_scan
    with _open_saver(db, signer, archive) as saver:
        try:
            receipt = saver.redact(thread, needles, **kwargs)
        except NothingToEraseError as exc:
            _die(exc.message, EXIT_INVALID, reason=exc.reason)
        except NeedlesFoundError as exc:
            where = "; ".join(
                " ".join(f"{k}={v!r}" for k, v in loc.items()) for loc in exc.locations[:20]
            )
            _die(f"[{exc.reason}] redaction refused, nothing was changed: {where}",
                 EXIT_INVALID, reason=exc.reason, locations=exc.locations)  # fmt: skip
    p = receipt.predicate
    summary = (
        f"redacted thread {thread!r}: {p['pre_state']['leaves']} row(s) rewritten, "
        f"{p['redaction']['checkpoints_after']} checkpoint(s) kept, receipt {receipt.receipt_id}"
    )
    written = [str(archive / f"{receipt.receipt_id}.json")] if archive is not None else []
    if out is not None:
        _write_out(out, receipt.to_json())
        written.insert(0, str(out))
    if as_json:
        _emit_json({
            "ok": True, "exit_code": 0, "receipt_id": receipt.receipt_id, "thread_id": thread,
            "status": p["status"], "rows": p["pre_state"]["leaves"],
            "checkpoints": p["redaction"]["checkpoints_after"],
            "pre_digest": receipt.pre_digest, "post_digest": p["post_state"]["digest"]["sha256"],
            "written_to": written, "receipt": json.loads(receipt.to_json()),
        })  # fmt: skip
        return
    typer.echo(summary)
    for path in written:
        typer.echo(f"written to {path}")
    if not written:
        typer.echo(receipt.to_json().decode("utf-8"), nl=False)
