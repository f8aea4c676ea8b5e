"""Witnessed receipt logs end to end, in real processes on 127.0.0.1: two ``receipt
witness serve`` processes cosign every append of a log (2 of 2); a witness that is down
loses no append and is caught up by ``receipt log witness push``; a forked log (same
key, same size, another entry) is refused by both witnesses (409), flagged by ``receipt
witness watch`` and fails ``verify --policy``; a witness killed with SIGKILL in the
middle of requests, or between writing and renaming its record, keeps a valid record;
an offline bundle verifies with the log deleted, and its tampered variants fail with
distinct reasons; malformed policies, bundles and request bodies give one error line
and the documented exit code."""

from __future__ import annotations

import base64
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from erasure_receipts.digest import EMPTY_ROOT
from erasure_receipts.log import Checkpoint, ReceiptLog, verifier_key
from erasure_receipts.policy import Policy
from erasure_receipts.signing import Signer
from erasure_receipts.witness import Witness
from receipt_factory import ATTACKER, TRUSTED, make_receipt, make_statement
from test_verify_inputs import validator

CLI = "from erasure_receipts.cli import main; main()"
ORIGIN = "example.com/erasures"


def run(*args: Any, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CLI, *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def one_error_line(p: subprocess.CompletedProcess[str], code: int) -> str:
    assert p.returncode == code, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, p.stderr
    return lines[0]


def receipt_bytes(n: int) -> bytes:
    return make_receipt(make_statement(receipt_id=str(uuid.UUID(int=n + 1, version=4)))).to_json()


class Env:
    def __init__(self, d: Path) -> None:
        self.d = d
        self.key = d / "log.key"
        self.key.write_bytes(TRUSTED.private_pem())
        self.key.chmod(0o600)
        self.pub = d / "log.pub.pem"
        self.pub.write_bytes(TRUSTED.public_pem())
        self.log = d / "log"
        self.procs: dict[str, tuple[subprocess.Popen[str], str, str]] = {}
        self.n = 0

    def witness_key(self, name: str) -> Path:
        path = self.d / f"{name}.key"
        if not path.exists():
            path.write_bytes(Signer.generate().private_pem())
            path.chmod(0o600)
        return path

    def witness_args(self, name: str) -> list[Any]:
        return ["--log-key", self.pub, "--origin", ORIGIN, "--key", self.witness_key(name),
                "--name", f"{name}.example", "--state", self.d / f"{name}-state"]  # fmt: skip

    def start(self, name: str, port: int = 0) -> tuple[str, str]:
        err = open(self.d / f"{name}.stderr", "a")  # noqa: SIM115 - the process writes it
        proc = subprocess.Popen(
            [sys.executable, "-c", CLI, "witness", "serve", *map(str, self.witness_args(name)),
             "--listen", f"127.0.0.1:{port}"],
            stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip
        err.close()
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        vkey = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        self.procs[name] = (proc, url, vkey)
        return url, vkey

    def kill(self, name: str) -> None:
        proc = self.procs[name][0]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def close(self) -> None:
        for proc, _, _ in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)

    def append(self, log: Path | None = None) -> subprocess.CompletedProcess[str]:
        f = self.d / f"r{self.n}.json"
        f.write_bytes(receipt_bytes(self.n))
        self.n += 1
        return run("log", "append", log or self.log, f, "--key", self.key, "--origin", ORIGIN)

    def policy(self, names: tuple[str, ...] = ("w1", "w2")) -> Path:
        text = f"log {verifier_key(ORIGIN, TRUSTED.public_key)}\n"
        for n in names:
            text += f"witness {n} {self.procs[n][2]}\n"
        text += f"group all-of-them all {' '.join(names)}\nquorum all-of-them\n"
        path = self.d / "policy.txt"
        path.write_text(text)
        return path


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    try:
        yield e
    finally:
        e.close()


@pytest.fixture
def witnessed(env: Env) -> Env:
    """A log of 2 receipts with two running witnesses, both configured."""
    for name in ("w1", "w2"):
        env.start(name)
    assert env.append().returncode == 0
    for name in ("w1", "w2"):
        _, url, vkey = env.procs[name]
        assert run("log", "witness", "add", env.log, vkey, url).returncode == 0
    assert env.append().returncode == 0
    return env


def cosigners(env: Env, log: Path | None = None) -> set[str]:
    cp = Checkpoint.parse(ReceiptLog(log or env.log).cosigned())
    return set(Policy.parse(env.policy().read_bytes()).check(cp).cosigners) if cp else set()


def test_two_witnesses_cosign_every_append(witnessed: Env) -> None:
    env = witnessed
    assert cosigners(env) == {"w1", "w2"}
    cp = Checkpoint.parse(ReceiptLog(env.log).cosigned())
    assert cp.size == 2 and cp.text == Checkpoint.parse(ReceiptLog(env.log).checkpoint()).text
    assert env.append().returncode == 0
    assert Checkpoint.parse(ReceiptLog(env.log).cosigned()).size == 3
    policy = env.policy()
    p = run("log", "verify", env.log, "--key", env.pub, "--policy", policy)
    assert p.returncode == 0 and "meets the witness policy" in p.stdout, p.stdout + p.stderr
    p = run("verify", env.d / "r2.json", "--key", env.pub, "--log", env.log, "--policy", policy)
    assert p.returncode == 0 and "log index 2" in p.stdout, p.stdout + p.stderr
    status = json.loads(run("log", "witness", "push", env.log, "--json").stdout)
    assert status["ok"] and {w["cosigned_size"] for w in status["witnesses"].values()} == {3}


def test_a_witness_that_is_down_loses_no_append(witnessed: Env) -> None:
    env = witnessed
    port = int(env.procs["w2"][1].rsplit(":", 1)[1])
    env.kill("w2")
    p = env.append()
    assert p.returncode == 0 and "witness w2.example: not cosigned, pending" in p.stderr
    assert ReceiptLog(env.log).size == 3
    policy = env.policy()
    cp = Checkpoint.parse(ReceiptLog(env.log).cosigned())  # the latest, with what it got
    w2 = Policy.parse(policy.read_bytes()).witnesses["w2"]
    assert cp.size == 3 and cp.cosigned_by(w2.key_name, w2.key) is None
    p = run("log", "verify", env.log, "--key", env.pub, "--policy", policy)
    assert p.returncode == 1 and "[quorum_not_met]" in p.stdout
    line = one_error_line(run("verify", env.d / "r2.json", "--key", env.pub, "--log", env.log,
                              "--policy", policy), 1)  # fmt: skip
    assert "[quorum_not_met]" in line and "valid cosignatures from w1" in line
    p = run("log", "witness", "push", env.log)
    assert p.returncode == 1 and "FAIL  w2.example" in p.stdout and "OK    w1.example" in p.stdout
    env.start("w2", port)  # back, with its state
    p = run("log", "witness", "push", env.log)
    assert p.returncode == 0, p.stdout + p.stderr
    assert Checkpoint.parse(ReceiptLog(env.log).cosigned()).size == 3 and cosigners(env) == {
        "w1", "w2"}  # fmt: skip
    assert run("log", "verify", env.log, "--key", env.pub, "--policy", policy).returncode == 0


def test_a_forked_log_is_refused_flagged_and_fails_the_policy(witnessed: Env) -> None:
    env = witnessed
    fork = env.d / "fork"
    shutil.copytree(env.log, fork)
    assert env.append().returncode == 0  # r2 into the log: cosigned at size 3
    p = env.append(fork)  # r3 into the fork: size 3, another root, the same key
    assert p.returncode == 0 and p.stderr.count("not cosigned, pending") == 2
    status = json.loads(run("log", "witness", "push", fork, "--json").stdout)
    assert not status["ok"]
    for st in status["witnesses"].values():
        assert "409" in st["error"] and "another root" in st["error"]
    for name in ("w1", "w2"):
        assert "409" in (env.d / f"{name}.stderr").read_text()
    policy = env.policy()
    p = run("witness", "watch", "--policy", policy, env.log, fork)
    assert p.returncode == 1 and "[split_view]" in p.stdout, p.stdout + p.stderr
    p = run("witness", "watch", "--policy", policy, fork / "checkpoint", env.d / "w1-state")
    assert p.returncode == 1 and "[split_view]" in p.stdout
    p = run("witness", "watch", "--policy", policy, env.log, env.d / "w1-state", env.d / "w2-state")
    assert p.returncode == 0 and "agree" in p.stdout
    p = run("log", "verify", fork, "--key", env.pub, "--policy", policy)
    assert p.returncode == 1 and "[not_witnessed]" in p.stdout
    p = run("verify", env.d / "r3.json", "--key", env.pub, "--log", fork, "--policy", policy)
    assert p.returncode == 1 and "[not_witnessed]" in p.stdout
    p = run("verify", env.d / "r2.json", "--key", env.pub, "--log", env.log, "--policy", policy)
    assert p.returncode == 0


def test_sigkill_in_the_middle_of_requests_keeps_a_valid_record(env: Env) -> None:
    url, vkey = env.start("w1")
    port = int(url.rsplit(":", 1)[1])
    assert env.append().returncode == 0
    assert run("log", "witness", "add", env.log, vkey, url).returncode == 0
    rl = ReceiptLog(env.log, TRUSTED, witness_timeout=2)
    state = env.d / "w1-state"
    rng = random.Random(7)
    for trial in range(4):
        stop = threading.Event()

        def hammer(base: int = 1000 * (trial + 1), stop: threading.Event = stop) -> None:
            i = 0
            while not stop.is_set():
                rl.append(receipt_bytes(base + i))
                i += 1

        t = threading.Thread(target=hammer)
        t.start()
        time.sleep(rng.uniform(0.1, 0.4))
        env.kill("w1")
        stop.set()
        t.join(30)
        w = Witness(state, Signer.from_pem(env.witness_key("w1").read_bytes()), "w1.example",
                    {ORIGIN: TRUSTED.public_key})  # fmt: skip
        record = w.latest(ORIGIN)  # parses and verifies: never a torn file
        assert record is not None and 1 <= record.size <= rl.size
        assert rl.consistency_proof(record.size).old_root == record.root
        env.start("w1", port)
        status = rl.push_witnesses()
        assert status["w1.example"]["error"] is None, status
        assert Checkpoint.parse(rl.cosigned()).size == rl.size


def test_a_crash_between_write_and_rename_keeps_the_old_record(env: Env) -> None:
    """A real process dies (SIGKILL by itself) after writing and fsyncing the new record,
    before the rename: the record is still the old checkpoint."""
    assert env.append().returncode == 0
    (env.d / "old.note").write_bytes(ReceiptLog(env.log).checkpoint())
    cosign = ["witness", "cosign", *env.witness_args("w1")]
    assert run(*cosign, env.d / "old.note", "--old", 0).returncode == 0
    before = next((env.d / "w1-state").glob("*.checkpoint")).read_bytes()
    assert env.append().returncode == 0
    rl = ReceiptLog(env.log)
    proof = rl.consistency_proof(1)
    (env.d / "new.note").write_bytes(rl.checkpoint())
    (env.d / "proof").write_text("".join(base64.b64encode(h).decode() + "\n" for h in proof.path))
    code = (
        "import os, signal, sys\n"
        "from erasure_receipts.signing import Signer, PublicKey\n"
        "from erasure_receipts.witness import Witness\n"
        "d, key, pub, body = sys.argv[1:]\n"
        "w = Witness(d, Signer.from_pem(open(key, 'rb').read()), 'w1.example',\n"
        f"            {{{ORIGIN!r}: PublicKey.from_pem(open(pub, 'rb').read())}})\n"
        "w._before_rename = lambda: os.kill(os.getpid(), signal.SIGKILL)\n"
        "w.add_checkpoint(open(body, 'rb').read())\n"
    )
    body = b"old 1\n" + (env.d / "proof").read_bytes() + b"\n" + rl.checkpoint()
    (env.d / "body").write_bytes(body)
    p = subprocess.run([sys.executable, "-c", code, env.d / "w1-state", env.witness_key("w1"),
                        env.pub, env.d / "body"], timeout=60)  # fmt: skip
    assert p.returncode == -signal.SIGKILL
    record = next((env.d / "w1-state").glob("*.checkpoint"))
    assert record.read_bytes() == before
    assert list((env.d / "w1-state").glob("*.tmp"))  # the new record was written, not renamed
    p = run(*cosign, env.d / "new.note", "--old", 1, "--proof", env.d / "proof")
    assert p.returncode == 0 and p.stdout.startswith("\u2014 w1.example ")
    assert Checkpoint.parse(record.read_bytes()).size == 2
    line = one_error_line(run(*cosign, env.d / "old.note", "--old", 0), 1)
    assert "[witness_conflict] HTTP 409: the witness holds size 2" in line


def bundle_for(env: Env) -> tuple[Path, Path]:
    receipt = env.d / "r1.json"
    out = env.d / "r1.tlog-proof"
    p = run("log", "bundle", env.log, receipt, "-o", out)
    assert p.returncode == 0, p.stderr
    return receipt, out


def test_a_bundle_verifies_offline_and_its_forgeries_fail(witnessed: Env) -> None:
    env = witnessed
    receipt, proof = bundle_for(env)
    policy = env.policy()
    assert proof.read_bytes().startswith(b"c2sp.org/tlog-proof@v1\nindex 1\n")
    shutil.rmtree(env.log)
    for name in ("w1", "w2"):
        env.kill(name)
    args = ["--key", env.pub, "--policy", policy]
    p = run("verify", receipt, "--proof", proof, *args)
    assert p.returncode == 0 and "entry 1 of 2" in p.stdout and "w1, w2" in p.stdout, p.stderr
    doc = json.loads(run("verify", receipt, "--proof", proof, *args, "--json").stdout)
    assert doc["ok"] and doc["results"][0]["cosigners"] == ["w1", "w2"]
    validator("verify-result").validate(doc)

    def reason(r: Path, b: Path, *extra: Any) -> str:
        p = run("verify", r, "--proof", b, *args, *extra, "--json")
        doc = json.loads(p.stdout)
        assert p.returncode == doc["exit_code"] and "Traceback" not in p.stderr
        validator("verify-result").validate(doc)  # every reason is one the schema lists
        return f"{doc['exit_code']} {doc['results'][0]['reason']}"

    reformatted = env.d / "reformatted.json"  # same signed statement, other bytes
    reformatted.write_text(json.dumps(json.loads(receipt.read_bytes()), indent=4))
    altered = env.d / "altered.json"
    altered.write_bytes(receipt.read_bytes().replace(b"thread-1", b"thread-2"))
    text = proof.read_bytes()
    lines = text.split(b"\n")
    one = env.d / "one-cosignature.tlog-proof"
    one.write_bytes(b"\n".join([*lines[:-2], b""]))  # the last cosignature removed
    cp = Checkpoint.parse(text.partition(b"\n\n")[2])
    resigned = Checkpoint.sign(ORIGIN, cp.size, cp.root, ATTACKER)
    resigned += b"".join(x for x in cp.signature_lines() if not x.startswith(f"\u2014 {ORIGIN} "
                                                                            .encode()))  # fmt: skip
    other = env.d / "resigned.tlog-proof"
    other.write_bytes(text.partition(b"\n\n")[0] + b"\n\n" + resigned)
    malformed = env.d / "malformed.tlog-proof"
    malformed.write_bytes(b"c2sp.org/tlog-proof@v1\nindex 01\n\n" + resigned)
    assert reason(reformatted, proof) == "1 proof_mismatch"
    assert reason(altered, proof).startswith("1 ") and "proof" not in reason(altered, proof)
    assert reason(receipt, one) == "1 quorum_not_met"
    assert reason(receipt, other) == "1 unknown_log"
    assert reason(receipt, malformed) == "1 malformed_proof"
    assert reason(receipt, env.d / "missing.tlog-proof") == "3 unreadable"
    for b in (one, other, malformed):
        p = run("verify", receipt, "--proof", b, *args)
        assert p.returncode == 1 and p.stdout.count("\n") == 1 and p.stdout.startswith("FAIL")
    none = env.d / "none.txt"
    none.write_text(f"log {verifier_key(ORIGIN, TRUSTED.public_key)}\nquorum none\n")
    p = run("verify", receipt, "--proof", one, "--key", env.pub, "--policy", none)
    assert p.returncode == 0


def test_malformed_inputs_give_one_line_and_the_documented_code(witnessed: Env) -> None:
    env = witnessed
    receipt, proof = bundle_for(env)
    bad = env.d / "bad-policy.txt"
    bad.write_text("witness w1 nonsense\nquorum w1\n")
    line = one_error_line(run("verify", receipt, "--proof", proof, "--key", env.pub,
                              "--policy", bad), 2)  # fmt: skip
    assert "policy line 1: bad verifier key" in line
    line = one_error_line(run("log", "verify", env.log, "--key", env.pub, "--policy", bad), 2)
    assert "policy line 1" in line
    assert "needs --policy" in one_error_line(run("verify", receipt, "--proof", proof,
                                                  "--key", env.pub), 2)  # fmt: skip
    one_error_line(run("verify", receipt, "--key", env.pub, "--proof", proof, "--policy",
                       env.d / "nope"), 3)  # fmt: skip
    line = one_error_line(run("witness", "watch", "--policy", bad, env.log), 2)
    assert "policy line 1" in line
    # witness request bodies, over HTTP and offline
    url = env.procs["w1"][1]
    host, port = url.removeprefix("http://").split(":")
    for body in (b"", b"old x\n\nfoo", b"old 0\n\nnot a checkpoint\n", b"\xff" * 100):
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("POST", "/add-checkpoint", body)
        r = conn.getresponse()
        text = r.read()
        conn.close()
        assert r.status == 400 and text.count(b"\n") == 1, (body, text)
    garbage = env.d / "garbage.note"
    garbage.write_bytes(b"not a checkpoint\n")
    line = one_error_line(run("witness", "cosign", *env.witness_args("w9"), garbage, "--old", 0), 1)
    assert "[bad_request] HTTP 400" in line
    alien = env.d / "alien.note"
    alien.write_bytes(Checkpoint.sign("other.example", 0, EMPTY_ROOT, TRUSTED))
    line = one_error_line(run("witness", "cosign", *env.witness_args("w9"), alien, "--old", 0), 1)
    assert "[unknown_origin] HTTP 404" in line
    unsigned = env.d / "attacker.note"
    unsigned.write_bytes(Checkpoint.sign(ORIGIN, 0, EMPTY_ROOT, ATTACKER))
    line = one_error_line(run("witness", "cosign", *env.witness_args("w9"), unsigned, "--old",
                              0), 1)  # fmt: skip
    assert "[unknown_log] HTTP 403" in line
    line = one_error_line(run("witness", "serve", *env.witness_args("w9"), "--listen",
                              "0.0.0.0:0"), 2)  # fmt: skip
    assert "--allow-remote" in line
    line = one_error_line(run("log", "witness", "add", env.log, "w+1234+AAAA", "http://x"), 2)
    assert "bad verifier key" in line


def test_receipt_verify_proof_imports_no_langgraph(witnessed: Env) -> None:
    env = witnessed
    receipt, proof = bundle_for(env)
    code = (
        "import sys, json\n"
        "from erasure_receipts.cli import verify_main\n"
        "rc = verify_main(sys.argv[1:])\n"
        "print(json.dumps([rc, sorted(sys.modules)]))\n"
    )
    p = subprocess.run([sys.executable, "-c", code, str(receipt), "--proof", str(proof), "--key",
                        str(env.pub), "--policy", str(env.policy()), "--quiet"],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    rc, modules = json.loads(p.stdout.strip().splitlines()[-1])
    assert rc == 0, p.stderr
    banned = ("langgraph", "langchain", "aiosqlite", "sqlite3", "_sqlite3", "psycopg", "typer",
              "jsonschema", "http")  # fmt: skip
    assert [m for m in modules if m.split(".")[0].startswith(banned)] == []
    assert "erasure_receipts.bundle" in modules


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX")
def test_watch_agrees_on_one_log(witnessed: Env) -> None:
    env = witnessed
    _, proof = bundle_for(env)
    p = run("witness", "watch", "--policy", env.policy(), env.log, proof, "--json")
    doc = json.loads(p.stdout)
    assert p.returncode == 0 and doc["ok"] and doc["checkpoints"] == 3
