"""The auditor's report over a large archive: ``receipt report`` vs ``receipt verify`` of
the same files, and the report's peak memory.

    python bench/report_bench.py [--quick] [--n 10000] [--rounds 3] [--workdir DIR]
    python bench/report_bench.py --n 100000 --rounds 1     # the 100,000-receipt archive

Setup: N receipt files (default 10,000; ``--quick`` 2,000) of the shape the engine
issues (``verify_batch.make_statement``: two tables, the engine's checks and residue),
sharded in 16 directories; two thirds carry a request (received 1-40 days before the
erasure, due 30 days after it was received, so some are late), a thousand request ids
shared between several receipts. Then, per round, in alternating order, each a fresh
process with the default ``--jobs`` (all cores) and with ``--jobs 1``:

``verify``   ``receipt verify DIR --key PUB --quiet``
``report``   ``receipt report DIR --key PUB -o REPORT.html --json``

Wall time includes interpreter start-up. Peak RSS is ``ru_maxrss`` from ``wait4`` of
the process (Linux: the largest of the process and its forked workers). Also reported:
the HTML file's size and element count (bounded by ``--max-rows``, not by N).

Target: report / verify <= 1.5 (the report verifies on the same batch path; rendering
and aggregation are the extra).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_verdicts, summary, verdict, write_result
from verify_batch import make_statement

from erasure_receipts.receipt import Receipt
from erasure_receipts.signing import Signer

CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
TARGET = 1.5
DAY = 86400


def _time(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def build(workdir: Path, n: int) -> tuple[Path, Path]:
    signer = Signer.from_seed(bytes(range(32)))
    rdir = workdir / "receipts"
    rng = random.Random(4321)
    for i in range(n):
        st = make_statement(i, rng)
        p = st["predicate"]
        issued = p["issued_at"]
        t = time.mktime(time.strptime(issued[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        if i % 3:
            received = t - rng.randint(1, 40) * DAY - rng.randint(0, DAY)
            rid = f"DSR-{rng.randint(0, 999) if i % 7 == 0 else i:06d}"
            p["request"] = {"id": rid, "basis": "gdpr-art17-1a", "requester": None,
                            "received_at": _time(received),
                            "due": _time(received + 30 * DAY)}  # fmt: skip
        r = Receipt.sign(st, signer)
        sub = rdir / f"{i % 16:02x}"
        if i < 16:
            sub.mkdir(parents=True, exist_ok=True)
        (sub / f"{r.receipt_id}.json").write_bytes(r.to_json())
    pub = workdir / "signer.pub.pem"
    pub.write_bytes(signer.public_pem())
    return rdir, pub


def run_wait4(argv: list[str]) -> tuple[float, int, bytes]:
    """Wall seconds, peak RSS (kB, ``wait4``) and stdout of one process."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        actions = [(os.POSIX_SPAWN_DUP2, out.fileno(), 1), (os.POSIX_SPAWN_DUP2, err.fileno(), 2)]
        pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
        _, status, usage = os.wait4(pid, 0)
        dt = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if code != 0:
            raise SystemExit(f"{argv[3:5]} failed ({code}): {err.read().decode()[-1500:]}")
        return dt, usage.ru_maxrss, out.read()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2,000 receipts, one round")
    ap.add_argument("--n", type=int, help="receipts (default 10000; 100000 for the full run)")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 3)")
    ap.add_argument("--workdir", help="keep the archive here (reused if it has N receipts)")
    args = ap.parse_args()
    n = args.n or (2000 if args.quick else 10000)
    rounds = args.rounds or (1 if args.quick else 3)
    tmp = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench-report-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        rdir, pub = tmp / "receipts", tmp / "signer.pub.pem"
        have = sum(1 for _ in rdir.rglob("*.json")) if rdir.exists() else 0
        if have != n:
            shutil.rmtree(rdir, ignore_errors=True)
            t0 = time.perf_counter()
            rdir, pub = build(tmp, n)
            print(f"built {n} receipts in {time.perf_counter() - t0:.1f} s")
        times: dict[str, list[float]] = {}
        rss: dict[str, list[int]] = {}
        html_bytes = elements = 0
        doc: dict[str, Any] = {}
        for r in range(rounds):
            for jobs in ("default", "1"):
                j = [] if jobs == "default" else ["--jobs", "1"]
                cmds = {
                    "verify": [*CLI, "verify", str(rdir), "--key", str(pub), "--quiet", *j],
                    "report": [
                        *CLI,
                        "report",
                        str(rdir),
                        "--key",
                        str(pub),
                        "-o",
                        str(tmp / "report.html"),
                        "--json",
                        *j,
                    ],
                }
                order = ("verify", "report") if r % 2 == 0 else ("report", "verify")
                for name in order:
                    (tmp / "report.html").unlink(missing_ok=True)
                    dt, peak, out = run_wait4(cmds[name])
                    key = f"{name} jobs={jobs}"
                    times.setdefault(key, []).append(dt)
                    rss.setdefault(key, []).append(peak)
                    print(f"round {r + 1} {key:<20} {dt:7.2f} s  peak RSS {peak / 1024:6.1f} MB")
                    if name == "report":
                        doc = json.loads(out)
                        html = (tmp / "report.html").read_bytes()
                        html_bytes, elements = len(html), html.count(b"<")
        assert doc["receipts"]["verified"] == n, doc["receipts"]
        med = {k: summary(v)["median"] for k, v in times.items()}
        ratio = med["report jobs=default"] / med["verify jobs=default"]
        ratio1 = med["report jobs=1"] / med["verify jobs=1"]
        verdicts = {
            "report / verify (default jobs, median)": verdict(ratio, TARGET, "<="),
            "report / verify (--jobs 1, median)": verdict(ratio1, TARGET, "<="),
        }
        print(f"report / verify: {ratio:.2f} (default jobs), {ratio1:.2f} (--jobs 1)")
        print(f"report peak RSS {max(rss['report jobs=default']) / 1024:.1f} MB; verify "
              f"{max(rss['verify jobs=default']) / 1024:.1f} MB; HTML {html_bytes / 1e6:.2f} MB, "
              f"{elements} tags; requests {doc['requests']}")  # fmt: skip
        print_verdicts(verdicts)
        write_result(
            "report_bench" if n != 100_000 else "report_bench_100k",
            {
                "n": n,
                "rounds": rounds,
                "seconds": {k: summary(v) for k, v in times.items()},
                "peak_rss_kb": {k: max(v) for k, v in rss.items()},
                "html_bytes": html_bytes,
                "html_tags": elements,
                "requests": doc["requests"],
                "verdicts": verdicts,
                "argv": sys.argv[1:],
            },
        )
        return 0 if all(v["pass"] for v in verdicts.values()) else 1
    finally:
        if not args.workdir:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
