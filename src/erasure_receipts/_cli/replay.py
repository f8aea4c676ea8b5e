"""``receipt replay``: after a restore, erase again what came back (RECEIPT_SPEC.md 9.11)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from .._batch import default_jobs
from ..errors import Error, InputError
from ..verify import _display
from ._app import (
    DB_HELP,
    AllowInsecureKey,
    JobsOption,
    JsonFlag,
    PasswordEnv,
    Verbose,
    _check_archive,
    _commitment_key_file,
    _load_signer,
    _open_saver,
    _probe_database,
    _trusted,
    app,
)
from ._base import _die, _emit_json, _run
from .verify_fast import EXIT_INVALID, EXIT_IO, EXIT_USAGE

__all__ = ["replay"]


@app.command()
def replay(
    db: Annotated[str, typer.Argument(help=DB_HELP)],
    key: Annotated[
        Path, typer.Option("--key", help="Ed25519 private key that signs the new receipts")
    ],
    archive: Annotated[
        Path | None,
        typer.Option("--archive", help="receipt archive directory (read; new receipts go here)"),
    ] = None,
    log: Annotated[
        Path | None,
        typer.Option("--log", help="receipt log (read; new receipts are appended to it)"),
    ] = None,
    trust: Annotated[
        Path | None, typer.Option("--trust", help="trust file: which old receipts count")
    ] = None,
    verify_key: Annotated[
        list[Path] | None,
        typer.Option("--verify-key", help="trusted public key (PEM) of old receipts; repeatable"),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="list what came back; change nothing")
    ] = False,
    commitment_key: Annotated[
        Path | None,
        typer.Option("--commitment-key", help="opens privacy-mode receipts' commitments"),
    ] = None,
    subject_ids: Annotated[
        Path | None,
        typer.Option("--subject-ids", help="file of subject ids, one per line (privacy mode)"),
    ] = None,
    jobs: JobsOption = None,
    password_env: PasswordEnv = None,
    allow_insecure_key: AllowInsecureKey = False,
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """Re-erase, after a backup restore, what the archived receipts say was erased.

    Only receipts that verify against --trust/--verify-key are used. Exit 0 when every
    scope is erased (again) or still empty, 1 when one failed or a receipt did not
    verify (it was not used), 2 for usage errors, 3 when an input cannot be read.
    """
    _run.json = as_json
    if (archive is None) == (log is None):
        _die("give the receipts with --archive DIR or --log LOG (one of them)", EXIT_USAGE)
    trusted = _trusted(verify_key, trust)
    signer = _load_signer(key, password_env, allow_insecure_key)
    key_kw: dict[str, Any] = {}
    if commitment_key is not None:
        key_kw["privacy_key"] = _commitment_key_file(commitment_key)
    ids: list[str] = []
    if subject_ids is not None:
        try:
            ids = [x for x in subject_ids.read_text("utf-8").splitlines() if x.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            _die(f"cannot read {_display(str(subject_ids))}: {exc}", EXIT_IO)
    _probe_database(db)
    source: Any
    target: Any
    if archive is not None:
        if not archive.is_dir():
            _die(f"{_display(str(archive))}: not a receipt archive directory", EXIT_IO)
        if not dry_run:
            _check_archive(archive)
        source = target = archive
    else:
        from ..log import ReceiptLog

        assert log is not None
        try:
            source = ReceiptLog(log)
            target = ReceiptLog(log, signer=signer) if not dry_run else None
        except InputError as exc:
            _die(exc.message, EXIT_IO, reason=exc.reason)
        except Error as exc:
            _die(f"--log: {exc.message}", EXIT_USAGE, reason=exc.reason)
    with _open_saver(db, signer, target) as saver:
        result = saver.replay_erasures(
            source, dry_run=dry_run, trust=trusted, subject_ids=ids,
            jobs=default_jobs() if jobs is None else jobs, **key_kw,
        )  # fmt: skip
    doc = result.to_json()
    if as_json:
        _emit_json({"ok": result.ok, "exit_code": 0 if result.ok else EXIT_INVALID, **doc})
    else:
        for s in result.scopes:
            line = f"{s.outcome:<12} {s.kind} {s.scope!r}"
            if s.rows:
                line += f" ({s.rows} rows)"
            if s.new_receipt_id:
                line += f"  receipt {s.new_receipt_id} replays {s.receipt_id}"
            if s.reason:
                line += f": {s.reason}"
            typer.echo(line)
        typer.echo(
            f"{result.checked} receipt(s) checked, {len(result.scopes)} scope(s): "
            f"{result.reappeared} reappeared, {result.re_erased} re-erased, "
            f"{result.still_empty} still empty, {doc['postdated']} postdated, "
            f"{result.failed} failed" + (" (dry run: nothing changed)" if dry_run else "")
        )
    for where, reason in result.rejected:
        typer.echo(f"not used: {_display(where)}: {reason}", err=True)
    if not result.ok:
        raise typer.Exit(EXIT_INVALID)
