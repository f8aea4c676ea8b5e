"""The pre-state measurement of a large thread: its digest and counts equal an
independent, sequential recomputation from the raw rows (many rows, several
namespaces, values around every size boundary the hashing may split work at); a
failure while hashing rolls the whole erasure back; no thread is left behind."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    ErasureIncompleteError,
    Signer,
)
from erasure_receipts.digest import RowLeafHasher
from scenario import columns, independent_digest, raw_rows

T = "big-thread"
NAMESPACES = ["", "child:1", "child:2|grandchild:3"]
# Payload lengths around 2 KB (hashlib's GIL threshold), 4 KB (a page), 64 KB, 256 KB
# and 1 MB; cycled with an odd stride so the running totals cross every power of two.
SIZES = [0, 1, 100, 2047, 2048, 2049, 4095, 4096, 4097, 65535, 65536, 65537,
         262143, 262144, 262145, (1 << 20) + 3, 7, 30000]  # fmt: skip


def cfg(thread: str, ns: str = "", parent: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if parent is not None:
        c["checkpoint_id"] = parent
    return {"configurable": c}


_ALPHABET = "abcdefghijklmnopqrstuvwxyzäöü€ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
_POOL = "".join(_ALPHABET[(i * 7919 + (i >> 7)) % len(_ALPHABET)] for i in range(1 << 16))


def text(n: int, seed: int) -> str:
    """``n`` characters that differ from one ``seed`` to the next."""
    start = seed * 977 % len(_POOL)
    out = (_POOL[start:] + _POOL[:start]) * (n // len(_POOL) + 1)
    return f"{seed}:{out}"[:n]


def fill(saver: Any, thread: str, checkpoints: int = 90) -> None:
    """Checkpoints of every size in ``SIZES``, in three namespaces, each with writes,
    plus one checkpoint with a thousand small writes."""
    parents: dict[str, str | None] = dict.fromkeys(NAMESPACES)
    for i in range(checkpoints):
        ns = NAMESPACES[i % len(NAMESPACES)]
        cp = empty_checkpoint()
        cp["id"] = f"1ef{i:029d}"
        cp["channel_values"] = {"v": text(SIZES[(i * 5) % len(SIZES)], i)}
        saved = saver.put(cfg(thread, ns, parents[ns]), cp, {"step": i}, {})
        parents[ns] = cp["id"]
        writes = [(f"ch{j}", text(SIZES[(i * 3 + j) % len(SIZES)] // 16, i + j)) for j in range(3)]
        saver.put_writes(saved, writes, f"task-{i}")
    cp = empty_checkpoint()
    cp["id"] = f"1ef{checkpoints:029d}"
    saved = saver.put(cfg(thread), cp, {"step": checkpoints}, {})
    saver.put_writes(saved, [(f"c{j}", j) for j in range(1000)], "many")


def counts(db: Path, thread: str) -> dict[str, dict[str, int]]:
    """Rows and stored bytes per table, computed from the raw rows (TEXT as UTF-8,
    INTEGER and REAL 8 bytes, NULL nothing)."""
    out = {}
    for table in ("checkpoints", "writes"):
        rows = raw_rows(db, table, "thread_id = ?", (thread,))
        size = 0
        for row in rows:
            for v in row:
                if isinstance(v, str):
                    size += len(v.encode("utf-8"))
                elif isinstance(v, bytes):
                    size += len(v)
                elif v is not None:
                    size += 8
        out[table] = {"rows": len(rows), "bytes": size}
    return out


def reference(db: Path, thread: str) -> str:
    return independent_digest(
        db, {t: ("thread_id = ?", (thread,)) for t in ("checkpoints", "writes")}
    )


@pytest.fixture
def big(tmp_path: Path, signer: Signer) -> tuple[Path, AttestingSqliteSaver]:
    db = tmp_path / "big.db"
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = AttestingSqliteSaver(conn, signer=signer)
    fill(saver, T)
    fill(saver, "bystander", 12)
    return db, saver


def test_digest_equals_the_sequential_recomputation(big: tuple[Path, Any]) -> None:
    db, saver = big
    assert set(columns(db, "checkpoints")) >= {"checkpoint_ns", "checkpoint", "metadata"}
    expected, expected_counts = reference(db, T), counts(db, T)
    assert len({r[1] for r in raw_rows(db, "checkpoints", "thread_id = ?", (T,))}) == 3
    assert expected_counts["writes"]["rows"] > 1000
    before = threading.enumerate()
    preview = saver.digest_thread(T)
    receipt = saver.erase_thread(T)
    assert threading.enumerate() == before
    assert receipt.pre_digest == preview.digest == expected
    assert receipt.predicate["pre_state"]["tables"] == expected_counts
    assert {t: c.to_json() for t, c in preview.tables.items()} == expected_counts
    assert raw_rows(db, "checkpoints", "thread_id = ?", (T,)) == []
    assert raw_rows(db, "checkpoints", "thread_id = ?", ("bystander",))


def _fail_at(monkeypatch: pytest.MonkeyPatch, nth: int) -> list[str]:
    """Make the ``nth`` row hashed (1-based) raise; returns the names of the threads the
    failure was raised in."""
    original = RowLeafHasher._feed_stored
    seen: list[int] = [0]
    where: list[str] = []

    def failing(self: RowLeafHasher, out: Any, row: Any, mask: int) -> int:
        seen[0] += 1
        if seen[0] == nth:
            where.append(threading.current_thread().name)
            raise RuntimeError("injected hashing failure")
        return original(self, out, row, mask)

    monkeypatch.setattr(RowLeafHasher, "_feed_stored", failing)
    return where


@pytest.mark.parametrize("nth", [1, 40, 200, 0], ids=["first", "early", "middle", "last"])
def test_a_hashing_failure_rolls_everything_back(
    big: tuple[Path, Any], monkeypatch: pytest.MonkeyPatch, nth: int
) -> None:
    db, saver = big
    before_rows = {t: raw_rows(db, t, "thread_id = ?", (T,)) for t in ("checkpoints", "writes")}
    expected = reference(db, T)
    threads = threading.enumerate()
    where = _fail_at(monkeypatch, nth or sum(len(r) for r in before_rows.values()))
    with pytest.raises(ErasureIncompleteError, match=r"rolled back.*injected hashing failure"):
        saver.erase_thread(T)
    assert where  # the failure was injected
    assert threading.enumerate() == threads  # no hashing thread left behind
    assert not saver.conn.in_transaction
    assert not saver.is_erased(T)
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM erasure_journal").fetchone()[0] == 0
    assert {t: raw_rows(db, t, "thread_id = ?", (T,)) for t in before_rows} == before_rows
    monkeypatch.undo()
    assert saver.erase_thread(T).pre_digest == expected  # and it erases afterwards


def test_a_failed_delete_stops_the_hashing(
    big: tuple[Path, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure of the main thread while rows may still be hashed (the DELETE):
    rolled back, and nothing keeps running."""
    db, saver = big
    from erasure_receipts._backends.sqlite.backend import SqlTablePart

    def boom(self: SqlTablePart) -> None:
        raise sqlite3.OperationalError("injected delete failure")

    threads = threading.enumerate()
    monkeypatch.setattr(SqlTablePart, "finish", boom)
    with pytest.raises(ErasureIncompleteError, match=r"rolled back.*injected delete failure"):
        saver.erase_thread(T)
    assert threading.enumerate() == threads
    assert not saver.conn.in_transaction
    assert raw_rows(db, "writes", "thread_id = ?", (T,))


def _ours() -> list[threading.Thread]:
    """Live threads but the event loop's default executor's workers."""
    return [t for t in threading.enumerate() if not t.name.startswith("asyncio_")]


async def test_async_saver_digest_equals_the_sequential_recomputation(
    tmp_path: Path, signer: Signer
) -> None:
    db = tmp_path / "a.db"
    with sqlite3.connect(db, check_same_thread=False) as conn:
        fill(AttestingSqliteSaver(conn, signer=signer), T, 30)
    expected, expected_counts = reference(db, T), counts(db, T)
    async with AsyncAttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        before = _ours()
        preview = await saver.adigest_thread(T)
        receipt = await saver.aerase_thread(T)
        assert _ours() == before
    assert receipt.pre_digest == preview.digest == expected
    assert receipt.predicate["pre_state"]["tables"] == expected_counts
