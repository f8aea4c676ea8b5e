"""``receipt defer`` and ``receipt deferrals``: signed decisions to retain
(RECEIPT_SPEC.md 9.14)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import ConfigurationError, NothingToEraseError
from ._app import (
    DB_HELP,
    AllowInsecureKey,
    JsonFlag,
    PasswordEnv,
    Verbose,
    _check_archive,
    _load_signer,
    _open_saver,
    _probe_database,
    app,
)
from ._base import _die, _emit_json, _run
from .verify_fast import EXIT_INVALID, EXIT_USAGE

__all__ = ["defer", "deferrals", "release_deferral"]


def _scope(thread: str | None, history: str | None, subject: str | None,
           subject_threads: list[str] | None, metadata_key: str | None) -> Any:  # fmt: skip
    from .._ops.defer import DeferralScope

    given = [name for name, v in (("--thread", thread), ("--history", history),
                                  ("--subject", subject)) if v is not None]  # fmt: skip
    if len(given) != 1:
        _die("give exactly one of --thread, --history and --subject", EXIT_USAGE)
    if subject is None and (subject_threads or metadata_key is not None):
        _die("--subject-thread and --metadata-key go with --subject", EXIT_USAGE)
    if thread is not None:
        return DeferralScope.thread(thread)
    if history is not None:
        return DeferralScope.history(history)
    assert subject is not None
    if not subject_threads and metadata_key is None:
        _die("--subject needs --subject-thread T (repeatable) and/or --metadata-key K", EXIT_USAGE)
    return DeferralScope.subject(subject, threads=subject_threads or (), metadata_key=metadata_key)


@app.command()
def defer(
    db: Annotated[str, typer.Argument(help=DB_HELP)],
    basis: Annotated[
        str, typer.Option("--basis", help="the legal basis for keeping the data (free text)")
    ],
    until: Annotated[
        str,
        typer.Option(
            "--until",
            help="when the retention ends: YYYY-MM-DD (midnight UTC) "
            "or an RFC 3339 time; must be in the future",
        ),
    ],
    key: Annotated[Path, typer.Option("--key", help="Ed25519 private key (PEM, mode 0600)")],
    archive: Annotated[
        Path, typer.Option("--archive", help="directory the deferral receipt is written to")
    ],
    thread: Annotated[
        str | None, typer.Option("--thread", help="retain every row of this thread")
    ] = None,
    history: Annotated[
        str | None,
        typer.Option(
            "--history", help="retain this thread's history (what erase_history would remove)"
        ),
    ] = None,
    subject: Annotated[
        str | None, typer.Option("--subject", help="retain this data subject's threads")
    ] = None,
    subject_thread: Annotated[
        list[str] | None,
        typer.Option("--subject-thread", help="a thread of --subject (repeatable)"),
    ] = None,
    metadata_key: Annotated[
        str | None,
        typer.Option(
            "--metadata-key",
            help="--subject: also its threads whose checkpoint metadata has KEY = the subject",
        ),
    ] = None,
    code: Annotated[
        str | None,
        typer.Option("--code", help="short code of the basis, e.g. gdpr-17-3-b"),
    ] = None,
    password_env: PasswordEnv = None,
    allow_insecure_key: AllowInsecureKey = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="print one JSON document (the receipt inside)")
    ] = False,
    verbose: Verbose = False,
) -> None:
    """Retain a thread, a thread's history or a data subject until a date: sign a
    deferral receipt (status retained) into --archive and record it in the database.

    Until then, erasures of its threads are refused and retention sweeps skip them;
    once the date has passed, `receipt retention --idle ...` erases the scope with a
    receipt that names the deferral. Nothing is deleted now. Exit 1 if the scope holds
    no rows, 2 for a date not in the future, an empty --basis or a malformed --code.
    """
    _run.json = as_json
    scope = _scope(thread, history, subject, subject_thread, metadata_key)
    signer = _load_signer(key, password_env, allow_insecure_key)
    _probe_database(db)
    _check_archive(archive)
    with _open_saver(db, signer, archive) as saver:
        try:
            receipt = saver.defer(scope, basis=basis, until=until, code=code)
        except NothingToEraseError as exc:
            _die(exc.message, EXIT_INVALID, reason="nothing_to_defer")
    p = receipt.predicate
    d, pre = p["deferral"], p["pre_state"]
    path = str(archive / f"{receipt.receipt_id}.json")
    if as_json:
        _emit_json({
            "ok": True, "exit_code": 0, "receipt_id": receipt.receipt_id, "kind": d["of_kind"],
            "scope": scope.target, "status": p["status"], "until": d["until"],
            "basis": d["basis"], "code": d["code"], "pre_digest": receipt.pre_digest,
            "rows": pre["leaves"], "written_to": [path],
            "receipt": json.loads(receipt.to_json()),
        })  # fmt: skip
        return
    typer.echo(
        f"deferred {d['of_kind']} {scope.target!r} until {d['until']}: {pre['leaves']} rows "
        f"retained, digest {receipt.pre_digest}, receipt {receipt.receipt_id}"
    )
    typer.echo(f"written to {path}")


@app.command()
def deferrals(
    db: Annotated[str, typer.Argument(help=DB_HELP)],
    state: Annotated[
        str | None,
        typer.Option(
            "--state", help="only deferrals in this state: open, executed, released, lapsed"
        ),
    ] = None,
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """List the deferrals recorded in the database (read-only): open ones with their end
    date, executed ones with the erasure receipt that carried them out."""
    from .._ops.defer import DEFERRAL_STATES
    from ..signing import Signer

    _run.json = as_json
    if state is not None and state not in DEFERRAL_STATES:
        _die(f"--state must be one of {', '.join(DEFERRAL_STATES)}", EXIT_USAGE)
    _probe_database(db)
    with _open_saver(db, Signer.generate(), None, read_only=True) as saver:
        found = saver.deferrals(state)
    if as_json:
        _emit_json({"ok": True, "exit_code": 0, "deferrals": [d.to_json() for d in found]})
        return
    if not found:
        typer.echo("no deferrals" + (f" in state {state}" if state else ""))
        return
    for d in found:
        code = f" ({d.code})" if d.code else ""
        closed = ""
        if d.state == "executed":
            closed = f"; erased {d.closed_at} by receipt {d.closed_by}" + (
                " (overridden before its end)" if d.note == "overridden" else ""
            )
        elif d.state in ("released", "lapsed"):
            closed = f"; {d.state} {d.closed_at}: {d.note!r}"
        typer.echo(f"{d.state:<9} {d.receipt_id} {d.kind} {d.scope_id!r} until {d.until}, "
                   f"basis {d.basis!r}{code}{closed}")  # fmt: skip


@app.command("release-deferral")
def release_deferral(
    db: Annotated[str, typer.Argument(help=DB_HELP)],
    receipt_id: Annotated[str, typer.Argument(help="the deferral receipt's id")],
    reason: Annotated[str, typer.Option("--reason", help="why it ends early (recorded)")],
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """End an open deferral early without erasing anything (state released, with the
    reason and the time; no receipt is signed). Its scope can then be erased, and
    sweeps no longer skip it. Exit 1 if no open deferral has that id."""
    from ..signing import Signer

    _run.json = as_json
    if not reason.strip():
        _die("--reason must not be empty", EXIT_USAGE)
    _probe_database(db)
    with _open_saver(db, Signer.generate(), None) as saver:
        try:
            d = saver.release_deferral(receipt_id, reason=reason)
        except ConfigurationError as exc:
            _die(exc.message, EXIT_INVALID, reason="not_open")
    if as_json:
        _emit_json({"ok": True, "exit_code": 0, "deferral": d.to_json()})
        return
    typer.echo(f"released {d.receipt_id} ({d.kind} {d.scope_id!r}) at {d.closed_at}: "
               f"{reason!r}; nothing was erased")  # fmt: skip
