"""``receipt`` console entry point.

``receipt verify`` is the auditor's hot path (cold start and batch throughput both
matter), so it is parsed here with the standard library and never imports typer,
LangGraph or a database driver. Every other sub-command lives in the typer app in
``app.py``, loaded only when needed.

Exit codes: 0 all verified, 1 any receipt invalid or untrusted, 2 usage error,
3 an input could not be read, or stdout/stderr was closed early (a broken pipe, as in
``receipt verify DIR | head -1``; handled for every command in ``main``).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from .canonical import MAX_INPUT_BYTES
from .errors import Error, InputError, KeyFormatError, MalformedReceiptError
from .signing import PublicKey
from .verify import TrustStore, check_size, read_input, verify_receipt
from .verify import _display as _display  # re-exported for app.py

__all__ = ["EXIT_INVALID", "EXIT_IO", "EXIT_OK", "EXIT_USAGE", "main", "verify_main"]

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
    if a.key and a.trust is not None:
        raise _UsageError(
            "--key and --trust are mutually exclusive (a --key would bypass the trust "
            "file's validity windows); put every key in the trust file"
        )
    if a.paths.count("-") > 1:
        raise _UsageError('"-" (standard input) may be given once')
    return a


_read_input = read_input  # kept for app.py: a bounded read of one regular file

STDIN = "-"


def _read_stdin() -> bytes:
    """One receipt from standard input, bounded like a file."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise InputError("cannot read standard input: not available")
    try:
        data = stream.read(MAX_INPUT_BYTES + 1)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read standard input: {exc}") from None
    if not isinstance(data, bytes):
        raise InputError("cannot read standard input: not a byte stream")
    return check_size(data)


def _read_arg(path: str) -> bytes:
    return _read_stdin() if path == STDIN else read_input(path)


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


def _load_trust(keys: Sequence[str], trust: str | None) -> TrustStore:
    if not keys and not trust:
        raise _UsageError("give the trusted key with --key PUB.pem or --trust TRUSTFILE")
    if trust:
        return TrustStore.from_json(read_input(trust))
    return TrustStore([PublicKey.from_pem(read_input(k)) for k in keys])


def _expand(paths: Sequence[str], skip: Sequence[str] = ()) -> Iterator[str]:
    """Files to verify, in order. Directories are searched for *.json files, leaving out
    the files named in ``skip`` (the --key/--trust files, compared by device and inode,
    so another spelling or a symlink is recognised too)."""
    skip_ids = {i for p in skip if (i := _file_id(p)) is not None}
    for p in paths:
        if p != STDIN and os.path.isdir(p):
            found = []
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for f in files:
                    if not f.endswith(".json"):
                        continue
                    path = os.path.join(root, f)
                    try:
                        st = os.stat(path)
                    except (OSError, ValueError):
                        continue
                    if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in skip_ids:
                        found.append(path)
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
        v = verify_receipt(_read_arg(path), trust)
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
            key_id=v.key_id, key_name=v.key_name, methods=dict(v.methods),
            residue=[{"action": a, "status": s} for a, s in v.residue],
        )  # fmt: skip
    return res


def _ok_line(res: dict[str, Any]) -> str:
    # Method and residue names are schema-checked ([A-Za-z0-9_.:-]): safe on one line.
    methods = ", ".join(f"{k}={m}" for k, m in sorted(res["methods"].items())) or "none"
    residue = ", ".join(f"{r['action']}={r['status']}" for r in res["residue"]) or "none"
    return (
        f"OK    {res['file']}: thread {res['thread_id']!r} {res['status']} at "
        f"{res['issued_at']}, receipt {res['receipt_id']}, key {res['key_id'][:16]}; "
        f"methods {methods}; residue {residue}\n"
    )


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
                out.write(_ok_line(res))
        else:
            out.write(f"FAIL  {res['file']}: [{res['reason']}] {res['message']}\n")
        progress.update(n)

    code = EXIT_IO if counts["unreadable"] else EXIT_INVALID if counts["invalid"] else EXIT_OK
    if args.json:
        doc = {"ok": code == EXIT_OK, "exit_code": code, "counts": counts, "results": results}
        out.write(json.dumps(doc, ensure_ascii=_ascii_only()) + "\n")
    elif len(files) > 1 or code:
        print(
            f"{counts['verified']} verified, {counts['invalid']} invalid, "
            f"{counts['unreadable']} unreadable",
            file=sys.stderr,
        )
    return code


def _fd_identity(fd: int) -> tuple[int, int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_rdev)


def _run_app(args: list[str]) -> Any:
    """The typer app's exit status, with broken pipes recognised. The app's libraries
    handle EPIPE themselves and exit 1: click (vendored by typer) wraps stdout and stderr
    in a ``PacifyFlushWrapper`` (matched by name: click's location differs between typer
    versions), and rich (help pages) points stdout at devnull. Both mean a broken pipe."""
    from .app import app

    stdout_before = _fd_identity(1)
    try:
        app(args=args, prog_name="receipt")
    except SystemExit as exc:
        if "PacifyFlushWrapper" in (type(sys.stdout).__name__, type(sys.stderr).__name__):
            raise BrokenPipeError from None
        now = _fd_identity(1)
        if now != stdout_before and now is not None and now == _devnull_identity():
            raise BrokenPipeError from None
        return exc.code
    return EXIT_OK


def _devnull_identity() -> tuple[int, int, int] | None:
    try:
        st = os.stat(os.devnull)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_rdev)


def _broken_pipe() -> int:
    """The reader went away (``| head -1``): no traceback, no more output, exit 3.
    As the Python docs recommend, stdout (and stderr, if it is the closed pipe) is
    pointed at devnull so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return EXIT_IO
    streams = [sys.stdout]
    try:
        sys.stderr.flush()
    except BrokenPipeError:
        streams.append(sys.stderr)
    except (OSError, ValueError, AttributeError):
        pass
    for stream in streams:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)
    return EXIT_IO


def main(argv: Sequence[str] | None = None) -> None:
    """The ``receipt`` console script. Every command's exit status goes through here,
    so a closed stdout is handled once for all of them (exit 3, no traceback)."""
    args = list(sys.argv[1:] if argv is None else argv)
    code: Any
    if sys.stdout is None:  # started with stdout closed (`>&-`): nowhere to report
        sys.exit(EXIT_IO)
    try:
        code = verify_main(args[1:]) if args and args[0] == "verify" else _run_app(args)
        sys.stdout.flush()
    except BrokenPipeError:
        code = _broken_pipe()
    except KeyboardInterrupt:
        code = 130  # like a shell: 128 + SIGINT, and no traceback
    sys.exit(code)
