"""Receipt log and archive-scale verification (issue 10).

    python bench/log_bench.py [--quick] [--only append,verify,crash,concurrency,batch]
                              [--n-log 100000] [--trials 100] [--tmp DIR]

Parts (each reports ratios against a baseline measured in the same run):

* append - durable append rate: ``ReceiptLog.append`` one receipt at a time (one write,
  one fdatasync, checkpoint published with temp file + fsync + rename) against the
  directory archive the savers use (``Receipt.save``: temp file, fsync, link, directory
  fsync), in interleaved rounds; plus ``append_many`` batches of 100.
* verify - a log of ``--n-log`` receipts (default 100,000; built with ``append_many``
  in batches of 1,000): ``receipt log verify LOG --key --quiet`` with ``--jobs 1`` and
  ``--jobs 2`` against a process that only calls the bare Ed25519 verify on the same
  (signature, message) pairs; the structural part alone (tree, every checkpoint record,
  the signed head) in process. While the log is built, inclusion and consistency proofs
  are timed at n = 10^3, 10^4, 10^5 (O(log n) reads of stored subtree roots) against
  the O(n) proof from the list of all leaf hashes.
* crash - ``--trials`` (default 100) appender processes killed with SIGKILL at random
  moments, then 5 kills at each step of an append (mid-write, after the fdatasync,
  before the checkpoint is published, while the derived files are written); after
  each kill the log must verify and hold every receipt whose append returned.
* concurrency - 4 processes x 1,000 appends into one log: 4,000 entries, none lost or
  duplicated.
* batch - ``receipt verify DIR`` of 10,000 receipt files (the corpus of
  ``verify_batch.py``) with ``--jobs 1`` and ``--jobs 2`` against the bare Ed25519
  process, interleaved; and in process, ``verify_receipt`` against bare ``verify``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS_DIR, fmt_s, print_verdicts, summary, verdict, write_result
from verify_batch import BASELINE_SCRIPT, build_corpus, make_statement

from erasure_receipts.digest import inclusion_proof, leaf_hash
from erasure_receipts.log import ReceiptLog, read_entries, verify_log
from erasure_receipts.receipt import Receipt
from erasure_receipts.signing import Signer

CLI = "from erasure_receipts.cli import main; main()"
SIGNER = Signer.from_seed(bytes(range(32)))
ORIGIN = "bench.example/erasures"
TARGET_BATCH = 0.6


def make_receipts(n: int, seed: int, start: int = 0) -> list[Receipt]:
    rng = random.Random(seed)
    return [Receipt.sign(make_statement(start + i, rng), SIGNER) for i in range(n)]


def run_proc(argv: list[str]) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True)
    return time.perf_counter() - t0, p


def write_pairs(path: Path, receipts: list[bytes]) -> None:
    """The bare-verify baseline's input: public key, then (sig, signed message) pairs."""
    with open(path, "wb") as fh:
        fh.write(SIGNER.public_key.raw)
        for data in receipts:
            r = Receipt.from_json(data)
            sig, msg = r.signatures[0].sig, r.signed_bytes()
            fh.write(struct.pack(">II", len(sig), len(msg)) + sig + msg)


# -- append ------------------------------------------------------------------------------


def bench_append(tmp: Path, quick: bool) -> dict[str, Any]:
    per_round = 60 if quick else 200
    rounds = 3 if quick else 5
    rs = make_receipts(per_round * rounds * 2 + 1000, seed=1)
    datas = iter(rs)
    log_t: list[float] = []
    dir_t: list[float] = []
    for r in range(rounds):
        order = ["log", "dir"] if r % 2 == 0 else ["dir", "log"]
        for what in order:
            batch = [next(datas) for _ in range(per_round)]
            if what == "log":
                log = ReceiptLog(tmp / f"append-log-{r}", signer=SIGNER, origin=ORIGIN)
                t0 = time.perf_counter()
                for rec in batch:
                    log.append(rec)
                log_t.append((time.perf_counter() - t0) / per_round)
            else:
                d = tmp / f"append-dir-{r}"
                d.mkdir()
                t0 = time.perf_counter()
                for rec in batch:
                    rec.save(d / f"{rec.receipt_id}.json")
                dir_t.append((time.perf_counter() - t0) / per_round)
    batch_log = ReceiptLog(tmp / "append-batch", signer=SIGNER, origin=ORIGIN)
    rest = list(datas)[:1000]
    t0 = time.perf_counter()
    for i in range(0, len(rest), 100):
        batch_log.append_many(rest[i : i + 100])
    batch_per = (time.perf_counter() - t0) / len(rest)
    ls, ds = summary(log_t), summary(dir_t)
    ratio = ds["median"] / ls["median"]
    print(f"\nappend ({rounds} interleaved rounds of {per_round}):")
    print(
        f"  ReceiptLog.append  {ls['median'] * 1e3:7.2f} ms -> {1 / ls['median']:6.0f}/s (median)"
    )
    print(
        f"  directory archive  {ds['median'] * 1e3:7.2f} ms -> {1 / ds['median']:6.0f}/s (median)"
    )
    print(f"  append_many(100)   {batch_per * 1e6:7.1f} us per receipt -> {1 / batch_per:6.0f}/s")
    print(f"  durable append rate, log / directory archive: {ratio:.2f}")
    return {
        "receipts_per_round": per_round,
        "rounds": rounds,
        "log_append_s": ls,
        "dir_archive_s": ds,
        "log_appends_per_s_median": 1 / ls["median"],
        "dir_archive_per_s_median": 1 / ds["median"],
        "append_many_100_per_receipt_s": batch_per,
        "ratio_log_to_directory_rate": ratio,
    }


# -- a large log: verify, proofs ---------------------------------------------------------------


def time_proofs(log: ReceiptLog, hashes: list[bytes], rng: random.Random) -> dict[str, Any]:
    n = len(hashes)
    idx = [rng.randrange(n) for _ in range(200)]
    t_inc = []
    sizes = []
    for i in idx:
        t0 = time.perf_counter()
        p = log.inclusion_proof(i)
        t_inc.append(time.perf_counter() - t0)
        sizes.append(len(p.audit_path))
    olds = [rng.randrange(1, n) for _ in range(50)]
    t_con = []
    csizes = []
    for m in olds:
        t0 = time.perf_counter()
        c = log.consistency_proof(m)
        t_con.append(time.perf_counter() - t0)
        csizes.append(len(c.path))
    t_lin = []
    for i in idx[:3]:
        t0 = time.perf_counter()
        inclusion_proof(hashes, i)
        t_lin.append(time.perf_counter() - t0)
    out = {
        "n": n,
        "inclusion_hashes_max": max(sizes),
        "inclusion_hashes_mean": statistics.fmean(sizes),
        "inclusion_bytes_max": 32 * max(sizes),
        "inclusion_time_median_s": statistics.median(t_inc),
        "consistency_hashes_max": max(csizes),
        "consistency_time_median_s": statistics.median(t_con),
        "o_n_inclusion_from_leaf_list_s": statistics.median(t_lin),
    }
    print(
        f"  n={n:>7}: inclusion {out['inclusion_hashes_max']:>2} hashes "
        f"({out['inclusion_bytes_max']} B) in {fmt_s(out['inclusion_time_median_s'])}; "
        f"consistency <= {out['consistency_hashes_max']} hashes in "
        f"{fmt_s(out['consistency_time_median_s'])}; O(n) proof from the leaf list "
        f"{fmt_s(out['o_n_inclusion_from_leaf_list_s'])}"
    )
    return out


def bench_verify(tmp: Path, n_log: int, quick: bool) -> dict[str, Any]:
    d = tmp / "big-log"
    log = ReceiptLog(d, signer=SIGNER, origin=ORIGIN)
    rng = random.Random(7)
    hashes: list[bytes] = []
    proofs = []
    checkpoints = [x for x in (1000, 10_000, 100_000) if x <= n_log]
    t_build = time.perf_counter()
    print(f"\nbuilding a log of {n_log} receipts (append_many, batches of 1,000); proofs:")
    i = 0
    while i < n_log:
        k = min(1000, n_log - i)
        batch = make_receipts(k, seed=1000 + i, start=i)
        log.append_many(batch)
        hashes += [leaf_hash(r.to_json()) for r in batch]
        i += k
        if i in checkpoints:
            proofs.append(time_proofs(log, hashes, rng))
    build_s = time.perf_counter() - t_build
    pub = tmp / "signer.pub.pem"
    pub.write_bytes(SIGNER.public_pem())
    pairs = tmp / "log-pairs.bin"
    write_pairs(pairs, [b for _, b in read_entries(d)])
    base_py = tmp / "bare_verify.py"
    base_py.write_text(BASELINE_SCRIPT, encoding="utf-8")
    argv = [sys.executable, "-c", CLI, "log", "verify", str(d), "--key", str(pub), "--quiet"]
    base = [sys.executable, str(base_py), str(pairs)]
    run_proc(base)  # warm the page cache
    res: dict[str, list[float]] = {"jobs1": [], "jobs2": [], "bare": []}
    for name in ["jobs1", "bare", "jobs2"]:  # one run each: a 100,000-entry log is slow
        cmd = base if name == "bare" else [*argv, "--jobs", name[-1]]
        dt, p = run_proc(cmd)
        if p.returncode != 0:
            raise SystemExit(f"{name} failed: {p.stdout[-500:]!r} {p.stderr[-500:]!r}")
        res[name].append(dt)
    t0 = time.perf_counter()
    structure = verify_log(d, [SIGNER.public_key])
    struct_s = time.perf_counter() - t0
    assert structure.ok and structure.tree_size == n_log
    j1, j2, bare = (min(res[k]) for k in ("jobs1", "jobs2", "bare"))
    print(f"\nreceipt log verify of {n_log} receipts (one run each):")
    print(
        f"  --jobs 1: {fmt_s(j1)} ({j1 / n_log * 1e6:.0f} us/entry)  ratio to bare {bare / j1:.2f}"
    )
    print(f"  --jobs 2: {fmt_s(j2)} ({j2 / n_log * 1e6:.0f} us/entry)  speed-up {j1 / j2:.2f}")
    print(f"  bare Ed25519 process: {fmt_s(bare)}; structure only (in process): {fmt_s(struct_s)}")
    return {
        "n": n_log,
        "build_s": build_s,
        "log_bytes": (d / "entries").stat().st_size,
        "log_verify_jobs1_s": j1,
        "log_verify_jobs2_s": j2,
        "bare_verify_process_s": bare,
        "structure_only_in_process_s": struct_s,
        "ratio_jobs1_to_bare": bare / j1,
        "speedup_jobs2": j1 / j2,
        "proofs": proofs,
    }


# -- crash safety ------------------------------------------------------------------------------

CHILD = r"""
import os, random, signal, sys, uuid
sys.path.insert(0, {bench!r})
from verify_batch import make_statement
from erasure_receipts.receipt import Receipt
from erasure_receipts.signing import Signer
import erasure_receipts.log as L

d, start, count, crash = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
signer = Signer.from_seed(bytes(range(32)))
rng = random.Random(start)
rs = [Receipt.sign(make_statement(start + i, rng), signer) for i in range(count)]
log = L.ReceiptLog(d, signer=signer, origin={origin!r})
def die():
    os.kill(os.getpid(), signal.SIGKILL)
if crash != "random":
    point, after = crash.split(":")
    calls = {{"n": 0}}
    def due():
        calls["n"] += 1
        return calls["n"] > int(after)
    if point == "mid_write":
        w0 = L._write_all
        def w(fd, data):
            if len(data) > 1000 and due():
                os.write(fd, data[: len(data) // 2]); die()
            w0(fd, data)
        L._write_all = w
    elif point == "after_fsync":
        s0 = L._fdatasync
        def s(fd):
            s0(fd)
            if due(): die()
        L._fdatasync = s
    elif point == "before_publish":
        p0 = L._publish
        def p(d_, note):
            if due(): die()
            p0(d_, note)
        L._publish = p
    elif point == "mid_derived":
        a0 = L.ReceiptLog._append_derived
        def a(self, new):
            if due():
                fd = os.open(os.path.join(d, "index"), os.O_WRONLY | os.O_APPEND)
                os.write(fd, b"\x00" * 20); die()
            a0(self, new)
        L.ReceiptLog._append_derived = a
print("ready", flush=True)
for i, r in enumerate(rs):
    log.append(r)
    print(r.receipt_id, flush=True)
"""


def appender(d: Path, start: int, count: int, crash: str) -> subprocess.Popen[str]:
    code = CHILD.format(bench=str(Path(__file__).resolve().parent), origin=ORIGIN)
    return subprocess.Popen(
        [sys.executable, "-c", code, str(d), str(start), str(count), crash],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def bench_crash(tmp: Path, trials: int) -> dict[str, Any]:
    d = tmp / "crash-log"
    rng = random.Random(99)
    acked: set[str] = set()
    failures: list[str] = []
    seen = {"interrupted_append_left_bytes": 0, "head_behind_log": 0, "clean": 0}
    start = 0
    t0 = time.perf_counter()

    def check(label: str) -> None:
        report = verify_log(d, [SIGNER.public_key])
        stored = [Receipt.from_json(b).receipt_id for _, b in read_entries(d)]
        missing = acked - set(stored)
        if not report.ok or missing or len(stored) != len(set(stored)):
            failures.append(
                f"{label}: ok={report.ok} missing={len(missing)} "
                f"duplicates={len(stored) - len(set(stored))} "
                f"{[p.to_json() for p in report.problems][:2]}"
            )
        from erasure_receipts.log import Checkpoint

        head = Checkpoint.parse((d / "checkpoint").read_bytes())
        if report.tail_bytes:
            seen["interrupted_append_left_bytes"] += 1
        elif head.size < report.tree_size:
            seen["head_behind_log"] += 1
        else:
            seen["clean"] += 1

    for t in range(trials):
        p = appender(d, start, 60, "random")
        assert p.stdout is not None
        if p.stdout.readline().strip() != "ready":
            raise SystemExit(p.stderr.read() if p.stderr else "appender did not start")
        time.sleep(rng.uniform(0.0, 0.08))
        p.send_signal(signal.SIGKILL)
        out, _ = p.communicate(timeout=60)
        acked |= {line.strip() for line in out.splitlines() if line.strip()}
        check(f"random trial {t}")
        start += 60
    points = ["mid_write", "after_fsync", "before_publish", "mid_derived"]
    for point in points:
        for k in range(5):
            p = appender(d, start, 6, f"{point}:{k}")
            out, _ = p.communicate(timeout=60)
            acked |= {line.strip() for line in out.splitlines()[1:] if line.strip()}
            check(f"{point}:{k}")
            start += 6
    elapsed = time.perf_counter() - t0
    total = ReceiptLog(d).size
    print(f"\ncrash: {trials} random kill -9 trials + {5 * len(points)} at chosen steps "
          f"({fmt_s(elapsed)}):")  # fmt: skip
    print(f"  states after the kill: {seen}")
    print(f"  acknowledged appends {len(acked)}, entries in the log {total}, failures "
          f"{len(failures)}")  # fmt: skip
    for f in failures[:5]:
        print("   ", f)
    return {
        "random_trials": trials,
        "chosen_point_trials": 5 * len(points),
        "acknowledged": len(acked),
        "entries": total,
        "states": seen,
        "failures": failures,
        "elapsed_s": elapsed,
    }


def bench_concurrency(tmp: Path, per: int) -> dict[str, Any]:
    d = tmp / "concurrent-log"
    ReceiptLog(d, signer=SIGNER, origin=ORIGIN)
    procs = [appender(d, 1_000_000 + w * per, per, "random") for w in range(4)]
    t0 = time.perf_counter()
    acked: set[str] = set()
    for p in procs:
        out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(err)
        acked |= {line.strip() for line in out.splitlines()[1:] if line.strip()}
    elapsed = time.perf_counter() - t0
    report = verify_log(d, [SIGNER.public_key])
    stored = [Receipt.from_json(b).receipt_id for _, b in read_entries(d)]
    ok = report.ok and len(stored) == 4 * per == len(set(stored)) and acked == set(stored)
    print(f"\nconcurrency: 4 processes x {per} appends: {len(stored)} entries, "
          f"{len(set(stored))} distinct, verified {report.ok}; {4 * per / elapsed:.0f} "
          "durable appends/s in total (incl. process start)")  # fmt: skip
    return {
        "processes": 4,
        "appends_each": per,
        "entries": len(stored),
        "distinct": len(set(stored)),
        "verified": report.ok,
        "ok": ok,
        "elapsed_s": elapsed,
    }


# -- batch verify of files -----------------------------------------------------------------------


def bench_batch(tmp: Path, quick: bool) -> dict[str, Any]:
    n = 2000 if quick else 10_000
    repeats = 2 if quick else 5
    work = tmp / "batch"
    work.mkdir()
    rdir, pub, pairs_file, signer = build_corpus(work, n)
    base_py = work / "bare_verify.py"
    base_py.write_text(BASELINE_SCRIPT, encoding="utf-8")
    cli = [sys.executable, "-c", CLI, "verify", str(rdir), "--key", str(pub), "--quiet"]
    runs = {"bare": [sys.executable, str(base_py), str(pairs_file)],
            "jobs1": [*cli, "--jobs", "1"], "jobs2": [*cli, "--jobs", "2"]}  # fmt: skip
    for argv in runs.values():
        run_proc(argv)  # warm page cache and .pyc
    times: dict[str, list[float]] = {k: [] for k in runs}
    for r in range(repeats):
        names = list(runs)
        names = names[r % 3 :] + names[: r % 3]
        for name in names:
            dt, p = run_proc(runs[name])
            if p.returncode != 0:
                raise SystemExit(f"{name}: {p.stderr[-500:]!r}")
            times[name].append(dt)
    s = {k: summary(v) for k, v in times.items()}
    ratio_best = s["bare"]["min"] / s["jobs1"]["min"]
    ratio_median = s["bare"]["median"] / s["jobs1"]["median"]
    speedup = s["jobs1"]["median"] / s["jobs2"]["median"]
    # in process: verify_receipt vs the bare verify of the same messages
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from erasure_receipts.canonical import use_orjson
    from erasure_receipts.cli import _expand
    from erasure_receipts.verify import TrustStore, read_input, verify_receipt

    use_orjson()
    datas = [read_input(f) for f in _expand([str(rdir)])]
    trust = TrustStore([signer.public_key])
    bare_key = Ed25519PublicKey.from_public_bytes(signer.public_key.raw)
    pairs = []
    for dd in datas:
        rc = Receipt.from_json(dd)
        pairs.append((rc.signatures[0].sig, rc.signed_bytes()))
    rec_t: list[float] = []
    bare_t: list[float] = []
    for r in range(3 if quick else 5):
        for name in ("rec", "bare") if r % 2 == 0 else ("bare", "rec"):
            t0 = time.perf_counter()
            if name == "rec":
                for dd in datas:
                    verify_receipt(dd, trust)
                rec_t.append(time.perf_counter() - t0)
            else:
                for sig, msg in pairs:
                    bare_key.verify(sig, msg)
                bare_t.append(time.perf_counter() - t0)
    inproc = statistics.median(bare_t) / statistics.median(rec_t)
    print(f"\nbatch verify of {n} files ({repeats} interleaved runs each, medians):")
    for k in runs:
        print(f"  {k:<6} {fmt_s(s[k]['median'])} (best {fmt_s(s[k]['min'])}) -> "
              f"{n / s[k]['median']:.0f}/s")  # fmt: skip
    print(f"  single-core ratio to bare Ed25519: best {ratio_best:.2f}, median {ratio_median:.2f}"
          f"; in process {inproc:.2f} ({statistics.median(rec_t) / n * 1e6:.1f} vs "
          f"{statistics.median(bare_t) / n * 1e6:.1f} us)")  # fmt: skip
    print(f"  --jobs 2 speed-up over --jobs 1: {speedup:.2f} (cores: {os.cpu_count()})")
    return {
        "n": n,
        "repeats": repeats,
        "whole_process_s": s,
        "ratio_jobs1_to_bare_best": ratio_best,
        "ratio_jobs1_to_bare_median": ratio_median,
        "ratio_in_process_median": inproc,
        "verify_receipt_us": statistics.median(rec_t) / n * 1e6,
        "bare_verify_us": statistics.median(bare_t) / n * 1e6,
        "speedup_jobs2_median": speedup,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run (~40 s)")
    ap.add_argument("--only", help="comma-separated parts: append,verify,crash,concurrency,batch")
    ap.add_argument("--n-log", type=int, help="receipts in the large log (default 100000)")
    ap.add_argument("--trials", type=int, help="random kill -9 trials (default 100)")
    ap.add_argument("--tmp", help="work directory (default: a temp dir, deleted)")
    args = ap.parse_args()
    parts = (args.only or "append,verify,crash,concurrency,batch").split(",")
    n_log = args.n_log or (10_000 if args.quick else 100_000)
    trials = args.trials or (20 if args.quick else 100)
    tmp = Path(args.tmp) if args.tmp else Path(tempfile.mkdtemp(prefix="bench-log-"))
    tmp.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"mode": "quick" if args.quick else "full", "parts": parts}
    verdicts: dict[str, Any] = {}
    previous = RESULTS_DIR / "log_bench.json"
    if args.only and previous.exists():  # keep the parts not re-run, with their mode
        old = json.loads(previous.read_text("utf-8"))
        modes = old.get("part_modes", {})
        for part in ("append", "verify", "crash", "concurrency", "batch"):
            if part not in parts and part in old:
                out[part] = old[part]
                out.setdefault("part_modes", {})[part] = modes.get(part, old.get("mode"))
        verdicts.update(old.get("verdicts", {}))
    out.setdefault("part_modes", {}).update({p: out["mode"] for p in parts})
    try:
        if "append" in parts:
            out["append"] = bench_append(tmp, args.quick)
        if "verify" in parts:
            out["verify"] = v = bench_verify(tmp, n_log, args.quick)
            verdicts["log verify: proof hashes at n=1e5 <= 17 (O(log n))"] = verdict(
                max(p["inclusion_hashes_max"] for p in v["proofs"]), 17, "<="
            )
        if "crash" in parts:
            out["crash"] = c = bench_crash(tmp, trials)
            verdicts["crash: failures (log verifies, nothing acknowledged lost)"] = verdict(
                len(c["failures"]), 0, "<="
            )
        if "concurrency" in parts:
            out["concurrency"] = cc = bench_concurrency(tmp, 250 if args.quick else 1000)
            verdicts["concurrency: 4 x N appends -> 4N distinct entries"] = verdict(
                float(cc["ok"]), 1, ">="
            )
        if "batch" in parts:
            out["batch"] = b = bench_batch(tmp, args.quick)
            verdicts["batch verify single-core ratio to bare (median)"] = verdict(
                b["ratio_jobs1_to_bare_median"], TARGET_BATCH, ">="
            )
            verdicts["batch verify, aim"] = verdict(b["ratio_jobs1_to_bare_median"], 0.8, ">=")
        print("\nverdicts:")
        print_verdicts(verdicts)
        out["verdicts"] = verdicts
        path = write_result("log_bench", out)
        print(f"\nwrote {path}")
    finally:
        if not args.tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
