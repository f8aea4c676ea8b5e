"""``receipt witness serve|cosign|watch``: a transparency-log witness for receipt logs
(C2SP tlog-witness) and the split-view watch."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import Error, InputError
from ..verify import _display
from ..verify import read_input as _read_input
from ._app import (
    AllowInsecureKey,
    JsonFlag,
    PasswordEnv,
    Verbose,
    _Group,
    _load_signer,
    _log_errors,
    app,
)
from ._base import _die, _emit_json, _run
from .verify_fast import EXIT_INVALID, EXIT_IO, EXIT_USAGE

witness_app = typer.Typer(
    cls=_Group,
    help="Witnesses: cosign receipt-log checkpoints that extend what they saw (C2SP "
    "tlog-witness), and watch for split views.",
    no_args_is_help=True,
)
app.add_typer(witness_app, name="witness")

LogKeyOption = Annotated[
    list[Path],
    typer.Option("--log-key", help="public key (PEM) of a followed log; repeat with --origin"),
]
OriginOption = Annotated[
    list[str], typer.Option("--origin", help="origin of the log of the --log-key at the same place")
]
WitnessKey = Annotated[Path, typer.Option("--key", help="the witness's Ed25519 private key (PEM)")]
NameOption = Annotated[
    str, typer.Option("--name", help="the witness's key name, e.g. witness.example/w1")
]
StateOption = Annotated[
    Path, typer.Option("--state", help="state directory: the latest cosigned checkpoint per log")
]

_STATUS_REASON = {400: "bad_request", 403: "unknown_log", 404: "unknown_origin",
                  409: "witness_conflict", 422: "bad_consistency_proof",
                  500: "witness_corrupt"}  # fmt: skip


def _witness(
    log_key: list[Path], origin: list[str], key: Path, name: str, state: Path,
    password_env: str | None, allow_insecure_key: bool,
) -> Any:  # fmt: skip
    from ..signing import PublicKey
    from ..witness import Witness

    if len(log_key) != len(origin):
        _die("give one --origin for each --log-key (in the same order)", EXIT_USAGE)
    signer = _load_signer(key, password_env, allow_insecure_key)
    logs = {}
    for o, k in zip(origin, log_key, strict=True):
        try:
            logs[o] = PublicKey.from_pem(_read_input(str(k)))
        except InputError as exc:
            _die(exc.message, EXIT_IO, reason=exc.reason)
        except Error as exc:
            _die(f"{_display(str(k))}: {exc.message}", EXIT_USAGE, reason=exc.reason)
    try:
        return Witness(state, signer, name, logs)
    except OSError as exc:
        _die(f"{_display(str(state))}: {exc.strerror or exc}", EXIT_IO, reason="unreadable")
    except Error as exc:
        _die(exc.message, EXIT_USAGE, reason=exc.reason)


def _listen(value: str, allow_remote: bool) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        _die(f"--listen {value!r}: expected HOST:PORT", EXIT_USAGE)
    host = host.strip("[]")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback and not allow_remote:
        _die(f"--listen {value!r} is not a loopback address; a witness answers anyone who "
             "reaches it: pass --allow-remote to listen there", EXIT_USAGE)  # fmt: skip
    return host, int(port)


@witness_app.command("serve")
def witness_serve(
    log_key: LogKeyOption,
    origin: OriginOption,
    key: WitnessKey,
    name: NameOption,
    state: StateOption,
    listen: Annotated[
        str, typer.Option("--listen", help="HOST:PORT (port 0: any free port)")
    ] = "127.0.0.1:7380",
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="allow a non-loopback --listen address")
    ] = False,
    password_env: PasswordEnv = None,
    allow_insecure_key: AllowInsecureKey = False,
    verbose: Verbose = False,
) -> None:
    """Serve a witness over HTTP: POST <URL>/add-checkpoint (C2SP tlog-witness).

    Prints its URL, then its verifier key (for policies and `receipt log witness add`),
    on stdout; one line per request on stderr. Runs until interrupted.
    """
    from ..witness import serve

    host, port = _listen(listen, allow_remote)
    w = _witness(log_key, origin, key, name, state, password_env, allow_insecure_key)

    def ready(url: str) -> None:
        sys.stdout.write(f"{url}\n{w.vkey}\n")
        sys.stdout.flush()

    def log(line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    try:
        serve(w, host, port, ready=ready, log=log)
    except OSError as exc:
        _die(f"--listen {listen}: {exc.strerror or exc}", EXIT_IO, reason="unreadable")


@witness_app.command("cosign")
def witness_cosign(
    checkpoint: Annotated[Path, typer.Argument(help="the signed checkpoint note to cosign")],
    log_key: LogKeyOption,
    origin: OriginOption,
    key: WitnessKey,
    name: NameOption,
    state: StateOption,
    old: Annotated[int, typer.Option("--old", help="tree size the witness last cosigned", min=0)],
    proof: Annotated[
        Path | None,
        typer.Option("--proof", help="consistency proof from --old: one base64 hash a line"),
    ] = None,
    password_env: PasswordEnv = None,
    allow_insecure_key: AllowInsecureKey = False,
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """Cosign a checkpoint offline, exactly as the HTTP witness would (same state, same
    checks); prints the cosignature line. Refusals exit 1 with the HTTP status's reason
    (400 bad_request, 403 unknown_log, 404 unknown_origin, 409 witness_conflict with the
    recorded size, 422 bad_consistency_proof)."""
    _run.json = as_json
    try:  # the inputs first: nothing is created for a command that cannot run
        note = _read_input(str(checkpoint))
        lines = _read_input(str(proof)) if proof is not None else b""
    except InputError as exc:
        _die(exc.message, EXIT_IO, reason=exc.reason)
    except Error as exc:
        _die(f"[{exc.reason}] {exc.message}", EXIT_INVALID, reason=exc.reason)
    w = _witness(log_key, origin, key, name, state, password_env, allow_insecure_key)
    body = b"old %d\n" % old + b"".join(x + b"\n" for x in lines.split(b"\n") if x.strip())
    with _log_errors():
        r = w.add_checkpoint(body + b"\n" + note)
    if r.status != 200:
        reason = _STATUS_REASON.get(r.status, "witness_refused")
        msg = r.message
        if r.status == 409:
            msg = f"the witness holds size {msg} (old {old}, or the same size with another root)"
        _die(f"[{reason}] HTTP {r.status}: {msg}", EXIT_IO if r.status == 500 else EXIT_INVALID,
             reason=reason, status=r.status)  # fmt: skip
    if as_json:
        _emit_json({"ok": True, "exit_code": 0, "status": 200, "cosignature": r.body.decode(),
                    "vkey": w.vkey})  # fmt: skip
        return
    sys.stdout.buffer.write(r.body)
    sys.stdout.flush()


@witness_app.command("watch")
def witness_watch(
    sources: Annotated[
        list[Path],
        typer.Argument(
            help="checkpoint notes, tlog-proof files, log directories, witness state directories"
        ),
    ],
    policy: Annotated[Path, typer.Option("--policy", help="witness policy: the trusted logs")],
    as_json: JsonFlag = False,
    verbose: Verbose = False,
) -> None:
    """Report a split view (exit 1): two checkpoints of one log of the same size with
    different roots, or a log directory that does not extend a checkpoint. Log
    directories give their latest and cosigned checkpoints and their tree as the
    consistency proof source; witness state directories every recorded checkpoint."""
    from ..log import Checkpoint, ReceiptLog, is_log
    from ..policy import Policy
    from ..witness import watch

    _run.json = as_json
    try:
        pol = Policy.parse(_read_input(str(policy)))
    except InputError as exc:
        _die(exc.message, EXIT_IO, reason=exc.reason)
    except Error as exc:
        _die(f"--policy {_display(str(policy))}: {exc.message}", EXIT_USAGE, reason=exc.reason)
    notes: list[tuple[str, bytes]] = []
    proofs = []
    with _log_errors():
        for src in sources:
            shown = _display(str(src))
            if src.is_dir() and is_log(src):
                rl = ReceiptLog(src)
                notes += [(shown, rl.checkpoint()), (f"{shown} (cosigned)", rl.cosigned())]

                def root_at(size: int, rl: ReceiptLog = rl) -> tuple[int, bytes] | None:
                    n = rl.size
                    return None if size > n else (n, rl.consistency_proof(size).old_root)

                proofs.append((shown, root_at))
            elif src.is_dir():
                found = sorted(src.glob("*.checkpoint"))
                if not found:
                    _die(f"{shown}: neither a receipt log nor a witness state directory",
                         EXIT_IO, reason="unreadable")  # fmt: skip
                notes += [(_display(str(f)), _read_input(str(f))) for f in found]
            else:
                data = _read_input(str(src))
                if data.startswith(b"c2sp.org/tlog-proof@v1\n"):
                    data = data.partition(b"\n\n")[2]
                notes.append((shown, data))

    def trusted(cp: Checkpoint) -> bool:
        return any(cp.signed_by(k) is True for k in pol.logs.get(cp.origin, []))

    with _log_errors():
        findings = watch(notes, trusted, proofs=proofs)
    code = EXIT_INVALID if findings else 0
    if as_json:
        _emit_json({"ok": not findings, "exit_code": code, "checkpoints": len(notes),
                    "findings": [{"reason": f.reason, "message": f.message}
                                 for f in findings]})  # fmt: skip
        raise typer.Exit(code)
    for f in findings:
        typer.echo(f"FAIL  [{f.reason}] {f.message}")
    if not findings:
        typer.echo(f"OK    {len(notes)} checkpoints agree (no split view)")
    raise typer.Exit(code)
