"""Cost of the verified residue scan, as ratios against baselines run in the same process.

For a database of ``--threads`` threads x ``--checkpoints`` checkpoints (about 50 MB by
default), each round builds a fresh copy, erases one thread with and without
``residue_scan``, and times:

* ``scan_only`` - ``residue_scan()`` on the committed, checkpointed database (needles of
  the erased thread), divided by reading every byte of the same files once;
* ``erase_with_scan / erase_without`` - the whole ``erase_thread`` call;
* how often SQLite left copies (``copies_before > 0``, hence a VACUUM).

Usage: ``python bench/residue_scan.py [--rounds 5] [--threads 40] [--checkpoints 120]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import code_state, machine_facts, summary, write_result
from langgraph.checkpoint.base import empty_checkpoint

from erasure_receipts import AttestingSqliteSaver, Signer
from erasure_receipts._backends.sqlite_residue import Needles, residue_scan

SIGNER = Signer.from_seed(bytes(range(32)))


def build(path: Path, threads: int, checkpoints: int) -> None:
    with AttestingSqliteSaver.from_conn_string(str(path), signer=SIGNER) as s:
        for i in range(checkpoints):
            for t in range(threads):
                cp = empty_checkpoint()
                cp["id"] = f"1ef{i:029d}"
                cp["channel_values"] = {"v": os.urandom(5000).hex()}  # ~10 KB per row
                s.put({"configurable": {"thread_id": f"t{t}", "checkpoint_ns": ""}}, cp, {}, {})
        s.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def read_once(path: Path) -> float:
    t0 = time.perf_counter()
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{path}{suffix}")
        if p.exists():
            with open(p, "rb") as fh:
                while fh.read(1 << 22):
                    pass
    return time.perf_counter() - t0


def scan_only(path: Path, victim: str) -> tuple[float, float, dict[str, Any]]:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA secure_delete = ON")
    needles = Needles(exclude=[victim])
    for row in conn.execute("SELECT * FROM checkpoints WHERE thread_id = ?", (victim,)):
        needles.add_row(row)
    conn.execute("DELETE FROM checkpoints WHERE thread_id = ?", (victim,))
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    base = read_once(path)
    t0 = time.perf_counter()
    entry = residue_scan(conn, str(path), needles)
    took = time.perf_counter() - t0
    conn.close()
    return took, base, entry


def erase(path: Path, victim: str, scan: bool) -> float:
    with AttestingSqliteSaver.from_conn_string(str(path), signer=SIGNER, residue_scan=scan) as s:
        t0 = time.perf_counter()
        s.erase_thread(victim)
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=40)
    ap.add_argument("--checkpoints", type=int, default=120)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="residue-bench-"))
    master = work / "master.db"
    build(master, args.threads, args.checkpoints)
    size = master.stat().st_size
    print(f"database: {size / 1e6:.1f} MB, {args.threads} threads x {args.checkpoints}")
    scan_ratios, erase_ratios, vacuums, scan_s, read_s = [], [], 0, [], []
    try:
        for r in range(args.rounds):
            victim = f"t{r % args.threads}"
            copies = []
            for label in ("scan", "plain", "with"):
                p = work / f"{label}.db"
                shutil.copy(master, p)
                copies.append(p)
            took, base, entry = scan_only(copies[0], victim)
            scan_ratios.append(took / base)
            scan_s.append(took)
            read_s.append(base)
            vacuums += bool(entry["detail"].get("vacuum"))
            plain = erase(copies[1], victim, False)
            with_scan = erase(copies[2], victim, True)
            erase_ratios.append(with_scan / plain)
            for p in copies:
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{p}{suffix}").unlink(missing_ok=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for name, xs in (
        ("scan_only / read_once", scan_ratios),
        ("erase with / without", erase_ratios),
    ):
        print(
            f"  {name:<28} median {statistics.median(xs):6.2f}"
            f"  (min {min(xs):.2f}, max {max(xs):.2f})"
        )
    print(
        f"  scan {statistics.median(scan_s) * 1e3:.0f} ms, "
        f"read once {statistics.median(read_s) * 1e3:.0f} ms"
    )
    print(f"rounds with copies left by SQLite (VACUUM ran): {vacuums}/{args.rounds}")
    write_result(
        "residue_scan",
        {
            "machine": machine_facts(),
            "code": code_state(),
            "params": vars(args) | {"db_bytes": size},
            "scan_only_ratio": summary(scan_ratios),
            "scan_only_seconds": summary(scan_s),
            "read_once_seconds": summary(read_s),
            "erase_with_scan_ratio": summary(erase_ratios),
            "vacuum_rounds": vacuums,
        },
    )


if __name__ == "__main__":
    main()
