"""Erasure targets on SQLite: what erasing a thread's application rows in the same
receipt costs, against the same erasure without targets.

    python bench/targets_bench.py [--quick] [--rounds N]

One file holds a thread of 50 checkpoints (through ``SqliteSaver.put``/``put_writes``,
as in erase_sqlite.py) and an application ledger of 20,000 rows (200 of the thread,
indexed on the key column). Three erasures of that thread, each from a fresh copy of
the file and interleaved per round:

``baseline``     ``erase_thread`` without targets (the ledger untouched);
``same_db``      with ``SqlTarget("grants", "thread_id")``: the 200 rows measured and
                 deleted in the erasure transaction;
``other_db``     the ledger in another SQLite file, ``SqlTarget(database=)``: measured in
                 the transaction, journaled, swept after the commit.

Reported as ratios to the baseline; target for ``same_db`` <= 1.5.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt_s, print_verdicts, summary, verdict, write_result
from erase_sqlite import Payloads, write_thread
from langgraph.checkpoint.sqlite import SqliteSaver

from erasure_receipts import AttestingSqliteSaver, Signer, SqlTarget

SIGNER = Signer.from_seed(bytes(range(32)))
THREAD = "bench-thread"
LEDGER = (
    "CREATE TABLE grants (grant_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, "
    "amount INTEGER, note TEXT)"
)


def ledger(conn: sqlite3.Connection, rows: int, mine: int) -> None:
    conn.execute(LEDGER)
    conn.execute("CREATE INDEX grants_thread ON grants (thread_id)")
    conn.executemany(
        "INSERT INTO grants VALUES (?, ?, ?, ?)",
        [(f"g{i:06d}", THREAD if i < mine else f"other-{i % 997}", i, "refund " * 8)
         for i in range(rows)],
    )  # fmt: skip
    conn.commit()


def seeded(tmp: Path, checkpoints: int, rows: int, mine: int) -> tuple[Path, Path]:
    db, other = tmp / "source.db", tmp / "source-ledger.db"
    with sqlite3.connect(db, check_same_thread=False) as conn:
        saver = SqliteSaver(conn)
        saver.setup()
        write_thread(saver, THREAD, checkpoints, 2000, 200, Payloads(1))
        ledger(conn, rows, mine)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # a copy of the file is the state
    with sqlite3.connect(other) as conn:
        ledger(conn, rows, mine)
    return db, other


def erase_once(db: Path, other: Path, variant: str) -> float:
    targets = {
        "baseline": [],
        "same_db": [SqlTarget("grants", "thread_id")],
        "other_db": [SqlTarget("grants", "thread_id", database=str(other))],
    }[variant]
    with AttestingSqliteSaver.from_conn_string(str(db), signer=SIGNER, targets=targets) as s:
        s.setup()
        t = time.perf_counter()
        s.erase_thread(THREAD)
        return time.perf_counter() - t


def bench(tmp: Path, rounds: int, checkpoints: int, rows: int, mine: int) -> dict[str, Any]:
    db, other = seeded(tmp, checkpoints, rows, mine)
    variants = ["baseline", "same_db", "other_db"]
    samples: dict[str, list[float]] = {v: [] for v in variants}
    for v in variants:  # warm-up (imports, first connections): not measured
        shutil.copy(db, tmp / "warm.db")
        shutil.copy(other, tmp / "warm-ledger.db")
        erase_once(tmp / "warm.db", tmp / "warm-ledger.db", v)
    for r in range(rounds):
        for v in variants[r % 3 :] + variants[: r % 3]:
            cdb, cother = tmp / f"r{r}-{v}.db", tmp / f"r{r}-{v}-ledger.db"
            shutil.copy(db, cdb)
            shutil.copy(other, cother)
            samples[v].append(erase_once(cdb, cother, v))
    base = statistics.median(samples["baseline"])
    return {
        "checkpoints": checkpoints, "ledger_rows": rows, "thread_rows": mine,
        "seconds": {k: summary(v) for k, v in samples.items()},
        "ratio_to_baseline": {k: statistics.median(v) / base for k, v in samples.items()},
    }  # fmt: skip


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    args = ap.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 9)
    with tempfile.TemporaryDirectory() as d:
        res = bench(Path(d), rounds, 20 if args.quick else 50,
                    2000 if args.quick else 20_000, 50 if args.quick else 200)  # fmt: skip
    verdicts = {
        "erase_thread with a same-database target / without": verdict(
            res["ratio_to_baseline"]["same_db"], 1.5, "<="
        ),
    }
    for k, s in res["seconds"].items():
        print(f"  {k:<10} {fmt_s(s['median']):>10}  x{res['ratio_to_baseline'][k]:.2f}")
    print_verdicts(verdicts)
    path = write_result("targets_bench", {"rounds": rounds, **res, "verdicts": verdicts})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
