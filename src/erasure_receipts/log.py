"""The receipt log: an append-only transparency log of receipts, as CT logs certificates.

A log is a directory. Its leaves are the exact bytes of each receipt file (leaf hash
``SHA-256(0x00 || receipt bytes)``, RFC 9162 section 2.1.1), in an RFC 9162 tree built
with :mod:`erasure_receipts.digest`. After every append (or batch) the log signs a
checkpoint in the C2SP ``tlog-checkpoint`` format (a C2SP ``signed-note`` whose text is
origin, tree size and base64 root hash; Ed25519 note signature), so the tooling
conventions of Go's sumdb, Sigstore and the transparency-dev ecosystem apply. An auditor
who keeps an old checkpoint can later check that the log only grew (RFC 9162 section
2.1.4 consistency proof), and anyone holding a receipt can check it is in the log
(section 2.1.3 inclusion proof). RECEIPT_SPEC.md, "Receipt log", is the normative text.

Files in the directory:

* ``entries`` - the log itself, append-only: a magic line, then records
  ``tag || u32 length || payload || SHA-256(0x00 || payload)``; tag ``E`` is an entry
  (payload = the receipt bytes, the trailing hash = its leaf hash), tag ``C`` a signed
  checkpoint (payload = the note) covering every entry before it. The records up to
  the last valid ``C`` are the log; anything after it is an interrupted append.
* ``checkpoint`` - the latest checkpoint, published (temp file, fsync, rename) after
  each append: what ``receipt log checkpoint`` prints and auditors keep. A log that
  holds fewer entries than it says was truncated.
* ``tree``, ``index`` - derived, rebuilt from ``entries`` when missing or short: every
  perfect subtree root in post-order (O(log n) proofs) and per entry its leaf hash,
  record offset and receipt id (duplicate and conflict checks).
* ``log.conf`` - origin and public key (informational: auditors trust ``--key``).
* ``lock`` - ``flock``: appenders in any number of processes are serialised (without
  ``fcntl``, as on Windows, a log can be read but not appended to).

Crash safety: an append writes its records with one ``write`` and one ``fdatasync``
(``fsync`` where there is none, as on macOS); that is the commit point. A kill at any
moment leaves either the old log (the new records are an incomplete tail, ignored by
readers and cut by the next appender) or the new one; ``append`` returns only after the
commit and the publication of the checkpoint. Appending identical bytes again returns
the existing index (idempotent, so a recovery may re-append); a different receipt under
an id already in the log is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from .canonical import MAX_INPUT_BYTES, parse_strict
from .digest import (
    EMPTY_ROOT,
    MerkleTree,
    audit_path,
    consistency_path,
    consistency_proof,
    leaf_hash,
    subtree_root,
    verify_consistency,
    verify_inclusion,
)
from .errors import (
    ArgumentTypeError,
    ConfigurationError,
    Error,
    InputError,
    LogConflictError,
    LogCorruptError,
    LogError,
    MalformedReceiptError,
)
from .note import (
    EM_DASH as EM_DASH,
)
from .note import (
    MAX_NOTE as MAX_NOTE,
)
from .note import (
    MAX_SIGNATURES as MAX_SIGNATURES,
)
from .note import (
    NOTE_COSIGNATURE,
    Checkpoint,
    _bad,
    _check_name,
    cosign,
    cosignature_key_id,
    cosignature_message,
    cosigner_vkey,
    note_key_id,
    parse_vkey,
    verifier_key,
)
from .note import (
    NOTE_ED25519 as NOTE_ED25519,
)
from .receipt import Receipt
from .signing import PublicKey, Signer, b64decode, b64encode
from .verify import TrustStore

if TYPE_CHECKING:
    from .timestamp import TsaClient, TsaTrust, VerifiedTimestamp

try:  # POSIX (Linux, macOS); absent on Windows, where logs are read-only (_NO_FLOCK)
    import fcntl
except ImportError:  # pragma: no cover - in a subprocess (unit/test_platform_fallbacks)
    fcntl = None  # type: ignore[assignment]

_NO_FLOCK = (
    "appending to a receipt log needs fcntl.flock (POSIX: Linux, macOS) to serialise "
    "appenders across processes; this platform has no fcntl, so logs are read-only here"
)

__all__ = [
    "FORMAT",
    "Checkpoint",
    "ConsistencyProof",
    "InclusionProof",
    "LogCheck",
    "LogConflictError",
    "LogCorruptError",
    "LogError",
    "LogProblem",
    "LogReport",
    "ReceiptLog",
    "WitnessEndpoint",
    "cosign",
    "cosignature_key_id",
    "cosignature_message",
    "cosigner_vkey",
    "entry_spans",
    "is_log",
    "note_key_id",
    "parallel_receipt_check",
    "parse_vkey",
    "read_entries",
    "verifier_key",
    "verify_log",
]

FORMAT = "erasure-receipts-log-v1"
MAGIC = b"erasure-receipts-log v1\n"
CONFIG, ENTRIES, CHECKPOINT, TREE, INDEX, LOCK = (
    "log.conf", "entries", "checkpoint", "tree", "index", "lock",
)  # fmt: skip
COSIGNED, WITNESSES, WITNESS_LOCK = "cosigned", "witnesses.json", "witness.lock"
TIMESTAMPS = "timestamps"
"""Directory of RFC 3161 time-stamp responses, ``<tree size>.tsr`` each."""
TAG_ENTRY, TAG_CHECKPOINT = 0x45, 0x43  # "E", "C"
_HEAD = struct.Struct(">BI")
_HASH = 32
_INDEX = struct.Struct(">32sQ16s")  # leaf hash, record offset, receipt id (UUID bytes)


class WitnessEndpoint:
    """A witness a log sends its checkpoints to: the cosigner ``name`` and ``key`` (from
    its verifier key) and ``url``, its tlog-witness submission prefix."""

    __slots__ = ("key", "name", "url")

    def __init__(self, name: str, key: PublicKey, url: str) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"a witness URL is http:// or https://, not {url[:60]!r}")
        self.name, self.key, self.url = _check_name(name, "witness name"), key, url.rstrip("/")

    @classmethod
    def from_vkey(cls, vkey: str, url: str) -> WitnessEndpoint:
        """From the witness's verifier key (type 0x04) and URL."""
        name, kind, key = parse_vkey(vkey)
        if kind != NOTE_COSIGNATURE:
            raise LogError(f"{vkey[:60]!r} is not a cosigner key (type 0x04)", reason="bad_vkey")
        return cls(name, key, url)

    @property
    def vkey(self) -> str:
        """The witness's verifier key."""
        return cosigner_vkey(self.name, self.key)

    def __repr__(self) -> str:
        return f"WitnessEndpoint({self.name!r}, {self.url!r})"


def _post(url: str, body: bytes, timeout: float) -> tuple[int, str, bytes]:
    """POST ``body`` (standard library HTTP client); ``(status, content type, body)``."""
    import http.client
    import urllib.parse

    u = urllib.parse.urlsplit(url)
    cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = cls(u.hostname or "", u.port, timeout=timeout)
    try:
        conn.request("POST", (u.path or "") + "/add-checkpoint", body,
                     {"Content-Type": "text/plain"})  # fmt: skip
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type") or "", resp.read(MAX_NOTE)
    finally:
        conn.close()


def _replace_file(
    directory: Path,
    name: str,
    data: bytes,
    *,
    sync_dir: bool = True,
    before_rename: Callable[[], None] | None = None,
) -> None:
    """Replace ``directory/name`` crash-safely: temp file, fsync, rename and (with
    ``sync_dir``) a directory fsync, so a kill leaves the old or the new bytes, never a
    mix. ``before_rename`` is a crash point for tests."""
    tmp = directory / (name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if before_rename is not None:
        before_rename()
    os.replace(tmp, directory / name)
    if sync_dir:
        _fsync_dir(directory)


# -- records ---------------------------------------------------------------------------------


def _record(tag: int, payload: bytes) -> bytes:
    return _HEAD.pack(tag, len(payload)) + payload + leaf_hash(payload)


class _Rec:
    __slots__ = ("end", "hash", "payload", "start", "tag")

    def __init__(self, tag: int, payload: bytes, h: bytes, start: int, end: int) -> None:
        self.tag, self.payload, self.hash, self.start, self.end = tag, payload, h, start, end


def _records(fh: BinaryIO, pos: int) -> Iterator[_Rec | int]:
    """Records from byte ``pos`` on. Yields each complete record, then, where reading
    stops, the offset of what could not be read as a record (an incomplete record at the
    end, or bytes that are not a record); nothing more if the file ends cleanly."""
    fh.seek(pos)
    read = fh.read
    while True:
        head = read(5)
        if not head:
            return
        if len(head) < 5:
            yield pos
            return
        tag, n = _HEAD.unpack(head)
        if tag not in (TAG_ENTRY, TAG_CHECKPOINT) or n > MAX_INPUT_BYTES:
            yield pos
            return
        body = read(n + _HASH)
        if len(body) < n + _HASH:
            yield pos
            return
        end = pos + 5 + n + _HASH
        yield _Rec(tag, body[:n], body[n:], pos, end)
        pos = end


def _receipt_id(data: bytes) -> bytes:
    """The 16 bytes of a stored receipt's id (a file or a DSSE envelope; zeros if it
    cannot be read: the id check then skips it). Entries were parsed strictly when they
    were appended; this only finds the id again."""
    try:
        doc = json.loads(data)
        st = doc["statement"] if "statement" in doc else json.loads(b64decode(doc["payload"]))
        return uuid.UUID(st["predicate"]["receipt_id"]).bytes
    except (ValueError, TypeError, KeyError, AttributeError):
        return bytes(16)


def _nodes(n: int) -> int:
    """Stored tree nodes for ``n`` leaves (post-order: every perfect subtree root)."""
    return 2 * n - n.bit_count()


def _leaf_pos(i: int) -> int:
    return 2 * i - i.bit_count()


def _node_pos(height: int, i: int) -> int:
    return _leaf_pos(((i + 1) << height) - 1) + height


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _fdatasync(fd: int) -> None:
    """Flush the file's data: ``fdatasync`` where there is one (Linux), else ``fsync``
    (macOS has no ``fdatasync``; ``fsync`` flushes the metadata too: as durable, slower)."""
    sync = getattr(os, "fdatasync", None)
    (sync or os.fsync)(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _publish(directory: Path, note: bytes) -> None:
    """Replace ``checkpoint`` atomically (temp file, fsync, rename). No directory fsync:
    the ``entries`` record is the commit point, and a lost rename is redone from it."""
    _replace_file(directory, CHECKPOINT, note, sync_dir=False)


def is_log(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a receipt log directory (it has ``log.conf`` and ``entries``)."""
    p = Path(path)
    return (p / CONFIG).is_file() and (p / ENTRIES).is_file()


def _read_small(path: Path, limit: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise LogError(f"{path} is over {limit} bytes", reason="malformed_log")
    return data


def _read_config(directory: Path) -> dict[str, Any]:
    data = _read_small(directory / CONFIG, 64 * 1024)
    try:  # strictly, as every other input: no duplicate names, NaN or trailing bytes
        doc = parse_strict(data, max_bytes=64 * 1024)
    except (MalformedReceiptError, ValueError):
        raise LogError(f"{directory / CONFIG} is not strict JSON", reason="malformed_log") from None
    if type(doc) is not dict or doc.get("format") != FORMAT or type(doc.get("origin")) is not str:
        raise LogError(f"{directory / CONFIG} is not a {FORMAT} config", reason="malformed_log")
    return doc


# -- proofs ------------------------------------------------------------------------------------


class InclusionProof:
    """RFC 9162 inclusion proof of one log entry against a signed checkpoint."""

    __slots__ = ("audit_path", "checkpoint", "index", "leaf_hash", "root", "tree_size")

    def __init__(
        self, index: int, tree_size: int, leaf: bytes, path: list[bytes], root: bytes,
        checkpoint: bytes,
    ) -> None:  # fmt: skip
        self.index, self.tree_size, self.leaf_hash = index, tree_size, leaf
        self.audit_path, self.root, self.checkpoint = path, root, checkpoint

    def verify(self, receipt_bytes: bytes | None = None) -> bool:
        """Whether the path leads from the leaf (or from ``receipt_bytes``' leaf hash) to
        the root at ``tree_size`` and the checkpoint says that root. The checkpoint's
        signature is not checked here: see :meth:`Checkpoint.verify`."""
        leaf = self.leaf_hash if receipt_bytes is None else leaf_hash(receipt_bytes)
        try:
            cp = Checkpoint.parse(self.checkpoint)
        except LogError:
            return False
        return (
            cp.size == self.tree_size
            and cp.root == self.root
            and verify_inclusion(self.index, self.tree_size, leaf, self.audit_path, self.root)
        )

    def to_json(self) -> dict[str, Any]:
        """A self-contained proof document (hex hashes, the checkpoint note as text)."""
        return {
            "proof_type": "rfc9162-inclusion",
            "index": self.index,
            "tree_size": self.tree_size,
            "leaf_hash": self.leaf_hash.hex(),
            "root": self.root.hex(),
            "audit_path": [h.hex() for h in self.audit_path],
            "checkpoint": self.checkpoint.decode("utf-8"),
        }


class ConsistencyProof:
    """RFC 9162 consistency proof from an older tree size to a signed checkpoint."""

    __slots__ = ("checkpoint", "new_root", "new_size", "old_root", "old_size", "path")

    def __init__(
        self, old_size: int, new_size: int, old_root: bytes, new_root: bytes,
        path: list[bytes], checkpoint: bytes,
    ) -> None:  # fmt: skip
        self.old_size, self.new_size, self.old_root, self.new_root = (
            old_size, new_size, old_root, new_root,
        )  # fmt: skip
        self.path, self.checkpoint = path, checkpoint

    def verify(self) -> bool:
        """RFC 9162 section 2.1.4.2 over the stated roots (signatures not checked)."""
        return verify_consistency(
            self.old_size, self.new_size, self.old_root, self.new_root, self.path
        )

    def to_json(self) -> dict[str, Any]:
        """A self-contained proof document (hex hashes, the checkpoint note as text)."""
        return {
            "proof_type": "rfc9162-consistency",
            "old_size": self.old_size,
            "new_size": self.new_size,
            "old_root": self.old_root.hex(),
            "new_root": self.new_root.hex(),
            "consistency_path": [h.hex() for h in self.path],
            "checkpoint": self.checkpoint.decode("utf-8"),
        }


# -- the log ------------------------------------------------------------------------------------


class _Scan:
    """Committed records found by scanning ``entries`` from a known state."""

    __slots__ = ("clean", "end", "n", "new", "note", "stack")

    def __init__(self) -> None:
        self.n = 0
        self.end = 0
        self.note = b""
        self.stack: list[bytes] = []
        self.new: list[tuple[bytes, int, bytes, list[bytes]]] = []
        """(leaf hash, record offset, receipt id, tree nodes) of each newly committed entry."""
        self.clean = True
        """Whether scanning stopped at the end of the file or an incomplete last record."""


class ReceiptLog:
    """An append-only, signed log of receipts in ``directory``.

    ``ReceiptLog(directory, signer=signer)`` opens the log for appending, creating it
    (with ``origin``, default ``langgraph-erasure-receipts/<random id>``) if the
    directory does not exist or is empty; the signer must be the key the log was created
    with. ``ReceiptLog(directory)`` opens an existing log read-only (proofs, look-ups).
    Safe for threads and for any number of processes (``flock`` on ``lock``). Pass it as
    a saver's ``archive=`` to log every receipt the saver issues.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        signer: Signer | None = None,
        *,
        origin: str | None = None,
        witnesses: Sequence[WitnessEndpoint] | None = None,
        witness_timeout: float = 5.0,
    ) -> None:
        if signer is not None and not isinstance(signer, Signer):
            raise ArgumentTypeError("signer= must be an erasure_receipts.Signer")
        if signer is not None and fcntl is None:
            raise LogError(_NO_FLOCK, reason="unsupported_platform")
        self.directory = Path(directory)
        self.signer = signer
        self._mutex = threading.Lock()
        self._pid = -1
        self._lock_fd = -1
        self._state: tuple[int, int, int] | None = None  # (n, end, entries inode)
        self._tree = MerkleTree()
        self._note = b""
        self._by_hash: dict[bytes, int] | None = None
        self._by_id: dict[bytes, int] | None = None
        self._mem_nodes: list[bytes] = []  # nodes beyond the tree file (read-only use)
        self._mem_index: list[tuple[bytes, int, bytes]] = []
        self._disk_n = 0  # entries the derived files hold (read-only use)
        if not is_log(self.directory):
            if signer is None:
                if not self.directory.exists():
                    raise InputError(f"no receipt log at {self.directory}")
                raise LogError(f"{self.directory} is not a receipt log", reason="not_a_log")
            self._create(origin)
        conf = _read_config(self.directory)
        self.origin: str = conf["origin"]
        if origin is not None and origin != self.origin:
            raise LogError(
                f"the log's origin is {self.origin!r}, not {origin!r}", reason="bad_origin"
            )
        try:
            self.public_key: PublicKey | None = PublicKey.from_base64(conf["public_key"])
        except (Error, KeyError, TypeError):
            self.public_key = None
        if signer is not None and self.public_key != signer.public_key:
            raise LogError(
                f"the log {self.directory} is signed by key "
                f"{self.public_key.key_id[:16] if self.public_key else '?'}, not by this "
                f"signer ({signer.key_id[:16]}); a log has one key",
                reason="wrong_key",
            )
        self.witnesses: list[WitnessEndpoint] = (
            list(witnesses) if witnesses is not None else _conf_witnesses(conf, self.directory)
        )
        """Where each new checkpoint is sent for cosignatures (``log.conf``'s
        ``witnesses`` unless given)."""
        self.witness_timeout = witness_timeout

    def __repr__(self) -> str:
        return f"ReceiptLog({str(self.directory)!r}, origin={self.origin!r})"

    def __str__(self) -> str:
        return str(self.directory)

    # -- creation and locking ----------------------------------------------------------

    def _create(self, origin: str | None) -> None:
        assert self.signer is not None
        d = self.directory
        if d.exists() and not d.is_dir():
            raise LogError(f"{d} exists and is not a directory", reason="not_a_log")
        origin = _check_name(origin or f"langgraph-erasure-receipts/{uuid.uuid4()}")
        d.mkdir(parents=True, exist_ok=True)
        stray = {p.name for p in d.iterdir()} - {LOCK, CHECKPOINT + ".tmp", ".conf.tmp"}
        if stray and not is_log(d):
            raise LogError(
                f"{d} is not empty and not a receipt log; refusing to create one there",
                reason="not_a_log",
            )
        with self._locked(exclusive=True, sync=False):
            if is_log(d):  # another process created it meanwhile
                return
            key = self.signer.public_key
            conf = {
                "format": FORMAT,
                "origin": origin,
                "public_key": key.b64(),
                "key_id": key.key_id,
                "verifier_key": verifier_key(origin, key),
            }
            note = Checkpoint.sign(origin, 0, EMPTY_ROOT, self.signer)
            fd = os.open(d / ENTRIES, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _write_all(fd, MAGIC + _record(TAG_CHECKPOINT, note))
                os.fsync(fd)
            finally:
                os.close(fd)
            for name in (TREE, INDEX):
                os.close(os.open(d / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
            _publish(d, note)
            tmp = d / ".conf.tmp"
            tmp.write_text(json.dumps(conf, indent=2) + "\n", encoding="utf-8")
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, d / CONFIG)  # last: the directory is a log from here on
            _fsync_dir(d)

    def _lock_file(self) -> int:
        if self._pid != os.getpid():  # a fork must not share the parent's flock
            self._lock_fd = -1
            self._state = None
            self._by_hash = self._by_id = None
        if self._lock_fd < 0:
            path = self.directory / LOCK
            try:
                self._lock_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                if self.signer is not None:
                    raise
                try:  # a reader of a log it may not write (read-only media, other owner)
                    self._lock_fd = os.open(path, os.O_RDONLY)
                except OSError:
                    self._lock_fd = -2  # no lock file to share: read without one
            self._pid = os.getpid()
        return self._lock_fd

    @contextlib.contextmanager
    def _locked(self, *, exclusive: bool, sync: bool = True) -> Iterator[None]:
        with self._mutex:
            # Without fcntl there are no writers (ReceiptLog refuses a signer), and a
            # reader ignores an incomplete tail anyway: it reads without a lock.
            fd = self._lock_file() if fcntl is not None else -2
            if fd >= 0:
                fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                if sync:
                    self._sync(write=exclusive and self.signer is not None)
                yield
            finally:
                if fd >= 0:
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Release the lock file descriptor (the log stays usable: it is reopened)."""
        with self._mutex:
            if self._lock_fd >= 0 and self._pid == os.getpid():
                os.close(self._lock_fd)
            self._lock_fd = -1

    def __enter__(self) -> ReceiptLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- bringing the in-memory state to the committed state on disk --------------------

    def _sync(self, *, write: bool) -> None:
        """Under the lock: find the committed end of ``entries`` (repairing after a crash
        when ``write``: cut an interrupted tail, complete the derived files)."""
        d = self.directory
        try:
            fh = open(d / ENTRIES, "rb")  # noqa: SIM115
        except OSError as exc:
            raise InputError(f"cannot read {d / ENTRIES}: {exc.strerror or exc}") from None
        with fh:
            st = os.fstat(fh.fileno())
            state = self._state
            if state is not None and state[2] == st.st_ino and st.st_size >= state[1]:
                if st.st_size == state[1]:
                    return
                scan = self._scan(fh, state[1], state[0], self._tree.perfect_roots())
                if scan.clean:
                    self._commit_scan(fh, st, scan, state[0], write, cold=False)
                    return
            self._cold(fh, st, write)

    def _cold(self, fh: BinaryIO, st: os.stat_result, write: bool) -> None:
        """Find the committed state from the derived files' resume point (or, if they
        disagree with the log, from the start). Never cuts more than an interrupted
        append: bytes that are not a record, or fewer entries than the published
        checkpoint covers, make the log corrupt (nothing is appended to it)."""
        d = self.directory
        fh.seek(0)
        if fh.read(len(MAGIC)) != MAGIC:
            raise LogCorruptError(f"{d / ENTRIES} is not a receipt log", reason="malformed_log")
        self._by_hash = self._by_id = None
        self._state = None
        head = self._head_size()
        derived = self._derived_count()
        scan: _Scan | None = None
        for k in dict.fromkeys((derived, 0)):
            start = self._resume_point(fh, k)
            if start is None:
                continue
            scan = self._scan(fh, start[0], k, start[1])
            if scan.clean and scan.n >= head:
                self._commit_scan(fh, st, scan, k, write, cold=True)
                return
        n = scan.n if scan is not None else 0
        raise LogCorruptError(
            f"{d}: the records of the log stop being valid after entry {n - 1}"
            + (f" while its published checkpoint covers {head} entries" if head > n else "")
            + "; run `receipt log verify` to find the first bad entry"
        )

    def _head_size(self) -> int:
        """Tree size of the published checkpoint (-1 if it cannot be read)."""
        try:
            cp = Checkpoint.parse(_read_small(self.directory / CHECKPOINT, MAX_NOTE))
        except (InputError, LogError):
            return -1
        return cp.size if cp.origin == self.origin else -1

    def _derived_count(self) -> int:
        d = self.directory
        try:
            n_idx = os.stat(d / INDEX).st_size // _INDEX.size
            nodes = os.stat(d / TREE).st_size // _HASH
        except OSError:
            return 0
        n = min(n_idx, (nodes + 64) // 2)
        while n and _nodes(n) > nodes:
            n -= 1
        return n

    def _resume_point(self, fh: BinaryIO, k: int) -> tuple[int, list[bytes]] | None:
        """Where to scan from when the derived files hold ``k`` entries: just after entry
        ``k - 1``'s record, with the tree's perfect subtree roots at size ``k``."""
        if k == 0:
            return len(MAGIC), []
        d = self.directory
        try:
            with open(d / INDEX, "rb") as ix, open(d / TREE, "rb") as tr:
                ix.seek((k - 1) * _INDEX.size)
                leaf, off, _ = _INDEX.unpack(ix.read(_INDEX.size))
                tr.seek(_leaf_pos(k - 1) * _HASH)
                if tr.read(_HASH) != leaf:
                    return None
                roots = []
                lo = 0
                for height in range(k.bit_length() - 1, -1, -1):
                    if k >> height & 1:
                        tr.seek(_node_pos(height, lo >> height) * _HASH)
                        roots.append(tr.read(_HASH))
                        lo += 1 << height
        except (OSError, struct.error):
            return None
        fh.seek(off)
        head = fh.read(5)
        if len(head) < 5:
            return None
        tag, n = _HEAD.unpack(head)
        if tag != TAG_ENTRY:
            return None
        fh.seek(off + 5 + n)
        if fh.read(_HASH) != leaf:
            return None
        return off + 5 + n + _HASH, roots

    def _scan(self, fh: BinaryIO, pos: int, n: int, roots: list[bytes]) -> _Scan:
        """Committed records from ``pos``, where the tree has ``n`` leaves (``roots``)."""
        out = _Scan()
        out.n, out.end, out.stack = n, pos, roots
        tree = MerkleTree.from_perfect_roots(n, roots)
        pending: list[tuple[bytes, int, bytes, list[bytes]]] = []
        for rec in _records(fh, pos):
            if isinstance(rec, int):
                # An incomplete record at the very end is an interrupted append; bytes
                # that can never become a record are not.
                out.clean = _tail_is_incomplete(fh, rec)
                break
            if rec.hash != leaf_hash(rec.payload):
                out.clean = False
                break
            if rec.tag == TAG_ENTRY:
                nodes = tree.append_hash_nodes(rec.hash)
                pending.append((rec.hash, rec.start, b"", nodes))  # ids: _fill_ids
                continue
            try:
                cp = Checkpoint.parse(rec.payload)
            except LogError:
                out.clean = False
                break
            if cp.origin != self.origin or cp.size != tree.size or cp.root != tree.root():
                out.clean = False
                break
            out.new.extend(pending)
            pending = []
            out.n, out.end, out.note = tree.size, rec.end, rec.payload
            out.stack = tree.perfect_roots()
        return out

    def _commit_scan(
        self, fh: BinaryIO, st: os.stat_result, scan: _Scan, k: int, write: bool, *, cold: bool
    ) -> None:
        """Adopt a scan's committed state (the derived files are known to hold ``k``
        entries); with ``write``, cut the interrupted tail and bring the derived files to
        exactly the committed entries, else keep what they lack in memory."""
        d = self.directory
        self._fill_ids(fh, scan)
        if scan.note:
            note = scan.note
        elif self._note and not cold:
            note = self._note
        else:
            note = self._last_note(fh, scan.end)
        if (
            write
            and self.public_key is not None
            and scan.new
            and Checkpoint.parse(note).signed_by(self.public_key) is not True
        ):
            raise LogCorruptError(f"{d}: the last checkpoint record is not signed by the log's key")
        if write:
            if st.st_size > scan.end:
                os.truncate(d / ENTRIES, scan.end)
            self._repair_derived(k, scan)
            self._disk_n = scan.n
            self._mem_nodes, self._mem_index = [], []
            if self._published() != note:
                _publish(d, note)
        else:
            if cold:
                self._disk_n, self._mem_nodes, self._mem_index = k, [], []
            self._mem_nodes += [x for e in scan.new for x in e[3]]
            self._mem_index += [(h, off, rid) for h, off, rid, _ in scan.new]
            if self._derived_count() >= scan.n:  # another writer completed them
                self._disk_n, self._mem_nodes, self._mem_index = scan.n, [], []
        if self._by_hash is not None and self._by_id is not None:
            base = scan.n - len(scan.new)
            for i, (h, _, rid, _) in enumerate(scan.new):
                self._by_hash.setdefault(h, base + i)
                if any(rid):
                    self._by_id.setdefault(rid, base + i)
        self._tree = MerkleTree.from_perfect_roots(scan.n, scan.stack)
        self._note = note
        self._state = (scan.n, scan.end, st.st_ino)

    def _fill_ids(self, fh: BinaryIO, scan: _Scan) -> None:
        """The receipt ids of a scan's new entries: from ``index`` where it already has
        them (another process appended them), else read from the entries themselves."""
        new = scan.new
        if not new:
            return
        base = scan.n - len(new)
        try:
            with open(self.directory / INDEX, "rb") as ix:
                ix.seek(base * _INDEX.size)
                blob = ix.read(len(new) * _INDEX.size)
        except OSError:
            blob = b""
        for i, (h, off, rid, nodes) in enumerate(new):
            if rid:
                continue
            if (i + 1) * _INDEX.size <= len(blob):
                stored_h, stored_off, stored_id = _INDEX.unpack_from(blob, i * _INDEX.size)
                if stored_h == h and stored_off == off:
                    new[i] = (h, off, stored_id, nodes)
                    continue
            fh.seek(off)
            _tag, n = _HEAD.unpack(fh.read(5))
            new[i] = (h, off, _receipt_id(fh.read(n)), nodes)

    def _last_note(self, fh: BinaryIO, end: int) -> bytes:
        """The payload of the checkpoint record that ends at ``end`` (searched backwards:
        a note is at most ``MAX_NOTE`` bytes)."""
        start = max(len(MAGIC), end - (5 + MAX_NOTE + _HASH))
        fh.seek(start)
        blob = fh.read(end - start)
        for i in range(len(blob) - _HASH - 5, -1, -1):
            if blob[i] == TAG_CHECKPOINT:
                n = int.from_bytes(blob[i + 1 : i + 5], "big")
                if i + 5 + n + _HASH == len(blob):
                    payload = blob[i + 5 : i + 5 + n]
                    if leaf_hash(payload) == blob[-_HASH:]:
                        return payload
        raise LogCorruptError(f"{self.directory}: no checkpoint record before offset {end}")

    def _published(self) -> bytes:
        try:
            return (self.directory / CHECKPOINT).read_bytes()
        except OSError:
            return b""

    def _repair_derived(self, k: int, scan: _Scan) -> None:
        """Make ``index`` and ``tree`` hold exactly the committed entries."""
        d = self.directory
        n = scan.n
        want_idx, want_tree = n * _INDEX.size, _nodes(n) * _HASH
        try:
            have_idx, have_tree = os.stat(d / INDEX).st_size, os.stat(d / TREE).st_size
        except OSError:
            have_idx = have_tree = -1
        if have_idx == want_idx and have_tree == want_tree:
            return
        base = n - len(scan.new)
        if have_idx < base * _INDEX.size or have_tree < _nodes(base) * _HASH:
            # Older entries are missing too: rebuild both from the whole log.
            with open(d / ENTRIES, "rb") as fh:
                full = self._scan(fh, len(MAGIC), 0, [])
                self._fill_ids(fh, full)
            if full.n < n:
                raise LogCorruptError(f"{d}: cannot rebuild the derived files")
            scan, base = full, 0
        for name, size in ((INDEX, base * _INDEX.size), (TREE, _nodes(base) * _HASH)):
            with open(d / name, "ab") as fh:
                fh.truncate(size)
        self._append_derived(scan.new)

    def _append_derived(self, new: Sequence[tuple[bytes, int, bytes, list[bytes]]]) -> None:
        d = self.directory
        idx = b"".join(_INDEX.pack(h, off, rid) for h, off, rid, _ in new)
        nodes = b"".join(x for e in new for x in e[3])
        for name, data in ((INDEX, idx), (TREE, nodes)):
            fd = os.open(d / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)

    # -- look-ups ------------------------------------------------------------------------

    def _load_lookups(self) -> tuple[dict[bytes, int], dict[bytes, int]]:
        if self._by_hash is None or self._by_id is None:
            by_hash: dict[bytes, int] = {}
            by_id: dict[bytes, int] = {}
            assert self._state is not None
            n = self._state[0]
            disk = min(n, self._disk_n)
            with open(self.directory / INDEX, "rb") as fh:
                blob = fh.read(disk * _INDEX.size)
            items = [
                _INDEX.unpack_from(blob, i * _INDEX.size) for i in range(len(blob) // _INDEX.size)
            ]
            items += [(h, off, rid) for h, off, rid in self._mem_index]
            for i, (h, _, rid) in enumerate(items[:n]):
                by_hash.setdefault(h, i)
                if any(rid):
                    by_id.setdefault(rid, i)
            self._by_hash, self._by_id = by_hash, by_id
        return self._by_hash, self._by_id

    def _index_record(self, i: int) -> tuple[bytes, int, bytes]:
        if i >= self._disk_n:
            return self._mem_index[i - self._disk_n]
        with open(self.directory / INDEX, "rb") as fh:
            fh.seek(i * _INDEX.size)
            h, off, rid = _INDEX.unpack(fh.read(_INDEX.size))
        return h, off, rid

    def _perfect(self, fh: BinaryIO) -> Callable[[int, int], bytes]:
        disk_nodes = _nodes(self._disk_n)

        def perfect(height: int, i: int) -> bytes:
            pos = _node_pos(height, i)
            if pos >= disk_nodes:
                return self._mem_nodes[pos - disk_nodes]
            fh.seek(pos * _HASH)
            return fh.read(_HASH)

        return perfect

    # -- the public API ---------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Entries in the log (the tree size of its latest checkpoint)."""
        with self._locked(exclusive=self.signer is not None):
            assert self._state is not None
            return self._state[0]

    def root(self) -> bytes:
        """The RFC 9162 root of all entries (the latest checkpoint's root hash)."""
        with self._locked(exclusive=self.signer is not None):
            return self._tree.root()

    def checkpoint(self) -> bytes:
        """The latest signed checkpoint (C2SP note bytes), published again if a crash
        left the ``checkpoint`` file behind the log."""
        with self._locked(exclusive=self.signer is not None):
            return self._note

    def check_writable(self) -> None:
        """Raise ``LogError`` unless appends can work (a signer; a writable directory)."""
        if self.signer is None:
            raise LogError(
                f"{self.directory}: opened without a signer (read-only)", reason="read_only"
            )
        if not os.access(self.directory, os.W_OK | os.X_OK) or not os.access(
            self.directory / ENTRIES, os.W_OK
        ):
            raise LogError(f"{self.directory} is not writable", reason="unwritable")

    def append(self, receipt: Receipt | bytes) -> int:
        """Add one receipt (a ``Receipt`` is stored as its file bytes, ``to_json()``);
        returns its index. Durable when it returns; identical bytes already in the log
        return their existing index; a different receipt with an id already in the log
        raises ``LogConflictError``."""
        return self.append_many([receipt])[0]

    def append_many(self, receipts: Iterable[Receipt | bytes]) -> list[int]:
        """Add several receipts under one checkpoint (one write, one fdatasync); returns
        their indexes in order (see :meth:`append`)."""
        if self.signer is None:
            raise LogError(
                f"{self.directory}: opened without a signer (read-only)", reason="read_only"
            )
        items: list[tuple[bytes, bytes, bytes]] = []
        for r in receipts:
            if isinstance(r, Receipt):
                data = r.to_json()
                rid = uuid.UUID(r.receipt_id).bytes
            elif isinstance(r, bytes | bytearray | memoryview):
                data = bytes(r)
                if len(data) > MAX_INPUT_BYTES:
                    raise LogError("a receipt is at most 1 MiB", reason="too_large")
                rid = uuid.UUID(Receipt.from_json(data).receipt_id).bytes  # refuses garbage
            else:
                raise ArgumentTypeError(
                    f"append() takes a Receipt or bytes, not {type(r).__name__}"
                )
            items.append((data, leaf_hash(data), rid))
        with self._locked(exclusive=True):
            out = self._append_locked(items)
        if self.witnesses:
            self.push_witnesses()  # never raises: a witness that is down loses no append
        return out

    def _append_locked(self, items: list[tuple[bytes, bytes, bytes]]) -> list[int]:
        assert self.signer is not None and self._state is not None
        by_hash, by_id = self._load_lookups()
        n, end, ino = self._state
        out: list[int] = []
        new: list[tuple[bytes, int, bytes, list[bytes]]] = []
        records: list[bytes] = []
        tree = MerkleTree.from_perfect_roots(n, self._tree.perfect_roots())
        batch: dict[bytes, int] = {}
        pos = end
        for data, h, rid in items:
            known = by_hash.get(h, batch.get(h))
            if known is not None:
                out.append(known)
                continue
            other = by_id.get(rid)
            if other is not None or any(rid == e[2] for e in new):
                raise LogConflictError(
                    f"{self.directory}: a different receipt with id {uuid.UUID(bytes=rid)} "
                    f"is already in the log (entry {other}); not adding this one"
                )
            rec = _record(TAG_ENTRY, data)
            new.append((h, pos, rid, tree.append_hash_nodes(h)))
            records.append(rec)
            batch[h] = tree.size - 1
            out.append(tree.size - 1)
            pos += len(rec)
        if not new:
            return out
        note = Checkpoint.sign(self.origin, tree.size, tree.root(), self.signer)
        records.append(_record(TAG_CHECKPOINT, note))
        blob = b"".join(records)
        fd = os.open(self.directory / ENTRIES, os.O_WRONLY | os.O_APPEND)
        try:
            try:
                _write_all(fd, blob)
                _fdatasync(fd)  # the commit point
            except BaseException:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, end)  # not committed: leave the old log
                self._state = None
                raise
        finally:
            os.close(fd)
        self._state = (tree.size, end + len(blob), ino)
        self._tree = tree
        self._note = note
        for i, (h, _, rid, _) in enumerate(new):
            by_hash[h] = n + i
            if any(rid):
                by_id[rid] = n + i
        try:
            self._append_derived(new)
            self._disk_n = tree.size
            _publish(self.directory, note)
        except BaseException:
            self._state = None  # repaired by the next call (the entries are committed)
            raise
        return out

    def index_of(self, receipt: Receipt | bytes) -> int | None:
        """The index of these exact receipt bytes in the log, or None."""
        data = receipt.to_json() if isinstance(receipt, Receipt) else bytes(receipt)
        h = leaf_hash(data)
        with self._locked(exclusive=self.signer is not None):
            by_hash, _ = self._load_lookups()
            return by_hash.get(h)

    def entry(self, index: int) -> bytes:
        """The stored bytes of entry ``index``."""
        with self._locked(exclusive=self.signer is not None):
            assert self._state is not None
            if not 0 <= index < self._state[0]:
                raise IndexError(f"entry {index} is outside a log of {self._state[0]}")
            _, off, _ = self._index_record(index)
            with open(self.directory / ENTRIES, "rb") as fh:
                fh.seek(off)
                _tag, n = _HEAD.unpack(fh.read(5))
                return fh.read(n)

    def entries(self) -> Iterator[tuple[int, bytes]]:
        """Every committed entry as ``(index, bytes)``, in order (read without the lock:
        entries appended meanwhile are left out)."""
        with self._locked(exclusive=self.signer is not None):
            assert self._state is not None
            n = self._state[0]
        yield from read_entries(self.directory, limit=n)

    def inclusion_proof(self, index: int, checkpoint: bytes | None = None) -> InclusionProof:
        """RFC 9162 inclusion proof of entry ``index`` against the latest checkpoint (or
        against an older ``checkpoint`` of this log, e.g. its cosigned one), read from the
        stored subtree roots in O(log n); checked before it is returned."""
        with self._locked(exclusive=self.signer is not None):
            assert self._state is not None
            n = self._state[0]
            note = self._note
            if checkpoint is not None:
                note, n = checkpoint, self._older(checkpoint, n)
            if not 0 <= index < n:
                raise IndexError(f"entry {index} is outside a log of {n}")
            leaf = self._index_record(index)[0]
            with open(self.directory / TREE, "rb") as fh:
                perfect = self._perfect(fh)
                path = audit_path(index, n, lambda lo, hi: subtree_root(lo, hi, perfect))
                root = self._tree.root() if n == self._state[0] else subtree_root(0, n, perfect)
            proof = InclusionProof(index, n, leaf, path, root, note)
        if not proof.verify():
            raise LogCorruptError(f"{self.directory}: stored tree nodes are damaged")
        return proof

    def consistency_proof(self, old_size: int, checkpoint: bytes | None = None) -> ConsistencyProof:
        """RFC 9162 consistency proof from the log at ``old_size`` entries to the latest
        checkpoint (or to an older ``checkpoint`` of this log), in O(log n); checked
        before it is returned."""
        with self._locked(exclusive=self.signer is not None):
            assert self._state is not None
            n = self._state[0]
            note = self._note
            if checkpoint is not None:
                note, n = checkpoint, self._older(checkpoint, n)
            if not 0 <= old_size <= n:
                raise ConfigurationError(f"the log has {n} entries; no proof from size {old_size}")
            with open(self.directory / TREE, "rb") as fh:
                perfect = self._perfect(fh)

                def root(lo: int, hi: int) -> bytes:
                    return subtree_root(lo, hi, perfect)

                path = consistency_path(old_size, n, root)
                old_root = root(0, old_size) if old_size else EMPTY_ROOT
                new_root = root(0, n) if n else EMPTY_ROOT
            proof = ConsistencyProof(old_size, n, old_root, new_root, path, note)
        if not proof.verify():
            raise LogCorruptError(f"{self.directory}: stored tree nodes are damaged")
        return proof

    def _older(self, checkpoint: bytes, n: int) -> int:
        """Under the lock: the size of ``checkpoint``, a checkpoint of this log whose
        root is the log's root at its size (``LogError`` otherwise)."""
        cp = Checkpoint.parse(checkpoint)
        if cp.origin != self.origin or cp.size > n:
            raise _bad(f"not a checkpoint of this log ({cp.origin!r}, size {cp.size})")
        with open(self.directory / TREE, "rb") as fh:
            perfect = self._perfect(fh)
            root = subtree_root(0, cp.size, perfect) if cp.size else EMPTY_ROOT
        if root != cp.root:
            raise _bad(f"the checkpoint at size {cp.size} is not this log's tree at that size")
        return cp.size

    # -- witnesses ---------------------------------------------------------------------

    def cosigned(self) -> bytes:
        """The latest checkpoint the witnesses cosigned, with their cosignatures (the
        ``cosigned`` file; the latest checkpoint, without cosignatures, if there is
        none yet)."""
        try:
            return _read_small(self.directory / COSIGNED, MAX_NOTE)
        except InputError:
            if (self.directory / COSIGNED).exists():
                raise
            return self.checkpoint()

    def witness_status(self) -> dict[str, dict[str, Any]]:
        """Per witness name: ``url``, ``size`` (the tree size the witness last said it
        holds), ``cosigned_size`` (of its last cosignature), ``error`` (of the last push,
        or None) and ``at`` (POSIX time of the last push), from ``witnesses.json``."""
        try:
            doc = parse_strict(_read_small(self.directory / WITNESSES, 1 << 20))
        except (InputError, MalformedReceiptError, ValueError, LogError):
            return {}
        return doc if type(doc) is dict else {}

    def add_witness(self, witness: WitnessEndpoint) -> None:
        """Add (or replace, by name) a witness in ``log.conf``: every later append sends
        its checkpoint there. Call :meth:`push_witnesses` to send the current one."""
        with self._locked(exclusive=True, sync=False):
            conf = _read_config(self.directory)
            ws = [w for w in conf.get("witnesses", []) if w.get("name") != witness.name]
            ws.append({"name": witness.name, "url": witness.url, "vkey": witness.vkey})
            conf["witnesses"] = ws
            _replace_file(self.directory, CONFIG, (json.dumps(conf, indent=2) + "\n").encode())
        self.witnesses = [w for w in self.witnesses if w.name != witness.name] + [witness]

    def push_witnesses(self) -> dict[str, dict[str, Any]]:
        """Send the latest checkpoint to every witness (tlog-witness ``add-checkpoint``,
        with the old size each last reported and a consistency proof; on 409, once more
        from the size it returns), keep their valid cosignatures in ``cosigned`` and
        each one's outcome in ``witnesses.json``; returns that status. Never raises for
        a witness's failure (it is in the status); pushes are serialised by
        ``witness.lock``."""
        if fcntl is None:  # pragma: no cover
            raise LogError(_NO_FLOCK, reason="unsupported_platform")
        fd = os.open(self.directory / WITNESS_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            note = self.checkpoint()
            cp = Checkpoint.parse(note)
            status = self.witness_status()
            lines: dict[str, bytes] = {}
            try:
                prev = Checkpoint.parse(self.cosigned())
                if prev.text == cp.text:
                    for w in self.witnesses:
                        lines.update((w.name, x) for x in prev.signature_lines(w.name)[-1:])
            except (LogError, InputError):
                pass
            for w in self.witnesses:
                st = dict(status.get(w.name) or {})
                st.update(url=w.url, at=int(time.time()), error=None)
                try:
                    line = self._push_one(w, note, cp, st)
                except (OSError, ValueError, LogError) as exc:
                    msg = exc.message if isinstance(exc, LogError) else str(exc) or repr(exc)
                    st["error"] = f"{w.url}: {msg}"
                else:
                    lines[w.name] = line
                    st["cosigned_size"] = cp.size
                status[w.name] = st
            if lines:
                _replace_file(self.directory, COSIGNED, note + b"".join(lines.values()))
            _replace_file(self.directory, WITNESSES, (json.dumps(status, indent=2) + "\n").encode())
            return status
        finally:
            os.close(fd)

    def _push_one(
        self, w: WitnessEndpoint, note: bytes, cp: Checkpoint, st: dict[str, Any]
    ) -> bytes:
        old = st.get("size")
        old = old if type(old) is int and 0 <= old <= cp.size else 0
        for _attempt in range(3):
            proof = self.consistency_proof(old, note).path if old else []
            body = b"old %d\n" % old + b"".join(b64encode(h).encode() + b"\n" for h in proof)
            status, ctype, answer = _post(w.url, body + b"\n" + note, self.witness_timeout)
            first = answer.decode("utf-8", "replace").split("\n", 1)[0][:200]
            if status == 200:
                got = Checkpoint.parse(note + answer)
                ts = got.cosigned_by(w.name, w.key)  # bad_cosignature if forged
                if ts is None:
                    raise LogError("answered 200 without its cosignature", reason="bad_cosignature")
                st["size"] = cp.size
                return got.signature_lines(w.name)[-1]
            if status != 409:
                raise LogError(f"HTTP {status}: {first}", reason="witness_refused")
            if not ctype.startswith("text/x.tlog.size") or not first.isdigit():
                raise LogError(f"HTTP 409 without a tree size: {first}", reason="witness_refused")
            theirs = int(first)
            st["size"] = theirs
            if theirs == old or theirs > cp.size:
                raise LogError(
                    f"HTTP 409: the witness holds a checkpoint of size {theirs} "
                    + ("with another root (split view?)" if theirs == old
                       else f"above this log's {cp.size} (split view?)"),
                    reason="witness_conflict",
                )  # fmt: skip
            old = theirs
        raise LogError("the witness kept answering 409", reason="witness_conflict")

    # -- trusted time ------------------------------------------------------------------

    def timestamp(self, tsa: TsaClient) -> tuple[int, bytes]:
        """Time-stamp the latest checkpoint with an RFC 3161 TSA (the imprint is SHA-256
        of its note text) and keep the response as ``timestamps/<size>.tsr``, replaced
        crash-safely (temp file, fsync, rename, directory fsync); returns ``(size,
        response)``. Needs no signing key: a token authenticates itself. The TSA is
        asked outside the log's lock; ``TimestampError`` if it cannot be obtained."""
        cp = Checkpoint.parse(self.checkpoint())
        token = tsa.stamp(cp.text)
        d = self.directory / TIMESTAMPS
        if not d.is_dir():
            d.mkdir(exist_ok=True)
            _fsync_dir(self.directory)
        _replace_file(d, f"{cp.size}.tsr", token)
        return cp.size, token

    def timestamp_sizes(self) -> list[int]:
        """The tree sizes whose checkpoints have a stored time-stamp, ascending."""
        try:
            names = os.listdir(self.directory / TIMESTAMPS)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise InputError(f"cannot read {self.directory / TIMESTAMPS}: {exc}") from None
        out = []
        for n in names:
            num, dot, ext = n.partition(".")
            if ext == "tsr" and dot and num.isascii() and num.isdigit() and str(int(num)) == num:
                out.append(int(num))
        return sorted(out)

    def timestamp_token(self, size: int) -> bytes | None:
        """The stored time-stamp response of the checkpoint of ``size``, or None."""
        from .timestamp import MAX_TOKEN

        path = self.directory / TIMESTAMPS / f"{size}.tsr"
        if not path.exists():
            return None
        return _read_small(path, MAX_TOKEN)


def _conf_witnesses(conf: dict[str, Any], directory: Path) -> list[WitnessEndpoint]:
    out = []
    ws = conf.get("witnesses", [])
    if type(ws) is not list:
        raise LogError(f"{directory / CONFIG}: witnesses is not a list", reason="malformed_log")
    for w in ws:
        try:
            out.append(WitnessEndpoint.from_vkey(w["vkey"], w["url"]))
        except (KeyError, TypeError, ConfigurationError, LogError) as exc:
            raise LogError(
                f"{directory / CONFIG}: a witness entry is not {{name, url, vkey}} ({exc})",
                reason="malformed_log",
            ) from None
    return out


def _tail_is_incomplete(fh: BinaryIO, pos: int) -> bool:
    """Whether the bytes from ``pos`` to the end are a prefix of one record (what an
    interrupted write leaves), rather than bytes that can never become a record."""
    fh.seek(pos)
    rest = fh.read(5)
    if len(rest) < 5:
        return not rest or rest[0] in (TAG_ENTRY, TAG_CHECKPOINT)
    tag, n = _HEAD.unpack(rest)
    if tag not in (TAG_ENTRY, TAG_CHECKPOINT) or n > MAX_INPUT_BYTES:
        return False
    end: int = fh.seek(0, os.SEEK_END)
    return end < pos + 5 + int(n) + _HASH


def entry_spans(directory: str | os.PathLike[str]) -> list[tuple[int, int, int]]:
    """``(index, offset, length)`` of every entry covered by a checkpoint record, read
    from the ``entries`` file (its receipt bytes are ``length`` bytes at ``offset``).
    The records are only parsed, not verified: see :func:`verify_log`."""
    path = Path(directory) / ENTRIES
    try:
        fh = open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    with fh:
        if fh.read(len(MAGIC)) != MAGIC:
            raise LogError(f"{path} is not a receipt log", reason="malformed_log")
        spans: list[tuple[int, int, int]] = []
        committed = 0
        for rec in _records(fh, len(MAGIC)):
            if isinstance(rec, int):
                break
            if rec.tag == TAG_ENTRY:
                spans.append((len(spans), rec.start + 5, len(rec.payload)))
            else:
                committed = len(spans)
    return spans[:committed]


def read_entries(
    directory: str | os.PathLike[str], *, limit: int | None = None
) -> Iterator[tuple[int, bytes]]:
    """The entries of the log's ``entries`` file in order, as ``(index, bytes)``, up to
    ``limit`` or the last checkpoint record (no verification: see :func:`verify_log`)."""
    path = Path(directory) / ENTRIES
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed in finally: this is a generator
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        if fh.read(len(MAGIC)) != MAGIC:
            raise LogError(f"{path} is not a receipt log", reason="malformed_log")
        pending: list[bytes] = []
        i = 0
        for rec in _records(fh, len(MAGIC)):
            if isinstance(rec, int):
                return
            if rec.tag == TAG_ENTRY:
                pending.append(rec.payload)
                continue
            for data in pending:
                if limit is not None and i >= limit:
                    return
                yield i, data
                i += 1
            pending = []
    finally:
        fh.close()


# -- auditing a whole log -----------------------------------------------------------------------


class LogProblem:
    """One thing wrong with a log: the first entry it concerns (or None), a reason code
    and a message."""

    __slots__ = ("index", "message", "reason")

    def __init__(self, index: int | None, reason: str, message: str) -> None:
        self.index, self.reason, self.message = index, reason, message

    def __repr__(self) -> str:
        return f"LogProblem({self.index}, {self.reason!r})"

    def to_json(self) -> dict[str, Any]:
        """``{"index", "reason", "message"}``."""
        return {"index": self.index, "reason": self.reason, "message": self.message}


class LogReport:
    """What :func:`verify_log` established. ``ok`` only if every check passed."""

    def __init__(self, directory: str) -> None:
        self.log = directory
        self.origin: str | None = None
        self.tree_size = 0
        """Entries verified (the tree size of the newest valid checkpoint)."""
        self.root: bytes | None = None
        self.checkpoint_size: int | None = None
        """Tree size of the published checkpoint."""
        self.receipts_verified = 0
        self.uncommitted = 0
        """Entry records after the last checkpoint record: an interrupted append."""
        self.tail_bytes = 0
        """Bytes after the last checkpoint record: an interrupted append (or damage)."""
        self.problems: list[LogProblem] = []
        self.consistency: ConsistencyProof | None = None
        """With an old checkpoint: the verified proof that the log extends it."""

    @property
    def ok(self) -> bool:
        """Whether the log verified: no problem at all."""
        return not self.problems

    @property
    def first_bad_index(self) -> int | None:
        """The lowest entry index any problem concerns (None if none names one)."""
        found = [p.index for p in self.problems if p.index is not None]
        return min(found) if found else None

    def add(self, index: int | None, reason: str, message: str) -> None:
        """Record a problem."""
        self.problems.append(LogProblem(index, reason, message))

    def to_json(self) -> dict[str, Any]:
        """The ``receipt log verify --json`` document (without ``exit_code``)."""
        first = self.first_bad_index
        problems = sorted(self.problems, key=lambda p: (p.index is None, p.index or 0))
        return {
            "ok": self.ok,
            "log": self.log,
            "origin": self.origin,
            "tree_size": self.tree_size,
            "root": self.root.hex() if self.root is not None else None,
            "checkpoint_size": self.checkpoint_size,
            "receipts_verified": self.receipts_verified,
            "uncommitted_entries": self.uncommitted,
            "tail_bytes": self.tail_bytes,
            "first_bad_index": first,
            "problems": [p.to_json() for p in problems],
            "consistency": self.consistency.to_json() if self.consistency else None,
        }


ReceiptCheck = Callable[[list[tuple[int, int, int]]], list[tuple[int, str, str] | None]]
"""Verifies receipts given as ``(index, offset, length)`` in the entries file; returns,
per item, None when it verified, else ``(index, reason, message)``."""


def verify_log(
    directory: str | os.PathLike[str],
    keys: Sequence[PublicKey] | TrustStore,
    *,
    old_checkpoint: bytes | None = None,
    check_receipts: ReceiptCheck | None = None,
) -> LogReport:
    """Audit a log: recompute the tree from the stored receipt bytes, check every stored
    leaf hash and every checkpoint record, the published checkpoint's signature by one of
    ``keys``, (through ``check_receipts``) every receipt, and with ``old_checkpoint`` that
    the log is consistent with it. With a ``TrustStore``, only its receipt signers may
    have signed the checkpoints (never an approver). Problems name the first entry they
    concern:

    * ``entry_altered`` - an entry's bytes do not hash to its stored leaf hash;
    * ``checkpoint_mismatch`` - the entries before a signed checkpoint record are not
      the tree it signed (an entry altered with its hash, deleted, inserted, reordered);
    * ``entry_missing`` - the log holds fewer entries than the published checkpoint;
    * ``bad_checkpoint`` - a checkpoint is malformed or not signed by a trusted key;
    * ``malformed_log`` - the file is not a log, or holds bytes that are not records;
    * ``receipt_invalid`` - an entry is not a receipt that verifies with ``keys``;
    * ``not_consistent`` - the log does not extend ``old_checkpoint``.

    ``InputError`` if the log cannot be read at all."""
    d = Path(directory)
    report = LogReport(str(d))
    head_raw = _read_small(d / CHECKPOINT, MAX_NOTE)

    log_keys = keys.log_keys() if isinstance(keys, TrustStore) else list(keys)

    def check(cp: Checkpoint) -> None:
        if isinstance(keys, TrustStore):
            cp.verify_trusted(keys)  # names an approver's signature
        else:
            cp.verify(log_keys)

    try:
        head = Checkpoint.parse(head_raw)
        check(head)
    except LogError as exc:
        report.add(None, "bad_checkpoint", f"published checkpoint: {exc.message}")
        return report
    report.origin, report.checkpoint_size = head.origin, head.size
    old: Checkpoint | None = None
    if old_checkpoint is not None:
        try:
            old = Checkpoint.parse(old_checkpoint)
            check(old)
            if old.origin != head.origin:
                raise _bad(f"it is a checkpoint of {old.origin!r}, not of {head.origin!r}")
        except LogError as exc:
            report.add(None, "bad_checkpoint", f"old checkpoint: {exc.message}")
            old = None
    path = d / ENTRIES
    try:
        fh = open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    hashes: list[bytes] = []
    spans: list[tuple[int, int, int]] = []
    with fh:
        if fh.read(len(MAGIC)) != MAGIC:
            report.add(0, "malformed_log", f"{path} does not start with the log's magic line")
            return report
        tree = MerkleTree()
        good, good_root, good_note, good_end = 0, EMPTY_ROOT, b"", len(MAGIC)
        for rec in _records(fh, len(MAGIC)):
            if isinstance(rec, int):
                if not _tail_is_incomplete(fh, rec) and good < head.size:
                    report.add(
                        len(hashes), "malformed_log",
                        f"bytes at offset {rec} after entry {len(hashes) - 1} are not a record",
                    )  # fmt: skip
                break
            i = len(hashes)
            if rec.tag == TAG_ENTRY:
                if leaf_hash(rec.payload) != rec.hash:
                    report.add(i, "entry_altered", f"entry {i}: bytes differ from its leaf hash")
                    break
                hashes.append(rec.hash)
                spans.append((i, rec.start + 5, len(rec.payload)))
                tree.append_hash(rec.hash)
                continue
            problem = _check_record(rec, tree, head, log_keys, good, i)
            if problem is not None:
                report.add(good, *problem)
                break
            good, good_root, good_note, good_end = i, tree.root(), rec.payload, rec.end
        report.uncommitted = len(hashes) - good
        report.tail_bytes = fh.seek(0, os.SEEK_END) - good_end
    hashes, spans = hashes[:good], spans[:good]
    n = good
    if n < head.size and not any(p.index is not None for p in report.problems):
        report.add(
            n, "entry_missing",
            f"the published checkpoint covers {head.size} entries; the log's committed "
            f"records end after {n} (truncated, or entries deleted)",
        )  # fmt: skip
    if n >= head.size and head.size:
        prefix = _prefix_root(hashes, head.size)
        if prefix != head.root:
            report.add(None, "checkpoint_mismatch",
                       "the published checkpoint is not the tree of the log's first "
                       f"{head.size} entries")  # fmt: skip
    if n > head.size and good_note:
        try:
            check(Checkpoint.parse(good_note))
        except LogError as exc:
            report.add(head.size, "bad_checkpoint",
                       f"the newest checkpoint record ({n} entries): {exc.message}")  # fmt: skip
    report.tree_size, report.root = n, good_root
    if check_receipts is not None and spans:
        for res in check_receipts(spans):
            if res is None:
                report.receipts_verified += 1
            else:
                idx, reason, message = res
                report.add(idx, "receipt_invalid", f"entry {idx}: [{reason}] {message}")
    if old is not None:
        if old.size > n:
            report.add(
                n, "not_consistent",
                f"the log holds {n} entries, fewer than the {old.size} of the old checkpoint",
            )  # fmt: skip
        elif _prefix_root(hashes, old.size) != old.root:
            report.add(
                None, "not_consistent",
                f"the log's first {old.size} entries are not those the old checkpoint "
                "signed (history rewritten): the first differing entry is at or before "
                f"index {old.size - 1}",
            )  # fmt: skip
        else:
            proof = consistency_proof(hashes, old.size)
            cp = ConsistencyProof(old.size, n, old.root, good_root, proof, good_note or head_raw)
            if not cp.verify():  # pragma: no cover - the digest module's own tests cover this
                report.add(None, "not_consistent", "consistency proof does not verify")
            else:
                report.consistency = cp
    return report


def _prefix_root(hashes: Sequence[bytes], size: int) -> bytes:
    tree = MerkleTree()
    for h in hashes[:size]:
        tree.append_hash(h)
    return tree.root()


def _check_record(
    rec: _Rec, tree: MerkleTree, head: Checkpoint, keys: Sequence[PublicKey], good: int, i: int
) -> tuple[str, str] | None:
    """Problems with a checkpoint record that follows ``i`` entries (``good`` = entries
    covered by the last checkpoint record that matched)."""
    if leaf_hash(rec.payload) != rec.hash:
        return "checkpoint_mismatch", f"the checkpoint record after entry {i - 1} was altered"
    try:
        cp = Checkpoint.parse(rec.payload)
    except LogError as exc:
        return "malformed_log", f"the checkpoint record after entry {i - 1}: {exc.message}"
    if cp.origin != head.origin:
        return "checkpoint_mismatch", f"a checkpoint record of another log ({cp.origin!r})"
    if cp.size == i and cp.root == tree.root():
        return None
    try:
        cp.verify(keys)
        signed = "signed"
    except LogError:
        signed = "not validly signed (the record itself was altered)"
    if cp.size > i:
        return (
            "entry_missing",
            f"the checkpoint {signed} at size {cp.size} follows only {i} entries: "
            f"entries from {good} on were deleted",
        )
    what = (
        f"it covers {cp.size} entries but follows {i}" if cp.size != i
        else "its root is not the tree of the entries before it"
    )  # fmt: skip
    return (
        "checkpoint_mismatch",
        f"entries {good}..{i - 1} are not what the checkpoint {signed} at size {cp.size} "
        f"covers: {what} (altered, inserted or reordered)",
    )


def parallel_receipt_check(
    directory: str | os.PathLike[str], keys: TrustStore, jobs: int = 1
) -> ReceiptCheck:
    """A ``check_receipts`` for :func:`verify_log`: every entry through
    ``verify_receipt`` with ``keys``, in ``jobs`` forked processes for a large log (the
    verdicts are the same, in entry order). A receipt that does not verify is
    ``(index, reason, message)``; an unexpected exception is ``internal_error`` for that
    entry, never hiding the others' verdicts."""
    from ._batch import BATCH, PARALLEL_MIN, _read_entry, fork_map
    from .verify import verify_receipt

    path = str(directory)

    def check(span: tuple[int, int, int]) -> tuple[int, str, str] | None:
        i, offset, length = span
        try:
            verify_receipt(_read_entry(path, offset, length), keys)
        except Error as exc:
            return (i, exc.reason, exc.message)
        except Exception as exc:  # a bug must not hide the other entries' verdicts
            return (i, "internal_error", repr(exc))
        return None

    def run(spans: list[tuple[int, int, int]]) -> list[tuple[int, str, str] | None]:
        if len(spans) >= BATCH:
            from .canonical import use_orjson

            use_orjson()
        if jobs > 1 and len(spans) >= PARALLEL_MIN:
            return list(fork_map(check, spans, jobs))
        return [check(s) for s in spans]

    return run


class LogCheck:
    """Receipt-in-log checks against a log whose published checkpoint is signed by a
    trusted key (``receipt verify --log``): "is this receipt in it?", answered with a
    verified RFC 9162 inclusion proof (and, when the log grew since, a consistency
    proof to the trusted checkpoint).

    Raises ``InputError`` if the log cannot be read, another :class:`Error` if its
    checkpoint is malformed or not signed by one of ``trust``'s receipt signers (never an
    approver). With a witness ``policy`` (:class:`erasure_receipts.policy.Policy`), the
    trusted checkpoint is the log's latest cosigned one, accepted by the policy (its
    logs and quorum) instead: a ``WitnessError`` names why not. With ``tsa``, the
    log's time-stamps are checked too (:meth:`timestamp_of`)."""

    def __init__(
        self, path: str, trust: TrustStore, policy: Any = None, tsa: TsaTrust | None = None
    ) -> None:
        from .verify import _display

        self.name = _display(path)
        self.log = ReceiptLog(path)
        self.policy = policy
        self.tsa = tsa
        self._stamps: dict[int, VerifiedTimestamp] = {}
        if policy is None:
            self.checkpoint = Checkpoint.parse(self.log.checkpoint())
            self.checkpoint.verify_trusted(trust)  # receipt signers only, never an approver
        else:  # a witness Policy: its logs and quorum, on the latest cosigned checkpoint
            self.checkpoint = Checkpoint.parse(self.log.cosigned())
            policy.check(self.checkpoint)
        self.size = self.checkpoint.size

    def witnessed(self, data: bytes) -> bool:
        """With a policy: whether these bytes are in the log, though after the latest
        cosigned checkpoint (appended, not yet witnessed)."""
        i = self.log.index_of(data)
        return self.policy is not None and i is not None and i >= self.size

    def index_of(self, data: bytes) -> int | None:
        """The entry index of these exact bytes, if the inclusion proof against the
        trusted checkpoint verifies (None otherwise)."""
        i = self.log.index_of(data)
        if i is None or i >= self.size:
            return None
        proof = self.log.inclusion_proof(i)
        if not proof.verify(data):
            return None
        if proof.tree_size == self.size:
            return i if proof.root == self.checkpoint.root else None
        # The log grew since its checkpoint was verified: the newer tree must extend it.
        c = self.log.consistency_proof(self.size)
        same = c.new_size == proof.tree_size and c.new_root == proof.root
        return i if same and c.old_root == self.checkpoint.root and c.verify() else None

    def timestamp_of(self, index: int) -> tuple[int, VerifiedTimestamp] | None:
        """With ``tsa``: ``(size, verified time-stamp)`` of the earliest time-stamped
        checkpoint that covers entry ``index`` and is the trusted checkpoint or an
        ancestor of it (its text is rebuilt from the log's root at that size, proven
        consistent with the trusted checkpoint); None if none covers it.
        ``TimestampError`` if that checkpoint's token does not verify."""
        if self.tsa is None:
            return None
        sizes = [s for s in self.log.timestamp_sizes() if index < s <= self.size]
        if not sizes:
            return None
        size = sizes[0]
        if size not in self._stamps:
            token = self.log.timestamp_token(size)
            if token is None:  # removed meanwhile
                return None
            self._stamps[size] = self.tsa.verify(token, self._text_at(size))
        return size, self._stamps[size]

    def _text_at(self, size: int) -> bytes:
        """The note text of this log's checkpoint at ``size`` <= the trusted size."""
        cp = self.checkpoint
        if size == cp.size:
            return cp.text
        c = self.log.consistency_proof(size, cp.raw)
        if not (c.new_root == cp.root and c.new_size == cp.size and c.verify()):
            raise LogCorruptError(f"{self.name}: the tree at size {size} does not extend "
                                  "to the trusted checkpoint")  # fmt: skip
        return f"{cp.origin}\n{size}\n{b64encode(c.old_root)}\n".encode()
