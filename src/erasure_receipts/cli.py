"""``receipt`` console entry point.

``receipt verify`` is the auditor's hot path (cold start and batch throughput both
matter), so it is parsed here with the standard library and never imports typer,
LangGraph or a database driver. Every other sub-command lives in the typer app in
``app.py``, loaded only when needed.

Exit codes: 0 all verified, 1 any receipt invalid or untrusted, 2 usage error,
3 an input could not be read.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from .canonical import MAX_INPUT_BYTES
from .errors import Error, InputError, KeyFormatError, MalformedReceiptError
from .signing import PublicKey
from .verify import TrustStore, verify_receipt

__all__ = ["EXIT_INVALID", "EXIT_IO", "EXIT_OK", "EXIT_USAGE", "main", "verify_main"]

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_IO = 0, 1, 2, 3


class _UsageError(Exception):
    pass


VERIFY_HELP = """\
usage: receipt verify FILE|DIR... (--key PUB.pem ... | --trust TRUSTFILE) [options]

Verify erasure receipts (receipt files or DSSE envelopes). Directories are searched
recursively for *.json files.

options:
  --key PUB.pem      trusted Ed25519 public key (PEM); repeatable
  --trust FILE       trust file: keys with optional validity windows (rotation)
  --json             print exactly one JSON document on stdout
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
        self.json = self.quiet = self.verbose = self.help = False


def _parse_verify_args(argv: Sequence[str]) -> _VerifyArgs:
    """A deliberately tiny parser: argparse alone would cost ~10% of cold start."""
    a = _VerifyArgs()
    flags = {"--json": "json", "-q": "quiet", "--quiet": "quiet", "-v": "verbose",
             "--verbose": "verbose", "-h": "help", "--help": "help"}  # fmt: skip
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
            if name not in ("--key", "--trust"):
                raise _UsageError(f"unrecognized option {arg!r}")
            if not eq:
                value = next(it, "")
                if value.startswith("--"):
                    value = ""
            if not value:
                raise _UsageError(f"{name} needs an argument")
            if name == "--key":
                a.key.append(value)
            elif a.trust is not None:
                raise _UsageError("--trust may be given once")
            else:
                a.trust = value
    if not a.help and not a.paths:
        raise _UsageError("the following arguments are required: FILE")
    return a


def _read_input(path: str) -> bytes:
    # O_NONBLOCK + a regular-file check: a FIFO or device named *.json must not hang a
    # batch verify; it is reported as unreadable instead.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise InputError(f"cannot read {_display(path)}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"cannot read {_display(path)}: not a regular file")
        size = st.st_size
        with os.fdopen(fd, "rb", buffering=0) as fh:
            fd = -1
            # Read what the file says it holds (+1 to notice growth), not a 1 MiB buffer
            # per file: allocation dominated small reads in batches.
            data = fh.read(min(size, MAX_INPUT_BYTES) + 1)
            while len(data) <= MAX_INPUT_BYTES and (more := fh.read(MAX_INPUT_BYTES + 1)):
                data += more
    except OSError as exc:
        raise InputError(f"cannot read {_display(path)}: {exc.strerror or exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)
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


def _display(path: str) -> str:
    """A file name that can always be printed on one line: undecodable bytes and
    control characters (a newline in a name could forge an output line) are escaped."""
    text = os.fsencode(path).decode("utf-8", "backslashreplace")
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text


def _expand(paths: Sequence[str]) -> Iterator[str]:
    for p in paths:
        if os.path.isdir(p):
            found = []
            for root, dirs, files in os.walk(p):
                dirs.sort()
                found += [
                    path
                    for f in files
                    if f.endswith(".json") and os.path.isfile(path := os.path.join(root, f))
                ]
            yield from sorted(found)
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


def _verify_file(path: str, trust: TrustStore, verbose: bool) -> dict[str, Any]:
    res: dict[str, Any] = {"file": _display(path)}
    try:
        v = verify_receipt(_read_input(path), trust)
    except Error as exc:  # InputError included: reason "unreadable"
        res.update(verified=False, reason=exc.reason, message=exc.message)
    except Exception as exc:  # a bug must not hide the other files' verdicts
        if verbose:
            import traceback

            traceback.print_exc()
        res.update(verified=False, reason="internal_error", message=repr(exc))
    else:
        res.update(
            verified=True, reason="ok", receipt_id=v.receipt_id, thread_id=v.thread_id,
            status=v.status, issued_at=v.issued_at, pre_digest=v.pre_digest,
            key_id=v.key_id, key_name=v.key_name,
        )  # fmt: skip
    return res


BATCH = 64


def _verify_all(files: list[str], trust: TrustStore, verbose: bool) -> Iterator[dict[str, Any]]:
    """Results in input order. From ``BATCH`` files on, orjson (a 5 ms import that a
    single-file verify cannot afford) computes the canonical bytes ~3x faster."""
    if len(files) >= BATCH:
        from .canonical import use_orjson

        use_orjson()
    for path in files:
        yield _verify_file(path, trust, verbose)


def _fail_early(message: str, code: int, as_json: bool) -> int:
    """Usage and key errors: one line on stderr, and still one JSON document with --json."""
    print(f"receipt verify: error: {message}", file=sys.stderr)
    if as_json:
        doc = {"ok": False, "exit_code": code, "error": message, "counts": None, "results": []}
        sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
    return code


def verify_main(argv: Sequence[str]) -> int:
    """Run ``receipt verify``; returns the exit code."""
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

    files = list(_expand(args.paths))
    if not files:
        return _fail_early("no receipt files found", EXIT_USAGE, as_json)
    progress = _Progress(len(files))
    results: list[dict[str, Any]] = []
    counts = {"verified": 0, "invalid": 0, "unreadable": 0}
    out = sys.stdout
    for n, res in enumerate(_verify_all(files, trust, args.verbose), 1):
        if res["verified"]:
            counts["verified"] += 1
        else:
            counts["unreadable" if res["reason"] == "unreadable" else "invalid"] += 1
        if args.json:
            results.append(res)
        elif res["verified"]:
            if not args.quiet:
                out.write(
                    f"OK    {res['file']}: thread {res['thread_id']!r} {res['status']} at "
                    f"{res['issued_at']}, receipt {res['receipt_id']}, "
                    f"key {res['key_id'][:16]}\n"
                )
        else:
            out.write(f"FAIL  {res['file']}: [{res['reason']}] {res['message']}\n")
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
