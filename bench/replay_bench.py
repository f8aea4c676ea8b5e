"""Replay after a restore: ``receipt replay`` of N receipts against an unchanged database
vs ``receipt verify`` of the same files, and what ``check_erasures=`` costs at startup.

    python bench/replay_bench.py [--quick] [--n 10000] [--rounds 3] [--tmp DIR]

Setup: N threads of one checkpoint each written through the saver's ``put`` (SQLite),
erased by one retention sweep (``erase_idle_threads``): N real thread receipts in an
archive directory. Then, per round, in rotating order, each a fresh process:

``verify``        ``receipt verify ARCHIVE --key PUB --quiet`` (default jobs)
``verify -j1``    the same with ``--jobs 1``
``replay``        ``receipt replay DB --archive ARCHIVE --key K --verify-key PUB --json``
                  (the database is unchanged: every scope is ``postdated``, nothing is
                  erased; the cost is reading, verifying and comparing the receipts)

and in process: ``setup()`` of a saver with ``check_erasures=ARCHIVE`` vs without (the
startup guard; README "Replay after a restore").

Target (issue): replay / verify <= 2.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_verdicts, summary, verdict, write_result
from langgraph.checkpoint.base import empty_checkpoint

from erasure_receipts import AttestingSqliteSaver, Signer

SIGNER = Signer.from_seed(bytes(range(32)))
CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
TARGET = 2.0


def build(tmp: Path, n: int) -> tuple[Path, Path]:
    db, archive = tmp / "app.db", tmp / "receipts"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=SIGNER, archive=archive) as s:
        for i in range(n):
            cp = empty_checkpoint()
            config = {"configurable": {"thread_id": f"user-{i:06d}", "checkpoint_ns": ""}}
            s.put(config, cp, {"source": "input", "step": -1}, {})  # type: ignore[arg-type]
        t0 = time.perf_counter()
        result = s.erase_idle_threads(datetime.now(UTC) + timedelta(days=1))
        dt = time.perf_counter() - t0
    assert result.receipts == n, result
    print(f"built {n} threads, swept into {n} receipts in {dt:.1f} s")
    return db, archive


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{argv[3:6]} failed ({p.returncode}): {p.stderr.decode()[-1500:]}")
    return dt


def guard_cost(db: Path, archive: Path, rounds: int) -> dict[str, Any]:
    out: dict[str, list[float]] = {"plain": [], "guard": []}
    for r in range(rounds):
        for mode in ("plain", "guard") if r % 2 == 0 else ("guard", "plain"):
            kw = {"check_erasures": archive} if mode == "guard" else {}
            with AttestingSqliteSaver.from_conn_string(str(db), signer=SIGNER, **kw) as s:
                t0 = time.perf_counter()
                s.setup()
                out[mode].append(time.perf_counter() - t0)
    return {k: summary(v) for k, v in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1,000 receipts, 2 rounds")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--tmp", type=Path, default=None)
    a = ap.parse_args()
    n = a.n or (1000 if a.quick else 10_000)
    rounds = a.rounds or (2 if a.quick else 3)
    tmp = Path(tempfile.mkdtemp(prefix="bench-replay-", dir=a.tmp))
    try:
        db, archive = build(tmp, n)
        key, pub = tmp / "k.pem", tmp / "pub.pem"
        key.write_bytes(SIGNER.private_pem())
        key.chmod(0o600)
        pub.write_bytes(SIGNER.public_pem())
        cmds = {
            "verify": [*CLI, "verify", str(archive), "--key", str(pub), "--quiet"],
            "verify -j1": [*CLI, "verify", str(archive), "--key", str(pub), "--quiet",
                           "--jobs", "1"],
            "replay": [*CLI, "replay", str(db), "--archive", str(archive), "--key", str(key),
                       "--verify-key", str(pub), "--json"],
        }  # fmt: skip
        times: dict[str, list[float]] = {k: [] for k in cmds}
        names = list(cmds)
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                times[name].append(timed(cmds[name]))
        wall = {k: summary(v) for k, v in times.items()}
        for k, s in wall.items():
            print(f"  {k:<12} median {s['median']:.2f} s  (min {s['min']:.2f}, max {s['max']:.2f})")
        guard = guard_cost(db, archive, rounds)
        g, p = guard["guard"]["median"], guard["plain"]["median"]
        print(f"  setup() with check_erasures: {g * 1e3:.0f} ms vs {p * 1e3:.1f} ms without "
              f"({n} receipts; {(g - p) / n * 1e6:.0f} us per receipt)")  # fmt: skip
        med = {k: statistics.median(v) for k, v in times.items()}
        verdicts = {
            "replay / verify (median, default jobs)": verdict(med["replay"] / med["verify"],
                                                              TARGET, "<="),
            "replay / verify --jobs 1 (median)": verdict(med["replay"] / med["verify -j1"],
                                                         TARGET, "<="),
        }  # fmt: skip
        print("\nratios:")
        print_verdicts(verdicts)
        write_result("replay_bench", {
            "mode": "quick" if a.quick else "full",
            "params": {"receipts": n, "rounds": rounds, "cpu_count": os.cpu_count()},
            "commands": {k: " ".join(v[3:]) for k, v in cmds.items()},
            "wall_s": wall, "startup_guard_s": guard, "verdicts": verdicts,
        })  # fmt: skip
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
