"""``receipt`` console entry point.

``receipt verify`` is the auditor's hot path (cold start and batch throughput both
matter), so it is parsed here with the standard library and never imports typer,
LangGraph or a database driver. Every other sub-command lives in the typer app in
``app.py``, loaded only when needed.

Exit codes: 0 all verified, 1 any receipt invalid or untrusted, 2 usage error,
3 an input could not be read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from .canonical import MAX_INPUT_BYTES
from .errors import Error, InputError, KeyFormatError, MalformedReceiptError
from .signing import PublicKey
from .verify import TrustStore, verify_receipt

__all__ = ["EXIT_INVALID", "EXIT_IO", "EXIT_OK", "EXIT_USAGE", "main", "verify_main"]

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_IO = 0, 1, 2, 3


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def _parser() -> _Parser:
    p = _Parser(
        prog="receipt verify",
        description="Verify erasure receipts (receipt files or DSSE envelopes).",
    )
    p.add_argument("paths", nargs="+", metavar="FILE", help="receipt files or directories")
    p.add_argument("--key", action="append", default=[], metavar="PUB.pem",
                   help="trusted Ed25519 public key (PEM); repeatable")  # fmt: skip
    p.add_argument("--trust", metavar="TRUSTFILE", help="trust file (keys with validity windows)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.add_argument("--quiet", "-q", action="store_true", help="print failures only")
    p.add_argument("--verbose", "-v", action="store_true", help="tracebacks for internal errors")
    return p


def _read_input(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise MalformedReceiptError(
            f"input is over the {MAX_INPUT_BYTES}-byte limit", reason="too_large"
        )
    return data


def _load_trust(keys: Sequence[str], trust: str | None) -> TrustStore:
    if not keys and not trust:
        raise _UsageError("give the trusted key with --key PUB.pem or --trust TRUSTFILE")
    loaded: list[Any] = [PublicKey.from_pem(_read_input(k)) for k in keys]
    store = TrustStore.from_json(_read_input(trust)) if trust else TrustStore()
    return TrustStore([*loaded, *store])


def _expand(paths: Sequence[str]) -> Iterator[str]:
    for p in paths:
        if os.path.isdir(p):
            yield from sorted(str(f) for f in Path(p).rglob("*.json") if f.is_file())
        else:
            yield p


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


def verify_main(argv: Sequence[str]) -> int:
    """Run ``receipt verify``; returns the exit code."""
    try:
        args = _parser().parse_args(argv)
    except _UsageError as exc:
        print(f"receipt verify: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    try:
        trust = _load_trust(args.key, args.trust)
    except _UsageError as exc:
        print(f"receipt verify: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except InputError as exc:
        print(f"receipt verify: error: {exc.message}", file=sys.stderr)
        return EXIT_IO
    except (KeyFormatError, MalformedReceiptError) as exc:
        print(f"receipt verify: error: bad key: {exc.message}", file=sys.stderr)
        return EXIT_USAGE

    files = list(_expand(args.paths))
    if not files:
        print("receipt verify: error: no receipt files found", file=sys.stderr)
        return EXIT_USAGE
    progress = _Progress(len(files))
    results: list[dict[str, Any]] = []
    counts = {"verified": 0, "invalid": 0, "unreadable": 0}
    out = sys.stdout
    for n, path in enumerate(files, 1):
        res: dict[str, Any] = {"file": path}
        try:
            v = verify_receipt(_read_input(path), trust)
        except InputError as exc:
            res.update(verified=False, reason=exc.reason, message=exc.message)
            counts["unreadable"] += 1
        except Error as exc:
            res.update(verified=False, reason=exc.reason, message=exc.message)
            counts["invalid"] += 1
        except Exception as exc:  # a bug must not hide the other files' verdicts
            if args.verbose:
                traceback.print_exc()
            res.update(verified=False, reason="internal_error", message=repr(exc))
            counts["invalid"] += 1
        else:
            res.update(
                verified=True, reason="ok", receipt_id=v.receipt_id, thread_id=v.thread_id,
                status=v.status, issued_at=v.issued_at, pre_digest=v.pre_digest,
                key_id=v.key_id, key_name=v.key_name,
            )  # fmt: skip
            counts["verified"] += 1
        if args.json:
            results.append(res)
        elif res["verified"]:
            if not args.quiet:
                out.write(
                    f"OK    {path}: thread {res['thread_id']!r} {res['status']} at "
                    f"{res['issued_at']}, receipt {res['receipt_id']}, "
                    f"key {res['key_id'][:16]}\n"
                )
        else:
            out.write(f"FAIL  {path}: [{res['reason']}] {res['message']}\n")
        progress.update(n)

    code = EXIT_IO if counts["unreadable"] else EXIT_INVALID if counts["invalid"] else EXIT_OK
    if args.json:
        doc = {"ok": code == EXIT_OK, "exit_code": code, "counts": counts, "results": results}
        out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    elif len(files) > 1 or code:
        print(
            f"{counts['verified']} verified, {counts['invalid']} invalid, "
            f"{counts['unreadable']} unreadable",
            file=sys.stderr,
        )
    return code


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "verify":
        sys.exit(verify_main(args[1:]))
    from .app import app

    app(args=args, prog_name="receipt")
