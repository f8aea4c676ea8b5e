"""Batched retention sweeps, against the same sweep with bare deletes, in the same run.

    python bench/sweep_bench.py [--large] [--only sqlite,pg,workers,memory]
                                [--rounds N] [--tmp DIR] [--dsn DSN]

``sqlite``  10,000 threads (4 checkpoints and 6 writes each, ~1 KB values; ``--large``
            100,000) of which 1,000 (10,000) have their latest checkpoint 40 days ago;
            rows bulk-inserted (``history_bench.build_sweep``), the database copied fresh
            for each timed run. Per round, in rotating order: (a) ``erase_idle_threads(30
            days, batch=True)`` into an archive directory (a ``subject`` receipt per
            batch); (b) the same sweep with bare deletes: the same selection query, then
            ``SqliteSaver.delete_thread`` per thread. Target (a)/(b) <= 3 (median of
            paired ratios). (c) once, for scale: the per-thread sweep (``batch=False``).
``pg``      The same on PostgreSQL (a throw-away server from ``tests/pg_server.py``
            unless ``--dsn``; rows bulk-inserted with the library's triggers installed;
            each run on a fresh ``CREATE DATABASE ... TEMPLATE`` copy): (a) batched,
            one process; (b) ``PostgresSaver.delete_thread`` per thread. Target <= 3.
``workers`` PostgreSQL: the batched sweep in one worker process vs two worker processes
            started at the same moment (the wall time from the start to the last
            worker's end). Target 1 worker / 2 workers >= 1.6 on 2 cores. Beside it,
            the cores each run kept busy: the CPU seconds of the workers (every thread,
            ``time.process_time``) and of the PostgreSQL server's processes (from
            ``/proc``, when the server runs on this machine) over the wall time. A
            run that keeps all of the machine's cores busy with one worker leaves no
            room for a second to add throughput.
``memory``  One process erases 4 x 1,000 idle threads (of 40,000; ``--large`` 4 x
            5,000 of 200,000) with ``batch=True`` in four chunks (``limit=``): the
            ``tracemalloc`` peak of each chunk and what stays allocated after it. Flat
            when the last chunk's figures equal the first's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
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
from erase_sqlite import copy_db, open_conn, remove_db
from history_bench import _id_at, _paired, _rotating, build_sweep, sweep_plain

from erasure_receipts import AttestingSqliteSaver, Signer
from erasure_receipts._clock import uuid6_floor

SIGNER = Signer.from_seed(b"\x09" * 32)
TARGET = 3.0
WORKERS_TARGET = 1.6


def sqlite_batched(path: Path, archive: Path, batch: bool = True) -> tuple[float, int]:
    shutil.rmtree(archive, ignore_errors=True)
    with closing(open_conn(path)) as conn:
        saver = AttestingSqliteSaver(conn, signer=SIGNER, archive=archive)
        saver.setup()
        t0 = time.perf_counter()
        result = saver.erase_idle_threads(timedelta(days=30), batch=batch)
        dt = time.perf_counter() - t0
    assert result.ok, result.failures
    return dt, result.threads


def part_sqlite(work: Path, large: bool, rounds: int) -> dict[str, Any]:
    threads, idle = (100_000, 10_000) if large else (10_000, 1_000)
    src = work / "sweep.db"
    print(f"[sqlite] building {threads} threads, {idle} idle")
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

    times = _rotating(rounds, {"batched receipts": fresh(lambda p: sqlite_batched(p, archive)),
                               "bare deletes": fresh(sweep_plain)})  # fmt: skip
    receipts = len(list(archive.glob("*.json"))) if archive.exists() else 0
    per_thread = fresh(lambda p: sqlite_batched(p, archive, batch=False))()
    return _report("sqlite", shape, rounds, times, idle, receipts, per_thread)


def _report(
    name: str,
    shape: dict[str, Any],
    rounds: int,
    times: dict[str, list[float]],
    idle: int,
    receipts: int,
    per_thread: float | None,
) -> dict[str, Any]:
    rate = {k: round(idle / min(v), 1) for k, v in times.items()}
    ratio = _paired(times["batched receipts"], times["bare deletes"])
    for k, v in times.items():
        print(f"  {k:<18} min {fmt_s(min(v)):>10}  {rate[k]:>8} threads/s")
    if per_thread is not None:
        print(f"  {'per-thread':<18} once {fmt_s(per_thread):>9}  "
              f"{round(idle / per_thread, 1):>8} threads/s")  # fmt: skip
    print(f"  batched receipts / bare deletes: median paired {ratio} ({receipts} receipts)")
    out = {"shape": shape, "rounds": rounds, "seconds": {k: summary(v) for k, v in times.items()},
           "threads_per_s_best": rate, "ratio_median_paired": ratio,
           "ratios": sorted(a / b for a, b in zip(times["batched receipts"],
                                                  times["bare deletes"], strict=True)),
           "receipts_per_sweep": receipts}  # fmt: skip
    if per_thread is not None:
        out["per_thread_receipts_s"] = per_thread
        out["per_thread_over_bare_min"] = round(per_thread / min(times["bare deletes"]), 2)
    print(f"[{name}] done")
    return out


# -- PostgreSQL -------------------------------------------------------------------------


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


def _dsn(server: str, name: str) -> str:
    import psycopg

    return psycopg.conninfo.make_conninfo(server, dbname=name)


def _admin(server: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(statement)  # type: ignore[arg-type]


def pg_build(server: str, name: str, threads: int, idle: int, seed: int = 5) -> dict[str, Any]:
    """The SQLite shape on PostgreSQL: 4 checkpoints per thread (jsonb), a
    ``messages`` blob per checkpoint (~1 KB), 6 writes (~500 B); the library's triggers
    installed first (they run on every insert, as in production)."""
    import psycopg

    from erasure_receipts import AttestingPostgresSaver

    t0 = time.perf_counter()
    _admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _admin(server, f'CREATE DATABASE "{name}"')
    dsn = _dsn(server, name)
    with AttestingPostgresSaver.from_conn_string(dsn, signer=SIGNER) as saver:
        saver.setup()
    rng = random.Random(seed)
    now = datetime.now(UTC)
    every = max(threads // idle, 1)
    text = "x" * 1000
    with psycopg.connect(dsn) as conn:
        cps, blobs, writes = [], [], []

        def flush() -> None:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
                    "parent_checkpoint_id, type, checkpoint, metadata) "
                    "VALUES (%s, '', %s, %s, NULL, %s, %s)", cps)  # fmt: skip
                cur.executemany(
                    "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, "
                    "version, type, blob) VALUES (%s, '', 'messages', %s, 'json', %s)",
                    blobs,
                )
                cur.executemany(
                    "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, "
                    "task_id, idx, channel, type, blob) "
                    "VALUES (%s, '', %s, %s, %s, 'messages', 'json', %s)", writes)  # fmt: skip
            conn.commit()
            cps.clear()
            blobs.clear()
            writes.clear()

        for i in range(threads):
            tid = f"thread-{i:06d}"
            base = now - timedelta(days=40) if i % every == 0 and i // every < idle else now
            parent = None
            for step in range(4):
                cid = _id_at(base - timedelta(seconds=4 - step), rng)
                version = f"{step + 1:032}.0"
                cp = {"v": 4, "id": cid, "ts": base.isoformat(), "channel_values": {"n": step},
                      "channel_versions": {"messages": version}, "versions_seen": {}}  # fmt: skip
                meta = {"source": "loop", "step": step, "parents": {}}
                cps.append((tid, cid, parent, json.dumps(cp), json.dumps(meta)))
                blobs.append((tid, version, json.dumps([text]).encode()))
                for idx in range(2 if step < 3 else 0):
                    writes.append((tid, cid, str(uuid.UUID(int=rng.getrandbits(128))), idx,
                                   json.dumps(text[:500]).encode()))  # fmt: skip
                parent = cid
            if len(cps) > 8_000:
                flush()
        flush()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    _admin(server, f'ALTER DATABASE "{name}" WITH IS_TEMPLATE true')
    return {"threads": threads, "idle": idle, "build_s": round(time.perf_counter() - t0, 1)}


def pg_drop(server: str, *names: str) -> None:
    """Drop the bench's databases (templates included), best effort."""
    for name in names:
        with contextlib.suppress(Exception):
            _admin(server, f'ALTER DATABASE "{name}" WITH IS_TEMPLATE false')
            _admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def pg_copy(server: str, template: str, name: str) -> str:
    _admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _admin(server, f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return _dsn(server, name)


def pg_batched(dsn: str, archive: Path) -> tuple[float, int]:
    from erasure_receipts import AttestingPostgresSaver

    shutil.rmtree(archive, ignore_errors=True)
    with AttestingPostgresSaver.from_conn_string(dsn, signer=SIGNER, archive=archive) as saver:
        saver.setup()
        t0 = time.perf_counter()
        result = saver.erase_idle_threads(timedelta(days=30), batch=True)
        dt = time.perf_counter() - t0
    assert result.ok, result.failures
    return dt, result.threads


def pg_plain(dsn: str) -> tuple[float, int]:
    from langgraph.checkpoint.postgres import PostgresSaver

    from erasure_receipts._backends import postgres as pg_backend
    from erasure_receipts._backends.postgres.session import SyncSession

    with PostgresSaver.from_conn_string(dsn) as saver:
        session = SyncSession(saver.conn)
        t0 = time.perf_counter()
        before = uuid6_floor(datetime.now(UTC) - timedelta(days=30))
        after, n = None, 0
        while page := pg_backend.idle_threads(session, before, after, 500):
            for tid, *_ in page:
                saver.delete_thread(tid)
                n += 1
            after = page[-1][0]
        dt = time.perf_counter() - t0
    return dt, n


def part_pg(work: Path, large: bool, rounds: int, server: str) -> dict[str, Any]:
    threads, idle = (100_000, 10_000) if large else (10_000, 1_000)
    print(f"[pg] building {threads} threads, {idle} idle")
    shape = pg_build(server, "sweep_template", threads, idle)
    archive = work / "pg-archive"

    def fresh(op: Callable[[str], tuple[float, int]]) -> Callable[[], float]:
        def go() -> float:
            dsn = pg_copy(server, "sweep_template", "sweep_run")
            dt, n = op(dsn)
            assert n == idle, (n, idle)
            return dt

        return go

    times = _rotating(rounds, {"batched receipts": fresh(lambda d: pg_batched(d, archive)),
                               "bare deletes": fresh(pg_plain)})  # fmt: skip
    receipts = len(list(archive.glob("*.json"))) if archive.exists() else 0
    return _report("pg", shape, rounds, times, idle, receipts, None)


WORKER = """
import json, sys, time
from datetime import timedelta
from erasure_receipts import AttestingPostgresSaver, Signer
dsn, archive, go = sys.argv[1], sys.argv[2], float(sys.argv[3])
with AttestingPostgresSaver.from_conn_string(dsn, signer=Signer.from_seed(b"\\x09" * 32),
                                             archive=archive) as saver:
    saver.setup()
    time.sleep(max(0.0, go - time.time()))
    cpu = time.process_time()
    r = saver.erase_idle_threads(timedelta(days=30), batch=True)
    print(json.dumps({"end": time.time(), "cpu": time.process_time() - cpu,
                      "threads": r.threads, "receipts": r.receipts, "failed": r.failed}))
"""


def postmaster(dsn: str) -> int | None:
    """The PostgreSQL server's postmaster pid, if it runs on this machine (Linux)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:  # read while its backend lives
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        try:
            with open(f"/proc/{row[0] if row else 0}/status") as fh:
                ppid = next(int(x.split()[1]) for x in fh if x.startswith("PPid:"))
            with open(f"/proc/{ppid}/cmdline", "rb") as fh:
                return ppid if b"postgres" in fh.read() else None
        except (OSError, StopIteration, ValueError):
            return None  # another machine, or no /proc


def server_cpu(pid: int) -> float:
    """CPU seconds used so far by the server: its live processes, and (through the
    postmaster's ``cutime``/``cstime``) the backends that have exited."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # from the state field on
        if int(entry) == pid:
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        elif int(fields[1]) == pid:
            total += int(fields[11]) + int(fields[12])
    return total / tick


def _backends(pid: int) -> int:
    n = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
                n += int(stat[stat.rindex(")") + 2 :].split()[1]) == pid
    return n


def pg_workers(
    dsn: str, archive: Path, n: int, server: int | None = None
) -> tuple[float, int, float | None]:
    """Wall time from the start to the last worker's end, threads erased, and the CPU
    seconds of the workers and (with ``server``) the server in that time (None without
    the server's)."""
    shutil.rmtree(archive, ignore_errors=True)
    go = time.time() + 2.0
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, dsn, str(archive), str(go)],
                              stdout=subprocess.PIPE, text=True) for _ in range(n)]  # fmt: skip
    idle = None if server is None else _backends(server)
    time.sleep(max(0.0, go - time.time()))
    cpu0 = None if server is None else server_cpu(server)
    docs = []
    for p in procs:
        out, _ = p.communicate(timeout=3600)
        assert p.returncode == 0
        docs.append(json.loads(out))
    assert all(d["failed"] == 0 for d in docs)
    wall = max(d["end"] for d in docs) - go
    cpu = None
    if server is not None and cpu0 is not None and idle is not None:
        deadline = time.time() + 5.0  # the workers' backends exit after their clients
        while _backends(server) > idle - n and time.time() < deadline:
            time.sleep(0.02)
        cpu = sum(d["cpu"] for d in docs) + server_cpu(server) - cpu0
    return wall, sum(d["threads"] for d in docs), cpu


def part_workers(work: Path, large: bool, rounds: int, server: str, built: bool) -> dict[str, Any]:
    threads, idle = (100_000, 10_000) if large else (10_000, 1_000)
    if not built:
        print(f"[workers] building {threads} threads, {idle} idle")
        pg_build(server, "sweep_template", threads, idle)
    archive = work / "pg-workers"
    pid = postmaster(server)
    busy: dict[str, list[float]] = {"1 worker": [], "2 workers": []}
    cpus: dict[str, list[float]] = {"1 worker": [], "2 workers": []}

    def fresh(n: int) -> Callable[[], float]:
        def go() -> float:
            dsn = pg_copy(server, "sweep_template", "sweep_run")
            dt, done, cpu = pg_workers(dsn, archive, n, pid)
            assert done == idle, (done, idle)
            if cpu is not None:
                busy[f"{n} worker{'s' * (n > 1)}"].append(cpu / dt)
                cpus[f"{n} worker{'s' * (n > 1)}"].append(cpu)
            return dt

        return go

    times = _rotating(rounds, {"1 worker": fresh(1), "2 workers": fresh(2)})
    speedup = _paired(times["1 worker"], times["2 workers"])
    cores = {k: summary(v) for k, v in busy.items() if v}
    for k, v in times.items():
        used = (
            f"  {cores[k]['median']:.2f} cores busy, "
            f"{statistics.median(cpus[k]):.2f} CPU s (medians)"
            if k in cores
            else ""
        )
        print(f"  {k:<10} min {fmt_s(min(v)):>10}  {round(idle / min(v), 1):>8} threads/s{used}")
    print(f"  1 worker / 2 workers: median paired {speedup} (os.cpu_count()={os.cpu_count()})")
    return {"idle": idle, "rounds": rounds, "seconds": {k: summary(v) for k, v in times.items()},
            "speedup_median_paired": speedup,
            "speedups": sorted(a / b for a, b in zip(times["1 worker"], times["2 workers"],
                                                     strict=True)),
            "cores_busy": cores or None,
            "cpu_seconds": {k: summary(v) for k, v in cpus.items() if v} or None,
            "cores_busy_note": "workers' CPU (all threads) + the server's, over the wall time; "
                               "None: the server is not on this machine. Two workers can be at "
                               "most os.cpu_count() / (one worker's cores busy) times as fast, "
                               "and less when they spend more CPU seconds on the same "
                               "threads"}  # fmt: skip


MEMORY_CHILD = """
import gc, json, sys, tracemalloc
from contextlib import closing
from datetime import timedelta
sys.path.insert(0, sys.argv[3])
from erase_sqlite import open_conn
from erasure_receipts import AttestingSqliteSaver, Signer
chunk, chunks = int(sys.argv[4]), int(sys.argv[5])
with closing(open_conn(sys.argv[1])) as conn:
    saver = AttestingSqliteSaver(conn, signer=Signer.from_seed(bytes(32)), archive=sys.argv[2])
    saver.setup()
    saver.erase_idle_threads(timedelta(days=30), limit=20, batch=True)  # warm
    gc.collect()
    tracemalloc.start()
    rows = []
    for _ in range(chunks):
        tracemalloc.reset_peak()
        result = saver.erase_idle_threads(timedelta(days=30), limit=chunk, batch=True)
        gc.collect()
        cur, peak = tracemalloc.get_traced_memory()
        rows.append({"threads": result.threads, "receipts": result.receipts,
                     "peak_kb": peak // 1024, "retained_kb": cur // 1024})
    tracemalloc.stop()
print(json.dumps(rows))
"""


def part_memory(work: Path, large: bool) -> dict[str, Any]:
    threads, chunk, chunks = (200_000, 5_000, 4) if large else (40_000, 1_000, 4)
    db = work / "mem.db"
    print(f"[memory] {threads} threads, {chunk * chunks} idle, in {chunks} chunks of {chunk}")
    build_sweep(db, threads, chunk * chunks + 20)
    res = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD, str(db), str(work / "mem-archive"),
         str(Path(__file__).resolve().parent), str(chunk), str(chunks)],
        capture_output=True, text=True, check=True, timeout=3600,
    )  # fmt: skip
    rows = json.loads(res.stdout)
    done = 0
    for r in rows:
        done += r["threads"]
        print(f"  after {done:>6} threads: chunk peak {r['peak_kb']} KB, retained "
              f"{r['retained_kb']} KB ({r['receipts']} receipts)")  # fmt: skip
    remove_db(db)
    first, last = rows[0], rows[-1]
    return {"threads": threads, "chunk": chunk, "chunks": rows,
            "peak_ratio_last_first": round(last["peak_kb"] / max(first["peak_kb"], 1), 3),
            "retained_ratio_last_first": round(
                last["retained_kb"] / max(first["retained_kb"], 1), 3)}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--large", action="store_true", help="100,000 threads, 10,000 idle")
    ap.add_argument("--only", default="sqlite,pg,workers,memory")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tmp", type=Path, default=None)
    ap.add_argument("--dsn", default=os.environ.get("ERASURE_RECEIPTS_PG_DSN"))
    args = ap.parse_args()
    parts = set(args.only.split(","))
    work = Path(tempfile.mkdtemp(prefix="sweep-bench-", dir=args.tmp))
    doc: dict[str, Any] = {"mode": "large" if args.large else "default"}
    verdicts: dict[str, Any] = {}
    try:
        if "sqlite" in parts:
            doc["sqlite"] = s = part_sqlite(work, args.large, args.rounds)
            verdicts["sqlite batched sweep / bare deletes"] = verdict(
                s["ratio_median_paired"], TARGET, "<="
            )
        if parts & {"pg", "workers"}:
            with pg_server(args.dsn) as server:
                built = False
                if "pg" in parts:
                    doc["pg"] = p = part_pg(work, args.large, args.rounds, server)
                    built = True
                    verdicts["pg batched sweep / bare deletes"] = verdict(
                        p["ratio_median_paired"], TARGET, "<="
                    )
                if "workers" in parts:
                    doc["workers"] = w = part_workers(work, args.large, args.rounds, server,
                                                      built)  # fmt: skip
                    verdicts["pg 1 worker / 2 workers"] = verdict(
                        w["speedup_median_paired"], WORKERS_TARGET, ">="
                    )
                pg_drop(server, "sweep_run", "sweep_template")
        if "memory" in parts:
            doc["memory"] = m = part_memory(work, args.large)
            verdicts["memory: last chunk peak / first"] = verdict(
                m["peak_ratio_last_first"], 1.1, "<="
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc["verdicts"] = verdicts
    name = "sweep_bench_large" if args.large else "sweep_bench"
    print(f"written {write_result(name, doc)}")
    print_verdicts(verdicts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
