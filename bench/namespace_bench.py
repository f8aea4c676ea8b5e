"""Store tombstones and namespace erasure on SQLite: what the store triggers cost a
``put``, and one ``erase_namespace`` vs LangGraph's read-then-delete loop.

    python bench/namespace_bench.py [--quick] [--rounds N]

``put``     ``SqliteStore.put`` of one small item (its own transaction, as LangGraph
            does it) into a prefix no tombstone covers, in four files that differ only
            in the store triggers and the tombstones they scan: none (baseline: no
            triggers, as without this library), triggers with 0, 1,000 and 10,000
            tombstones. Interleaved per round. Reported as ratios to the baseline;
            target for 1,000 tombstones <= 2.0 (the trigger scans the tombstone table).
``erase``   ``erase_namespace`` of a prefix holding 2,000 items in 20 sub-namespaces
            (measured, deleted, checked, tombstoned, signed; one transaction) vs the
            baseline a LangGraph user writes today: ``search`` page by page (limit 100)
            and ``delete`` each item, from a fresh copy of the same file each time.
            Target: erase / loop <= 1.0.
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
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import AttestingSqliteSaver, Signer
from erasure_receipts._backends.sqlite.schema import ensure_store_triggers

SIGNER = Signer.from_seed(bytes(range(32)))


def store_file(path: Path, triggers: bool, tombstones: int) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    SqliteSaver(conn).setup()
    SqliteStore(conn).setup()
    if triggers:
        conn.execute("BEGIN IMMEDIATE")
        ensure_store_triggers(conn)
        conn.executemany(
            "INSERT INTO erasure_store_tombstones VALUES (?, 'r', '2026-01-01T00:00:00Z')",
            [(f"erased.user{i}",) for i in range(tombstones)],
        )
        conn.execute("COMMIT")
    conn.close()


def time_puts(path: Path, n: int, offset: int) -> float:
    with SqliteStore.from_conn_string(str(path)) as store:
        t = time.perf_counter()
        for i in range(n):
            store.put(("users", "bob", "notes"), f"k{offset + i}", {"text": "x" * 64})
        return (time.perf_counter() - t) / n


def bench_put(tmp: Path, rounds: int, n: int) -> dict[str, Any]:
    variants = {"baseline": (False, 0), "t0": (True, 0), "t1000": (True, 1000),
                "t10000": (True, 10_000)}  # fmt: skip
    files = {}
    for name, (trig, count) in variants.items():
        files[name] = tmp / f"put-{name}.db"
        store_file(files[name], trig, count)
    samples: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(rounds):
        order = list(variants)[r % 4 :] + list(variants)[: r % 4]
        for name in order:
            samples[name].append(time_puts(files[name], n, r * n))
    base = statistics.median(samples["baseline"])
    return {
        "per_put": {k: summary(v) for k, v in samples.items()},
        "ratio_to_baseline": {k: statistics.median(v) / base for k, v in samples.items()},
    }


def seeded(path: Path, items: int) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    SqliteSaver(conn).setup()
    store = SqliteStore(conn)
    store.setup()
    from langgraph.store.base import PutOp

    ops = [PutOp(("users", "alice", f"s{i % 20}"), f"k{i}", {"text": f"memory {i} " * 8})
           for i in range(items)]  # fmt: skip
    store.batch([*ops, PutOp(("users", "alicia"), "k", {"text": "bystander"})])
    conn.close()


def erase_once(path: Path) -> float:
    with (
        SqliteStore.from_conn_string(str(path)) as store,
        AttestingSqliteSaver.from_conn_string(str(path), signer=SIGNER, store=store) as s,
    ):
        s.setup()
        t = time.perf_counter()
        s.erase_namespace(("users", "alice"))
        return time.perf_counter() - t


def loop_once(path: Path) -> float:
    with SqliteStore.from_conn_string(str(path)) as store:
        t = time.perf_counter()
        while True:
            page = store.search(("users", "alice"), limit=100)
            if not page:
                break
            for item in page:
                store.delete(item.namespace, item.key)
        return time.perf_counter() - t


def bench_erase(tmp: Path, rounds: int, items: int) -> dict[str, Any]:
    source = tmp / "erase-source.db"
    seeded(source, items)
    samples: dict[str, list[float]] = {"erase_namespace": [], "search_delete_loop": []}
    for r in range(rounds):
        for name in list(samples) if r % 2 == 0 else list(samples)[::-1]:
            copy = tmp / f"erase-{r}-{name}.db"
            shutil.copy(source, copy)
            run = erase_once if name == "erase_namespace" else loop_once
            samples[name].append(run(copy))
    ratio = statistics.median(samples["erase_namespace"]) / statistics.median(
        samples["search_delete_loop"]
    )
    return {"items": items, "seconds": {k: summary(v) for k, v in samples.items()},
            "ratio_erase_to_loop": ratio}  # fmt: skip


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    args = ap.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 7)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        put = bench_put(tmp, rounds, 50 if args.quick else 200)
        erase = bench_erase(tmp, rounds, 500 if args.quick else 2000)
    verdicts = {
        "put with 1,000 tombstones / no triggers": verdict(
            put["ratio_to_baseline"]["t1000"], 2.0, "<="
        ),
        "erase_namespace / search+delete loop": verdict(erase["ratio_erase_to_loop"], 1.0, "<="),
    }
    for k, v in put["ratio_to_baseline"].items():
        print(f"  put {k:<10} {fmt_s(put['per_put'][k]['median']):>10}  x{v:.2f}")
    for k, s in erase["seconds"].items():
        print(f"  {k:<20} {fmt_s(s['median']):>10}")
    print_verdicts(verdicts)
    path = write_result("namespace_bench", {"rounds": rounds, "put": put, "erase": erase,
                                            "verdicts": verdicts})  # fmt: skip
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
