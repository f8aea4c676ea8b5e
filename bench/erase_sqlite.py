"""SQLite erasure and write-path costs of ``AttestingSqliteSaver``.

    python bench/erase_sqlite.py [--quick] [--only erase,rss,put,scale]

Four parts, each against a baseline measured in the same run (interleaved where it can
be), reported as ratios:

``erase``  One target thread of ~2,000 checkpoints (~25 KB of text each, ~50 MB) plus a
           few other threads, written through the saver's ``put``/``put_writes``. The
           database (after a TRUNCATE checkpoint) is copied fresh for every timed run,
           so each operation starts from identical bytes. Per round, in rotating order:
           (a) ``AttestingSqliteSaver.erase_thread``; (b) baseline: SELECT every row of
           the thread from ``checkpoints`` and ``writes`` (fetching all bytes) followed
           by a plain ``SqliteSaver.delete_thread``; (c) plain ``delete_thread`` alone;
           plus two attribution runs: plain delete with ``secure_delete=OFF`` and plain
           delete followed by ``wal_checkpoint(TRUNCATE)``. Targets: erase/(select+
           delete) <= 1.5; erase/delete is reported. A separate instrumented erase (a
           ``sqlite3.Connection`` subclass timing every statement, and wrappers around
           the engine's phases) breaks the erase time down.
``rss``    Peak RSS growth while erasing a ~250 MB thread (target <= 64 MB). The DB is
           built in one process; the erase runs in a fresh process that reads VmHWM
           after resetting it (``/proc/self/clear_refs``), plus ``ru_maxrss`` and a
           10 ms VmRSS sampler. Plain ``delete_thread`` and select+delete are measured
           the same way for context.
``put``    ``put`` + ``put_writes`` throughput, AttestingSqliteSaver vs SqliteSaver on
           separate file databases with the same settings, interleaved rounds (default
           3,000 puts each, each followed by a 2-write ``put_writes``). Target ratio
           >= 0.9. An informative second pass uses ``synchronous=NORMAL``, where fsync
           no longer hides CPU overhead.
``scale``  Erase one ~50-checkpoint thread in a DB of 10 threads vs 10,000 threads
           (same per-thread size; filler threads are bulk-copied with SQL, the target
           threads are written through the saver). Expect a ratio of ~1.0.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS_DIR, fmt_s, print_verdicts, summary, verdict, write_result
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sqlite import SqliteSaver

from erasure_receipts import AttestingSqliteSaver, Signer

SIGNER = Signer.from_seed(b"\x07" * 32)
TARGET_ERASE_VS_SELECT_DELETE = 1.5
TARGET_RSS_MB = 64.0
TARGET_PUT_RATIO = 0.9

# ------------------------------------------------------------------------------------
# data generation

_WORDS = [
    "the",
    "user",
    "asked",
    "about",
    "their",
    "account",
    "balance",
    "and",
    "the",
    "assistant",
    "replied",
    "with",
    "a",
    "summary",
    "of",
    "recent",
    "transactions",
    "including",
    "a",
    "transfer",
    "to",
    "savings",
    "a",
    "card",
    "payment",
    "for",
    "groceries",
    "and",
    "a",
    "refund",
    "from",
    "an",
    "online",
    "store",
    "please",
    "confirm",
    "the",
    "address",
    "on",
    "file",
    "is",
    "still",
    "correct",
    "we",
    "will",
    "send",
    "the",
    "documents",
    "by",
    "email",
    "tomorrow",
    "morning",
    "thanks",
    "for",
    "your",
    "patience",
    "regarding",
    "the",
    "delayed",
    "order",
    "ticket",
    "number",
    "reference",
    "policy",
    "claim",
    "invoice",
]


def text_pool(seed: int = 1, size: int = 1 << 20) -> str:
    rng = random.Random(seed)
    out, n = [], 0
    while n < size:
        w = rng.choice(_WORDS)
        if rng.random() < 0.05:
            w = f"{w}-{rng.randint(0, 99999)}"
        out.append(w)
        n += len(w) + 1
    return " ".join(out)


class Payloads:
    """Random-ish text slices: a word pool plus a unique random prefix per value."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.pool = text_pool(seed)

    def text(self, n: int) -> str:
        head = self.rng.randbytes(12).hex()
        start = self.rng.randrange(0, len(self.pool) - n)
        return head + " " + self.pool[start : start + n - len(head) - 1]


def make_checkpoint(step: int, text: str, extra: str) -> dict[str, Any]:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=step))
    cp["channel_values"] = {
        "messages": text,
        "summary": extra,
        "__start__": {"step": step},
    }
    cp["channel_versions"] = {
        "messages": f"{step:032}.0.1",
        "summary": f"{step:032}.0.2",
        "__start__": f"{step:032}.0.3",
    }
    cp["versions_seen"] = {"agent": {"messages": f"{max(step - 1, 0):032}.0.1"}}
    return cp


def write_thread(
    saver: SqliteSaver,
    thread_id: str,
    n_checkpoints: int,
    cp_bytes: int,
    write_bytes: int,
    payloads: Payloads,
    ns: str = "",
) -> None:
    """Write a thread through the saver's public API: put() then put_writes() per step."""
    parent: str | None = None
    for step in range(n_checkpoints):
        cp = make_checkpoint(step, payloads.text(cp_bytes), payloads.text(120))
        cfg: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
        if parent:
            cfg["configurable"]["checkpoint_id"] = parent
        md = {"source": "loop", "step": step, "parents": {}, "run_id": str(uuid.uuid4())}
        stored = saver.put(cfg, cp, md, cp["channel_versions"])  # type: ignore[arg-type]
        saver.put_writes(
            stored,
            [("messages", payloads.text(write_bytes)), ("branch:to:agent", None)],
            task_id=str(uuid.uuid4()),
        )
        parent = cp["id"]


def open_conn(
    path: Path | str, factory: type[sqlite3.Connection] | None = None
) -> sqlite3.Connection:
    kw: dict[str, Any] = {"check_same_thread": False}
    if factory is not None:
        kw["factory"] = factory
    return sqlite3.connect(str(path), **kw)


def finish_db(path: Path) -> None:
    with closing(open_conn(path)) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def copy_db(src: Path, dst: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{dst}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(src, dst)
    wal = Path(f"{src}-wal")
    if wal.exists() and wal.stat().st_size:
        shutil.copyfile(wal, f"{dst}-wal")


def remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def build_db(
    path: Path, threads: list[tuple[str, int]], cp_bytes: int, write_bytes: int, seed: int = 1
) -> dict[str, Any]:
    """Create the DB through AttestingSqliteSaver (so tombstone DDL exists up front)."""
    remove_db(path)
    t0 = time.perf_counter()
    payloads = Payloads(seed)
    with closing(open_conn(path)) as conn:
        saver = AttestingSqliteSaver(conn, signer=SIGNER)
        saver.setup()
        conn.execute("PRAGMA synchronous=OFF")  # build speed only; same bytes either way
        for tid, n in threads:
            write_thread(saver, tid, n, cp_bytes, write_bytes, payloads)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        sizes = {
            t: conn.execute(
                "SELECT count(*), coalesce(sum(length(checkpoint) + length(metadata)), 0) "
                "FROM checkpoints WHERE thread_id = ?",
                (t,),
            ).fetchone()
            for t, _ in threads[:1]
        }
        wsz = conn.execute(
            "SELECT count(*), coalesce(sum(length(value)), 0) FROM writes WHERE thread_id = ?",
            (threads[0][0],),
        ).fetchone()
    tid = threads[0][0]
    return {
        "build_s": round(time.perf_counter() - t0, 2),
        "db_bytes": path.stat().st_size,
        "target_checkpoint_rows": sizes[tid][0],
        "target_checkpoint_bytes": sizes[tid][1],
        "target_write_rows": wsz[0],
        "target_write_bytes": wsz[1],
    }


def warm_library() -> None:
    """Pay one-off import/metadata costs outside any timed region."""
    from erasure_receipts._savers import sqlite as savers

    savers._versions()
    import langgraph.store.sqlite  # noqa: F401  (imported lazily by erase_thread)

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "warm.db"
        build_db(p, [("w", 3)], 100, 50)
        with closing(open_conn(p)) as c:
            AttestingSqliteSaver(c, signer=SIGNER).erase_thread("w")


# ------------------------------------------------------------------------------------
# the operations compared


def op_erase(path: Path, tid: str, **_: Any) -> float:
    with closing(open_conn(path)) as conn:
        saver = AttestingSqliteSaver(conn, signer=SIGNER)
        saver.setup()
        t0 = time.perf_counter()
        receipt = saver.erase_thread(tid)
        dt = time.perf_counter() - t0
    assert receipt.thread_id == tid
    return dt


def _select_all(conn: sqlite3.Connection, tid: str) -> int:
    total = 0
    for table in ("checkpoints", "writes"):
        for row in conn.execute(f"SELECT * FROM {table} WHERE thread_id = ?", (tid,)).fetchall():
            total += sum(len(v) if isinstance(v, bytes | str) else 8 for v in row if v is not None)
    return total


def op_select_delete(path: Path, tid: str, **_: Any) -> float:
    with closing(open_conn(path)) as conn:
        saver = SqliteSaver(conn)
        saver.setup()
        t0 = time.perf_counter()
        nbytes = _select_all(conn, tid)
        saver.delete_thread(tid)
        dt = time.perf_counter() - t0
    assert nbytes > 0
    return dt


def op_delete(
    path: Path, tid: str, secure_delete: int | None = None, checkpoint: bool = False, **_: Any
) -> float:
    with closing(open_conn(path)) as conn:
        saver = SqliteSaver(conn)
        saver.setup()
        if secure_delete is not None:
            conn.execute(f"PRAGMA secure_delete = {int(secure_delete)}")
        t0 = time.perf_counter()
        saver.delete_thread(tid)
        if checkpoint:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        dt = time.perf_counter() - t0
    return dt


# ------------------------------------------------------------------------------------
# instrumentation for the erase breakdown


class TimedConnection(sqlite3.Connection):
    """Times execute()/commit()/rollback() by statement kind (cursor stepping excluded)."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.timings: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)

    @staticmethod
    def _kind(sql: str) -> str:
        s = " ".join(sql.split()).upper()
        if s.startswith("PRAGMA WAL_CHECKPOINT"):
            return "sql: PRAGMA wal_checkpoint(TRUNCATE)"
        if s.startswith("PRAGMA"):
            return "sql: other PRAGMAs"
        if s.startswith("BEGIN"):
            return "sql: BEGIN IMMEDIATE/BEGIN"
        if s.startswith("DELETE"):
            return "sql: DELETE (incl. secure_delete zeroing)"
        if s.startswith("SELECT COUNT(*)"):
            return "sql: remaining() count(*)"
        if s.startswith("INSERT"):
            return "sql: tombstone INSERT"
        if s.startswith("SELECT"):
            return "sql: SELECT first step"
        return "sql: other"

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:  # type: ignore[override]
        t0 = time.perf_counter()
        try:
            return super().execute(sql, parameters)
        finally:
            k = self._kind(sql)
            self.timings[k] += time.perf_counter() - t0
            self.counts[k] += 1

    def commit(self) -> None:
        t0 = time.perf_counter()
        try:
            super().commit()
        finally:
            self.timings["sql: COMMIT"] += time.perf_counter() - t0
            self.counts["sql: COMMIT"] += 1


@contextmanager
def patched_timers() -> Iterator[dict[str, list[float]]]:
    """Wrap engine/backend/saver functions; record inclusive time per call."""
    from erasure_receipts import digest
    from erasure_receipts._backends import sqlite as be
    from erasure_receipts._engine import eraser, protocol
    from erasure_receipts._savers import sqlite as savers

    rec: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    targets: list[tuple[Any, str, str]] = [
        (digest.RowLeafHasher, "stored", "row leaf hashing (streamed)"),
        (digest.MerkleTree, "append_hash", "MerkleTree.append_hash (node hashing)"),
        (be.SqlTablePart, "measure", "SqlTablePart.measure"),
        (be.SqlTablePart, "erase", "SqlTablePart.erase"),
        (be.SqlTablePart, "remaining", "SqlTablePart.remaining"),
        (be.SqliteBackend, "write_tombstone", "write_tombstone"),
        (be.SqliteBackend, "reduce_residue", "reduce_residue"),
        (protocol, "measure_parts", "measure_parts"),
        (protocol, "measure_rows", "post-commit measure_rows"),
        (eraser, "api_checks", "api_checks (get_tuple/list)"),
        (eraser.Eraser, "_sign", "_sign (sign + archive receipt)"),
        (savers._SqliteDatabase, "backend", "backend (SqliteBackend init)"),
        (savers._SqliteDatabase, "resolve_store", "resolve_store"),
    ]
    saved = []

    def wrap(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        def inner(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                r = rec[name]
                r[0] += time.perf_counter() - t0
                r[1] += 1

        return inner

    for obj, attr, name in targets:
        own = attr in vars(obj)  # inherited methods are shadowed
        orig = vars(obj)[attr] if own else getattr(obj, attr)
        saved.append((obj, attr, orig, own))
        setattr(obj, attr, wrap(orig, name))
    try:
        yield rec
    finally:
        for obj, attr, orig, own in saved:
            if own:
                setattr(obj, attr, orig)
            else:
                delattr(obj, attr)


def erase_breakdown(path: Path, tid: str) -> dict[str, Any]:
    with patched_timers() as rec, closing(open_conn(path, TimedConnection)) as conn:
        saver = AttestingSqliteSaver(conn, signer=SIGNER)
        saver.setup()
        conn.timings.clear()  # type: ignore[attr-defined]
        conn.counts.clear()  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        saver.erase_thread(tid)
        total = time.perf_counter() - t0
        sql = dict(conn.timings)  # type: ignore[attr-defined]
        sql_counts = dict(conn.counts)  # type: ignore[attr-defined]
    f = {k: v[0] for k, v in rec.items()}
    calls = {k: v[1] for k, v in rec.items()}
    # SqlTablePart.erase = measure (stream rows, hash); its DELETE runs in finish();
    # leaf hashing / MerkleTree.append_hash only run there (the post-commit re-measure
    # finds no rows), so the row-fetch share is what remains of measure.
    enc = f.get("row leaf hashing (streamed)", 0.0)
    mt = f.get("MerkleTree.append_hash (node hashing)", 0.0)
    delete = sql.get("sql: DELETE (incl. secure_delete zeroing)", 0.0)
    measure_in_txn = f.get("SqlTablePart.erase", 0.0)  # the DELETE runs later, in finish()
    residue = f.get("reduce_residue", 0.0)
    wal = sql.get("sql: PRAGMA wal_checkpoint(TRUNCATE)", 0.0)
    phases = {
        "pre-measure: row fetch (SELECT stepping, tuples, counting)": measure_in_txn - enc - mt,
        "pre-measure: row leaf hashing (streamed SHA-256)": enc,
        "pre-measure: Merkle node hashing": mt,
        "DELETE statements (secure_delete zeroing)": delete,
        "remaining() count(*)": f.get("SqlTablePart.remaining", 0.0),
        "tombstone INSERT": f.get("write_tombstone", 0.0),
        "COMMIT (WAL write + fsync)": sql.get("sql: COMMIT", 0.0),
        "reduce_residue: wal_checkpoint(TRUNCATE)": wal,
        "reduce_residue: other": residue - wal,
        "post-commit measure_rows": f.get("post-commit measure_rows", 0.0),
        "public-API checks (get_tuple/list)": f.get("_api_checks (get_tuple/list)", 0.0),
        "issue receipt (build + sign)": f.get("_sign (sign + archive receipt)", 0.0),
    }
    accounted = sum(phases.values())
    phases["other / unaccounted"] = total - accounted
    return {
        "total_s": total,
        "phases_s": phases,
        "phase_share": {k: v / total for k, v in phases.items()},
        "function_inclusive_s": f,
        "function_calls": calls,
        "sql_execute_s": sql,
        "sql_execute_calls": sql_counts,
    }


def whatif_leaf_hashing(path: Path, tid: str, repeats: int) -> dict[str, Any]:
    """The library's streaming RowLeafHasher vs the reference leaf_hash(encode_row(...))
    over the same stored rows (hashes must be identical)."""
    from erasure_receipts.digest import RowLeafHasher, encode_row, leaf_hash

    rows_by_table = {}
    with closing(open_conn(path)) as conn:
        for table in ("checkpoints", "writes"):
            info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
            cols = [r[1] for r in info]
            pk = [r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
            rows = conn.execute(
                f"SELECT * FROM {table} WHERE thread_id = ? ORDER BY " + ", ".join(pk), (tid,)
            ).fetchall()
            rows_by_table[table] = (cols, pk, rows)

    def reference() -> list[bytes]:
        out = []
        for table, (cols, pk, rows) in rows_by_table.items():
            idx = [cols.index(c) for c in pk]
            for row in rows:
                named = list(zip(cols, row, strict=True))
                out.append(leaf_hash(encode_row(table, [row[i] for i in idx], named)))
        return out

    def library() -> list[bytes]:
        out = []
        for table, (cols, pk, rows) in rows_by_table.items():
            hasher = RowLeafHasher(table, cols, pk)
            out.extend(hasher(row) for row in rows)
        return out

    assert reference() == library(), "streaming leaf hash differs from the reference"
    tr, tl = [], []
    for _ in range(repeats):
        for fn, acc in ((reference, tr), (library, tl)):
            gc.collect()
            t0 = time.perf_counter()
            fn()
            acc.append(time.perf_counter() - t0)
    return {
        "rows": sum(len(r[2]) for r in rows_by_table.values()),
        "reference_encode_then_hash_s": min(tr),
        "library_row_leaf_hasher_s": min(tl),
        "identical_hashes": True,
    }


# ------------------------------------------------------------------------------------
# part 1: erase vs select+delete vs delete


def part_erase(tmp: Path, quick: bool, rounds: int | None) -> dict[str, Any]:
    n_cp = 500 if quick else 2000
    rounds = rounds or (2 if quick else 5)
    cp_bytes, write_bytes = 25_000, 300
    src = tmp / "erase-src.db"
    tid = "target-thread"
    others = [(f"other-{i}", 100 if not quick else 40) for i in range(5)]
    print(
        f"[erase] building: target {n_cp} checkpoints x ~{cp_bytes // 1000} KB + "
        f"{len(others)} other threads ...",
        flush=True,
    )
    info = build_db(src, [(tid, n_cp), *others], cp_bytes, write_bytes)
    target_mb = (info["target_checkpoint_bytes"] + info["target_write_bytes"]) / 1e6
    print(
        f"[erase] built in {info['build_s']} s: db {info['db_bytes'] / 1e6:.1f} MB, target "
        f"{info['target_checkpoint_rows']} checkpoints + {info['target_write_rows']} writes, "
        f"{target_mb:.1f} MB",
        flush=True,
    )
    ops: dict[str, tuple[Callable[..., float], dict[str, Any]]] = {
        "erase_thread (attesting)": (op_erase, {}),
        "select all + delete_thread (plain)": (op_select_delete, {}),
        "delete_thread (plain)": (op_delete, {}),
        "info: delete_thread, secure_delete=OFF": (op_delete, {"secure_delete": 0}),
        "info: delete_thread + wal_checkpoint(TRUNCATE)": (op_delete, {"checkpoint": True}),
    }
    names = list(ops)
    times: dict[str, list[float]] = {k: [] for k in names}
    work = tmp / "erase-work.db"
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            copy_db(src, work)
            fn, kw = ops[name]
            gc.collect()
            times[name].append(fn(work, tid, **kw))
            remove_db(work)
        print(
            f"[erase] round {r + 1}/{rounds}: "
            + ", ".join(f"{n.split(' (')[0]} {times[n][-1]:.2f}s" for n in names[:3]),
            flush=True,
        )
    stats = {k: summary(v) for k, v in times.items()}
    med = {k: s["median"] for k, s in stats.items()}
    e, sd, d = names[0], names[1], names[2]
    paired_sd = statistics.median(a / b for a, b in zip(times[e], times[sd], strict=True))
    paired_d = statistics.median(a / b for a, b in zip(times[e], times[d], strict=True))

    # breakdown: instrumented runs on fresh copies (median per phase)
    bds = []
    for _ in range(2 if quick else 3):
        copy_db(src, work)
        gc.collect()
        bds.append(erase_breakdown(work, tid))
        remove_db(work)
    phase_names = list(bds[0]["phases_s"])
    bd_med = {p: statistics.median(b["phases_s"][p] for b in bds) for p in phase_names}
    bd_total = statistics.median(b["total_s"] for b in bds)
    whatif = whatif_leaf_hashing(src, tid, 3)
    remove_db(src)

    print(f"\n[erase] {rounds} interleaved rounds on fresh copies (median / best):")
    for k in names:
        print(f"  {k:<48} {fmt_s(stats[k]['median']):>10} / {fmt_s(stats[k]['min']):>10}")
    print(
        f"\n[erase] breakdown of an instrumented erase (median of {len(bds)}, "
        f"total {fmt_s(bd_total)}):"
    )
    for p in sorted(phase_names, key=lambda p: -bd_med[p]):
        print(f"  {p:<58} {fmt_s(bd_med[p]):>10}  {bd_med[p] / bd_total * 100:5.1f}%")
    print(
        f"\n[erase] leaf hashing of the {whatif['rows']} rows (identical hashes): reference "
        f"encode_row + leaf_hash {fmt_s(whatif['reference_encode_then_hash_s'])}, library "
        f"RowLeafHasher {fmt_s(whatif['library_row_leaf_hasher_s'])}"
    )
    return {
        "params": {
            "target_checkpoints": n_cp,
            "checkpoint_text_bytes": cp_bytes,
            "write_text_bytes": write_bytes,
            "other_threads": others,
            "rounds": rounds,
            **info,
            "target_mb": round(target_mb, 2),
        },
        "times_s": stats,
        "ratios": {
            "erase / (select+delete) median": med[e] / med[sd],
            "erase / (select+delete) best": stats[e]["min"] / stats[sd]["min"],
            "erase / (select+delete) paired median": paired_sd,
            "erase / delete median": med[e] / med[d],
            "erase / delete best": stats[e]["min"] / stats[d]["min"],
            "erase / delete paired median": paired_d,
            "delete(secure_delete=OFF) / delete(default)": med[names[3]] / med[d],
            "(delete + wal_checkpoint) / delete": med[names[4]] / med[d],
        },
        "breakdown": {
            "runs": len(bds),
            "total_s_median": bd_total,
            "phases_s_median": bd_med,
            "phase_share_median": {p: bd_med[p] / bd_total for p in phase_names},
            "runs_detail": bds,
        },
        "whatif_leaf_hashing": whatif,
    }


# ------------------------------------------------------------------------------------
# part 2: peak RSS while erasing a big thread (fresh subprocesses)


def child_rss(db: str, tid: str, op: str) -> None:
    """Run in a fresh process: report memory before/after one operation as JSON."""
    from _common import vm_status

    warm_library()
    gc.collect()
    conn = open_conn(db)
    saver: SqliteSaver = (
        AttestingSqliteSaver(conn, signer=SIGNER) if op == "erase" else SqliteSaver(conn)
    )
    saver.setup()
    ru0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    st0 = vm_status()
    reset = False
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        reset = True
    except OSError:
        pass
    st_reset = vm_status()
    peak = [st_reset["VmRSS"]]
    stop = threading.Event()

    def sampler() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], vm_status()["VmRSS"])
            stop.wait(0.01)

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    t0 = time.perf_counter()
    if op == "erase":
        saver.erase_thread(tid)  # type: ignore[attr-defined]
    elif op == "select_delete":
        _select_all(conn, tid)
        saver.delete_thread(tid)
    else:
        saver.delete_thread(tid)
    dt = time.perf_counter() - t0
    stop.set()
    th.join()
    st1 = vm_status()
    ru1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    conn.close()
    print(
        json.dumps(
            {
                "op": op,
                "seconds": dt,
                "hwm_reset": reset,
                "rss_before_kb": st0["VmRSS"],
                "hwm_before_kb": st0["VmHWM"],
                "rss_after_reset_kb": st_reset["VmRSS"],
                "hwm_after_reset_kb": st_reset["VmHWM"],
                "hwm_after_kb": st1["VmHWM"],
                "rss_after_kb": st1["VmRSS"],
                "sampled_peak_rss_kb": peak[0],
                "ru_maxrss_before_kb": ru0,
                "ru_maxrss_after_kb": ru1,
                "peak_growth_hwm_mb": (st1["VmHWM"] - st_reset["VmRSS"]) / 1024 if reset else None,
                "peak_growth_sampled_mb": (peak[0] - st_reset["VmRSS"]) / 1024,
                "peak_growth_ru_maxrss_mb": (ru1 - ru0) / 1024,
            }
        )
    )


def child_build(db: str, tid: str, n: int, cp_bytes: int) -> None:
    info = build_db(Path(db), [(tid, n), ("other-1", 20), ("other-2", 20)], cp_bytes, 300)
    print(json.dumps(info))


def run_child(args: list[str]) -> dict[str, Any]:
    p = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *args], capture_output=True, text=True
    )
    if p.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def part_rss(tmp: Path, quick: bool) -> dict[str, Any]:
    n_cp = 2000 if quick else 10000
    src = tmp / "rss-src.db"
    tid = "big-thread"
    print(f"\n[rss] building a {n_cp} x 25 KB thread in a separate process ...", flush=True)
    info = run_child(
        [
            "--child",
            "build",
            "--db",
            str(src),
            "--tid",
            tid,
            "--n",
            str(n_cp),
            "--cp-bytes",
            "25000",
        ]
    )
    mb = (info["target_checkpoint_bytes"] + info["target_write_bytes"]) / 1e6
    print(
        f"[rss] built in {info['build_s']} s: thread {mb:.0f} MB, db "
        f"{info['db_bytes'] / 1e6:.0f} MB",
        flush=True,
    )
    out: dict[str, Any] = {"params": {**info, "target_mb": round(mb, 1)}, "runs": {}}
    work = tmp / "rss-work.db"
    for op in ("erase", "delete", "select_delete"):
        copy_db(src, work)
        res = run_child(["--child", "rss", "--db", str(work), "--tid", tid, "--op", op])
        remove_db(work)
        out["runs"][op] = res
        g = res["peak_growth_hwm_mb"]
        print(
            f"[rss] {op:<14} {res['seconds']:.2f} s  peak growth: VmHWM "
            f"{'n/a' if g is None else f'{g:.1f} MB'}, sampled {res['peak_growth_sampled_mb']:.1f}"
            f" MB, ru_maxrss {res['peak_growth_ru_maxrss_mb']:.1f} MB",
            flush=True,
        )
    remove_db(src)
    er = out["runs"]["erase"]
    growth = (
        er["peak_growth_hwm_mb"]
        if er["peak_growth_hwm_mb"] is not None
        else max(er["peak_growth_sampled_mb"], er["peak_growth_ru_maxrss_mb"])
    )
    out["erase_peak_growth_mb"] = growth
    return out


# ------------------------------------------------------------------------------------
# part 3: put/put_writes throughput


def part_put(tmp: Path, quick: bool) -> dict[str, Any]:
    total = 600 if quick else 3000
    per_round = 100 if quick else 250
    rounds = total // per_round
    payloads = Payloads(3)
    out: dict[str, Any] = {
        "params": {
            "puts_per_saver": total,
            "rounds": rounds,
            "puts_per_round": per_round,
            "checkpoint_text_bytes": 800,
            "writes_per_put": 2,
        }
    }
    passes = [("default (synchronous=FULL in WAL)", None, rounds)]
    passes.append(("info: synchronous=NORMAL", "NORMAL", max(2, rounds // 2)))
    for label, sync, n_rounds in passes:
        dbs = {"plain": tmp / "put-plain.db", "attesting": tmp / "put-attest.db"}
        savers: dict[str, SqliteSaver] = {}
        conns = []
        for k, p in dbs.items():
            remove_db(p)
            c = open_conn(p)
            conns.append(c)
            s = SqliteSaver(c) if k == "plain" else AttestingSqliteSaver(c, signer=SIGNER)
            s.setup()
            if sync:
                c.execute(f"PRAGMA synchronous={sync}")
            savers[k] = s
        # one untimed warm-up round each
        for k, s in savers.items():
            write_thread(s, f"warm-{k}", 20, 800, 200, payloads)
        t: dict[str, list[float]] = {"plain": [], "attesting": []}
        for r in range(n_rounds):
            order = ["plain", "attesting"] if r % 2 == 0 else ["attesting", "plain"]
            for k in order:
                gc.collect()
                t0 = time.perf_counter()
                write_thread(savers[k], f"t-{r}", per_round, 800, 200, payloads)
                t[k].append(time.perf_counter() - t0)
        for c in conns:
            c.close()
        for p in dbs.values():
            remove_db(p)
        n = n_rounds * per_round
        tp = {k: n / sum(v) for k, v in t.items()}
        ratio = tp["attesting"] / tp["plain"]
        paired = statistics.median(p / a for p, a in zip(t["plain"], t["attesting"], strict=True))
        out[label] = {
            "puts": n,
            "round_s": {k: summary(v) for k, v in t.items()},
            "puts_per_s": tp,
            "us_per_put_plus_writes": {k: 1e6 / v for k, v in tp.items()},
            "ratio_attesting_over_plain": ratio,
            "ratio_paired_median": paired,
        }
        print(f"\n[put] {label}: {n} puts + put_writes per saver, {n_rounds} interleaved rounds")
        print(f"  plain     {tp['plain']:8.0f} puts/s ({1e6 / tp['plain']:.0f} us each)")
        print(
            f"  attesting {tp['attesting']:8.0f} puts/s ({1e6 / tp['attesting']:.0f} us each)"
            f"  ratio {ratio:.3f} (paired median {paired:.3f})"
        )
    return out


# ------------------------------------------------------------------------------------
# part 4: erase cost vs number of threads in the database


def build_many_threads(
    path: Path, n_threads: int, targets: list[int], per_thread: int, cp_bytes: int, seed: int
) -> dict[str, Any]:
    """Targets (and a template) through the saver; all other threads bulk-copied in SQL."""
    remove_db(path)
    t0 = time.perf_counter()
    payloads = Payloads(seed)
    tids = [f"thread-{i:06d}" for i in range(n_threads)]
    with closing(open_conn(path)) as conn:
        saver = AttestingSqliteSaver(conn, signer=SIGNER)
        saver.setup()
        conn.execute("PRAGMA synchronous=OFF")
        template = tids[0]
        write_thread(saver, template, per_thread, cp_bytes, 200, payloads)
        for i in targets:
            write_thread(saver, tids[i], per_thread, cp_bytes, 200, payloads)
        fillers = [t for i, t in enumerate(tids) if i and i not in set(targets)]
        conn.execute("CREATE TEMP TABLE filler (tid TEXT PRIMARY KEY)")
        conn.executemany("INSERT INTO filler VALUES (?)", [(t,) for t in fillers])
        conn.execute(
            "INSERT INTO checkpoints SELECT f.tid, c.checkpoint_ns, c.checkpoint_id, "
            "c.parent_checkpoint_id, c.type, c.checkpoint, c.metadata "
            "FROM filler f CROSS JOIN checkpoints c WHERE c.thread_id = ?",
            (template,),
        )
        conn.execute(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, "
            "idx, channel, type, value) SELECT f.tid, w.checkpoint_ns, w.checkpoint_id, "
            "w.task_id, w.task_path, w.idx, w.channel, w.type, w.value "
            "FROM filler f CROSS JOIN writes w WHERE w.thread_id = ?",
            (template,),
        )
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        n = conn.execute("SELECT count(DISTINCT thread_id) FROM checkpoints").fetchone()[0]
        rows = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        wrows = conn.execute("SELECT count(*) FROM writes").fetchone()[0]
    assert n == n_threads, (n, n_threads)
    return {
        "threads": n,
        "checkpoint_rows": rows,
        "write_rows": wrows,
        "db_bytes": path.stat().st_size,
        "build_s": round(time.perf_counter() - t0, 2),
        "target_thread_ids": [tids[i] for i in targets],
    }


def part_scale(tmp: Path, quick: bool) -> dict[str, Any]:
    big_n = 1000 if quick else 10000
    small_n = 10
    k = 4 if quick else 9
    per_thread, cp_bytes = 50, 400
    small_src = tmp / "scale-small.db"
    big = tmp / "scale-big.db"
    print(
        f"\n[scale] building DBs of {small_n} and {big_n} threads x {per_thread} checkpoints ...",
        flush=True,
    )
    small_info = build_many_threads(small_src, small_n, [small_n // 2], per_thread, cp_bytes, 5)
    big_targets = [big_n * (j + 1) // (k + 1) for j in range(k)]
    big_info = build_many_threads(big, big_n, big_targets, per_thread, cp_bytes, 5)
    print(
        f"[scale] small: {small_info['db_bytes'] / 1e6:.1f} MB in {small_info['build_s']} s; "
        f"big: {big_info['db_bytes'] / 1e6:.0f} MB, {big_info['checkpoint_rows']} checkpoint "
        f"rows, in {big_info['build_s']} s",
        flush=True,
    )
    small_tid = small_info["target_thread_ids"][0]
    work = tmp / "scale-small-work.db"
    t_small: list[float] = []
    t_big: list[float] = []
    for r in range(k):
        # small: a fresh copy each round (always exactly 10 threads); big: a different
        # saver-written target each round in the same file (10,000 -> 10,000-k threads)
        jobs = [("small", work, small_tid), ("big", big, big_info["target_thread_ids"][r])]
        if r % 2:
            jobs.reverse()
        for name, path, tid in jobs:
            if name == "small":
                copy_db(small_src, work)
            gc.collect()
            dt = op_erase(path, tid)
            (t_small if name == "small" else t_big).append(dt)
            if name == "small":
                remove_db(work)
    for p in (small_src, big):
        remove_db(p)
    ss, sb = summary(t_small), summary(t_big)
    ratio = sb["median"] / ss["median"]
    paired = statistics.median(b / s for b, s in zip(t_big, t_small, strict=True))
    print(
        f"[scale] erase of one {per_thread}-checkpoint thread: {small_n} threads "
        f"{fmt_s(ss['median'])} vs {big_n} threads {fmt_s(sb['median'])} (medians of {k}); "
        f"ratio {ratio:.2f} (paired {paired:.2f})"
    )
    return {
        "params": {
            "small_threads": small_n,
            "big_threads": big_n,
            "rounds": k,
            "checkpoints_per_thread": per_thread,
            "checkpoint_text_bytes": cp_bytes,
            "small_db": small_info,
            "big_db": big_info,
        },
        "erase_s": {"small": ss, "big": sb},
        "ratio_big_over_small_median": ratio,
        "ratio_paired_median": paired,
    }


# ------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="~20-40 s smoke run")
    ap.add_argument(
        "--only", default="erase,rss,put,scale", help="comma-separated parts: erase,rss,put,scale"
    )
    ap.add_argument("--rounds", type=int, help="erase rounds (default 5; quick 2)")
    ap.add_argument("--tmp", help="directory for the databases (default: a temp dir)")
    # internal: fresh-process helpers for the RSS part
    ap.add_argument("--child", choices=["build", "rss"], help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    ap.add_argument("--tid", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--cp-bytes", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--op", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "build":
        child_build(args.db, args.tid, args.n, args.cp_bytes)
        return 0
    if args.child == "rss":
        child_rss(args.db, args.tid, args.op)
        return 0

    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="bench-erase-", dir=args.tmp))
    t_start = time.perf_counter()
    prev: dict[str, Any] = {}
    prev_path = RESULTS_DIR / "erase_sqlite.json"
    if set(parts) != {"erase", "rss", "put", "scale"} and prev_path.exists():
        prev = json.loads(prev_path.read_text())  # keep the parts not re-run
    results: dict[str, Any] = {k: prev[k] for k in ("erase", "rss", "put", "scale") if k in prev}
    verdicts: dict[str, Any] = dict(prev.get("verdicts", {}))
    modes: dict[str, str] = dict(prev.get("part_modes", {}))
    try:
        warm_library()
        if "erase" in parts:
            results["erase"] = part_erase(tmp, args.quick, args.rounds)
            r = results["erase"]["ratios"]
            verdicts["erase / (select+delete) median"] = verdict(
                r["erase / (select+delete) median"], TARGET_ERASE_VS_SELECT_DELETE, "<="
            )
            verdicts["erase / (select+delete) best"] = verdict(
                r["erase / (select+delete) best"], TARGET_ERASE_VS_SELECT_DELETE, "<="
            )
        if "rss" in parts:
            results["rss"] = part_rss(tmp, args.quick)
            verdicts["erase peak RSS growth (MB)"] = verdict(
                results["rss"]["erase_peak_growth_mb"], TARGET_RSS_MB, "<="
            )
        if "put" in parts:
            results["put"] = part_put(tmp, args.quick)
            d = results["put"]["default (synchronous=FULL in WAL)"]
            verdicts["put throughput attesting/plain"] = verdict(
                d["ratio_attesting_over_plain"], TARGET_PUT_RATIO, ">="
            )
        if "scale" in parts:
            results["scale"] = part_scale(tmp, args.quick)
        for p in parts:
            modes[p] = "quick" if args.quick else "full"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.perf_counter() - t_start
    if "erase" in results:
        r = results["erase"]["ratios"]
        print("\nratios:")
        for k in (
            "erase / (select+delete) median",
            "erase / delete median",
            "delete(secure_delete=OFF) / delete(default)",
            "(delete + wal_checkpoint) / delete",
        ):
            print(f"  {k:<48} {r[k]:.3f}")
    if "scale" in results:
        print(
            f"  {'erase in 10,000-thread DB / 10-thread DB':<48} "
            f"{results['scale']['ratio_big_over_small_median']:.3f}"
        )
    print("\nverdicts:")
    print_verdicts(verdicts)
    path = write_result(
        "erase_sqlite",
        {
            "mode": "quick" if args.quick else "full",
            "part_modes": modes,
            "elapsed_s_this_run": round(elapsed, 1),
            "targets": {
                "erase / (select+delete)": f"<= {TARGET_ERASE_VS_SELECT_DELETE}",
                "erase peak RSS growth": f"<= {TARGET_RSS_MB} MB",
                "put throughput attesting/plain": f">= {TARGET_PUT_RATIO}",
                "erase 10,000 vs 10 threads": "~1.0 (informative)",
            },
            **results,
            "verdicts": verdicts,
        },
    )
    print(f"\nwrote {path} ({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
