"""Verified residue scan for SQLite: are copies of the erased rows left in the files?

``secure_delete`` zeroes freed cells and pages, but when a DELETE empties pages SQLite
rebalances the B-tree and moves surviving cells of the same table to neighbouring pages;
the rebuilt page keeps the old bytes in its unused space (not zeroed, even with
``secure_delete``). So "secure_delete applied" does not mean "no copy left". This module
checks instead of assuming:

1. while the erasure measures each row, every text/blob value of at least
   ``WINDOW`` bytes contributes 32-byte windows (at offsets 0, ``STRIDE``, 2*``STRIDE``
   ..., and its last 32 bytes) to a set of *needles* - any surviving run of
   ``WINDOW + STRIDE - 1`` or more contiguous bytes of a value contains one;
2. after commit and the WAL checkpoint, the database file is walked page by page (the
   B-trees from their root pages, overflow chains, the freelist) to find its *dead
   space*: unallocated space and freeblocks of live pages, stale tails of overflow
   pages, freelist pages, pages nothing references. Live cells are not searched: they
   hold other rows (the erased ones were verified absent by SQL), which may legitimately
   share content (e.g. a thread copied with ``copy_thread``);
3. dead space, and the whole ``-wal``, ``-shm`` and ``-journal`` files, are searched for
   the needles; if any is found, ``VACUUM`` rewrites the database, the WAL is truncated
   again, and the scan is repeated. The receipt records both counts.

Without usable needles (a receipt issued by recovery after a crash, when the rows are
long gone; or more erased data or non-zero dead space than the limits below) the scan
is *conservative*: it cannot tell a copy from other stale bytes (B-tree rebuilds leave
stale cell-pointer arrays even in a fresh database), so it always runs ``VACUUM``. After
``VACUUM`` and a complete WAL checkpoint every page of the file was rebuilt from live
rows only, so no erased row can remain in it.

The receipt's other SQLite residue entries are here too: ``secure_delete`` and the WAL
checkpoint (:func:`scrub`), the rollback journal cleared (:func:`journal_residue`).
"""

from __future__ import annotations

import mmap
import os
import sqlite3
import struct
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .connection import database_path

__all__ = [
    "CHECKPOINT_WAIT_MS",
    "JOURNAL_FILE_MODES",
    "LIVE_PAGE_RESIDUE",
    "WINDOW",
    "Needles",
    "bounded_checkpoint",
    "clear_journal",
    "dead_space",
    "journal_residue",
    "residue_scan",
    "scrub",
]

WINDOW = 32
"""Needle length. Long enough that a match is not chance; short enough for partial copies."""
STRIDE = 64
"""Distance between needles within one value (memory ~ erased bytes / STRIDE)."""
MAX_NEEDLES = 4_000_000
"""Above this (about 256 MB of erased values) the scan becomes conservative."""
MAX_SEARCH_BYTES = 4 << 20
"""Non-zero dead bytes searched window by window (a Python loop, ~10 MB/s); past this a
VACUUM is cheaper than the search, so the scan becomes conservative."""


class Needles:
    """Windows of the erased rows, collected while they are measured.

    Two kinds per row: windows of each TEXT/BLOB value of at least ``WINDOW`` bytes, and
    windows of the row's *record body* - its stored values back to back, as SQLite lays
    them out in a cell - so rows made only of short values are searchable too. A row
    whose body is shorter than ``WINDOW`` cannot be told apart from chance: it makes the
    scan conservative (``blind_rows``).
    """

    def __init__(self, encoding: str = "utf-8", exclude: Iterable[str] = ()) -> None:
        self._encoding = encoding
        # Scope identifiers (thread id, store prefixes) are kept on purpose by the
        # tombstone and journal; alone they identify the scope, they are not its content.
        self._exclude = {e.encode(encoding, "surrogatepass") for e in exclude}
        self.hashes: set[int] = set()
        self.rows = 0
        self.blind_rows = 0
        self.overflow = False

    def _windows(self, data: bytes) -> None:
        last = len(data) - WINDOW
        for off in [*range(0, last, STRIDE), last]:
            chunk = data[off : off + WINDOW]
            if chunk.count(chunk[:1]) != WINDOW:  # not one repeated byte (e.g. zeros)
                self.hashes.add(hash(chunk))

    def add_row(self, row: Sequence[Any]) -> None:
        """Collect the windows of one measured row (values as stored: TEXT as bytes in
        the database's encoding, BLOB, int, float, None)."""
        self.rows += 1
        if self.overflow:
            return
        body = bytearray()
        for value in row:
            data = _stored(value, self._encoding)
            body += data
            if len(data) >= WINDOW and data not in self._exclude:
                self._windows(data)
        if len(body) >= WINDOW:
            self._windows(bytes(body))
        else:
            self.blind_rows += 1
        if len(self.hashes) > MAX_NEEDLES:
            self.overflow = True
            self.hashes.clear()

    @property
    def usable(self) -> bool:
        """Whether a search for these windows can prove the absence of every erased row:
        not over ``MAX_NEEDLES``, and no row too short to be searched for."""
        return not self.overflow and not self.blind_rows


def _stored(value: Any, encoding: str) -> bytes:
    """A value's bytes in an SQLite record body (sqlite.org/fileformat2.html#record)."""
    if value is None:
        return b""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode(encoding, "surrogatepass")
    if isinstance(value, float):
        return struct.pack(">d", value)
    if isinstance(value, int):
        if value in (0, 1):
            return b""  # serial types 8 and 9 carry no body bytes
        for n in (1, 2, 3, 4, 6, 8):
            if -(1 << (8 * n - 1)) <= value < 1 << (8 * n - 1):
                return value.to_bytes(n, "big", signed=True)
    return b""


_U16 = struct.Struct(">H").unpack_from
_U32 = struct.Struct(">I").unpack_from


def _u16(b: bytes | mmap.mmap, o: int) -> int:
    return int(_U16(b, o)[0])


def _u32(b: bytes | mmap.mmap, o: int) -> int:
    return int(_U32(b, o)[0])


def _varint(b: bytes | mmap.mmap, o: int) -> tuple[int, int]:
    v = 0
    for i in range(8):
        c = b[o + i]
        v = (v << 7) | (c & 0x7F)
        if c < 0x80:
            return v, o + i + 1
    return (v << 8) | b[o + 8], o + 9


def dead_space(mm: bytes | mmap.mmap, roots: Iterable[int]) -> list[tuple[int, int]]:
    """``(start, end)`` file offsets of every byte that holds no live content.

    Follows the SQLite file format (sqlite.org/fileformat2.html): B-tree pages from the
    given root pages (page 1, the schema, is always included), their overflow chains,
    the freelist; every page reached by none of them is dead as a whole.
    """
    size = len(mm)
    if size < 100 or bytes(mm[:16]) != b"SQLite format 3\x00":
        raise ValueError("not a SQLite database file")
    page_size = _u16(mm, 16)
    page_size = 65536 if page_size == 1 else page_size
    usable = page_size - mm[20]
    npages = size // page_size
    seen = bytearray(npages + 1)
    dead: list[tuple[int, int]] = []
    max_local_table = usable - 35
    max_local_index = ((usable - 12) * 64 // 255) - 23
    min_local = ((usable - 12) * 32 // 255) - 23

    stack = [1, *roots]
    while stack:
        n = stack.pop()
        if not 0 < n <= npages or seen[n]:
            continue
        base = (n - 1) * page_size
        h = base + (100 if n == 1 else 0)
        kind = mm[h]
        if kind not in (2, 5, 10, 13):
            continue  # not a B-tree page: stays unreferenced, hence scanned whole
        seen[n] = 1
        interior = kind in (2, 5)
        hsize = 12 if interior else 8
        ncells = _u16(mm, h + 3)
        content = _u16(mm, h + 5) or 65536
        dead.append((h + hsize + 2 * ncells, base + content))
        fb, hops = _u16(mm, h + 1), 0
        while fb and hops < page_size // 4:
            nxt, length = _u16(mm, base + fb), _u16(mm, base + fb + 2)
            dead.append((base + fb + 4, base + fb + length))  # after its 4-byte header
            fb, hops = nxt, hops + 1
        if usable < page_size:
            dead.append((base + usable, base + page_size))
        if interior:
            stack.append(_u32(mm, h + 8))
        if kind == 5:  # table interior cells: child pointer + rowid, no payload
            stack.extend(_u32(mm, base + _u16(mm, h + hsize + 2 * i)) for i in range(ncells))
            continue
        max_local = max_local_table if kind == 13 else max_local_index
        for i in range(ncells):
            c = base + _u16(mm, h + hsize + 2 * i)
            if kind == 2:
                stack.append(_u32(mm, c))
                c += 4
            payload, c = _varint(mm, c)
            if kind == 13:
                _, c = _varint(mm, c)  # rowid
            if payload <= max_local:
                continue
            k = min_local + (payload - min_local) % (usable - 4)
            local = k if k <= max_local else min_local
            left, ovfl = payload - local, _u32(mm, c + local)
            while ovfl and left > 0 and 0 < ovfl <= npages and not seen[ovfl]:
                seen[ovfl] = 1
                ob = (ovfl - 1) * page_size
                take = min(left, usable - 4)
                if take < usable - 4:
                    dead.append((ob + 4 + take, ob + page_size))  # stale tail
                left -= take
                ovfl = _u32(mm, ob) if left > 0 else 0

    trunk, hops = _u32(mm, 32), 0
    while 0 < trunk <= npages and not seen[trunk] and hops < npages:
        seen[trunk] = 1
        tb = (trunk - 1) * page_size
        count = min(_u32(mm, tb + 4), (usable - 8) // 4)
        dead.append((tb + 8 + 4 * count, tb + page_size))
        for i in range(count):
            leaf = _u32(mm, tb + 8 + 4 * i)
            if 0 < leaf <= npages and not seen[leaf]:
                seen[leaf] = 1
                dead.append(((leaf - 1) * page_size, leaf * page_size))
        trunk, hops = _u32(mm, tb), hops + 1
    dead += [((n - 1) * page_size, n * page_size) for n in range(1, npages + 1) if not seen[n]]
    if npages * page_size < size:
        dead.append((npages * page_size, size))
    return [(a, b) for a, b in dead if b > a]


class _Tally:
    def __init__(self, needles: Needles | None) -> None:
        self.needles = needles if needles is not None and needles.usable else None
        self.bytes_scanned = 0
        self.dead_bytes = 0
        self.nonzero = 0
        self.copies = 0
        self.too_much = False

    def search(self, seg: bytes) -> None:
        """Count needle windows in one dead segment (non-zero bytes only matter)."""
        self.dead_bytes += len(seg)
        lo = len(seg) - len(seg.lstrip(b"\x00"))
        hi = len(seg.rstrip(b"\x00"))
        if hi <= lo:
            return
        nonzero = hi - lo - seg.count(0, lo, hi)
        self.nonzero += nonzero
        if self.needles is None:
            return
        if self.nonzero > MAX_SEARCH_BYTES:
            self.too_much = True
            return
        hashes = self.needles.hashes
        i, end = max(lo - WINDOW + 1, 0), min(hi + WINDOW - 1, len(seg)) - WINDOW
        while i <= end:
            if hash(seg[i : i + WINDOW]) in hashes:
                self.copies += 1
                i += WINDOW  # count non-overlapping copies
            else:
                i += 1

    @property
    def counted(self) -> bool:
        """Whether ``copies`` is a real count (needles usable, within the limits)."""
        return self.needles is not None and not self.too_much


def _scan_files(conn: sqlite3.Connection, path: str, needles: Needles | None) -> _Tally:
    """Search the settled file's dead space, the ``-shm`` and ``-journal`` files.

    Runs inside :func:`_settled`'s read transaction: the file cannot change meanwhile.
    The ``-wal`` was empty when that transaction began, so whatever it holds now was
    committed later by other connections (not residue of this erasure).
    """
    tally = _Tally(needles)
    roots = [int(r[0]) for r in conn.execute("SELECT rootpage FROM sqlite_master")
             if r[0]]  # fmt: skip
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size:
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                tally.bytes_scanned += size
                for a, b in dead_space(mm, roots):
                    tally.search(mm[a:b])
    for suffix in ("-shm", "-journal"):
        for seg in _file_chunks(path + suffix):
            tally.bytes_scanned += len(seg)
            tally.search(seg)
    return tally


def _file_chunks(path: str, chunk: int = 1 << 22) -> Iterator[bytes]:
    """The file in overlapping chunks (a needle across a boundary is still seen)."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below; absence is normal
    except FileNotFoundError:
        return
    with fh:
        prev = b""
        while data := fh.read(chunk):
            yield prev + data
            prev = data[-(WINDOW - 1) :]


SETTLE_WAIT_MS = 1000
"""Longest wait for readers of older snapshots, per checkpoint attempt."""


def bounded_checkpoint(conn: sqlite3.Connection, wait_ms: int) -> tuple[int, int, int, int]:
    """``wal_checkpoint(TRUNCATE)`` waiting at most ``wait_ms`` for readers of older
    snapshots (the busy handler), so one long reader delays an erasure by a bounded
    time. Returns ``(busy, log_frames, checkpointed_frames, waited_ms)``."""
    timeout = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
    waited = min(timeout, wait_ms)
    conn.execute(f"PRAGMA busy_timeout = {waited}")
    try:
        busy, log, done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.execute(f"PRAGMA busy_timeout = {timeout}")
    return int(busy), int(log), int(done), waited


JOURNAL_FILE_MODES = ("delete", "truncate", "persist")
"""Journal modes that write the rollback journal to the ``-journal`` file (``memory``
keeps it in memory, ``off`` has none, ``wal`` writes the ``-wal`` instead)."""


def clear_journal(conn: sqlite3.Connection, path: str, wait_ms: int) -> dict[str, Any]:
    """Leave the ``-journal`` file holding nothing: zero it in place and truncate it,
    under the write lock, then read it back. Returns the residue ``detail``; ``cleared``
    is True only if the file was read back absent, empty or all zero bytes.

    A rollback journal holds pre-images of every page a transaction changed, so after
    an erasure it holds the erased rows in full. ``DELETE`` and ``TRUNCATE`` drop it at
    commit, but ``PERSIST`` (and any mode under ``locking_mode=EXCLUSIVE``) only zeroes
    its header: the pre-images stay until a later transaction happens to overwrite
    them. Only the writer holding the lock writes the journal, and a journal whose
    header is zero (or that is empty) is never rolled back, so zeroing it under
    ``BEGIN IMMEDIATE`` (waiting at most ``wait_ms`` for another writer) cannot harm
    a transaction. Never raises: the failure is in ``detail`` (``error``, ``reason``).
    """
    journal = path + "-journal"
    detail: dict[str, Any] = {"journal_bytes_before": 0, "zeroed_bytes": 0, "cleared": False}
    try:
        size = _size(journal)
        detail["journal_bytes_before"] = size
        if size and _nonzero(journal):
            with _write_lock(conn, wait_ms) as waited:
                detail["writer_wait_ms"] = waited
                size = _size(journal)  # as the lock holder sees it
                if size:
                    with open(journal, "r+b") as fh:
                        for off in range(0, size, 1 << 20):
                            fh.write(bytes(min(1 << 20, size - off)))
                        fh.flush()
                        os.fsync(fh.fileno())
                        fh.truncate(0)
                        os.fsync(fh.fileno())
                    detail["zeroed_bytes"] = size
        after = _size(journal)
        detail["journal_bytes_after"] = after
        detail["cleared"] = after == 0 or not _nonzero(journal)
    except sqlite3.OperationalError as exc:
        if not any(w in str(exc).lower() for w in ("locked", "busy")):
            detail["error"] = f"{type(exc).__name__}: {exc}"[:200]
            return detail
        detail["reason"] = (
            f"the write lock was not obtained within {wait_ms} ms ({exc}): another "
            "connection is writing, so the -journal file was left as it is"
        )[:400]
        detail["journal_bytes_after"] = _size(journal)
    except sqlite3.Error as exc:
        detail["error"] = f"{type(exc).__name__}: {exc}"[:200]
    except OSError as exc:  # strerror only: the file name is a path (privacy mode)
        detail["error"] = f"{type(exc).__name__}: {exc.strerror or 'I/O error'}"[:200]
    return detail


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


def _nonzero(path: str) -> bool:
    """Whether the file (if it exists) holds any non-zero byte: read, not assumed."""
    return any(seg.count(0) != len(seg) for seg in _file_chunks(path))


@contextmanager
def _write_lock(conn: sqlite3.Connection, wait_ms: int) -> Iterator[int]:
    """``BEGIN IMMEDIATE`` (the write lock) for at most ``wait_ms``, rolled back after."""
    if conn.in_transaction:
        raise sqlite3.ProgrammingError("the connection has an open transaction")
    timeout = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
    waited = min(timeout, wait_ms)
    conn.execute(f"PRAGMA busy_timeout = {waited}")
    try:
        conn.execute("BEGIN IMMEDIATE")
    finally:
        conn.execute(f"PRAGMA busy_timeout = {timeout}")
    try:
        yield waited
    finally:
        conn.rollback()


def _checkpoint(conn: sqlite3.Connection) -> int:
    return bounded_checkpoint(conn, SETTLE_WAIT_MS)[0]


class _Unsettled(Exception):
    """The database file could not be made to hold the current state."""


@contextmanager
def _settled(conn: sqlite3.Connection, path: str) -> Iterator[None]:
    """Hold a read transaction in which the database *file* is the current state.

    WAL mode: checkpoint with TRUNCATE until it completes and the ``-wal`` is empty, then
    read. A reader that began on an empty WAL reads the file only, and SQLite lets no
    checkpoint write into the file while such a reader exists, so the file stays as
    scanned. Rollback-journal modes: the read transaction's SHARED lock keeps writers
    from committing. If a reader of an older snapshot keeps the WAL from being emptied,
    the file is not the current state and nothing can be claimed about it.
    """
    wal = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal"
    for _ in range(2):
        busy = _checkpoint(conn) if wal else 0
        conn.execute("BEGIN")
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            pending = os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0
            if not wal or (busy == 0 and pending == 0):
                yield
                return
        finally:
            conn.rollback()
    raise _Unsettled(
        "the WAL could not be checkpointed completely (a reader holds an older snapshot): "
        "the database file is not the current state and the -wal still holds its pages"
    )


def residue_scan(
    conn: sqlite3.Connection, path: str, needles: Needles | None, *, vacuum: bool = False
) -> dict[str, Any]:
    """Scan, ``VACUUM`` if a copy is found (or always, with ``vacuum``), scan again.

    Returns one residue entry and never raises: failures are reported in it.
    """
    usable = needles is not None and needles.usable
    detail: dict[str, Any] = {
        "scope": "database free space and freelist, -shm and -journal files, "
        "with the WAL checkpointed and empty",
        "mode": "vacuum" if vacuum else "needles" if usable else "conservative",
        "window_bytes": WINDOW,
        "needles": len(needles.hashes) if needles is not None and usable else 0,
    }
    if needles is not None and not usable:
        detail["reason"] = (
            f"{needles.blind_rows} erased row(s) too short to search for"
            if needles.blind_rows
            else "more erased data than the scan holds in memory"
        )
    if path == ":memory:" or not os.path.exists(path):
        detail["reason"] = "in-memory database: no files to scan"
        return {"action": "residue_scan", "status": "not_applicable", "detail": detail}
    vacuumed = False
    try:
        if conn.in_transaction:  # pragma: no cover - the engine committed
            conn.commit()
        with _settled(conn, path):
            before = _scan_files(conn, path, needles)
        detail.update(
            bytes_scanned=before.bytes_scanned,
            dead_bytes=before.dead_bytes,
            nonzero_dead_bytes=before.nonzero,
            copies_before=before.copies if before.counted else None,
        )
        after, journal_cleared = before, True
        if vacuum or not before.counted or before.copies:
            conn.execute("VACUUM")
            vacuumed = True
            # In a rollback-journal mode VACUUM journals every page it rewrites; PERSIST
            # keeps those pre-images (the copies and earlier versions) in the -journal.
            journal = clear_journal(conn, path, SETTLE_WAIT_MS)
            journal_cleared = bool(journal["cleared"])
            detail["journal_cleared"] = journal_cleared
            with _settled(conn, path):
                after = _scan_files(conn, path, needles)
        detail.update(
            vacuum=vacuumed,
            copies_after=after.copies if after.counted else None,
            nonzero_dead_bytes_after=after.nonzero,
        )
        if not journal_cleared:
            why = journal.get("reason") or journal.get("error") or "non-zero bytes remain"
            why = f"the -journal file keeps the pages VACUUM replaced: {why}"
            detail["reason"] = "; ".join(filter(None, [detail.get("reason"), why]))[:4000]
    except _Unsettled as exc:
        detail.update(vacuum=vacuumed, reason=str(exc))
        return {"action": "residue_scan", "status": "partial", "detail": detail}
    except Exception as exc:  # never let the scan break an erasure that committed
        detail.update(vacuum=vacuumed, error=f"{type(exc).__name__}: {exc}"[:200])
        return {"action": "residue_scan", "status": "failed", "detail": detail}
    # Without a count, the VACUUM (completed into the settled file) rebuilt every page
    # from live rows only, so no erased row can remain.
    clean = (after.copies == 0 if after.counted else vacuumed) and journal_cleared
    return {"action": "residue_scan", "status": "applied" if clean else "partial", "detail": detail}


TOMBSTONE_MESSAGE = "erasure_receipts: thread erased"
CHECKPOINT_WAIT_MS = 1000
"""Longest wait for readers before the WAL checkpoint gives up and reports ``partial``."""

LIVE_PAGE_RESIDUE: dict[str, Any] = {
    "action": "sqlite.live_page_free_space",
    "status": "skipped",
    "detail": {
        "reason": "not scanned: secure_delete does not zero the unused space of pages "
        "rebuilt while the B-tree rebalances, so copies of erased rows can remain there "
        "until VACUUM; enable residue_scan to check and remove them",
    },
}
"""Stated in every receipt made without the residue scan: what was *not* scrubbed."""


def scrub(conn: sqlite3.Connection, label: str = "") -> list[dict[str, Any]]:
    """Report ``secure_delete`` and truncate the WAL of one connection's database.

    Never raises: every outcome, failures included, becomes a residue entry. ``label``
    names the database in the entries when it is not the saver's own.
    """
    suffix = f".{label}" if label else ""
    where = {"database": database_path(conn)} if label else {}
    out: list[dict[str, Any]] = []
    try:
        value = int(conn.execute("PRAGMA secure_delete").fetchone()[0])
        out.append(
            {"action": f"sqlite.secure_delete{suffix}", "status": "applied" if value else "failed",
             "detail": {"value": value, "scope": "this connection", **where}}
        )  # fmt: skip
    except sqlite3.Error as exc:
        out.append({"action": f"sqlite.secure_delete{suffix}", "status": "failed",
                    "detail": {"error": str(exc)[:200], **where}})  # fmt: skip
    action = f"sqlite.wal_checkpoint{suffix}"
    try:
        mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
    except sqlite3.Error as exc:
        mode = f"unknown ({exc})"[:60]
    if mode != "wal":
        out.append({"action": action, "status": "not_applicable",
                    "detail": {"journal_mode": mode, **where}})  # fmt: skip
        out.append(journal_residue(conn, mode, suffix, where))
        return out
    try:
        busy, log, done, waited = bounded_checkpoint(conn, CHECKPOINT_WAIT_MS)
    except sqlite3.Error as exc:
        out.append({"action": action, "status": "failed",
                    "detail": {"mode": "TRUNCATE", "error": str(exc)[:200], **where}})  # fmt: skip
        out.append(journal_residue(conn, mode, suffix, where))
        return out
    wal = database_path(conn) + "-wal"
    wal_bytes = os.path.getsize(wal) if os.path.exists(wal) else 0
    ok = busy == 0 and wal_bytes == 0
    detail = {
        "mode": "TRUNCATE",
        "busy": int(busy),
        "log_frames": max(int(log), 0),
        "checkpointed_frames": max(int(done), 0),
        "wal_bytes_after": wal_bytes,
        "reader_wait_ms": waited,
        **where,
    }
    out.append({"action": action, "status": "applied" if ok else "partial", "detail": detail})
    out.append(journal_residue(conn, mode, suffix, where))
    return out


def journal_residue(
    conn: sqlite3.Connection, mode: str, suffix: str = "", where: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The ``sqlite.rollback_journal`` entry: the ``-journal`` file cleared of the
    erased rows' pre-images (:func:`clear_journal`), whatever the journal mode.

    ``applied`` only if the file was read back absent, empty or all zeros; ``partial``
    if another writer kept the lock (the file is left as it is), ``failed`` on an error;
    ``not_applicable`` for an in-memory database, or a mode that writes no ``-journal``
    (``wal``, ``memory``, ``off``) when none was there.
    """
    action = f"sqlite.rollback_journal{suffix}"
    base: dict[str, Any] = {"journal_mode": mode, **(where or {})}
    path = database_path(conn)
    if path == ":memory:":
        return {"action": action, "status": "not_applicable",
                "detail": {**base, "reason": "in-memory database: no -journal file"}}  # fmt: skip
    detail = {**base, **clear_journal(conn, path, CHECKPOINT_WAIT_MS)}
    cleared = detail.pop("cleared")
    if "error" in detail:
        status = "failed"
    elif not cleared:
        status = "partial"
        detail.setdefault("reason", "the -journal file still holds non-zero bytes")
    elif mode in JOURNAL_FILE_MODES or detail["journal_bytes_before"]:
        status = "applied"
    else:
        status = "not_applicable"
    return {"action": action, "status": status, "detail": detail}
