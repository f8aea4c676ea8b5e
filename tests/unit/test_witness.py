"""Witnesses in process (C2SP tlog-cosignature, tlog-policy, tlog-witness): cosignature
key IDs and messages as the specification writes them, the policy parser's refusals,
the quorum check's reason codes, every ``add-checkpoint`` status, the state kept across
an injected failure between write and rename, and the split-view watch."""

from __future__ import annotations

import base64
import hashlib
import struct
import threading
import time
import uuid
from pathlib import Path

import pytest

from erasure_receipts.digest import EMPTY_ROOT
from erasure_receipts.errors import LogError, WitnessError
from erasure_receipts.log import (
    Checkpoint,
    ReceiptLog,
    WitnessEndpoint,
    cosign,
    cosignature_key_id,
    cosignature_message,
    cosigner_vkey,
    parse_vkey,
    verifier_key,
)
from erasure_receipts.policy import Policy
from erasure_receipts.receipt import Receipt
from erasure_receipts.signing import Signer
from erasure_receipts.witness import Witness, parse_add_checkpoint, serve, watch
from receipt_factory import make_receipt, make_statement

ORIGIN = "example.com/erasures"
LOG_KEY = Signer.from_seed(bytes(range(32)))
OTHER_KEY = Signer.from_seed(b"\x07" * 32)
W1 = Signer.from_seed(b"\x11" * 32)
W2 = Signer.from_seed(b"\x12" * 32)
T = 1_700_000_000


def rec(n: int) -> Receipt:
    return make_receipt(make_statement(receipt_id=str(uuid.UUID(int=n + 1, version=4))))


def note(size: int = 0, root: bytes = EMPTY_ROOT, key: Signer = LOG_KEY) -> bytes:
    return Checkpoint.sign(ORIGIN, size, root, key)


def policy_text(quorum: str = "both", extra: str = "") -> bytes:
    return (
        f"# two witnesses\nlog {verifier_key(ORIGIN, LOG_KEY.public_key)}\n"
        f"witness w1 {cosigner_vkey('w1.example', W1.public_key)}\n"
        f"\twitness  w2 {cosigner_vkey('w2.example', W2.public_key)} http://127.0.0.1:1\n"
        f"{extra}group both all w1 w2\ngroup one any w1 w2\nquorum {quorum}\n"
    ).encode()


# -- cosignatures ---------------------------------------------------------------------------


def test_cosignature_bytes_follow_the_specification() -> None:
    n = note()
    line = cosign(n, "w1.example", W1, T)
    head, name, b64 = line.decode().rstrip("\n").split(" ")
    assert head == "\u2014" and name == "w1.example"
    blob = base64.b64decode(b64)
    kid = hashlib.sha256(b"w1.example\n\x04" + W1.public_key.raw).digest()[:4]
    assert blob[:4] == kid == cosignature_key_id("w1.example", W1.public_key)
    assert struct.unpack(">Q", blob[4:12])[0] == T
    text = Checkpoint.parse(n).text
    msg = b"cosignature/v1\ntime 1700000000\n" + text
    assert cosignature_message(text, T) == msg
    assert W1.public_key.verify(blob[12:], msg)
    cp = Checkpoint.parse(n + line)
    assert cp.cosigned_by("w1.example", W1.public_key) == T
    assert cp.cosigned_by("w2.example", W2.public_key) is None  # unknown: ignored
    assert cp.signed_by(LOG_KEY.public_key) is True  # the log's own signature still found


def test_a_forged_cosignature_is_refused_and_a_wrong_name_ignored() -> None:
    n = note()
    line = bytearray(cosign(n, "w1.example", W1, T))
    cp = Checkpoint.parse(n + cosign(n, "w1.example", W1, T + 1).replace(b"w1.example", b"wX"))
    assert cp.cosigned_by("w1.example", W1.public_key) is None
    other = Checkpoint.parse(note(1, b"\x01" * 32))
    forged = other.text + b"\n" + b"".join(other.signature_lines()) + bytes(line)
    with pytest.raises(LogError) as e:
        Checkpoint.parse(forged).cosigned_by("w1.example", W1.public_key)
    assert e.value.reason == "bad_cosignature"


def test_vkeys_round_trip_and_refuse_a_wrong_key_id() -> None:
    v = cosigner_vkey("w1.example", W1.public_key)
    assert parse_vkey(v) == ("w1.example", 4, W1.public_key)
    assert parse_vkey(verifier_key(ORIGIN, LOG_KEY.public_key))[1] == 1
    name, kid, key = v.split("+")
    for bad in (f"{name}+00000000+{key}", f"{name}+{kid}", f"other+{kid}+{key}", "x+y+z"):
        with pytest.raises(LogError) as e:
            parse_vkey(bad)
        assert e.value.reason == "bad_vkey"


# -- policies -----------------------------------------------------------------------------------


def cosigned(*witnesses: tuple[str, Signer], key: Signer = LOG_KEY, size: int = 0) -> bytes:
    n = note(size, EMPTY_ROOT if not size else b"\x02" * 32, key)
    return n + b"".join(cosign(n, name, s, T) for name, s in witnesses)


def test_policy_quorum_all_any_k_and_none() -> None:
    both = Policy.parse(policy_text("both"))
    assert set(both.check(cosigned(("w1.example", W1), ("w2.example", W2))).cosigners) == {
        "w1",
        "w2",
    }
    with pytest.raises(WitnessError) as e:
        both.check(cosigned(("w1.example", W1)))
    assert e.value.reason == "quorum_not_met"
    assert "2 of w1, w2" in e.value.message and "\n" not in e.value.message
    assert Policy.parse(policy_text("one")).check(cosigned(("w2.example", W2))).cosigners
    assert Policy.parse(policy_text("w1")).check(cosigned(("w1.example", W1)))
    k = Policy.parse(policy_text("k", "witness w3 " + cosigner_vkey("w3", OTHER_KEY.public_key)
                                 + "\ngroup k 2 w1 w2 w3\n"))  # fmt: skip
    assert k.check(cosigned(("w1.example", W1), ("w3", OTHER_KEY))).cosigners.keys() == {"w1", "w3"}
    assert Policy.parse(policy_text("none")).check(cosigned()).size == 0


def test_policy_check_reason_codes() -> None:
    p = Policy.parse(policy_text("both"))
    cases = {
        "unknown_log": cosigned(("w1.example", W1), ("w2.example", W2), key=OTHER_KEY),
        "quorum_not_met": cosigned(("w1.example", W1)),
    }
    bad_w2 = cosigned(("w1.example", W1), ("w2.example", W2))
    lines = bad_w2.split(b"\n")
    blob = bytearray(base64.b64decode(lines[-2].split(b" ")[2]))
    blob[-1] ^= 1
    lines[-2] = b"\xe2\x80\x94 w2.example " + base64.b64encode(bytes(blob))
    cases["bad_cosignature"] = b"\n".join(lines)
    sig = bytearray(base64.b64decode(lines[4].split(b" ")[2]))
    sig[-1] ^= 1
    lines[4] = f"\u2014 {ORIGIN} ".encode() + base64.b64encode(bytes(sig))
    cases["bad_log_signature"] = b"\n".join(lines)
    alien = Checkpoint.sign("elsewhere.example/log", 0, EMPTY_ROOT, LOG_KEY)
    cases["unknown_log "] = alien
    for reason, data in cases.items():
        with pytest.raises(WitnessError) as e:
            p.check(data)
        assert e.value.reason == reason.strip(), reason


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (b"quorum w9\n", "not a witness or group defined above"),
        (b"group g any w1\nquorum g\n", "not defined above"),
        (b"", "no quorum line"),
        (b"quorum none\nquorum none\n", "nothing may follow"),
        (b"witness none x\nquorum none\n", "'none' is predefined"),
        (b"witness w1 KEY1\nwitness w1 KEY2\nquorum none\n", "already defined"),
        (b"witness w1 KEY1\nwitness w2 KEY1\nquorum none\n", "duplicate key"),
        (b"witness w1 KEY1\ngroup g 2 w1\nquorum g\n", "threshold 2"),
        (b"witness w1 KEY1\ngroup g 01 w1\nquorum g\n", "threshold '01'"),
        (b"witness w1 KEY1\ngroup g any w1 w1\nquorum g\n", "at most once"),
        (b"witness w1 KEY1\ngroup g any none\nquorum g\n", "'none' cannot"),
        (b"log KEY1\nquorum none\n", "type 0x01"),
        (b"witness w1 LOGKEY\nquorum none\n", "type 0x04"),
        (b"frobnicate\nquorum none\n", "unknown line type"),
        (b"quorum none\x0b\n", "control character"),
        (b"quorum \xff\n", "not UTF-8"),
        (b"witness w1 a+b+c\nquorum none\n", "bad verifier key"),
    ],
)
def test_policy_parser_refusals(text: bytes, needle: str) -> None:
    text = text.replace(b"KEY1", cosigner_vkey("w1.example", W1.public_key).encode())
    text = text.replace(b"KEY2", cosigner_vkey("w2.example", W2.public_key).encode())
    text = text.replace(b"LOGKEY", verifier_key(ORIGIN, LOG_KEY.public_key).encode())
    with pytest.raises(WitnessError) as e:
        Policy.parse(text)
    assert e.value.reason == "malformed_policy"
    assert needle in e.value.message and "\n" not in e.value.message


# -- the witness ------------------------------------------------------------------------------


@pytest.fixture
def log(tmp_path: Path) -> ReceiptLog:
    rl = ReceiptLog(tmp_path / "log", LOG_KEY, origin=ORIGIN)
    for i in range(3):
        rl.append(rec(i))
    return rl


def request(rl: ReceiptLog, old: int, note: bytes | None = None) -> bytes:
    proof = rl.consistency_proof(old, note).path if old else []
    lines = b"".join(base64.b64encode(h) + b"\n" for h in proof)
    return b"old %d\n" % old + lines + b"\n" + (note or rl.checkpoint())


def test_add_checkpoint_statuses(tmp_path: Path, log: ReceiptLog) -> None:
    w = Witness(tmp_path / "w", W1, "w1.example", {ORIGIN: LOG_KEY.public_key}, clock=lambda: T)
    head = log.checkpoint()
    r = w.add_checkpoint(request(log, 0))
    assert (
        r.status == 200
        and Checkpoint.parse(head + r.body).cosigned_by("w1.example", W1.public_key) == T
    )
    record = w.latest(ORIGIN)
    assert record is not None and record.size == 3
    assert w.add_checkpoint(request(log, 3)).status == 200  # same size, same root: cosigned
    stale = w.add_checkpoint(b"old 0\n\n" + head)
    assert (stale.status, stale.content_type, stale.body) == (409, "text/x.tlog.size", b"3\n")
    fork = Checkpoint.sign(ORIGIN, 3, b"\x05" * 32, LOG_KEY)
    assert w.add_checkpoint(b"old 3\n\n" + fork).status == 409  # same size, other root
    log.append(rec(9))
    good = request(log, 3)
    bad_proof = good.replace(good.split(b"\n")[1], base64.b64encode(b"\x00" * 32), 1)
    assert w.add_checkpoint(bad_proof).status == 422
    assert w.add_checkpoint(b"old 5\n\n" + log.checkpoint()).status == 400  # old > new
    alien = Checkpoint.sign("elsewhere.example", 1, b"\x01" * 32, LOG_KEY)
    assert w.add_checkpoint(b"old 0\n\n" + alien).status == 404
    assert w.add_checkpoint(b"old 3\n\n" + note(4, b"\x01" * 32, OTHER_KEY)).status == 403
    for body in (b"", b"old 01\n\n" + head, b"old 0\nnot base64!\n\n" + head, b"old 0\n" + head,
                 b"old 0\n\n" + b"garbage\n"):  # fmt: skip
        r = w.add_checkpoint(body)
        assert r.status == 400 and r.body.count(b"\n") == 1, body
    assert w.latest(ORIGIN).size == 3  # type: ignore[union-attr]
    assert w.add_checkpoint(good).status == 200
    assert w.latest(ORIGIN).size == 4  # type: ignore[union-attr]


def test_request_parser() -> None:
    assert parse_add_checkpoint(b"old 0\n\nX") == (0, [], b"X")
    with pytest.raises(WitnessError):
        parse_add_checkpoint(b"old 1\n" + (base64.b64encode(bytes(32)) + b"\n") * 64 + b"\nX")


def test_a_failure_between_write_and_rename_keeps_the_old_record(
    tmp_path: Path, log: ReceiptLog
) -> None:
    w = Witness(tmp_path / "w", W1, "w1.example", {ORIGIN: LOG_KEY.public_key})
    assert w.add_checkpoint(request(log, 0)).status == 200
    before = w.record_path(ORIGIN).read_bytes()
    log.append(rec(9))

    def fail() -> None:
        raise OSError("disk gone")

    w._before_rename = fail
    with pytest.raises(OSError):
        w.add_checkpoint(request(log, 3))
    assert w.record_path(ORIGIN).read_bytes() == before
    w._before_rename = None
    assert w.add_checkpoint(request(log, 3)).status == 200  # the stale temp file is replaced
    assert w.latest(ORIGIN).size == 4  # type: ignore[union-attr]


def test_concurrent_requests_never_roll_back(tmp_path: Path, log: ReceiptLog) -> None:
    w = Witness(tmp_path / "w", W1, "w1.example", {ORIGIN: LOG_KEY.public_key})
    assert w.add_checkpoint(request(log, 0)).status == 200
    notes = []
    for i in range(4):
        log.append(rec(100 + i))
        notes.append(log.checkpoint())
    bodies = [request(log, 3, n) for n in notes]  # all from size 3: only one may win
    statuses: list[int] = []
    threads = [threading.Thread(target=lambda b=b: statuses.append(w.add_checkpoint(b).status))
               for b in bodies]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200, 409, 409, 409]


def test_watch_finds_a_split_view() -> None:
    a = note(3, b"\x01" * 32)
    b = note(3, b"\x02" * 32)
    keys = {ORIGIN: LOG_KEY.public_key}
    assert watch([("a", a), ("a2", a)], keys) == []
    found = watch([("a", a), ("b", b), ("c", note(3, b"\x01" * 32, OTHER_KEY))], keys)
    assert [f.reason for f in found] == ["split_view", "unknown_log"]
    found = watch([("a", a)], keys, proofs=[("copy", lambda size: (5, b"\x09" * 32))])
    assert [f.reason for f in found] == ["not_consistent"]


def test_a_push_whose_answer_was_lost_is_caught_up(tmp_path: Path, log: ReceiptLog) -> None:
    """The witness stored a checkpoint but its answer never reached the log (the log's
    status is older): the push gets 409 with that size and succeeds from it."""
    w = Witness(tmp_path / "w", W1, "w1.example", {ORIGIN: LOG_KEY.public_key})
    urls: list[str] = []
    threading.Thread(target=serve, args=(w,), kwargs={"ready": urls.append}, daemon=True).start()
    while not urls:
        time.sleep(0.01)
    endpoint = WitnessEndpoint("w1.example", W1.public_key, urls[0])
    rl = ReceiptLog(log.directory, LOG_KEY, witnesses=[endpoint])
    rl.append(rec(10))
    assert rl.witness_status()["w1.example"]["size"] == 4
    quiet = ReceiptLog(log.directory, LOG_KEY, witnesses=[])
    quiet.append(rec(11))
    assert w.add_checkpoint(request(quiet, 4)).status == 200  # the answer "lost"
    status = rl.push_witnesses()["w1.example"]
    assert status["error"] is None and status["cosigned_size"] == 5
    cp = Checkpoint.parse(rl.cosigned())
    assert cp.size == 5 and cp.cosigned_by("w1.example", W1.public_key) is not None
    quiet.append(rec(12))
    other = Witness(tmp_path / "w", W1, "w1.example", {ORIGIN: LOG_KEY.public_key})
    assert other.latest(ORIGIN).size == 5  # type: ignore[union-attr]


def test_every_witness_reason_code_is_in_the_spec() -> None:
    spec = (Path(__file__).resolve().parents[2] / "RECEIPT_SPEC.md").read_text("utf-8")
    section = spec[spec.index("### 10.8 Witnesses") :]
    doc = WitnessError.__doc__ or ""
    codes = [c.strip("`,. ") for c in doc.split("``")[1::2]]
    assert len(codes) >= 12
    missing = [c for c in codes if c not in section]
    assert missing == []
