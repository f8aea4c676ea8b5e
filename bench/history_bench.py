"""History erasure and retention sweeps, against plain SQL measured in the same run.

    python bench/history_bench.py [--quick] [--only history,pg,sweep,memory]
                                  [--rounds N] [--tmp DIR] [--dsn DSN]

``history`` SQLite: one thread of 2,000 checkpoints (25 KB of text each, 2 writes each,
            written through ``put``/``put_writes``) plus 5 other threads; the database
            is copied fresh for every timed run. Per round, in rotating order: (a)
            ``AttestingSqliteSaver.erase_history``; (b) baseline: SELECT every row that
            erase_history removes (all checkpoints but the latest, their writes; every
            column fetched) and a plain DELETE of the same rows, in one transaction.
            Target (a)/(b) <= 1.5 (median of paired ratios).
``pg``      The same on PostgreSQL (a throw-away server from ``tests/pg_server.py``
            unless ``--dsn``): ``AttestingPostgresSaver.erase_history`` vs SELECT of the
            removed checkpoints, their writes and the blobs only they reference, plus a
            plain DELETE of the same rows. Reported against the same 1.5.
``sweep``   10,000 threads (4 checkpoints and 6 writes each, ~1 KB values) of which
            1,000 have their latest checkpoint 40 days ago (uuid6 ids made with that
            time); rows bulk-inserted. (a) ``erase_idle_threads(30 days)`` with a
            receipt per thread into an archive directory; (b) the same sweep without
            receipts: the same selection query, then ``SqliteSaver.delete_thread`` per
            thread. Threads/s of both and (a)/(b).
``memory``  One process erases 4,000 idle threads (of 40,000) in four chunks of 1,000
            (``limit=``): the ``tracemalloc`` peak of each chunk, what stays allocated
            after it, and the peak RSS growth so far (VmHWM after ``clear_refs``).
            Memory is flat in the number of threads when the last chunk's figures equal
            the first's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _common import fmt_s, print_verdicts, summary, verdict, write_result
from erase_sqlite import Payloads, build_db, copy_db, finish_db, open_conn, remove_db
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

from erasure_receipts import AttestingSqliteSaver, Signer
from erasure_receipts._backends import sqlite as sqlite_backend
from erasure_receipts._clock import uuid6_floor

SIGNER = Signer.from_seed(b"\x08" * 32)
TARGET = 1.5
TID = "target"


def _rotating(rounds: int, ops: dict[str, Callable[[], float]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in ops}
    names = list(ops)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            out[name].append(ops[name]())
    return out


def _paired(a: list[float], b: list[float]) -> float:
    return round(statistics.median(x / y for x, y in zip(a, b, strict=True)), 4)


# -- history (SQLite) --------------------------------------------------------------------


def sqlite_erase_history(path: Path) -> float:
    with closing(open_conn(path)) as conn:
        saver = AttestingSqliteSaver(conn, signer=SIGNER)
        saver.setup()
        t0 = time.perf_counter()
        receipt = saver.erase_history(TID)
        dt = time.perf_counter() - t0
    assert receipt.predicate["kept_state"]["tables"]["checkpoints"]["rows"] == 1
    return dt


def sqlite_select_delete(path: Path) -> float:
    with closing(open_conn(path)) as conn:
        SqliteSaver(conn).setup()
        t0 = time.perf_counter()
        (latest,) = conn.execute(
            "SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''",
            (TID,),
        ).fetchone()
        n = 0
        for table in ("checkpoints", "writes"):
            rows = conn.execute(
                f"SELECT * FROM {table} WHERE thread_id = ? AND checkpoint_id < ?", (TID, latest)
            ).fetchall()
            n += len(rows)
        with conn:
            for table in ("writes", "checkpoints"):
                conn.execute(
                    f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id < ?", (TID, latest)
                )
        dt = time.perf_counter() - t0
    assert n > 0
    return dt


def part_history(work: Path, quick: bool, rounds: int) -> dict[str, Any]:
    n, cp_bytes, w_bytes = (300, 5_000, 500) if quick else (2000, 25_000, 2_000)
    src = work / "history.db"
    print(f"[history] building a {n}-checkpoint thread ({cp_bytes} B each) + 5 others")
    shape = build_db(src, [(TID, n), *[(f"other{i}", 20) for i in range(5)]], cp_bytes, w_bytes)
    finish_db(src)
    run = work / "run.db"

    def fresh(op: Callable[[Path], float]) -> Callable[[], float]:
        def go() -> float:
            remove_db(run)
            copy_db(src, run)
            return op(run)

        return go

    fresh(sqlite_erase_history)()  # warm imports and one-off costs
    times = _rotating(rounds, {"erase_history": fresh(sqlite_erase_history),
                               "select+delete": fresh(sqlite_select_delete)})  # fmt: skip
    ratio = _paired(times["erase_history"], times["select+delete"])
    best = round(min(times["erase_history"]) / min(times["select+delete"]), 4)
    for k, v in times.items():
        print(f"  {k:<16} best {fmt_s(min(v)):>10}  median {fmt_s(statistics.median(v)):>10}")
    print(f"  erase_history / (select+delete): median paired {ratio}, best {best}")
    return {"shape": shape, "params": {"checkpoints": n, "cp_bytes": cp_bytes, "rounds": rounds},
            "seconds": {k: summary(v) for k, v in times.items()},
            "ratio_median_paired": ratio, "ratio_best": best}  # fmt: skip


# -- history (PostgreSQL) ----------------------------------------------------------------


@contextlib.contextmanager
def pg_server(dsn: str | None) -> Iterator[str]:
    if dsn:
        yield dsn
        return
    import pg_server as srv

    root = srv.new_root()
    try:
        yield srv.start(root)
    finally:
        srv.stop(root)


def _pg_build(dsn: str, n: int, cp_bytes: int, w_bytes: int) -> None:
    from erasure_receipts import AttestingPostgresSaver

    payloads = Payloads(3)
    with AttestingPostgresSaver.from_conn_string(dsn, signer=SIGNER) as saver:
        saver.setup()
        for tid, count in [(TID, n), *[(f"other{i}", 20) for i in range(5)]]:
            parent: dict[str, Any] = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
            for step in range(count):
                cp = empty_checkpoint()
                cp["channel_values"] = {"messages": [payloads.text(cp_bytes)], "n": step}
                versions = {"messages": f"{step + 1:032}.0", "n": f"{step + 1:032}.0"}
                cp["channel_versions"] = versions
                parent = saver.put(parent, cp, {"step": step}, versions)
                pending = [("messages", payloads.text(w_bytes)), ("branch:to:agent", None)]
                saver.put_writes(parent, pending, str(uuid.uuid4()))


PG_REMOVED = {
    "checkpoints": "thread_id = %(t)s AND checkpoint_id < %(h)s",
    "checkpoint_writes": "thread_id = %(t)s AND checkpoint_id < %(h)s",
    "checkpoint_blobs": (
        "thread_id = %(t)s AND (channel, version) NOT IN (SELECT v.key, v.value FROM "
        "checkpoints c, jsonb_each_text(c.checkpoint -> 'channel_versions') v "
        "WHERE c.thread_id = %(t)s AND c.checkpoint_ns = '' AND c.checkpoint_id = %(h)s)"
    ),
}


def part_pg(work: Path, quick: bool, rounds: int, dsn: str | None) -> dict[str, Any]:
    import psycopg
    from psycopg import sql

    from erasure_receipts import AttestingPostgresSaver

    n, cp_bytes, w_bytes = (300, 5_000, 500) if quick else (2000, 25_000, 2_000)
    with pg_server(dsn) as server:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute("DROP DATABASE IF EXISTS history_src")
            admin.execute("CREATE DATABASE history_src")
        src = psycopg.conninfo.make_conninfo(server, dbname="history_src")
        print(f"[pg] building a {n}-checkpoint thread ({cp_bytes} B each) + 5 others")
        t0 = time.perf_counter()
        _pg_build(src, n, cp_bytes, w_bytes)
        build_s = round(time.perf_counter() - t0, 1)
        run = psycopg.conninfo.make_conninfo(server, dbname="history_run")

        def fresh(op: Callable[[str], float]) -> Callable[[], float]:
            def go() -> float:
                with psycopg.connect(server, autocommit=True) as admin:
                    admin.execute("DROP DATABASE IF EXISTS history_run WITH (FORCE)")
                    admin.execute("CREATE DATABASE history_run TEMPLATE history_src")
                return op(run)

            return go

        def erase(d: str) -> float:
            with AttestingPostgresSaver.from_conn_string(d, signer=SIGNER) as saver:
                saver.setup()
                t = time.perf_counter()
                saver.erase_history(TID)
                return time.perf_counter() - t

        def select_delete(d: str) -> float:
            with psycopg.connect(d, autocommit=True) as conn:
                t = time.perf_counter()
                with conn.transaction():
                    row = conn.execute(
                        "SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = %s "
                        "AND checkpoint_ns = ''", (TID,)).fetchone()  # fmt: skip
                    args = {"t": TID, "h": row[0] if row else None}
                    for table, where in PG_REMOVED.items():
                        with conn.cursor(binary=True) as cur:  # bytes as bytes, no hex text
                            cur.execute(sql.SQL("SELECT * FROM {} WHERE " + where).format(
                                sql.Identifier(table)), args)  # fmt: skip
                            cur.fetchall()
                    for table in ("checkpoint_blobs", "checkpoint_writes", "checkpoints"):
                        conn.execute(sql.SQL("DELETE FROM {} WHERE " + PG_REMOVED[table]).format(
                            sql.Identifier(table)), args)  # fmt: skip
                return time.perf_counter() - t

        fresh(erase)()
        times = _rotating(rounds, {"erase_history": fresh(erase),
                                   "select+delete": fresh(select_delete)})  # fmt: skip
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute("DROP DATABASE IF EXISTS history_run WITH (FORCE)")
            admin.execute("DROP DATABASE IF EXISTS history_src WITH (FORCE)")
    ratio = _paired(times["erase_history"], times["select+delete"])
    best = round(min(times["erase_history"]) / min(times["select+delete"]), 4)
    for k, v in times.items():
        print(f"  {k:<16} best {fmt_s(min(v)):>10}  median {fmt_s(statistics.median(v)):>10}")
    print(f"  erase_history / (select+delete): median paired {ratio}, best {best}")
    return {"params": {"checkpoints": n, "cp_bytes": cp_bytes, "rounds": rounds},
            "build_s": build_s, "seconds": {k: summary(v) for k, v in times.items()},
            "ratio_median_paired": ratio, "ratio_best": best}  # fmt: skip


# -- retention sweep -----------------------------------------------------------------------


def _id_at(t: datetime, rng: random.Random) -> str:
    """A uuid6 with timestamp ``t`` and random clock sequence and node (as LangGraph's)."""
    floor = uuid6_floor(t).replace("-", "")
    tail = rng.getrandbits(62) | (1 << 63)  # variant 10, random clock_seq + node
    h = floor[:16] + f"{tail:016x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def build_sweep(path: Path, threads: int, idle: int, seed: int = 5) -> dict[str, Any]:
    """Threads of 4 checkpoints and 6 writes (~1 KB values, serialized like the saver
    does); ``idle`` of them (spread evenly) 40 days old. Bulk-inserted."""
    remove_db(path)
    t0 = time.perf_counter()
    rng = random.Random(seed)
    payloads = Payloads(seed)
    now = datetime.now(UTC)
    every = max(threads // idle, 1) if idle else threads + 1
    with closing(open_conn(path)) as conn:
        saver = AttestingSqliteSaver(conn, signer=SIGNER)
        saver.setup()
        conn.execute("PRAGMA synchronous=OFF")
        serde = saver.serde
        cps: list[tuple[Any, ...]] = []
        writes: list[tuple[Any, ...]] = []
        for i in range(threads):
            tid = f"thread-{i:06d}"
            base = now - timedelta(days=40) if i % every == 0 and i // every < idle else now
            parent = None
            for step in range(4):
                cid = _id_at(base - timedelta(seconds=4 - step), rng)
                cp = empty_checkpoint()
                cp["id"] = cid
                cp["channel_values"] = {"messages": [payloads.text(1000)], "n": step}
                typ, blob = serde.dumps_typed(cp)
                meta = json.dumps({"source": "loop", "step": step, "parents": {}})
                cps.append((tid, "", cid, parent, typ, blob, meta))
                for idx in range(2 if step < 3 else 0):
                    wtyp, wblob = serde.dumps_typed(payloads.text(500))
                    writes.append((tid, "", cid, str(uuid.UUID(int=rng.getrandbits(128))), idx,
                                   "messages", wtyp, wblob))  # fmt: skip
                parent = cid
            if len(cps) > 20_000:
                _flush(conn, cps, writes)
        _flush(conn, cps, writes)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {"threads": threads, "idle": idle, "db_bytes": path.stat().st_size,
            "build_s": round(time.perf_counter() - t0, 1)}  # fmt: skip


def _flush(conn: sqlite3.Connection, cps: list[Any], writes: list[Any]) -> None:
    with conn:
        conn.executemany(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
            "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)",
            cps,
        )
        conn.executemany(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, "
            "channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            writes,
        )
    cps.clear()
    writes.clear()


def sweep_attested(path: Path, archive: Path) -> tuple[float, int]:
    shutil.rmtree(archive, ignore_errors=True)
    with closing(open_conn(path)) as conn:
        saver = AttestingSqliteSaver(conn, signer=SIGNER, archive=archive)
        saver.setup()
        t0 = time.perf_counter()
        result = saver.erase_idle_threads(timedelta(days=30))
        dt = time.perf_counter() - t0
    assert result.ok
    return dt, result.threads


def sweep_plain(path: Path) -> tuple[float, int]:
    with closing(open_conn(path)) as conn:
        saver = SqliteSaver(conn)
        saver.setup()
        t0 = time.perf_counter()
        before = uuid6_floor(datetime.now(UTC) - timedelta(days=30))
        after, n = None, 0
        while page := sqlite_backend.idle_threads(conn, before, after, 500):
            for tid, *_ in page:
                saver.delete_thread(tid)
                n += 1
            after = page[-1][0]
        dt = time.perf_counter() - t0
    return dt, n


def part_sweep(work: Path, quick: bool, rounds: int) -> dict[str, Any]:
    threads, idle = (2_000, 200) if quick else (10_000, 1_000)
    src = work / "sweep.db"
    print(f"[sweep] building {threads} threads, {idle} idle")
    shape = build_sweep(src, threads, idle)
    run, archive = work / "sweep-run.db", work / "archive"

    def fresh(op: Callable[[Path], tuple[float, int]]) -> Callable[[], float]:
        def go() -> float:
            remove_db(run)
            copy_db(src, run)
            dt, n = op(run)
            assert n == idle, (n, idle)
            return dt

        return go

    times = _rotating(rounds, {"with receipts": fresh(lambda p: sweep_attested(p, archive)),
                               "without receipts": fresh(sweep_plain)})  # fmt: skip
    rate = {k: round(idle / min(v), 1) for k, v in times.items()}
    ratio = _paired(times["with receipts"], times["without receipts"])
    for k, v in times.items():
        print(f"  {k:<18} best {fmt_s(min(v)):>10}  {rate[k]:>8} threads/s")
    print(f"  with / without receipts: median paired {ratio}")
    return {"shape": shape, "rounds": rounds, "seconds": {k: summary(v) for k, v in times.items()},
            "threads_per_s_best": rate, "ratio_median_paired": ratio}  # fmt: skip


# -- memory ---------------------------------------------------------------------------------

MEMORY_CHILD = """
import gc, json, sys, tracemalloc
from contextlib import closing
from datetime import timedelta
sys.path.insert(0, sys.argv[3])
from erase_sqlite import open_conn
from erasure_receipts import AttestingSqliteSaver, Signer
chunk, chunks = int(sys.argv[4]), int(sys.argv[5])
def status():
    out = {}
    for line in open("/proc/self/status"):
        if line.startswith(("VmRSS:", "VmHWM:")):
            k, v = line.split(":", 1)
            out[k] = int(v.split()[0])
    return out
with closing(open_conn(sys.argv[1])) as conn:
    saver = AttestingSqliteSaver(conn, signer=Signer.from_seed(bytes(32)), archive=sys.argv[2])
    saver.setup()
    saver.erase_idle_threads(timedelta(days=30), limit=1)  # warm: imports, caches
    gc.collect()
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    base = status()
    tracemalloc.start()
    rows = []
    for _ in range(chunks):
        tracemalloc.reset_peak()
        result = saver.erase_idle_threads(timedelta(days=30), limit=chunk)
        cur, peak = tracemalloc.get_traced_memory()
        hwm = status()["VmHWM"] - base["VmRSS"]
        rows.append({"threads": result.threads, "peak_kb": peak // 1024,
                     "retained_kb": cur // 1024, "rss_hwm_growth_kb": hwm})
    tracemalloc.stop()
print(json.dumps(rows))
"""


def part_memory(work: Path, quick: bool) -> dict[str, Any]:
    """One sweep of ``chunks`` x ``chunk`` idle threads, in chunks (``limit=``), in a
    fresh process: the tracemalloc peak of each chunk, what stays allocated after it,
    and the process's peak RSS growth so far. Flat: the last chunk's peak is the
    first's, and nothing accumulates."""
    threads, chunk, chunks = (8_000, 200, 4) if quick else (40_000, 1_000, 4)
    db = work / "mem.db"
    print(f"[memory] {threads} threads, {chunk * chunks} idle, in {chunks} chunks of {chunk}")
    build_sweep(db, threads, chunk * chunks + 1)
    res = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD, str(db), str(work / "mem-archive"),
         str(Path(__file__).resolve().parent), str(chunk), str(chunks)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rows = json.loads(res.stdout)
    done = 0
    for r in rows:
        done += r["threads"]
        print(f"  after {done:>6} threads: chunk peak {r['peak_kb']} KB, retained "
              f"{r['retained_kb']} KB, RSS peak growth {r['rss_hwm_growth_kb']} KB")  # fmt: skip
    remove_db(db)
    first, last = rows[0], rows[-1]
    return {"threads": threads, "chunk": chunk, "chunks": rows,
            "peak_ratio_last_first": round(last["peak_kb"] / max(first["peak_kb"], 1), 3),
            "rss_growth_ratio_last_first": round(
                last["rss_hwm_growth_kb"] / max(first["rss_hwm_growth_kb"], 1), 3)}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="history,pg,sweep,memory")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--tmp", type=Path, default=None)
    ap.add_argument("--dsn", default=os.environ.get("ERASURE_RECEIPTS_PG_DSN"))
    args = ap.parse_args()
    parts = set(args.only.split(","))
    rounds = args.rounds or (2 if args.quick else 5)
    work = Path(tempfile.mkdtemp(prefix="history-bench-", dir=args.tmp))
    doc: dict[str, Any] = {"mode": "quick" if args.quick else "full"}
    verdicts: dict[str, Any] = {}
    try:
        if "history" in parts:
            doc["history"] = h = part_history(work, args.quick, rounds)
            verdicts["sqlite erase_history / (select+delete)"] = verdict(
                h["ratio_median_paired"], TARGET, "<="
            )
        if "pg" in parts:
            doc["pg"] = g = part_pg(work, args.quick, rounds, args.dsn)
            verdicts["pg erase_history / (select+delete)"] = verdict(
                g["ratio_median_paired"], TARGET, "<="
            )
        if "sweep" in parts:
            doc["sweep"] = part_sweep(work, args.quick, max(2, rounds // 2))
        if "memory" in parts:
            doc["memory"] = m = part_memory(work, args.quick)
            verdicts["sweep memory peak, last chunk / first"] = verdict(
                m["peak_ratio_last_first"], 1.25, "<="
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc["verdicts"] = verdicts
    print_verdicts(verdicts)
    path = write_result("history_bench", doc)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
