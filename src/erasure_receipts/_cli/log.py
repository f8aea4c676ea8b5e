"""``receipt log append|verify|prove|checkpoint|bundle|timestamp``, ``receipt log
witness add|push``: receipt logs, the witnesses that cosign them and the TSA that
time-stamps their checkpoints."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import (
    Error,
    InputError,
)
from ..receipt import Receipt
from ..verify import _display
from ..verify import read_input as _read_input
from ._app import (
    AllowInsecureKey,
    JobsOption,
    JsonFlag,
    KeyOption,
    PasswordEnv,
    TrustOption,
    Verbose,
    _check_out,
    _Group,
    _load_signer,
    _log_errors,
    _trusted,
    _write_out,
    app,
)
from ._base import _die, _emit_json, _run
from .verify_fast import EXIT_INVALID, EXIT_IO, EXIT_USAGE


def _receipt_bytes(receipt: Path) -> bytes:
    """A receipt file's bytes; one error line and exit 3 (unreadable) or 1 (not a receipt
    file) otherwise."""
    try:
        return _read_input(str(receipt))
    except InputError as exc:
        _die(exc.message, EXIT_IO, reason=exc.reason)
    except Error as exc:
        _die(f"{_display(str(receipt))}: [{exc.reason}] {exc.message}", EXIT_INVALID,
             reason=exc.reason)  # fmt: skip


# -- receipt logs ---------------------------------------------------------------------------

log_app = typer.Typer(
    cls=_Group,
    help="Receipt logs: append-only, C2SP-checkpoint-signed, with RFC 9162 proofs "
    "(RECEIPT_SPEC.md, Receipt log).",
    no_args_is_help=True,
)
app.add_typer(log_app, name="log")


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
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """Append receipt files (their exact bytes) to a log under one new signed checkpoint.

    A receipt already in the log is not added again (its index is reported); a different
    receipt with the same receipt id is refused (exit 1).
    """
    from ..log import ReceiptLog

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
                    "checkpoint": note.decode("utf-8"),
                    "witnesses": rl.witness_status() if rl.witnesses else {}})  # fmt: skip
        return
    for e in entries:
        typer.echo(
            f"{e['file']}  entry {e['index']}" + ("" if e["new"] else " (already in the log)")
        )
    for n, st in rl.witness_status().items():
        if st.get("error") and any(w.name == n for w in rl.witnesses):
            typer.echo(f"witness {n}: not cosigned, pending ({st['error']}); the entries are "
                       "in the log: `receipt log witness push` retries", err=True)  # fmt: skip
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
    policy: Annotated[
        Path | None,
        typer.Option("--policy", help="witness policy the latest checkpoint must meet"),
    ] = None,
    as_json: JsonFlag = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print failures only")] = False,
    verbose: Verbose = False,
) -> None:
    """Audit a log: recompute the tree from every stored receipt, check every checkpoint
    and the signed head (by a trusted key), verify every receipt, and with --checkpoint
    prove the log extends that older checkpoint. With --policy, the latest checkpoint
    must be cosigned (the `cosigned` file) by the policy's quorum of witnesses. Exit 1
    names the first bad entry."""
    from .._batch import default_jobs
    from ..log import MAX_NOTE, parallel_receipt_check, verify_log

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
    pol = _policy(policy) if policy is not None else None
    check = parallel_receipt_check(log, trusted, jobs if jobs is not None else default_jobs())
    with _log_errors():
        report = verify_log(log, trusted, old_checkpoint=old, check_receipts=check)
        if pol is not None and report.ok:
            _check_witnessed(log, pol, report)
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
        if pol is not None:
            typer.echo(f"OK    the latest checkpoint meets the witness policy "
                       f"({pol.describe(pol.quorum)})")  # fmt: skip
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
    from ..log import Checkpoint, ReceiptLog

    _run.json = as_json
    data = _receipt_bytes(receipt)
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
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """Print the log's latest signed checkpoint (C2SP tlog-checkpoint note): keep it, and
    later pass it to `receipt log verify --checkpoint` to prove the log only grew."""
    from ..log import Checkpoint, ReceiptLog, verifier_key

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


def _policy(path: Path) -> Any:
    """A parsed --policy file (unreadable: exit 3; malformed: exit 2)."""
    from ..policy import Policy

    try:
        return Policy.parse(_read_input(str(path)))
    except InputError as exc:
        _die(exc.message, EXIT_IO, reason=exc.reason)
    except Error as exc:
        _die(f"--policy {_display(str(path))}: {exc.message}", EXIT_USAGE, reason=exc.reason)


def _check_witnessed(log: Path, policy: Any, report: Any) -> None:
    """``log verify --policy``: the cosigned checkpoint meets the policy, is this log's
    tree at its size, and is the latest checkpoint (else ``not_witnessed``)."""
    from ..log import Checkpoint, ReceiptLog

    rl = ReceiptLog(log)
    try:
        cp = Checkpoint.parse(rl.cosigned())
        policy.check(cp)
        if cp.size > rl.size or rl.consistency_proof(cp.size).old_root != cp.root:
            report.add(None, "split_view", f"the cosigned checkpoint (size {cp.size}) is not "
                       "this log's tree at that size")  # fmt: skip
        elif cp.size < report.tree_size:
            report.add(cp.size, "not_witnessed",
                       f"the latest checkpoint (size {report.tree_size}) is not cosigned; the "
                       f"witnesses last cosigned size {cp.size} (see `receipt log witness "
                       "push`)")  # fmt: skip
    except Error as exc:
        report.add(None, exc.reason, f"cosigned checkpoint: {exc.message}")


@log_app.command("bundle")
def log_bundle(
    log: Annotated[Path, typer.Argument(help="log directory")],
    receipt: Annotated[Path, typer.Argument(help="receipt file (its exact bytes)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="the tlog-proof file to write")],
    verbose: Verbose = False,
) -> None:
    """Write an offline proof (C2SP tlog-proof) of a receipt: its index, its inclusion
    proof and the log's latest cosigned checkpoint. `receipt verify RECEIPT --proof OUT
    --key PUB.pem --policy POLICY` checks it without the log."""
    from ..bundle import build_bundle
    from ..log import ReceiptLog

    _check_out(out)
    data = _receipt_bytes(receipt)
    with _log_errors():
        blob = build_bundle(ReceiptLog(log), data)
    _write_out(out, blob)
    typer.echo(f"wrote {_display(str(out))}", err=True)


@log_app.command("timestamp")
def log_timestamp(
    log: Annotated[Path, typer.Argument(help="log directory")],
    tsa: Annotated[str, typer.Option("--tsa", help="the TSA's URL (RFC 3161 over HTTP)")],
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, max=600, help="seconds to wait for the TSA")
    ] = 10.0,
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """Time-stamp the log's latest checkpoint with an RFC 3161 TSA (imprint: SHA-256 of
    the checkpoint's text; with a nonce; the TSA's certificate requested) and keep the
    token as timestamps/<size>.tsr. `receipt verify --log LOG --tsa-cert TSA.pem` then
    reports, per receipt, the time it was issued no later than; `receipt log bundle`
    carries the token. Exit 3 if the TSA cannot be reached, 1 if it refuses or answers
    with a token that is not for this request."""
    from ..errors import ConfigurationError, TimestampError
    from ..log import ReceiptLog
    from ..timestamp import TsaClient, token_time

    _run.json = as_json
    try:
        client = TsaClient(tsa, timeout)
    except ConfigurationError as exc:
        _die(exc.message, EXIT_USAGE, reason=exc.reason)
    with _log_errors():
        rl = ReceiptLog(log)
        try:
            size, token = rl.timestamp(client)
        except TimestampError as exc:
            code = EXIT_IO if exc.reason == "tsa_unreachable" else EXIT_INVALID
            _die(f"[{exc.reason}] {exc.message}", code, reason=exc.reason)
    when = token_time(token)
    path = f"timestamps/{size}.tsr"
    if as_json:
        _emit_json({"ok": True, "exit_code": 0, "log": _display(str(log)), "tree_size": size,
                    "gen_time": when, "token": path})  # fmt: skip
        return
    typer.echo(f"time-stamped the checkpoint of size {size} at {when} (the TSA's time, "
               "not checked against a trusted TSA certificate here): "
               f"{_display(str(log))}/{path}")  # fmt: skip


log_witness_app = typer.Typer(
    cls=_Group,
    help="The witnesses a log sends its checkpoints to (C2SP tlog-witness).",
    no_args_is_help=True,
)
log_app.add_typer(log_witness_app, name="witness")


@log_witness_app.command("add")
def log_witness_add(
    log: Annotated[Path, typer.Argument(help="log directory")],
    vkey: Annotated[str, typer.Argument(help="the witness's verifier key (name+id+key)")],
    url: Annotated[str, typer.Argument(help="the witness's URL (submission prefix)")],
    verbose: Verbose = False,
) -> None:
    """Add a witness to the log's log.conf: every append then sends its new checkpoint
    there and keeps the cosignature (in `cosigned`). Run `receipt log witness push` to
    send the current checkpoint now."""
    from ..log import ReceiptLog, WitnessEndpoint

    with _log_errors():
        rl = ReceiptLog(log)
        try:
            w = WitnessEndpoint.from_vkey(vkey, url)
        except Error as exc:
            _die(exc.message, EXIT_USAGE, reason=exc.reason)
        rl.add_witness(w)
    typer.echo(f"witness {w.name} ({w.url}) added to {_display(str(log))}", err=True)


@log_witness_app.command("push")
def log_witness_push(
    log: Annotated[Path, typer.Argument(help="log directory")],
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """Send the latest checkpoint to every witness of the log and keep their
    cosignatures; prints each witness's status. Exit 1 if any witness failed (the
    log itself is unchanged)."""
    from ..log import Checkpoint, ReceiptLog

    _run.json = as_json
    with _log_errors():
        rl = ReceiptLog(log)
        if not rl.witnesses:
            _die(f"{_display(str(log))} has no witnesses (receipt log witness add)", EXIT_USAGE,
                 reason="no_witnesses")  # fmt: skip
        status = rl.push_witnesses()
        size = Checkpoint.parse(rl.checkpoint()).size
    failed = [n for n in status if status[n].get("error")]
    code = EXIT_INVALID if failed else 0
    if as_json:
        _emit_json({"ok": not failed, "exit_code": code, "tree_size": size, "witnesses": status})
        raise typer.Exit(code)
    for n, st in status.items():
        if st.get("error"):
            typer.echo(f"FAIL  {n}: {st['error']} (cosigned up to size "
                       f"{st.get('cosigned_size', 0)}; pending)")  # fmt: skip
        else:
            typer.echo(f"OK    {n}: cosigned size {st['cosigned_size']}")
    raise typer.Exit(code)
