"""Witnessed logs: offline bundle verification and witness cosigning.

    python bench/witness_bench.py [--quick] [--runs 15] [--loops 2000] [--cosigns 300]

Parts (each reports ratios or rates measured in the same run):

* offline - whole process: ``receipt verify R --proof R.tlog-proof --key --policy``
  (2-of-2 policy, two cosignatures) against plain ``receipt verify R --key`` of the same
  receipt, interleaved, ``--runs`` each; min/median/max of both and the ratio of the
  medians (target <= 1.5), with bytecode cached (as installed) and as-is (this
  environment's PYTHONDONTWRITEBYTECODE=1: compiled from source at every start).
* in-process - ``verify_bundle`` per receipt (receipt signature, inclusion proof, log
  signature, two cosignatures), ``--loops`` times (target <= 1 ms), and
  ``verify_receipt`` alone for reference.
* cosign - witness throughput: ``Witness.add_checkpoint`` in process (each request a
  consistency proof from the last cosigned size; every record fsynced and renamed), and
  the same over HTTP (``receipt witness``'s ``serve``, one connection per request, as a
  log pushes), in cosignatures per second.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt_s, per_call, print_verdicts, summary, verdict, write_result

from erasure_receipts.bundle import build_bundle, verify_bundle
from erasure_receipts.log import ReceiptLog, WitnessEndpoint, verifier_key
from erasure_receipts.policy import Policy
from erasure_receipts.receipt import Receipt
from erasure_receipts.signing import Signer
from erasure_receipts.verify import TrustStore, verify_receipt
from erasure_receipts.witness import Witness, serve

CLI = "from erasure_receipts.cli import main; main()"
SIGNER = Signer.from_seed(bytes(range(32)))
W1, W2 = Signer.from_seed(b"\x11" * 32), Signer.from_seed(b"\x12" * 32)
ORIGIN = "bench.example/erasures"
TARGET_OFFLINE = 1.5
TARGET_IN_PROCESS_S = 1e-3


def _receipt(i: int) -> bytes:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from receipt_factory import make_statement

    st = make_statement(receipt_id=str(uuid.UUID(int=i + 1, version=4)))
    return Receipt.sign(st, SIGNER).to_json()


def _start(w: Witness) -> str:
    ready: list[str] = []
    t = threading.Thread(target=serve, args=(w,), kwargs={"ready": ready.append}, daemon=True)
    t.start()
    while not ready:
        time.sleep(0.01)
    return ready[0]


def _setup(d: Path, n: int) -> dict[str, Any]:
    keys = {ORIGIN: SIGNER.public_key}
    w1 = Witness(d / "w1", W1, "w1.bench", keys)
    w2 = Witness(d / "w2", W2, "w2.bench", keys)
    endpoints = [WitnessEndpoint("w1.bench", W1.public_key, _start(w1)),
                 WitnessEndpoint("w2.bench", W2.public_key, _start(w2))]  # fmt: skip
    rl = ReceiptLog(d / "log", SIGNER, origin=ORIGIN, witnesses=endpoints)
    datas = [_receipt(i) for i in range(n)]
    rl.append_many(datas)
    receipt = d / "r.json"
    receipt.write_bytes(datas[n // 2])
    proof = d / "r.tlog-proof"
    proof.write_bytes(build_bundle(rl, datas[n // 2]))
    pub = d / "pub.pem"
    pub.write_bytes(SIGNER.public_pem())
    policy = d / "policy.txt"
    policy.write_text(
        f"log {verifier_key(ORIGIN, SIGNER.public_key)}\n"
        f"witness w1 {endpoints[0].vkey}\nwitness w2 {endpoints[1].vkey}\n"
        "group both all w1 w2\nquorum both\n"
    )
    return {"receipt": receipt, "proof": proof, "pub": pub, "policy": policy, "data": datas[n // 2]}


def _time_process(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CLI, *argv], capture_output=True, env=env)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{argv}: exit {p.returncode}: {p.stderr.decode()}")
    return dt


def bench_offline(s: dict[str, Any], runs: int, tmp: Path) -> dict[str, Any]:
    """Both ways of running (as bench/cold_start.py): ``as-is`` inherits this
    environment (with PYTHONDONTWRITEBYTECODE=1 every start compiles the package from
    source), ``pyc-cached`` caches bytecode under a temporary PYTHONPYCACHEPREFIX, as a
    normal install does."""
    plain = ["verify", str(s["receipt"]), "--key", str(s["pub"]), "--quiet"]
    offline = [*plain, "--proof", str(s["proof"]), "--policy", str(s["policy"])]
    env_asis = dict(os.environ)
    env_pyc = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env_pyc["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    out: dict[str, Any] = {}
    for name, env in (("as-is", env_asis), ("pyc-cached", env_pyc)):
        for argv in (plain, offline, plain, offline):  # warm bytecode and page caches
            _time_process(argv, env)
        a: list[float] = []
        b: list[float] = []
        for _ in range(runs):
            a.append(_time_process(plain, env))
            b.append(_time_process(offline, env))
        sa, sb = summary(a), summary(b)
        out[name] = {"plain_verify_s": sa, "offline_bundle_verify_s": sb,
                     "ratio_median": sb["median"] / sa["median"],
                     "ratio_min": sb["min"] / sa["min"]}  # fmt: skip
    return out


def bench_in_process(s: dict[str, Any], loops: int) -> dict[str, Any]:
    trust = TrustStore([SIGNER.public_key])
    policy = Policy.parse(s["policy"].read_bytes())
    bundle = s["proof"].read_bytes()
    data = s["data"]
    out: dict[str, Any] = {}
    for name, fn in (("verify_bundle_s", lambda: verify_bundle(data, bundle, trust, policy)),
                     ("verify_receipt_s", lambda: verify_receipt(data, trust))):  # fmt: skip
        out[name] = per_call(fn, loops)
    return out


def bench_cosign(d: Path, count: int) -> dict[str, Any]:
    keys = {ORIGIN: SIGNER.public_key}
    rl = ReceiptLog(d / "cosign-log", SIGNER, origin=ORIGIN, witnesses=[])
    notes = []
    for i in range(count):
        rl.append(_receipt(10_000 + i))
        notes.append(rl.checkpoint())

    def bodies() -> list[bytes]:
        out = []
        for old, n in enumerate(notes):  # checkpoint i has i + 1 entries
            p = rl.consistency_proof(old, n).path if old else []
            out.append(b"old %d\n" % old + b"".join(base64.b64encode(h) + b"\n" for h in p)
                       + b"\n" + n)  # fmt: skip
        return out

    res: dict[str, Any] = {}
    w = Witness(d / "w-inproc", W1, "w1.bench", keys)
    reqs = bodies()
    t0 = time.perf_counter()
    for body in reqs:
        assert w.add_checkpoint(body).status == 200
    res["in_process_per_s"] = count / (time.perf_counter() - t0)
    wh = Witness(d / "w-http", W2, "w2.bench", keys)
    url = _start(wh)
    host, port = url.removeprefix("http://").split(":")
    t0 = time.perf_counter()
    for body in reqs:
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("POST", "/add-checkpoint", body)
        r = conn.getresponse()
        r.read()
        conn.close()
        assert r.status == 200
    res["http_per_s"] = count / (time.perf_counter() - t0)
    res["requests"] = count
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--loops", type=int, default=2000)
    ap.add_argument("--cosigns", type=int, default=300)
    ap.add_argument("--log-size", type=int, default=1000)
    a = ap.parse_args()
    if a.quick:
        a.runs, a.loops, a.cosigns, a.log_size = 5, 200, 50, 100
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        s = _setup(d, a.log_size)
        offline = bench_offline(s, a.runs, d)
        inproc = bench_in_process(s, a.loops)
        cosign = bench_cosign(d, a.cosigns)
    per = inproc["verify_bundle_s"]["median"]
    for name, o in offline.items():
        print(f"whole process ({name}): plain verify {fmt_s(o['plain_verify_s']['median'])}, "
              f"offline bundle {fmt_s(o['offline_bundle_verify_s']['median'])} (median), "
              f"ratio {o['ratio_median']:.3f}")  # fmt: skip
    print(
        f"in process: verify_bundle {fmt_s(per)}, verify_receipt "
        f"{fmt_s(inproc['verify_receipt_s']['median'])}"
    )
    print(f"cosign: {cosign['in_process_per_s']:.0f}/s in process, "
          f"{cosign['http_per_s']:.0f}/s over HTTP")  # fmt: skip
    verdicts = {
        "offline / plain verify, pyc-cached (median)": verdict(
            offline["pyc-cached"]["ratio_median"], TARGET_OFFLINE, "<="),
        "offline / plain verify, as-is (median)": verdict(
            offline["as-is"]["ratio_median"], TARGET_OFFLINE, "<="),
        "verify_bundle per receipt (s)": verdict(per, TARGET_IN_PROCESS_S, "<="),
    }  # fmt: skip
    print_verdicts(verdicts)
    write_result("witness_bench", {
        "mode": "quick" if a.quick else "full",
        "params": {"runs": a.runs, "loops": a.loops, "cosigns": a.cosigns,
                   "log_size": a.log_size, "policy": "2 of 2 witnesses"},
        "offline": offline, "in_process": inproc, "cosign": cosign, "verdicts": verdicts,
    })  # fmt: skip
    return 0 if all(v["pass"] for v in verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
