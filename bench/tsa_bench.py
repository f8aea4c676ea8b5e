"""Trusted time: what checking an RFC 3161 time-stamp adds to a verify.

    python bench/tsa_bench.py [--quick] [--runs 15] [--loops 500]

The TSA is OpenSSL's ``openssl ts -reply`` behind ``http.server`` on 127.0.0.1
(tests/tsa_helpers.py); a log of 100 receipts is time-stamped once, and one receipt's
tlog-proof carries the token. Parts (ratios measured in the same run):

* whole process - ``receipt verify R --proof P --key --policy --tsa-cert --tsa-root``
  against the same command without ``--tsa-cert``, interleaved, bytecode cached;
  min/median/max and the ratio of the medians (the TSA check imports rfc3161-client
  and cryptography's x509 module, and runs a CMS signature and chain check).
* in process - ``verify_bundle`` with the token checked ÷ without, ``--loops`` times;
  ``TsaTrust.verify`` alone.
* stamp - ``ReceiptLog.timestamp`` against the local TSA (dominated by starting the
  ``openssl`` process per request; for scale only).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _common import fmt_s, per_call, summary, write_result

from erasure_receipts.bundle import build_bundle, verify_bundle
from erasure_receipts.log import Checkpoint, ReceiptLog, verifier_key
from erasure_receipts.policy import Policy
from erasure_receipts.receipt import Receipt
from erasure_receipts.signing import Signer
from erasure_receipts.timestamp import TsaClient, TsaTrust
from erasure_receipts.verify import TrustStore
from receipt_factory import make_statement
from tsa_helpers import Pki, serve_tsa

CLI = "from erasure_receipts.cli import main; main()"
SIGNER = Signer.from_seed(bytes(range(32)))
ORIGIN = "bench.example/erasures"


def _setup(d: Path) -> dict[str, Any]:
    pki = Pki(d / "pki", "bench")
    cert, key = pki.tsa("tsa")
    rl = ReceiptLog(d / "log", SIGNER, origin=ORIGIN)
    datas = [
        Receipt.sign(make_statement(receipt_id=str(uuid.UUID(int=i + 1, version=4))),
                     SIGNER).to_json()
        for i in range(100)
    ]  # fmt: skip
    rl.append_many(datas)
    with serve_tsa(cert, key) as url:
        stamps = []
        for _ in range(5):
            t0 = time.perf_counter()
            rl.timestamp(TsaClient(url))
            stamps.append(time.perf_counter() - t0)
    data = datas[50]
    (d / "r.json").write_bytes(data)
    (d / "r.tlog-proof").write_bytes(build_bundle(rl, data))
    (d / "pub.pem").write_bytes(SIGNER.public_pem())
    (d / "policy.txt").write_text(f"log {verifier_key(ORIGIN, SIGNER.public_key)}\nquorum none\n")
    text = Checkpoint.parse(rl.checkpoint()).text
    return {"cert": cert, "root": pki.root_pem, "data": data, "stamp_s": summary(stamps),
            "text": text, "token": rl.timestamp_token(100)}  # fmt: skip


def _time_process(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CLI, *argv], capture_output=True, env=env)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{argv}: exit {p.returncode}: {p.stderr.decode()}")
    return dt


def bench_process(d: Path, s: dict[str, Any], runs: int) -> dict[str, Any]:
    plain = ["verify", str(d / "r.json"), "--key", str(d / "pub.pem"), "--proof",
             str(d / "r.tlog-proof"), "--policy", str(d / "policy.txt"), "--quiet"]  # fmt: skip
    tsa = [*plain, "--tsa-cert", str(s["cert"]), "--tsa-root", str(s["root"])]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(d / "pycache")
    for argv in (plain, tsa, plain, tsa):
        _time_process(argv, env)
    a: list[float] = []
    b: list[float] = []
    for _ in range(runs):
        a.append(_time_process(plain, env))
        b.append(_time_process(tsa, env))
    sa, sb = summary(a), summary(b)
    return {"proof_verify_s": sa, "proof_verify_with_tsa_s": sb,
            "ratio_median": sb["median"] / sa["median"]}  # fmt: skip


def bench_in_process(d: Path, s: dict[str, Any], loops: int) -> dict[str, Any]:
    trust = TrustStore([SIGNER.public_key])
    policy = Policy.parse((d / "policy.txt").read_bytes())
    bundle = (d / "r.tlog-proof").read_bytes()
    tsa = TsaTrust(s["cert"].read_bytes(), s["root"].read_bytes())
    data = s["data"]
    out: dict[str, Any] = {}
    for name, fn in (
        ("verify_bundle_s", lambda: verify_bundle(data, bundle, trust, policy)),
        ("verify_bundle_with_tsa_s", lambda: verify_bundle(data, bundle, trust, policy, tsa)),
        ("tsa_verify_s", lambda: tsa.verify(s["token"], s["text"])),
    ):
        out[name] = per_call(fn, loops)
    out["ratio_median"] = (
        out["verify_bundle_with_tsa_s"]["median"] / out["verify_bundle_s"]["median"]
    )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--loops", type=int, default=500)
    a = ap.parse_args()
    if a.quick:
        a.runs, a.loops = 5, 50
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        s = _setup(d)
        proc = bench_process(d, s, a.runs)
        inproc = bench_in_process(d, s, a.loops)
    print(f"whole process (pyc-cached): --proof verify {fmt_s(proc['proof_verify_s']['median'])}, "
          f"with --tsa-cert {fmt_s(proc['proof_verify_with_tsa_s']['median'])} (median), "
          f"ratio {proc['ratio_median']:.3f}")  # fmt: skip
    print(f"in process: verify_bundle {fmt_s(inproc['verify_bundle_s']['median'])}, with the "
          f"token {fmt_s(inproc['verify_bundle_with_tsa_s']['median'])} (ratio "
          f"{inproc['ratio_median']:.2f}); TsaTrust.verify "
          f"{fmt_s(inproc['tsa_verify_s']['median'])}")  # fmt: skip
    print(f"stamp (local OpenSSL TSA): {fmt_s(s['stamp_s']['median'])} per checkpoint")
    write_result("tsa_bench", {
        "mode": "quick" if a.quick else "full",
        "params": {"runs": a.runs, "loops": a.loops, "log_size": 100, "policy": "quorum none"},
        "process": proc, "in_process": inproc, "stamp_s": s["stamp_s"],
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
