"""``receipt verify``: the auditor's hot path (cold start and batch throughput both
matter), parsed with the standard library; it never imports typer, LangGraph or a
database driver. ``erasure_receipts._cli.main`` dispatches to ``verify_main`` before
the typer app of every other command is loaded.

Exit codes: 0 all verified, 1 any receipt invalid or untrusted, 2 usage error,
3 an input could not be read.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from .._batch import (
    BATCH,
    PARALLEL_MIN,
    STDIN,
    _expand,
    _read_arg,
    default_jobs,
    fork_map,
)
from ..errors import Error, InputError, KeyFormatError, MalformedReceiptError
from ..signing import PublicKey
from ..verify import TrustStore, VerifiedReceipt, read_input, verify_receipt
from ..verify import _display as _display  # re-exported for the typer commands

__all__ = ["EXIT_INVALID", "EXIT_IO", "EXIT_OK", "EXIT_USAGE", "verify_main"]

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_IO = 0, 1, 2, 3


class _UsageError(Exception):
    pass


VERIFY_HELP = """\
usage: receipt verify FILE|DIR|-... (--key PUB.pem ... | --trust TRUSTFILE) [options]

Verify erasure receipts (receipt files or DSSE envelopes). Directories are searched
recursively for *.json files (the files named by --key/--trust are skipped); "-" reads
one receipt from standard input.

options:
  --key PUB.pem      trusted Ed25519 public key (PEM); repeatable
  --trust FILE       trust file: keys with optional validity windows (rotation);
                     not together with --key (it would bypass the windows)
  --log LOG          also check each receipt is in this receipt log (its checkpoint
                     must be signed by a key the trust file lets sign logs):
                     RFC 9162 inclusion proof
  --policy FILE      with --log: the log's latest cosigned checkpoint must meet this
                     witness policy (C2SP tlog-policy: logs, witnesses, quorum),
                     and the receipt must be in it; with --proof: the policy the
                     proof's checkpoint must meet
  --proof FILE       verify one receipt offline with its tlog-proof (from
                     `receipt log bundle`): the receipt, its inclusion in the
                     proof's checkpoint, and that checkpoint against --policy
  --tsa-cert TSA.pem with --log or --proof: check the RFC 3161 time-stamps of the
                     log's checkpoints (`receipt log timestamp`) against this TSA
                     certificate, and report for each receipt the time it was
                     issued no later than; a receipt whose issued_at is after it
                     fails (issued_after_timestamp)
  --tsa-root ROOT.pem
                     the root the TSA certificate chains to (default: the TSA
                     certificate file's last certificate, if self-signed)
  --require-authorization
                     fail a receipt without an authorization signed by an approver
                     of the trust file (four eyes); needs --trust
  -j, --jobs N       verify in N processes (default: all cores); same output
  --json             print exactly one JSON document on stdout
  --explain          tell each verification in plain language (what was erased,
                     when, on whose request, what was checked and how, what the
                     receipt does not cover); not with --json
  -q, --quiet        print failures only
  -v, --verbose      print tracebacks for internal errors
  -h, --help         show this help

exit codes: 0 all verified, 1 any invalid or untrusted, 2 usage error, 3 unreadable input
"""


class _VerifyArgs:
    def __init__(self) -> None:
        self.paths: list[str] = []
        self.key: list[str] = []
        self.trust: str | None = None
        self.log: str | None = None
        self.policy: str | None = None
        self.proof: str | None = None
        self.tsa_cert: str | None = None
        self.tsa_root: str | None = None
        self.jobs: int | None = None
        self.json = self.quiet = self.verbose = self.help = False
        self.require_authorization = False
        self.explain = False


def _parse_verify_args(argv: Sequence[str]) -> _VerifyArgs:
    """A deliberately tiny parser: argparse alone would cost ~10% of cold start."""
    a = _VerifyArgs()
    flags = {"--json": "json", "-q": "quiet", "--quiet": "quiet", "-v": "verbose",
             "--verbose": "verbose", "-h": "help", "--help": "help",
             "--require-authorization": "require_authorization",
             "--explain": "explain"}  # fmt: skip
    it = iter(argv)
    only_paths = False
    for arg in it:
        if only_paths or not arg.startswith("-") or arg == "-":
            a.paths.append(arg)
        elif arg == "--":
            only_paths = True
        elif arg in flags:
            setattr(a, flags[arg], True)
        else:
            name, eq, value = arg.partition("=")
            if name == "-j":
                name = "--jobs"
            if name not in ("--key", "--trust", "--log", "--jobs", "--policy", "--proof",
                            "--tsa-cert", "--tsa-root"):  # fmt: skip
                raise _UsageError(f"unrecognized option {arg!r}")
            if not eq:
                value = next(it, "")
                if value.startswith("--"):
                    value = ""
            if not value:
                raise _UsageError(f"{name} needs an argument")
            if name == "--key":
                a.key.append(value)
            elif (
                name in ("--log", "--jobs", "--policy", "--proof", "--tsa-cert", "--tsa-root")
                and getattr(a, name[2:].replace("-", "_")) is not None
            ):
                raise _UsageError(f"{name} may be given once")
            elif name in ("--log", "--policy", "--proof", "--tsa-cert", "--tsa-root"):
                setattr(a, name[2:].replace("-", "_"), value)
            elif name == "--jobs":
                if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= 1024:
                    raise _UsageError(f"--jobs needs a number of processes (1-1024), not {value!r}")
                a.jobs = int(value)
            elif a.trust is not None:
                raise _UsageError("--trust may be given once")
            else:
                a.trust = value
    if not a.help and not a.paths:
        raise _UsageError("the following arguments are required: FILE")
    if a.key and a.trust is not None:
        raise _UsageError(
            "--key and --trust are mutually exclusive (a --key would bypass the trust "
            "file's validity windows); put every key in the trust file"
        )
    if a.require_authorization and a.trust is None and not a.help:
        raise _UsageError(
            "--require-authorization needs --trust: approvers are the trust file's keys "
            'with "role": "approver" (a --key is never an approver)'
        )
    if a.explain and a.json:
        raise _UsageError("--explain and --json are mutually exclusive (--explain is for people)")
    if a.policy is not None and a.log is None and a.proof is None and not a.help:
        raise _UsageError("--policy needs --log LOG or --proof FILE")
    if a.proof is not None and not a.help:
        if a.policy is None:
            raise _UsageError("--proof needs --policy: the logs and witnesses to trust")
        if a.log is not None or len(a.paths) != 1 or a.explain:
            raise _UsageError("--proof verifies one receipt file, without --log or --explain")
    if a.tsa_root is not None and a.tsa_cert is None and not a.help:
        raise _UsageError("--tsa-root needs --tsa-cert")
    if a.tsa_cert is not None and not a.help:
        if a.log is None and a.proof is None:
            raise _UsageError("--tsa-cert needs --log LOG or --proof FILE (the time-stamps "
                              "are on the log's checkpoints)")  # fmt: skip
        if a.explain:
            raise _UsageError("--tsa-cert is not available with --explain")
    if a.paths.count("-") > 1:
        raise _UsageError('"-" (standard input) may be given once')
    return a


def _load_trust(keys: Sequence[str], trust: str | None) -> TrustStore:
    if not keys and not trust:
        raise _UsageError("give the trusted key with --key PUB.pem or --trust TRUSTFILE")
    if trust:
        return TrustStore.from_json(read_input(trust))
    return TrustStore([PublicKey.from_pem(read_input(k)) for k in keys])


class _Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.on = total > 1 and sys.stderr.isatty()
        self.step = max(1, total // 100)

    def update(self, done: int) -> None:
        if self.on and (done % self.step == 0 or done == self.total):
            width = 30
            filled = width * done // self.total
            bar = "#" * filled + "-" * (width - filled)
            sys.stderr.write(f"\r[{bar}] {done}/{self.total}")
            if done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()


_SCOPE_WORDS = {"thread": "thread", "history": "history of thread", "subject": "subject",
                "namespace": "store namespace", "redaction": "thread",
                "shred": "shredded key of"}  # fmt: skip


def _load_tsa(cert: str, root: str | None) -> Any:
    """The trusted TSA of --tsa-cert/--tsa-root (imports rfc3161-client's verifier)."""
    from ..timestamp import TsaTrust

    return TsaTrust(read_input(cert), read_input(root) if root is not None else None)


def _time_check(res: dict[str, Any], log: Any, index: int, issued_at: str) -> dict[str, Any]:
    """With --tsa-cert and --log: the receipt's ``issued_no_later_than`` (None when no
    time-stamped checkpoint covers it yet), or a failure with the reason."""
    from ..timestamp import check_issued_at

    found = None
    try:
        found = log.timestamp_of(index)
        if found is not None:
            check_issued_at(issued_at, found[1], found[0])
    except Error as exc:
        out = {"file": res["file"], "verified": False, "reason": exc.reason,
               "message": exc.message, "log_index": index}  # fmt: skip
        if found is not None:
            out.update(issued_at=issued_at, issued_no_later_than=found[1].issued_no_later_than,
                       timestamp_size=found[0])  # fmt: skip
        return out
    res["issued_no_later_than"] = found[1].issued_no_later_than if found else None
    res["timestamp_size"] = found[0] if found else None
    return res


def _verified_fields(v: VerifiedReceipt) -> dict[str, Any]:
    """The result fields of a verified receipt (verify-result.schema.json), every one from
    its signed statement: the same whether it was checked alone, in a log or by a proof."""
    p = v.statement["predicate"]
    rows = p["pre_state"]["leaves"]
    res: dict[str, Any] = dict(
        verified=True, reason="ok", receipt_id=v.receipt_id, thread_id=v.thread_id,
        kind=p.get("kind", "thread"),
        status=v.status, issued_at=v.issued_at, pre_digest=v.pre_digest,
        rows=rows, empty_scope=rows == 0,
        key_id=v.key_id, key_name=v.key_name, methods=dict(v.methods),
        residue=[{"action": a, "status": s} for a, s in v.residue],
    )  # fmt: skip
    if "kept_state" in p:
        res["kept_rows"] = p["kept_state"]["leaves"]
    if "replay_of" in p:
        res["replay_of"] = p["replay_of"]
    if "targets" in p:  # RECEIPT_SPEC.md 9.13
        res["targets"] = [{k: t[k] for k in ("name", "type", "method")} for t in p["targets"]]
    if "deferral" in p:  # RECEIPT_SPEC.md 9.14: what is retained, why, until when
        res["deferral"] = dict(p["deferral"])
    if "deferral_of" in p:
        res["deferral_of"] = p["deferral_of"]
    if v.request is not None:  # RECEIPT_SPEC.md 9.6: only receipts with a request
        res.update(request=v.request, approver=v.approver,
                   approver_key_id=v.approver_key_id, sla_seconds=v.sla_seconds)  # fmt: skip
    return res


def _verify_file(
    path: str,
    trust: TrustStore,
    verbose: bool,
    log: Any = None,
    require_auth: bool = False,
    fields: bool = True,
) -> dict[str, Any]:
    """One file's result. Without ``fields`` (``--quiet`` text output, no log: only
    failures are printed) a verified file's result is its verdict alone."""
    res: dict[str, Any] = {"file": _display(path)}
    try:
        data = _read_arg(path)
        v = verify_receipt(data, trust, require_authorization=require_auth)
        index = None if log is None else log.index_of(data)
    except Error as exc:  # InputError included: reason "unreadable"
        res.update(verified=False, reason=exc.reason, message=exc.message)
    except Exception as exc:  # a bug must not hide the other files' verdicts
        if verbose:
            import traceback

            traceback.print_exc()
        res.update(verified=False, reason="internal_error", message=repr(exc))
    else:
        if not fields and log is None:
            res["verified"] = True
            res["reason"] = "ok"
            return res
        res.update(_verified_fields(v))
        if log is not None:
            if index is None and log.policy is not None and log.witnessed(data):
                msg = (f"verified and in the log {log.name}, but after its latest cosigned "
                       f"checkpoint (size {log.size}): not yet witnessed")  # fmt: skip
                res = {"file": res["file"], "verified": False, "reason": "not_witnessed",
                       "message": msg}  # fmt: skip
            elif index is None:
                res = {"file": res["file"], "verified": False, "reason": "not_in_log",
                       "message": f"verified, but not in the log {log.name} "
                                  f"(checkpoint size {log.size})"}  # fmt: skip
            else:
                res["log_index"] = index
                if log.tsa is not None:
                    res = _time_check(res, log, index, v.issued_at)
    return res


def _scope_words(res: dict[str, Any]) -> str:
    if "deferral" in res:  # 9.14: "deferral of history of thread 't1'"
        return f"deferral of {_SCOPE_WORDS[res['deferral']['of_kind']]}"
    return _SCOPE_WORDS[res["kind"]]


def _ok_line(res: dict[str, Any]) -> str:
    # Method and residue names are schema-checked ([A-Za-z0-9_.:-]): safe on one line.
    methods = ", ".join(f"{k}={m}" for k, m in sorted(res["methods"].items())) or "none"
    residue = ", ".join(f"{r['action']}={r['status']}" for r in res["residue"]) or "none"
    return (
        f"OK    {res['file']}: {_scope_words(res)} {res['thread_id']!r} "
        f"{_what_erased(res)} at "
        f"{res['issued_at']}, receipt {res['receipt_id']}, key {res['key_id'][:16]}; "
        f"methods {methods}; residue {residue}"
        + _request_text(res)
        + (f"; replay of {res['replay_of']}" if "replay_of" in res else "")
        + (
            "; targets "
            + ", ".join(f"{t['name']} ({t['type']}, {t['method']})" for t in res["targets"])
            if "targets" in res
            else ""
        )
        + (f"; carries out deferral {res['deferral_of']}" if "deferral_of" in res else "")
        + (f"; log index {res['log_index']}" if "log_index" in res else "")
        + (
            f"; issued no later than {res['issued_no_later_than']} (time-stamped checkpoint "
            f"of size {res['timestamp_size']})"
            if res.get("issued_no_later_than")
            else "; no time-stamped checkpoint covers it yet"
            if "issued_no_later_than" in res
            else ""
        )
        + "\n"
    )


def _what_erased(res: dict[str, Any]) -> str:
    """``erased (5 rows)`` - or, for an empty scope, that nothing existed to erase (a
    receipt of an empty scope must not read like the erasure of data)."""
    d = res.get("deferral")
    if d is not None:  # 9.14: retained, not erased (free text: repr keeps one line)
        code = f", code {d['code']}" if d["code"] is not None else ""
        return (f"RETAINED, not erased ({res['rows']} rows) until {d['until']} "
                f"(basis {d['basis']!r}{code}), decided")  # fmt: skip
    if res["empty_scope"]:
        return "attested as an EMPTY SCOPE (no rows existed, nothing was deleted)"
    n = res["rows"]
    kept = f", {res['kept_rows']} kept" if "kept_rows" in res else ""
    if res["kind"] == "redaction":  # RECEIPT_SPEC.md 9.12: rewritten, every checkpoint kept
        kept = ", rewritten in place; every checkpoint kept"
    if res["kind"] == "shred":  # 9.16: the key is gone; the data rows stay, as ciphertext
        return (f"SHREDDED: the data key destroyed ({n} key-store row{'s' * (n != 1)} "
                "erased; the encrypted data rows remain, undecryptable without a copy of "
                "the key)")  # fmt: skip
    return f"{res['status']} ({n} row{'s' * (n != 1)}{kept})"


def _request_text(res: dict[str, Any]) -> str:
    """``; request 'ID' (basis 'B'), approved by 'NAME', sla N s`` for receipts with a
    request (free text: repr keeps it on one line)."""
    r = res.get("request")
    if r is None:
        return ""
    out = f"; request {r['id']!r} (basis {r['basis']!r})"
    if res["approver"] is not None:
        out += f", approved by {res['approver']!r}"
    if res["sla_seconds"] is not None:
        out += f", {res['sla_seconds']} s after it was received"
    return out


def _verify_all(
    files: list[str],
    trust: TrustStore,
    verbose: bool,
    jobs: int = 1,
    log: Any = None,
    require_auth: bool = False,
    fields: bool = True,
) -> Iterator[dict[str, Any]]:
    """Results in input order. From ``BATCH`` files on, orjson (a 5 ms import that a
    single-file verify cannot afford) parses and computes the canonical bytes ~3x
    faster; from ``PARALLEL_MIN`` files on, ``jobs`` processes share the work."""
    import gc

    collect = len(files) >= BATCH and gc.isenabled()
    if len(files) >= BATCH:
        from ..canonical import use_orjson

        use_orjson()
        # Parsed receipts are acyclic and freed by reference counting; the cyclic
        # collector only re-walks the growing results (~5% of a batch's time).
        gc.disable()
    try:
        if jobs > 1 and len(files) >= PARALLEL_MIN and STDIN not in files:
            yield from fork_map(
                lambda p: _verify_file(p, trust, verbose, log, require_auth, fields), files, jobs
            )
            return
        for path in files:
            yield _verify_file(path, trust, verbose, log, require_auth, fields)
    finally:
        if collect:
            gc.enable()


def _fail_early(message: str, code: int, as_json: bool) -> int:
    """Usage and key errors: one line on stderr (a usage error names ``--help``), and
    still one JSON document with --json."""
    if code == EXIT_USAGE and "--help" not in message:
        message += " (see `receipt verify --help`)"
    print(f"receipt verify: error: {message}", file=sys.stderr)
    if as_json:
        doc = {"ok": False, "exit_code": code, "error": message, "counts": None, "results": []}
        import json

        sys.stdout.write(json.dumps(doc, ensure_ascii=_ascii_only()) + "\n")
    return code


def _ascii_only() -> bool:
    """Whether stdout cannot take UTF-8 (e.g. PYTHONIOENCODING=ascii): JSON is then
    written with \\u escapes, which is the same document, instead of failing."""
    enc = getattr(sys.stdout, "encoding", None) or "utf-8"
    return enc.replace("_", "-").lower() not in ("utf-8", "utf8")


def _safe_text_output() -> None:
    """Text results must never fail on an encoding: a thread id the terminal cannot
    show is written with backslash escapes."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def verify_main(argv: Sequence[str]) -> int:
    """Run ``receipt verify``; returns the exit code."""
    _safe_text_output()
    as_json = "--json" in argv
    try:
        args = _parse_verify_args(argv)
    except _UsageError as exc:
        return _fail_early(str(exc), EXIT_USAGE, as_json)
    if args.help:
        sys.stdout.write(VERIFY_HELP)
        return EXIT_OK
    try:
        trust = _load_trust(args.key, args.trust)
    except _UsageError as exc:
        return _fail_early(str(exc), EXIT_USAGE, as_json)
    except InputError as exc:
        return _fail_early(exc.message, EXIT_IO, as_json)
    except (KeyFormatError, MalformedReceiptError) as exc:
        return _fail_early(f"bad key: {exc.message}", EXIT_USAGE, as_json)

    files = list(_expand(args.paths, [*args.key, *([args.trust] if args.trust else [])]))
    if not files:
        return _fail_early("no receipt files found", EXIT_USAGE, as_json)
    policy = None
    if args.policy is not None:
        try:
            from ..policy import Policy

            policy = Policy.parse(read_input(args.policy))
        except InputError as exc:
            return _fail_early(f"--policy: {exc.message}", EXIT_IO, as_json)
        except Error as exc:
            return _fail_early(f"--policy {_display(args.policy)}: {exc.message}", EXIT_USAGE,
                               as_json)  # fmt: skip
    tsa = None
    if args.tsa_cert is not None:
        try:
            tsa = _load_tsa(args.tsa_cert, args.tsa_root)
        except InputError as exc:
            return _fail_early(f"--tsa-cert: {exc.message}", EXIT_IO, as_json)
        except Error as exc:
            return _fail_early(f"--tsa-cert: {exc.message}", EXIT_USAGE, as_json)
    if args.proof is not None:
        return _verify_proof(files[0], args.proof, trust, policy, args.json, args.quiet, tsa)
    log = None
    if args.log is not None:
        try:
            from ..log import LogCheck

            log = LogCheck(args.log, trust, policy, tsa)
        except InputError as exc:
            return _fail_early(f"--log: {exc.message}", EXIT_IO, as_json)
        except Error as exc:
            return _fail_early(f"--log {_display(args.log)}: [{exc.reason}] {exc.message}",
                               EXIT_INVALID, as_json)  # fmt: skip
    if args.explain:
        return _explain_all(files, trust, log, args.require_authorization, args.quiet)
    progress = _Progress(len(files))
    results: list[dict[str, Any]] = []
    counts = {"verified": 0, "invalid": 0, "unreadable": 0}
    out = sys.stdout
    jobs = args.jobs if args.jobs is not None else default_jobs()
    fields = args.json or not args.quiet  # --quiet text prints failures only
    results_iter = _verify_all(
        files, trust, args.verbose, jobs, log, args.require_authorization, fields
    )
    for n, res in enumerate(results_iter, 1):
        if res["verified"]:
            counts["verified"] += 1
        else:
            counts["unreadable" if res["reason"] == "unreadable" else "invalid"] += 1
        if args.json:
            results.append(res)
        elif res["verified"]:
            if not args.quiet:
                out.write(_ok_line(res))
        else:
            out.write(f"FAIL  {res['file']}: [{res['reason']}] {res['message']}\n")
        progress.update(n)

    code = EXIT_IO if counts["unreadable"] else EXIT_INVALID if counts["invalid"] else EXIT_OK
    if args.json:
        doc = {"ok": code == EXIT_OK, "exit_code": code, "counts": counts, "results": results}
        import json

        out.write(json.dumps(doc, ensure_ascii=_ascii_only()) + "\n")
    elif len(files) > 1 or code:
        print(
            f"{counts['verified']} verified, {counts['invalid']} invalid, "
            f"{counts['unreadable']} unreadable",
            file=sys.stderr,
        )
    return code


def _verify_proof(
    path: str,
    proof: str,
    trust: TrustStore,
    policy: Any,
    as_json: bool,
    quiet: bool,
    tsa: Any = None,
) -> int:
    """``--proof``: one receipt and its tlog-proof, offline (no log)."""
    from ..bundle import verify_bundle

    shown = _display(path)
    res: dict[str, Any] = {"file": shown, "proof": _display(proof)}
    try:
        data = _read_arg(path)
        bundle = read_input(proof)
        vb = verify_bundle(data, bundle, trust, policy, tsa)
    except InputError as exc:
        code = EXIT_IO
        res.update(verified=False, reason=exc.reason, message=exc.message)
    except Error as exc:
        code = EXIT_INVALID
        res.update(verified=False, reason=exc.reason, message=exc.message)
    else:
        code = EXIT_OK
        cp = vb.checkpoint
        res.update(_verified_fields(vb.receipt))
        res.update(log_index=vb.index, origin=cp.origin, tree_size=cp.size,
                   root=cp.root.hex(), cosigners=sorted(cp.cosigners))  # fmt: skip
        if tsa is not None:
            ts = vb.timestamp
            res.update(issued_at=vb.receipt.issued_at,
                       issued_no_later_than=ts.issued_no_later_than if ts else None)  # fmt: skip
    if as_json:
        import json  # only here: a plain verify does not pay for it

        counts = {"verified": int(code == EXIT_OK), "invalid": int(code == EXIT_INVALID),
                  "unreadable": int(code == EXIT_IO)}  # fmt: skip
        doc = {"ok": code == EXIT_OK, "exit_code": code, "counts": counts, "results": [res]}
        sys.stdout.write(json.dumps(doc, ensure_ascii=_ascii_only()) + "\n")
    elif code == EXIT_OK:
        if not quiet:
            who = ", ".join(res["cosigners"]) or "no witness (quorum none)"
            sys.stdout.write(
                f"OK    {shown}: receipt {res['receipt_id']} is entry {res['log_index']} of "
                f"{res['tree_size']} in {res['origin']!r}, checkpoint cosigned by {who} "
                "(verified offline)"
                + (
                    f"; issued no later than {res['issued_no_later_than']} (time-stamped "
                    "checkpoint)"
                    if res.get("issued_no_later_than")
                    else "; the proof carries no time-stamp"
                    if "issued_no_later_than" in res
                    else ""
                )
                + "\n"
            )
    else:
        sys.stdout.write(f"FAIL  {shown}: [{res['reason']}] {res['message']}\n")
    return code


def _explain_all(
    files: list[str], trust: TrustStore, log: Any, require_auth: bool, quiet: bool
) -> int:
    """``--explain``: the same verification as without it, told in plain language."""
    from ..explain import explain, explain_failure

    counts = {"verified": 0, "invalid": 0, "unreadable": 0}
    out = sys.stdout
    for n, path in enumerate(files):
        shown = _display(path)
        try:
            data = _read_arg(path)
            v = verify_receipt(data, trust, require_authorization=require_auth)
            if log is not None and log.index_of(data) is None:
                raise MalformedReceiptError(
                    f"verified, but not in the log {log.name} (checkpoint size {log.size})",
                    reason="not_in_log",
                )
        except Error as exc:
            counts["unreadable" if exc.reason == "unreadable" else "invalid"] += 1
            text = explain_failure(shown, exc.reason, exc.message)
        else:
            counts["verified"] += 1
            if quiet:
                continue
            text = explain(v, source=shown)
        out.write(("\n" if n else "") + text)
    code = EXIT_IO if counts["unreadable"] else EXIT_INVALID if counts["invalid"] else EXIT_OK
    if len(files) > 1 or code:
        print(
            f"{counts['verified']} verified, {counts['invalid']} invalid, "
            f"{counts['unreadable']} unreadable",
            file=sys.stderr,
        )
    return code
