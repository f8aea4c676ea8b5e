"""Erasure per person on SQLite: one subject erasure vs one erasure per thread, and
``locate`` vs reading the database file once.

    python bench/subject_bench.py [--quick] [--rounds N] [--tmp DIR]

``erase``   A subject with 50 threads x 200 checkpoints (one ``put`` + one
            ``put_writes`` per checkpoint, ``user_id`` in the metadata) and another
            subject with 20 threads of the same shape. One thread per subject is written
            through the saver's public API; the others are copies made with SQL (rows
            identical except the thread id), so building stays fast. Every timed run
            starts from a fresh copy of the same file. Per round, in rotating order:
            (a) ``erase_subject(metadata_key="user_id")`` - discovery, one transaction,
            one receipt; (b) baseline: 50 ``erase_thread`` calls (50 transactions, 50
            receipts); (c) ``erase_subject`` with the 50 threads listed (no discovery);
            (d) (a) plus a needle searched through the whole database. Target: (a)/(b)
            <= 1.0. (c) and (d) attribute the cost of discovery and of the needle check.
``locate``  ``locate([needle])`` over the same database (ASCII needle: one form; and a
            non-ASCII one: four forms, four scans) vs reading the database file once
            (``read`` into memory) and vs reading it and searching the bytes
            (``read+find``). Reported as ratios and MB/s; no target (it is a full scan
            of every row and column through SQLite, a read is a memcpy).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt_s, print_verdicts, summary, verdict, write_result
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from erasure_receipts import AttestingSqliteSaver, Signer

SIGNER = Signer.from_seed(bytes(range(32)))
SUBJECT = "alice"
NEEDLE = "alice.zoe@example.com"


def write_thread(saver: AttestingSqliteSaver, tid: str, user: str, n: int, size: int) -> None:
    """``n`` checkpoints, each with a ``put_writes`` of two writes, through the API."""
    parent: str | None = None
    for step in range(n):
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=step))
        text = f"{user} step {step} " + ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]
        cp["channel_values"] = {"messages": text, "__start__": {"step": step}}
        cp["channel_versions"] = {"messages": f"{step:032}.0.1", "__start__": f"{step:032}.0.2"}
        cfg: dict[str, Any] = {
            "configurable": {"thread_id": tid, "checkpoint_ns": "", "user_id": user}
        }
        if parent:
            cfg["configurable"]["checkpoint_id"] = parent
        md = {"source": "loop", "step": step, "parents": {}}
        stored = saver.put(cfg, cp, md, cp["channel_versions"])  # type: ignore[arg-type]
        saver.put_writes(stored, [("messages", text[:200]), ("branch:to:agent", None)],
                         task_id=str(uuid.uuid4()))  # fmt: skip
        parent = cp["id"]


def copy_thread_sql(conn: sqlite3.Connection, source: str, targets: list[str]) -> None:
    for table in ("checkpoints", "writes"):
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        rest = ", ".join(c for c in cols if c != "thread_id")
        conn.executemany(
            f"INSERT INTO {table} (thread_id, {rest}) SELECT ?, {rest} FROM {table} "
            "WHERE thread_id = ?",
            [(t, source) for t in targets],
        )


def build(path: Path, n_threads: int, n_cps: int, size: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    mine = [f"alice-{i:03d}" for i in range(n_threads)]
    others = [f"bob-{i:03d}" for i in range(max(n_threads * 2 // 5, 1))]
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        saver = AttestingSqliteSaver(conn, signer=SIGNER)
        saver.setup()
        conn.execute("PRAGMA synchronous=OFF")
        write_thread(saver, mine[0], SUBJECT, n_cps, size)
        write_thread(saver, others[0], "bob", n_cps, size)
        # The subject's email, once, in one of its threads (a needle with one copy).
        conn.execute(
            "UPDATE writes SET value = CAST(? AS BLOB) WHERE rowid = (SELECT min(rowid) "
            "FROM writes WHERE thread_id = ?)",
            (f"contact: {NEEDLE}", mine[0]),
        )
        copy_thread_sql(conn, mine[0], mine[1:])
        copy_thread_sql(conn, others[0], others[1:])
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        writes = conn.execute("SELECT count(*) FROM writes").fetchone()[0]
    return {
        "threads_subject": len(mine), "threads_other": len(others), "checkpoints_per_thread": n_cps,
        "checkpoint_rows": rows, "write_rows": writes, "db_bytes": path.stat().st_size,
        "build_s": round(time.perf_counter() - t0, 2), "subject_threads": mine,
    }  # fmt: skip


def fresh(src: Path, dst: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{dst}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(src, dst)


def timed(path: Path, fn: Callable[[AttestingSqliteSaver], Any]) -> tuple[float, Any]:
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        saver = AttestingSqliteSaver(conn, signer=SIGNER)
        saver.setup()
        t0 = time.perf_counter()
        out = fn(saver)
        return time.perf_counter() - t0, out


def part_erase(src: Path, work: Path, threads: list[str], rounds: int) -> dict[str, Any]:
    ops: dict[str, Callable[[AttestingSqliteSaver], Any]] = {
        "subject_discovery": lambda s: [s.erase_subject(SUBJECT, metadata_key="user_id")],
        "per_thread_erase": lambda s: [s.erase_thread(t) for t in threads],
        "subject_explicit": lambda s: [s.erase_subject(SUBJECT, threads=threads)],
        "subject_discovery_needle": lambda s: [
            s.erase_subject(SUBJECT, metadata_key="user_id", needles=[NEEDLE])
        ],
    }
    times: dict[str, list[float]] = {k: [] for k in ops}
    names = list(ops)
    db = work / "run.db"
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            fresh(src, db)
            dt, receipts = timed(db, ops[name])
            times[name].append(dt)
            with closing(sqlite3.connect(db)) as c:
                left = c.execute(
                    f"SELECT count(*) FROM checkpoints WHERE thread_id IN "
                    f"({', '.join('?' * len(threads))})",
                    threads,
                ).fetchone()[0]
            assert left == 0, (name, left)
            assert len(receipts) == (len(threads) if name == "per_thread_erase" else 1)
    best = {k: min(v) for k, v in times.items()}
    base = best["per_thread_erase"]
    return {
        "rounds": rounds,
        "seconds": {k: summary(v) for k, v in times.items()},
        "ratios_best": {k: round(v / base, 4) for k, v in best.items()},
        "ratio_median": round(
            statistics.median(times["subject_discovery"])
            / statistics.median(times["per_thread_erase"]),
            4,
        ),
    }


def part_locate(src: Path, rounds: int) -> dict[str, Any]:
    size = src.stat().st_size
    needles = {"ascii": NEEDLE, "non_ascii": "Zoë Åberg"}
    times: dict[str, list[float]] = {"read": [], "read+find": []}
    times.update({f"locate_{k}": [] for k in needles})
    found: dict[str, int] = {}
    with closing(sqlite3.connect(src, check_same_thread=False)) as conn:
        saver = AttestingSqliteSaver(conn, signer=SIGNER)
        saver.setup()
        saver.locate([NEEDLE])  # warm: page cache, statement cache
        for _ in range(rounds):
            t0 = time.perf_counter()
            data = src.read_bytes()
            times["read"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            data = src.read_bytes()
            hit = data.find(NEEDLE.encode())
            times["read+find"].append(time.perf_counter() - t0)
            assert hit >= 0
            del data
            for k, n in needles.items():
                t0 = time.perf_counter()
                locs = saver.locate([n])
                times[f"locate_{k}"].append(time.perf_counter() - t0)
                found[k] = len(locs)
    best = {k: min(v) for k, v in times.items()}
    return {
        "rounds": rounds,
        "db_bytes": size,
        "locations_found": found,
        "seconds": {k: summary(v) for k, v in times.items()},
        "mb_per_s_best": {k: round(size / v / 1e6, 1) for k, v in best.items()},
        "ratio_locate_ascii_to_read": round(best["locate_ascii"] / best["read"], 2),
        "ratio_locate_ascii_to_read_find": round(best["locate_ascii"] / best["read+find"], 2),
        "ratio_locate_non_ascii_to_read": round(best["locate_non_ascii"] / best["read"], 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, one round")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--tmp", type=Path, default=None)
    args = ap.parse_args()
    n_threads, n_cps, size = (10, 40, 400) if args.quick else (50, 200, 1000)
    rounds = args.rounds or (1 if args.quick else 3)
    work = Path(tempfile.mkdtemp(prefix="subject-bench-", dir=args.tmp))
    try:
        src = work / "src.db"
        print(f"[build] {n_threads} subject threads x {n_cps} checkpoints (+ other subject)")
        shape = build(src, n_threads, n_cps, size)
        threads = shape.pop("subject_threads")
        print(f"        {shape['checkpoint_rows']} checkpoints, {shape['write_rows']} writes, "
              f"{shape['db_bytes'] / 1e6:.1f} MB, built in {shape['build_s']} s")  # fmt: skip
        # Warm imports and one-off costs outside the timed region.
        warm = work / "warm.db"
        fresh(src, warm)
        timed(warm, lambda s: s.erase_subject(SUBJECT, threads=threads[:1]))
        erase = part_erase(src, work, threads, rounds)
        print("[erase] best of", rounds, "rounds:")
        for k, v in erase["seconds"].items():
            print(f"  {k:<28} {fmt_s(v['min']):>10}  ratio {erase['ratios_best'][k]}")
        locate = part_locate(src, max(rounds, 3))
        print("[locate] best:")
        for k, v in locate["seconds"].items():
            print(f"  {k:<28} {fmt_s(v['min']):>10}  {locate['mb_per_s_best'][k]} MB/s")
        verdicts = {
            "subject_erase / per_thread_erase (best)": verdict(
                erase["ratios_best"]["subject_discovery"], 1.0, "<="
            ),
            "subject_erase / per_thread_erase (median)": verdict(erase["ratio_median"], 1.0, "<="),
        }
        print_verdicts(verdicts)
        print(f"  locate/read {locate['ratio_locate_ascii_to_read']}x, locate/(read+find) "
              f"{locate['ratio_locate_ascii_to_read_find']}x, non-ASCII (4 forms) "
              f"{locate['ratio_locate_non_ascii_to_read']}x")  # fmt: skip
        path = write_result("subject_bench", {
            "mode": "quick" if args.quick else "full", "shape": shape, "erase": erase,
            "locate": locate, "verdicts": verdicts,
        })  # fmt: skip
        print(f"wrote {path}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
