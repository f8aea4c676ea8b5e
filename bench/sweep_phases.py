"""Where a batched PostgreSQL retention sweep spends its time, phase by phase.

    python bench/sweep_phases.py [--threads 10000] [--idle 1000] [--runs 2] [--dsn DSN]

Builds the ``sweep_bench`` shape, then per run (on a fresh ``TEMPLATE`` copy) times the
batched sweep and, inside it, the engine's phases by wrapping them: each batch's phase
one (its transaction), LangGraph's read-back (``api_checks``: ``get_tuple`` and ``list``
per thread), the statement, the signature and archive write, and the journal mark; and,
once, the bare sweep (selection + ``delete_thread`` per thread) for scale. The read-back
runs on its own thread and connection beside the next batch, so it is reported apart
from the sweep's own thread (whose "rest" includes waiting for it). Wall times, not
ratios: a breakdown to read beside ``sweep_bench.py``'s ratio, not a target.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sweep_bench as sb

from erasure_receipts._engine import eraser as eraser_module


def _timed(acc: collections.Counter[str], owner: Any, name: str) -> None:
    real = getattr(owner, name)

    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            acc[name] += time.perf_counter() - t0

    setattr(owner, name, wrapper)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=10_000)
    ap.add_argument("--idle", type=int, default=1_000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--dsn", default=os.environ.get("ERASURE_RECEIPTS_PG_DSN"))
    args = ap.parse_args()
    acc: collections.Counter[str] = collections.Counter()
    _timed(acc, eraser_module, "api_checks")
    for name in ("_phase_one", "_statement_of", "_sign", "_mark_issued"):
        _timed(acc, eraser_module.Eraser, name)
    work = Path(tempfile.mkdtemp(prefix="sweep-phases-"))
    try:
        with sb.pg_server(args.dsn) as server:
            sb.pg_build(server, "phases_template", args.threads, args.idle)
            for run in range(args.runs + 1):
                acc.clear()
                dsn = sb.pg_copy(server, "phases_template", "phases_run")
                if run == args.runs:
                    dt, n = sb.pg_plain(dsn)
                    print(f"bare sweep: {dt * 1000:.0f} ms for {n} threads")
                    continue
                dt, n = sb.pg_batched(dsn, work / f"receipts-{run}")
                print(f"batched sweep: {dt * 1000:.0f} ms for {n} threads")
                readback = acc.pop("api_checks", 0.0)
                for name, seconds in acc.most_common():
                    print(f"  {name:14s} {seconds * 1000:7.0f} ms")
                rest = dt - sum(acc.values())
                print(f"  {'(the rest)':14s} {rest * 1000:7.0f} ms  selection, claims, queueing,"
                      " waiting for a read-back")  # fmt: skip
                print(f"  {'api_checks':14s} {readback * 1000:7.0f} ms  on the read-back thread"
                      " (beside the next batch; in turn without a second connection)")  # fmt: skip
            sb.pg_drop(server, "phases_run", "phases_template")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
