"""Trusted time end to end, in real processes, with OpenSSL's ``ts -reply`` as the TSA
behind ``http.server`` on 127.0.0.1: ``receipt log timestamp`` stamps the latest
checkpoint; ``receipt verify --log --tsa-cert`` and ``--proof --tsa-cert`` report the
time each receipt was issued no later than, fail tokens over another checkpoint, from
an untrusted TSA or after the TSA certificate expired with distinct reasons, flag a
receipt dated after its time-stamp; malformed tokens, an unreachable TSA and bad
certificate files give one error line and the documented exit code; a plain verify
never imports the TSP library."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from erasure_receipts.log import ReceiptLog, verifier_key
from receipt_factory import TRUSTED, make_receipt, make_statement
from test_verify_inputs import validator
from test_witness_cli import ORIGIN, one_error_line, run
from tsa_helpers import OPENSSL, Tsas, serve_tsa

# Under CI=true (.ci/run installs openssl) a missing command fails the tests, never skips them.
pytestmark = pytest.mark.skipif(
    OPENSSL is None and os.environ.get("CI") != "true", reason="needs the openssl command"
)

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


class Env:
    def __init__(self, d: Path) -> None:
        t = Tsas(d)  # the unit tests' PKI (this class's trust() writes trust files instead)
        self.pki, self.cert, self.key, self.other = t.pki, t.cert, t.key, t.other
        self.expired, self.expired_key = t.expired, t.expired_key
        self.other_cert, self.other_key = t.other_cert, t.other_key
        self.d = d
        self.pub = d / "log.pub.pem"
        self.pub.write_bytes(TRUSTED.public_pem())
        self.log = d / "log"
        self.files: list[Path] = []
        self.policy = d / "policy.txt"
        self.policy.write_text(f"log {verifier_key(ORIGIN, TRUSTED.public_key)}\nquorum none\n")

    def append(self, n: int, issued_at: str | None = None) -> None:
        rl = ReceiptLog(self.log, TRUSTED, origin=ORIGIN)
        for _ in range(n):
            i = len(self.files)
            extra = {"issued_at": issued_at} if issued_at else {}
            data = make_receipt(
                make_statement(receipt_id=str(uuid.UUID(int=i + 1, version=4)), **extra)
            ).to_json()
            f = self.d / f"r{i}.json"
            f.write_bytes(data)
            rl.append(data)
            self.files.append(f)

    def trust(self, cert: Path | None = None, root: Path | None = None) -> list[Any]:
        return ["--tsa-cert", cert or self.cert, "--tsa-root", root or self.pki.root_pem]

    def verify(self, *extra: Any) -> tuple[int, dict[str, Any]]:
        p = run("verify", *self.files, "--key", self.pub, "--log", self.log, "--json", *extra)
        assert "Traceback" not in p.stderr
        doc = json.loads(p.stdout)
        validator("verify-result").validate(doc)  # every reason is one the schema lists
        return p.returncode, doc


@pytest.fixture
def env(tmp_path: Path) -> Env:
    e = Env(tmp_path)
    e.append(3)
    return e


def stamp(env: Env, cert: Path | None = None, key: Path | None = None) -> dict[str, Any]:
    with serve_tsa(cert or env.cert, key or env.key) as url:
        p = run("log", "timestamp", env.log, "--tsa", url, "--json")
    assert p.returncode == 0, p.stderr
    doc: dict[str, Any] = json.loads(p.stdout)
    return doc


def test_stamp_then_verify_reports_issued_no_later_than(env: Env) -> None:
    with serve_tsa(env.cert, env.key) as url:
        p = run("log", "timestamp", env.log, "--tsa", url)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("time-stamped the checkpoint of size 3 at ")
    assert (env.log / "timestamps" / "3.tsr").is_file()
    env.append(1)  # entry 3: after the time-stamp
    code, doc = env.verify(*env.trust())
    assert code == 0 and doc["ok"], doc
    got = [(r["log_index"], r["timestamp_size"]) for r in doc["results"]]
    assert got == [(0, 3), (1, 3), (2, 3), (3, None)]
    bound = doc["results"][0]["issued_no_later_than"]
    assert bound.endswith("Z") and doc["results"][3]["issued_no_later_than"] is None
    assert doc["results"][0]["issued_at"] < bound
    schema = json.loads((SCHEMAS / "verify-result.schema.json").read_text("utf-8"))
    jsonschema.Draft202012Validator(schema).validate(doc)
    p = run("verify", *env.files, "--key", env.pub, "--log", env.log, *env.trust())
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert f"issued no later than {bound} (time-stamped checkpoint of size 3)" in lines[0]
    assert lines[3].endswith("; no time-stamped checkpoint covers it yet")
    # without --tsa-cert the result is as before: no time fields
    code, doc = env.verify()
    assert code == 0 and "issued_no_later_than" not in doc["results"][0]


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("another_checkpoint", "timestamp_mismatch"),
        ("untrusted_tsa", "untrusted_tsa"),
        ("expired_certificate", "tsa_cert_not_valid"),
        ("malformed_token", "malformed_timestamp"),
    ],
)
def test_bad_tokens_fail_with_distinct_reasons(env: Env, case: str, reason: str) -> None:
    args = env.trust()
    tsr = env.log / "timestamps" / "3.tsr"
    if case == "another_checkpoint":  # the token of size 3 kept as the one of size 4
        stamp(env)
        env.append(1)
        tsr.rename(tsr.with_name("4.tsr"))
    elif case == "untrusted_tsa":
        stamp(env, env.other_cert, env.other_key)
    elif case == "expired_certificate":
        stamp(env, env.expired, env.expired_key)
        args = env.trust(env.expired)
    else:
        stamp(env)
        tsr.write_bytes(b"0\x82\x00\x05 garbage")
    code, doc = env.verify(*args)
    assert code == 1 and not doc["ok"]
    assert {r["reason"] for r in doc["results"]} == {reason}, doc["results"][0]["message"]
    p = run("verify", env.files[0], "--key", env.pub, "--log", env.log, *args)
    assert p.returncode == 1 and p.stdout.startswith(f"FAIL  {env.files[0]}: [{reason}]")


def test_a_receipt_dated_after_its_time_stamp_is_flagged(env: Env) -> None:
    env.append(1, issued_at="2099-01-01T00:00:00Z")
    stamp(env)
    code, doc = env.verify(*env.trust())
    assert code == 1 and doc["counts"] == {"verified": 3, "invalid": 1, "unreadable": 0}
    bad = doc["results"][3]
    assert bad["reason"] == "issued_after_timestamp" and bad["issued_at"] == "2099-01-01T00:00:00Z"
    assert bad["issued_no_later_than"] < bad["issued_at"] and bad["timestamp_size"] == 4


def test_an_offline_bundle_carries_and_checks_the_token(env: Env) -> None:
    stamp(env)
    out = env.d / "r1.tlog-proof"
    assert run("log", "bundle", env.log, env.files[1], "-o", out).returncode == 0
    assert out.read_bytes().startswith(b"c2sp.org/tlog-proof@v1\nextra ")
    shutil.rmtree(env.log)
    base = [env.files[1], "--proof", out, "--key", env.pub, "--policy", env.policy]
    p = run("verify", *base, *env.trust(), "--json")
    doc = json.loads(p.stdout)
    assert p.returncode == 0, doc
    res = doc["results"][0]
    assert (
        res["issued_no_later_than"].endswith("Z") and res["issued_at"] < res["issued_no_later_than"]
    )
    p = run("verify", *base, *env.trust())
    assert p.returncode == 0 and "; issued no later than " in p.stdout
    p = run("verify", *base, *env.trust(env.other_cert, env.other.root_pem), "--json")
    assert p.returncode == 1 and json.loads(p.stdout)["results"][0]["reason"] == "untrusted_tsa"
    p = run("verify", *base)  # no TSA given: extra ignored, as before
    assert p.returncode == 0 and "issued no later than" not in p.stdout


def test_unreachable_and_misbehaving_tsas_are_one_line(env: Env) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    line = one_error_line(run("log", "timestamp", env.log, "--tsa",
                              f"http://127.0.0.1:{port}/", "--timeout", 2), 3)  # fmt: skip
    assert "[tsa_unreachable]" in line and f"127.0.0.1:{port}" in line
    with serve_tsa(env.cert, env.key, answer=b"not a token") as url:
        line = one_error_line(run("log", "timestamp", env.log, "--tsa", url), 1)
    assert "[malformed_timestamp]" in line
    line = one_error_line(run("log", "timestamp", env.log, "--tsa", "ftp://x"), 2)
    assert "http://" in line
    line = one_error_line(run("log", "timestamp", env.d / "nowhere", "--tsa", "http://x/"), 3)
    assert not (env.log / "timestamps").exists()


def test_certificate_options_usage_and_io_errors(env: Env) -> None:
    f, pub = env.files[0], env.pub
    line = one_error_line(run("verify", f, "--key", pub, "--tsa-cert", env.cert), 2)
    assert "--tsa-cert needs --log" in line
    line = one_error_line(run("verify", f, "--key", pub, "--log", env.log, "--tsa-root",
                              env.pki.root_pem), 2)  # fmt: skip
    assert "--tsa-root needs --tsa-cert" in line
    line = one_error_line(run("verify", f, "--key", pub, "--log", env.log, "--tsa-cert",
                              env.cert), 2)  # fmt: skip
    assert "--tsa-root" in line and "self-signed" in line
    line = one_error_line(run("verify", f, "--key", pub, "--log", env.log, "--tsa-cert",
                              pub), 2)  # fmt: skip
    assert "not PEM X.509 certificates" in line
    missing = env.d / "missing.pem"
    line = one_error_line(run("verify", f, "--key", pub, "--log", env.log, "--tsa-cert",
                              missing), 3)  # fmt: skip
    assert "missing.pem" in line
    p = run("verify", f, "--key", pub, "--log", env.log, "--tsa-cert", missing, "--json")
    assert p.returncode == 3 and json.loads(p.stdout)["exit_code"] == 3


def test_only_a_tsa_check_imports_the_tsp_library(env: Env) -> None:
    stamp(env)
    out = env.d / "r0.tlog-proof"
    assert run("log", "bundle", env.log, env.files[0], "-o", out).returncode == 0
    code = (
        "import sys, json\n"
        "from erasure_receipts.cli import verify_main\n"
        "rc = verify_main(sys.argv[1:])\n"
        "print(json.dumps([rc, sorted(sys.modules)]))\n"
    )

    def modules(*args: Any) -> list[str]:
        p = subprocess.run([sys.executable, "-c", code, *map(str, args), "--quiet"],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
        rc, mods = json.loads(p.stdout.strip().splitlines()[-1])
        assert rc == 0, p.stderr
        return [m for m in mods if m.split(".")[0] in ("rfc3161_client", "http", "langgraph")
                or m == "erasure_receipts.timestamp"]  # fmt: skip

    proof = [env.files[0], "--proof", out, "--key", env.pub, "--policy", env.policy]
    assert modules(env.files[0], "--key", env.pub) == []
    assert modules(*proof) == []
    assert modules(env.files[0], "--key", env.pub, "--log", env.log) == []
    with_tsa = modules(*proof, *env.trust())
    assert "rfc3161_client" in with_tsa and "erasure_receipts.timestamp" in with_tsa
    assert [m for m in with_tsa if m.split(".")[0] in ("http", "langgraph")] == []
