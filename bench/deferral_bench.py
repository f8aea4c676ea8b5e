"""Deferrals on SQLite (RECEIPT_SPEC.md 9.14): what the deferral check costs an erasure,
what a deferral costs next to the read-only digest it contains, and what a retention
sweep pays per retained thread it skips.

    python bench/deferral_bench.py [--quick] [--rounds N]

``erase``   ``erase_thread`` of one thread (3 checkpoints, 2 writes) in two copies
            of one file: no deferral recorded (baseline) and 1,000 open deferrals of
            other threads (the check inside each erasure's transaction looks its
            threads up in ``erasure_deferral_threads``). Interleaved per round; target
            ratio <= 1.10.
``defer``   ``defer(thread)`` (measure in a read snapshot, sign, record, archive) vs
            ``digest_thread`` (the measurement alone), per thread.
``sweep``   ``erase_idle_threads`` over N idle threads of which half are retained:
            seconds per retained thread skipped and per thread erased.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt_s, print_verdicts, summary, verdict, write_result
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

from erasure_receipts import AttestingSqliteSaver, Signer

SIGNER = Signer.from_seed(bytes(range(32)))
LATER = datetime.now(UTC) + timedelta(days=2)  # the savers' clock: every thread is idle


def clock() -> datetime:
    return LATER


def seeded(path: Path, threads: int) -> None:
    with SqliteSaver.from_conn_string(str(path)) as saver:
        saver.setup()
        for i in range(threads):
            cfg: Any = {"configurable": {"thread_id": f"t{i:05d}", "checkpoint_ns": ""}}
            for step in range(3):
                cp = empty_checkpoint()
                cfg = saver.put(cfg, cp, {"step": step, "source": "loop"}, {})
                if step < 2:  # pending writes on the latest checkpoint: a run in flight
                    saver.put_writes(cfg, [("messages", f"hello {i} {step}" * 4)], f"t-{step}")
    with AttestingSqliteSaver.from_conn_string(str(path), signer=SIGNER) as s:
        s.setup()  # the library's tables, as in production


def with_deferrals(path: Path, first: int, n: int) -> None:
    with AttestingSqliteSaver.from_conn_string(str(path), signer=SIGNER, clock=clock) as s:
        for i in range(first, first + n):
            s.defer(f"t{i:05d}", basis="bench", until=LATER + timedelta(days=30))


def bench_erase(tmp: Path, rounds: int, per_round: int) -> dict[str, Any]:
    source = tmp / "erase-source.db"
    seeded(source, 1000 + rounds * per_round)
    deferred = tmp / "erase-deferred-source.db"
    shutil.copy(source, deferred)
    with_deferrals(deferred, 0, 1000)  # threads t00000-t00999; the erased ones come after
    samples: dict[str, list[float]] = {"no_deferrals": [], "deferrals_1000": []}
    for r in range(rounds):
        for name in list(samples) if r % 2 == 0 else list(samples)[::-1]:
            copy = tmp / f"erase-{r}-{name}.db"
            shutil.copy(source if name == "no_deferrals" else deferred, copy)
            with AttestingSqliteSaver.from_conn_string(str(copy), signer=SIGNER) as s:
                s.setup()
                for k in range(per_round):
                    tid = f"t{1000 + r * per_round + k:05d}"
                    t = time.perf_counter()
                    s.erase_thread(tid)
                    samples[name].append(time.perf_counter() - t)
    ratio = statistics.median(samples["deferrals_1000"]) / statistics.median(
        samples["no_deferrals"]
    )
    return {"per_erase": {k: summary(v) for k, v in samples.items()}, "ratio": ratio}


def bench_defer(tmp: Path, n: int) -> dict[str, Any]:
    path = tmp / "defer.db"
    seeded(path, n)
    samples: dict[str, list[float]] = {"digest_thread": [], "defer": []}
    with AttestingSqliteSaver.from_conn_string(
        str(path), signer=SIGNER, clock=clock, archive=tmp / "defer-receipts"
    ) as s:
        s.setup()
        for i in range(n):
            tid = f"t{i:05d}"
            for name in list(samples) if i % 2 == 0 else list(samples)[::-1]:
                t = time.perf_counter()
                if name == "defer":
                    s.defer(tid, basis="bench", until=LATER + timedelta(days=1))
                else:
                    s.digest_thread(tid)
                samples[name].append(time.perf_counter() - t)
    ratio = statistics.median(samples["defer"]) / statistics.median(samples["digest_thread"])
    return {"per_thread": {k: summary(v) for k, v in samples.items()}, "ratio": ratio}


def bench_sweep(tmp: Path, n: int) -> dict[str, Any]:
    path = tmp / "sweep.db"
    seeded(path, n)
    with_deferrals(path, 0, n // 2)
    with AttestingSqliteSaver.from_conn_string(
        str(path), signer=SIGNER, clock=clock, archive=tmp / "sweep-receipts"
    ) as s:
        times: dict[str, list[float]] = {"deferred": [], "erased": []}
        last = [time.perf_counter()]

        def progress(event: Any) -> None:
            now = time.perf_counter()
            times.setdefault(event.outcome, []).append(now - last[0])
            last[0] = now

        start = time.perf_counter()
        res = s.erase_idle_threads(timedelta(days=1), progress=progress)
        total = time.perf_counter() - start
    assert res.ok and res.skipped == {"deferred": n // 2} and res.threads == n - n // 2, res
    return {
        "threads": n, "deferred": n // 2, "seconds": total,
        "per_thread": {k: summary(v) for k, v in times.items() if v},
    }  # fmt: skip


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    args = ap.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 5)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        erase = bench_erase(tmp, rounds, 20 if args.quick else 50)
        defer = bench_defer(tmp, 50 if args.quick else 200)
        sweep = bench_sweep(tmp, 200 if args.quick else 1000)
    verdicts = {
        "erase_thread with 1,000 open deferrals / none": verdict(erase["ratio"], 1.10, "<="),
    }
    for k, s in erase["per_erase"].items():
        print(f"  erase_thread {k:<16} {fmt_s(s['median']):>10}")
    for k, s in defer["per_thread"].items():
        print(f"  {k:<29} {fmt_s(s['median']):>10}")
    print(f"  defer / digest_thread         x{defer['ratio']:.2f}")
    for k, s in sweep["per_thread"].items():
        print(f"  sweep per {k:<19} {fmt_s(s['median']):>10}")
    print_verdicts(verdicts)
    path = write_result("deferral_bench", {"rounds": rounds, "erase": erase, "defer": defer,
                                           "sweep": sweep, "verdicts": verdicts})  # fmt: skip
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
