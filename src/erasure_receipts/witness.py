"""A transparency-log witness (C2SP ``tlog-witness``, ``tlog-cosignature``), and the
split-view watch.

A :class:`Witness` is a name, an Ed25519 key and the logs it follows (origin -> the
log's public key). For each origin it keeps one record in its state directory: the
latest checkpoint it cosigned (the note, the log's signature and its own cosignature),
in ``<sha256(origin) hex>.checkpoint``. :meth:`Witness.add_checkpoint` is the
``add-checkpoint`` call: 404 unknown origin, 403 no valid signature of the log, 400 a
malformed request or an old size above the new one, 409 (body: the recorded size,
``text/x.tlog.size``) when the old size is not the recorded one or the same size comes
with another root, 422 a consistency proof that does not verify, else 200 with the
cosignature line. The check and the update happen under one ``flock`` on ``lock`` in
the state directory (threads and processes), and the record is replaced crash-safely
(temp file, fsync, rename, directory fsync): after a crash it is the old checkpoint or
the new one, never a mix. :func:`serve` puts a witness on HTTP with the standard
library's ``http.server``.

:func:`watch` compares checkpoints of one log seen from several places (files, log
directories, witness records) and reports a split view: two checkpoints of the same size
with different roots, or a log directory that does not extend a checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .digest import EMPTY_ROOT, verify_consistency
from .errors import ConfigurationError, InputError, LogError, WitnessError
from .log import _read_small, _replace_file
from .note import MAX_NOTE, Checkpoint, _check_name, cosign, cosigner_vkey
from .signing import PublicKey, Signer, b64decode, sha256

try:
    import fcntl
except ImportError:  # pragma: no cover - no witness state on Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "MAX_PROOF_LINES",
    "MAX_REQUEST",
    "SIZE_CONTENT_TYPE",
    "Finding",
    "Witness",
    "WitnessResponse",
    "parse_add_checkpoint",
    "serve",
    "watch",
]

MAX_PROOF_LINES = 63
MAX_REQUEST = MAX_NOTE + 128 + MAX_PROOF_LINES * 46
SIZE_CONTENT_TYPE = "text/x.tlog.size"
LOCK = "lock"


@dataclass(frozen=True)
class WitnessResponse:
    """An ``add-checkpoint`` answer: HTTP status, content type and body."""

    status: int
    content_type: str
    body: bytes

    @property
    def message(self) -> str:
        """The body's first line as text (the reason of a refusal)."""
        return self.body.decode("utf-8", "replace").split("\n", 1)[0]


def _text(status: int, message: str) -> WitnessResponse:
    return WitnessResponse(status, "text/plain; charset=utf-8", message.encode() + b"\n")


def parse_add_checkpoint(body: bytes) -> tuple[int, list[bytes], bytes]:
    """``(old size, consistency proof, checkpoint note)`` of an ``add-checkpoint``
    request body (``old N``, up to 63 base64 hash lines, an empty line, the note);
    ``WitnessError`` "bad_request" if it is not one."""

    def bad(why: str) -> WitnessError:
        return WitnessError(f"malformed add-checkpoint request: {why}", reason="bad_request")

    if not isinstance(body, bytes) or len(body) > MAX_REQUEST:
        raise bad(f"the body is at most {MAX_REQUEST} bytes")
    head, sep, note = body.partition(b"\n\n")
    if not sep:
        raise bad("no empty line before the checkpoint")
    lines = head.split(b"\n")
    first = lines[0]
    size = first[4:]
    if (
        not first.startswith(b"old ")
        or not size.isdigit()
        or not size.isascii()
        or len(size) > 19
        or (size != b"0" and size.startswith(b"0"))
    ):
        raise bad("the first line is not 'old <size>' (decimal, no leading zeros)")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise bad(f"more than {MAX_PROOF_LINES} consistency proof lines")
    proof: list[bytes] = []
    for line in lines[1:]:
        try:
            h = b64decode(line)
        except ValueError:
            raise bad("a consistency proof line is not base64") from None
        if len(h) != 32:
            raise bad("a consistency proof line is not a 32-byte hash")
        proof.append(h)
    return int(size), proof, note


class Witness:
    """A witness named ``name`` (its cosignatures' key name) signing with ``signer``,
    following ``logs`` (origin -> the log's public key), with its state in
    ``directory`` (created if missing). ``clock`` gives the cosignature time (POSIX
    seconds)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        signer: Signer,
        name: str,
        logs: Mapping[str, PublicKey],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if fcntl is None:  # pragma: no cover
            raise LogError("a witness needs fcntl.flock (POSIX)", reason="unsupported_platform")
        self.name = _check_name(name, "witness name")
        if not logs:
            raise ConfigurationError("a witness follows at least one log (origin and key)")
        self.logs = {_check_name(o): k for o, k in logs.items()}
        self.signer = signer
        self.directory = Path(directory)
        self.clock = clock
        self._before_rename: Callable[[], None] | None = None
        """Called between writing a new record and renaming it into place (crash tests)."""
        self.directory.mkdir(parents=True, exist_ok=True)

    @property
    def vkey(self) -> str:
        """This witness's verifier key (``name+id+base64(0x04 || key)``): policies list it."""
        return cosigner_vkey(self.name, self.signer.public_key)

    def record_path(self, origin: str) -> Path:
        """Where the latest cosigned checkpoint of ``origin`` is kept."""
        name: str = sha256(origin.encode("utf-8")).hexdigest()
        return self.directory / (name + ".checkpoint")

    def latest(self, origin: str) -> Checkpoint | None:
        """The latest checkpoint of ``origin`` this witness cosigned (None: never),
        checked again (the log's signature and this witness's cosignature)."""
        path = self.record_path(origin)
        try:
            data = _read_small(path, MAX_NOTE)
        except InputError:
            if not path.exists():
                return None
            raise
        try:
            cp = Checkpoint.parse(data)
            key = self.logs.get(cp.origin)
            ok = (
                cp.origin == origin
                and key is not None
                and cp.signed_by(key) is True
                and cp.cosigned_by(self.name, self.signer.public_key) is not None
            )
        except LogError:
            ok = False
        if not ok:
            raise WitnessError(f"{path}: the witness record is damaged", reason="witness_corrupt")
        return cp

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.directory / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the flock

    def add_checkpoint(self, body: bytes) -> WitnessResponse:
        """Handle one ``add-checkpoint`` request body (see the module docstring)."""
        try:
            old, proof, note = parse_add_checkpoint(body)
            cp = Checkpoint.parse(note)
        except LogError as exc:
            return _text(400, exc.message)
        key = self.logs.get(cp.origin)
        if key is None:
            return _text(404, f"unknown log origin {cp.origin!r}")
        if cp.signed_by(key) is not True:
            return _text(403, f"the checkpoint is not signed by the trusted key of {cp.origin!r}")
        if old > cp.size:
            return _text(400, f"old size {old} is above the checkpoint size {cp.size}")
        with self._locked():
            try:
                rec = self.latest(cp.origin)
            except LogError as exc:
                return _text(500, exc.message)
            have = rec.size if rec is not None else 0
            have_root = rec.root if rec is not None else EMPTY_ROOT
            if old != have:
                return WitnessResponse(409, SIZE_CONTENT_TYPE, b"%d\n" % have)
            if old == cp.size and cp.root != have_root:
                return WitnessResponse(409, SIZE_CONTENT_TYPE, b"%d\n" % have)
            if (old == 0 and proof) or not verify_consistency(
                old, cp.size, have_root if old else EMPTY_ROOT, cp.root, proof
            ):
                return _text(422, f"the consistency proof from size {old} does not verify")
            ts = int(self.clock())
            line = cosign(note, self.name, self.signer, ts)
            record = cp.text + b"\n" + b"".join(cp.signature_lines(cp.origin)) + line
            self._store(self.record_path(cp.origin), record)
        return WitnessResponse(200, "text/plain; charset=utf-8", line)

    def _store(self, path: Path, data: bytes) -> None:
        _replace_file(path.parent, path.name, data, before_rename=self._before_rename)


def serve(
    witness: Witness,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    ready: Callable[[str], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> None:
    """Serve ``witness`` over HTTP (``POST /add-checkpoint``) until interrupted;
    ``ready`` gets the URL (the submission prefix) once it listens, ``log`` one line per
    request."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "erasure-receipts-witness"

        def _reply(self, r: WitnessResponse) -> None:
            self.send_response(r.status)
            self.send_header("Content-Type", r.content_type)
            self.send_header("Content-Length", str(len(r.body)))
            self.end_headers()
            self.wfile.write(r.body)
            if log is not None:
                log(f"{self.command} {self.path} {r.status} {r.message}")

        def do_POST(self) -> None:
            if self.path != "/add-checkpoint":
                self._reply(_text(404, "only POST /add-checkpoint"))
                return
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                self.close_connection = True
                self._reply(_text(411, "a Content-Length is required"))
                return
            if int(length) > MAX_REQUEST:
                self.close_connection = True
                self._reply(_text(413, f"the body is at most {MAX_REQUEST} bytes"))
                return
            body = self.rfile.read(int(length))
            self._reply(witness.add_checkpoint(body))

        def do_GET(self) -> None:
            self._reply(_text(404, "only POST /add-checkpoint"))

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    try:
        if ready is not None:
            h, p = server.server_address[:2]
            ready(f"http://{h if isinstance(h, str) else h.decode()}:{p}")
        server.serve_forever()
    finally:
        server.server_close()


# -- the watch --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One thing :func:`watch` found: a reason code (``split_view``, ``not_consistent``,
    ``unknown_log``, ``bad_checkpoint``) and a one-line message."""

    reason: str
    message: str


def watch(
    checkpoints: Sequence[tuple[str, bytes]],
    logs: Mapping[str, PublicKey] | Callable[[Checkpoint], bool],
    *,
    proofs: Sequence[tuple[str, Callable[[int], tuple[int, bytes] | None]]] = (),
) -> list[Finding]:
    """Compare ``(source, note)`` checkpoints: each must be signed by its origin's key in
    ``logs`` (or accepted by the callable); two of one origin with the same size and
    different roots are a split view. ``proofs`` are ``(source, root_at)`` of log
    copies: ``root_at(size)`` is ``(size of that copy, its root at size)`` or None
    (the copy is smaller); a checkpoint whose root differs from the copy's root at its
    size is not consistent with it (the copy does not extend it)."""
    findings: list[Finding] = []
    seen: dict[tuple[str, int], tuple[bytes, str]] = {}
    good: list[tuple[str, Checkpoint]] = []
    for source, note in checkpoints:
        try:
            cp = Checkpoint.parse(note)
        except LogError as exc:
            findings.append(Finding("bad_checkpoint", f"{source}: {exc.message}"))
            continue
        if callable(logs):
            ok = logs(cp)
        else:
            key = logs.get(cp.origin)
            ok = key is not None and cp.signed_by(key) is True
        if not ok:
            findings.append(Finding(
                "unknown_log",
                f"{source}: the checkpoint of {cp.origin!r} is not signed by a trusted log key",
            ))  # fmt: skip
            continue
        good.append((source, cp))
        prev = seen.get((cp.origin, cp.size))
        if prev is None:
            seen[(cp.origin, cp.size)] = (cp.root, source)
        elif prev[0] != cp.root:
            findings.append(Finding(
                "split_view",
                f"{cp.origin!r} at size {cp.size}: root {prev[0].hex()[:16]}... in "
                f"{prev[1]} but {cp.root.hex()[:16]}... in {source}",
            ))  # fmt: skip
    for source, root_at in proofs:
        for csource, cp in good:
            if csource == source:
                continue
            got = root_at(cp.size)
            if got is None:
                continue
            size, root = got
            if root != cp.root:
                findings.append(Finding(
                    "not_consistent",
                    f"{source} (size {size}) does not extend the checkpoint of {csource} "
                    f"(size {cp.size}): its root at that size differs",
                ))  # fmt: skip
    return findings
