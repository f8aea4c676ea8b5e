"""The receipt log (issue 10): RFC 9162 consistency proofs against CT test vectors, C2SP
signed notes against Go's sumdb/note vector, tamper detection naming the first bad
entry, checkpoints by other keys, kill -9 at random and chosen points, concurrent
appenders in several processes, savers writing into a log, ``receipt verify --log``."""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from erasure_receipts import digest
from erasure_receipts.app import app
from erasure_receipts.cli import verify_main
from erasure_receipts.digest import (
    MerkleTree,
    audit_path,
    consistency_path,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    merkle_root,
    subtree_root,
    verify_consistency,
)
from erasure_receipts.errors import MalformedReceiptError
from erasure_receipts.log import (
    Checkpoint,
    LogConflictError,
    LogError,
    ReceiptLog,
    note_key_id,
    read_entries,
    verifier_key,
    verify_log,
)
from erasure_receipts.receipt import Receipt
from erasure_receipts.signing import Signer
from receipt_factory import ATTACKER, TRUSTED, make_receipt, make_statement

TESTS = Path(__file__).resolve().parents[1]
ORIGIN = "example.com/erasures"

# -- RFC 9162 consistency proofs: Certificate Transparency test vectors ------------------
# Leaves, roots and proofs as published with the CT reference implementation (RFC 6962
# test data, reused by transparency-dev/merkle: testonly/constants.go, reference_test.go
# and testdata/consistency/).

CT_LEAVES = [
    bytes.fromhex(x)
    for x in ("", "00", "10", "2021", "3031", "40414243", "5051525354555657",
              "606162636465666768696a6b6c6d6e6f")
]  # fmt: skip
CT_HASHES = [leaf_hash(x) for x in CT_LEAVES]
CT_ROOTS = [
    bytes.fromhex(x)
    for x in (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    )
]
CT_CONSISTENCY = [
    (1, 1, []),
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]  # fmt: skip
# testdata/consistency/ (base64 as published): (size1, size2, root1, root2, proof, accept)
CT_CONSISTENCY_CASES = [
    (1, 8, "bjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0=",
     "XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=",
     ["lqKW0iTyhcZ77pPDD4owkVfw2qNdxbh+QQt4YwoJz8c=",
      "Xwg/ChozygdqlSeYMlgNs+DvRYS9/x9UyKNg9Q3jAx4=",
      "a0eq8p7jwq+a+Im8H7klTavTEXfxYjLdaqsDXKOb9uQ="], True),
    (6, 8, "duZ9rbzfHhDht03cYIq9L5jfsW+851J3tSMqEn8gh+8=",
     "XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=",
     ["DrxdNDf74tsVi58Sah0RjjCBgQMdCpSfje3t68VY72o=",
      "yoVOoSjtBQtBs1/8G4e46yveRh6eO1WW7Oa51ZdaCuA=",
      "037kGJdt2VdTwcc4Yrk5j6Kiz5tP8P3+izDNlSCWFLc="], True),
    (2, 5, "+sVCA+fMaWzw38tCySodnbr3CtnmIfS9jZhmLwDjwSU=",
     "Tju7H3tHjc/nH7YxYxUZo7yhLJrvyhYSv85ME6hiZNQ=",
     ["Xwg/ChozygdqlSeYMlgNs+DvRYS9/x9UyKNg9Q3jAx4=",
      "vBoGQ7EuTS18d5GPROD095qDi2z57FtcKD4fTYhZnms="], True),
    (6, 7, "duZ9rbzfHhDht03cYIq9L5jfsW+851J3tSMqEn8gh+8=",
     "3bib5AOAnjJXUNPSY814kpwpQreUKjS3fhIslZSnTIw=",
     ["DrxdNDf74tsVi58Sah0RjjCBgQMdCpSfje3t68VY72o=",
      "sIaT7C5yFZcTBkHoIR5+7cy0wmQTlj7ubB4u0W/7Gl8=",
      "037kGJdt2VdTwcc4Yrk5j6Kiz5tP8P3+izDNlSCWFLc="], True),
    # swapped roots
    (6, 8, "XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=",
     "duZ9rbzfHhDht03cYIq9L5jfsW+851J3tSMqEn8gh+8=",
     ["DrxdNDf74tsVi58Sah0RjjCBgQMdCpSfje3t68VY72o=",
      "yoVOoSjtBQtBs1/8G4e46yveRh6eO1WW7Oa51ZdaCuA=",
      "037kGJdt2VdTwcc4Yrk5j6Kiz5tP8P3+izDNlSCWFLc="], False),
    # truncated proof
    (1, 8, "bjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0=",
     "XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=",
     ["lqKW0iTyhcZ77pPDD4owkVfw2qNdxbh+QQt4YwoJz8c=",
      "Xwg/ChozygdqlSeYMlgNs+DvRYS9/x9UyKNg9Q3jAx4="], False),
    # modified proof (bit 4 of element 1)
    (6, 7, "duZ9rbzfHhDht03cYIq9L5jfsW+851J3tSMqEn8gh+8=",
     "3bib5AOAnjJXUNPSY814kpwpQreUKjS3fhIslZSnTIw=",
     ["DrxdNDf74tsVi58Sah0RjjCBgQMdCpSfje3t68VY72o=",
      "oIaT7C5yFZcTBkHoIR5+7cy0wmQTlj7ubB4u0W/7Gl8=",
      "037kGJdt2VdTwcc4Yrk5j6Kiz5tP8P3+izDNlSCWFLc="], False),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new", "proof"), CT_CONSISTENCY)
def test_consistency_proof_ct_vectors(old: int, new: int, proof: list[str]) -> None:
    got = consistency_proof(CT_HASHES[:new], old)
    assert [p.hex() for p in got] == proof
    assert verify_consistency(old, new, CT_ROOTS[old], CT_ROOTS[new], got)


@pytest.mark.parametrize("case", CT_CONSISTENCY_CASES)
def test_consistency_verification_ct_testdata(case: tuple[Any, ...]) -> None:
    old, new, r1, r2, proof, accept = case
    b = base64.b64decode
    ok = verify_consistency(old, new, b(r1), b(r2), [b(p) for p in proof])
    assert ok is accept


def test_consistency_wrong_old_root_is_refused() -> None:
    # not a power of two: the old root is only consulted while it is rebuilt
    proof = consistency_proof(CT_HASHES, 6)
    assert verify_consistency(6, 8, CT_ROOTS[6], CT_ROOTS[8], proof)
    assert not verify_consistency(6, 8, CT_ROOTS[5], CT_ROOTS[8], proof)
    assert not verify_consistency(6, 8, CT_ROOTS[6], CT_ROOTS[8], [*proof, CT_HASHES[0]])
    assert not verify_consistency(8, 6, CT_ROOTS[8], CT_ROOTS[6], proof)
    assert not verify_consistency(2, 5, CT_ROOTS[2], CT_ROOTS[5], [])
    assert verify_consistency(4, 4, CT_ROOTS[4], CT_ROOTS[4], [])
    assert not verify_consistency(4, 4, CT_ROOTS[4], CT_ROOTS[4], [CT_ROOTS[2]])
    assert verify_consistency(0, 5, digest.EMPTY_ROOT, CT_ROOTS[5], [])
    assert not verify_consistency(0, 5, CT_ROOTS[1], CT_ROOTS[5], [])


def test_every_size_pair_and_the_node_store_agree() -> None:
    """All (old, new) pairs up to 70 leaves verify, with a truncated proof refused; the
    O(log n) proofs from stored perfect-subtree roots equal the O(n) ones."""
    for n in range(1, 71):
        hashes = [leaf_hash(bytes([i % 256, i // 256])) for i in range(n)]
        tree, store = MerkleTree(), []
        for h in hashes:
            store += tree.append_hash_nodes(h)
        assert len(store) == 2 * n - n.bit_count() and tree.root() == merkle_root(hashes)
        resumed = MerkleTree.from_perfect_roots(n, tree.perfect_roots())
        assert resumed.root() == tree.root() and resumed.size == n

        def perfect(height: int, i: int, store: list[bytes] = store) -> bytes:
            leaf = ((i + 1) << height) - 1
            return store[2 * leaf - leaf.bit_count() + height]

        def root(lo: int, hi: int) -> bytes:
            return subtree_root(lo, hi, perfect)

        for i in range(n):
            assert audit_path(i, n, root) == inclusion_proof(hashes, i)
        for m in range(n + 1):
            proof = consistency_path(m, n, root)
            assert proof == consistency_proof(hashes, m)
            assert verify_consistency(m, n, merkle_root(hashes[:m]), tree.root(), proof)
            if proof:
                assert not verify_consistency(m, n, merkle_root(hashes[:m]), tree.root(),
                                              proof[:-1])  # fmt: skip


# -- C2SP signed notes and checkpoints ----------------------------------------------------

# golang.org/x/mod/sumdb/note's example key and signed message (also in the C2SP tests)
GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    b"If you think cryptography is the answer to your problem,\n"
    b"then you don't know what your problem is.\n"
)
GO_SIG = (
    "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM="
)
C2SP_EXAMPLE = (
    "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n"
    "\u2014 example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5"
    "/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
).encode()


def test_signed_note_matches_go_sumdb_note() -> None:
    seed = base64.b64decode(GO_SKEY.split("+", 4)[4])
    assert seed[0] == 1
    signer = Signer.from_seed(seed[1:])
    assert verifier_key("PeterNeumann", signer.public_key) == GO_VKEY
    assert note_key_id("PeterNeumann", signer.public_key).hex() == "c74f20a3"
    blob = note_key_id("PeterNeumann", signer.public_key) + signer.sign(GO_TEXT)
    assert base64.b64encode(blob).decode() == GO_SIG


def test_checkpoint_parses_the_c2sp_example_and_ignores_unknown_keys() -> None:
    cp = Checkpoint.parse(C2SP_EXAMPLE)
    assert (cp.origin, cp.size) == ("example.com/behind-the-sofa", 20852163)
    assert cp.root == base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=")
    assert cp.signed_by(TRUSTED.public_key) is None
    with pytest.raises(LogError, match="not signed by a trusted key"):
        cp.verify([TRUSTED.public_key])


def test_checkpoint_sign_verify_and_cosignatures() -> None:
    note = Checkpoint.sign(ORIGIN, 5, CT_ROOTS[5], TRUSTED)
    text, _, sig = note.decode().rpartition("\n\n")
    assert text == f"{ORIGIN}\n5\n{base64.b64encode(CT_ROOTS[5]).decode()}"
    assert sig.startswith(f"\u2014 {ORIGIN} ") and sig.endswith("\n")
    cp = Checkpoint.parse(note)
    assert cp.verify([ATTACKER.public_key, TRUSTED.public_key]) == TRUSTED.public_key
    with pytest.raises(LogError):
        cp.verify([ATTACKER.public_key])
    # a witness cosignature line (another name) is ignored, a forged one by our key is not
    witness = note + "\u2014 witness.example/w1 AAAAAAAAAAAA\n".encode()
    assert Checkpoint.parse(witness).verify([TRUSTED.public_key]) == TRUSTED.public_key
    forged = note.replace(b"\n5\n", b"\n6\n")
    with pytest.raises(LogError, match="does not verify"):
        Checkpoint.parse(forged).verify([TRUSTED.public_key])


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"o\n5\nAAAA\n",  # no signatures
        b"o\n05\n" + base64.b64encode(bytes(32)) + b"\n\n\xe2\x80\x94 o AAAAAAAA\n",
        b"o\n-5\n" + base64.b64encode(bytes(32)) + b"\n\n\xe2\x80\x94 o AAAAAAAA\n",
        b"o\n5\n" + base64.b64encode(bytes(31)) + b"\n\n\xe2\x80\x94 o AAAAAAAA\n",
        b"o\n5\n" + base64.b64encode(bytes(32))[:-1] + b"\n\n\xe2\x80\x94 o AAAAAAAA\n",
        b"o\n5\n" + base64.b64encode(bytes(32)) + b"\n\n- o AAAAAAAA\n",
        b"o\n5\n" + base64.b64encode(bytes(32)) + b"\n\n\xe2\x80\x94 o AAAA\n",
        b"o\n5\n" + base64.b64encode(bytes(32)) + b"\n\n\xe2\x80\x94 o AAAAAAAA",
        b"o\t\n5\n" + base64.b64encode(bytes(32)) + b"\n\n\xe2\x80\x94 o AAAAAAAA\n",
        b"o\n\n" + base64.b64encode(bytes(32)) + b"\n\n\xe2\x80\x94 o AAAAAAAA\n",
        b"\xff\n5\n" + base64.b64encode(bytes(32)) + b"\n\n\xe2\x80\x94 o AAAAAAAA\n",
    ],
)
def test_malformed_checkpoints_are_refused(bad: bytes) -> None:
    with pytest.raises(LogError) as info:
        Checkpoint.parse(bad)
    assert info.value.reason == "bad_checkpoint"


# -- the log ---------------------------------------------------------------------------------


def receipts(n: int, start: int = 0) -> list[Receipt]:
    return [
        make_receipt(make_statement(receipt_id=str(uuid.UUID(int=start + i + 1, version=4))))
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def twelve() -> list[Receipt]:
    return receipts(12)


def new_log(path: Path, rs: list[Receipt]) -> ReceiptLog:
    log = ReceiptLog(path, signer=TRUSTED, origin=ORIGIN)
    for r in rs:
        log.append(r)
    return log


def test_append_proofs_and_idempotence(tmp_path: Path, twelve: list[Receipt]) -> None:
    log = new_log(tmp_path / "log", twelve)
    assert log.size == 12 and log.origin == ORIGIN
    hashes = [leaf_hash(r.to_json()) for r in twelve]
    assert log.root() == merkle_root(hashes)
    cp = Checkpoint.parse(log.checkpoint())
    assert (cp.size, cp.root) == (12, merkle_root(hashes))
    assert cp.verify([TRUSTED.public_key])
    assert (tmp_path / "log" / "checkpoint").read_bytes() == log.checkpoint()
    # identical bytes: the existing index, nothing appended; a batch dedupes too
    assert log.append(twelve[3]) == 3
    assert log.append_many([twelve[5], twelve[5], twelve[0]]) == [5, 5, 0]
    assert log.size == 12
    for i in range(12):
        p = log.inclusion_proof(i)
        assert p.audit_path == inclusion_proof(hashes, i) and p.verify(twelve[i].to_json())
        assert not p.verify(twelve[(i + 1) % 12].to_json())
        assert log.index_of(twelve[i]) == i and log.entry(i) == twelve[i].to_json()
    for m in range(13):
        c = log.consistency_proof(m)
        assert c.path == consistency_proof(hashes, m) and c.verify()
    assert [d for _, d in read_entries(tmp_path / "log")] == [r.to_json() for r in twelve]
    # another process / object sees the same log, read-only
    ro = ReceiptLog(tmp_path / "log")
    assert ro.size == 12 and ro.index_of(twelve[11]) == 11 and ro.inclusion_proof(7).verify()
    with pytest.raises(LogError):
        ro.append(twelve[0])


def test_conflicts_keys_and_non_logs_are_refused(tmp_path: Path, twelve: list[Receipt]) -> None:
    log = new_log(tmp_path / "log", twelve[:2])
    other = make_receipt(twelve[0].statement, ATTACKER)  # same receipt id, other bytes
    with pytest.raises(LogConflictError):
        log.append(other)
    assert log.size == 2
    with pytest.raises(LogError, match="one key"):
        ReceiptLog(tmp_path / "log", signer=ATTACKER)
    with pytest.raises(LogError, match="origin"):
        ReceiptLog(tmp_path / "log", signer=TRUSTED, origin="other.example/log")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "notes.txt").write_text("x")
    with pytest.raises(LogError, match="not empty"):
        ReceiptLog(tmp_path / "dir", signer=TRUSTED)
    with pytest.raises(LogError, match="not a receipt log"):
        ReceiptLog(tmp_path / "dir")
    with pytest.raises(LogError, match="spaces"):
        ReceiptLog(tmp_path / "new", signer=TRUSTED, origin="has space")
    with pytest.raises(MalformedReceiptError):
        log.append(b"{}")


def test_derived_files_are_rebuilt(tmp_path: Path, twelve: list[Receipt]) -> None:
    d = tmp_path / "log"
    new_log(d, twelve[:9])
    (d / "tree").write_bytes(b"")
    (d / "index").write_bytes((d / "index").read_bytes()[:100])
    ro = ReceiptLog(d)  # read-only: what the files lack is kept in memory
    assert ro.inclusion_proof(8).verify(twelve[8].to_json()) and ro.index_of(twelve[4]) == 4
    log = ReceiptLog(d, signer=TRUSTED)  # a writer repairs them
    assert log.append(twelve[9]) == 9
    assert (d / "tree").stat().st_size == 32 * (2 * 10 - 2)
    assert log.inclusion_proof(3).verify(twelve[3].to_json())


# -- tampering: `receipt log verify` names the first bad entry ------------------------------


def records(d: Path) -> list[tuple[int, bytes, bytes]]:
    data = (d / "entries").read_bytes()
    pos, out = 24, []
    while pos < len(data):
        tag, n = struct.unpack_from(">BI", data, pos)
        out.append((tag, data[pos + 5 : pos + 5 + n], data[pos + 5 + n : pos + 37 + n]))
        pos += 37 + n
    return out


def write_records(d: Path, recs: list[tuple[int, bytes, bytes]]) -> None:
    body = b"".join(struct.pack(">BI", t, len(p)) + p + h for t, p, h in recs)
    (d / "entries").write_bytes(b"erasure-receipts-log v1\n" + body)


def entry_positions(recs: list[tuple[int, bytes, bytes]]) -> list[int]:
    return [i for i, r in enumerate(recs) if r[0] == 0x45]


def cli(*args: Any) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def log_verify(d: Path, pub: Path, *extra: Any) -> tuple[int, dict[str, Any]]:
    res = cli("log", "verify", d, "--key", pub, "--json", "--jobs", "1", *extra)
    return res.exit_code, json.loads(res.stdout)


def _delete(recs: list[Any], i: int) -> None:
    del recs[entry_positions(recs)[i]]


def _delete_with_checkpoint(recs: list[Any], i: int) -> None:
    p = entry_positions(recs)[i]
    del recs[p : p + 2]


def _alter(recs: list[Any], i: int) -> None:
    p = entry_positions(recs)[i]
    t, payload, h = recs[p]
    recs[p] = (t, payload.replace(b'"rows": 3', b'"rows": 4'), h)


def _alter_rehash(recs: list[Any], i: int) -> None:
    p = entry_positions(recs)[i]
    t, payload, _ = recs[p]
    new = payload.replace(b'"rows": 3', b'"rows": 4')
    recs[p] = (t, new, leaf_hash(new))


def _reorder(recs: list[Any], i: int) -> None:
    a, b = entry_positions(recs)[i], entry_positions(recs)[i + 2]
    recs[a], recs[b] = recs[b], recs[a]


def _truncate(recs: list[Any], i: int) -> None:
    del recs[entry_positions(recs)[i] :]


TAMPER = {
    "delete": (_delete, "entry_missing"),
    "delete_with_checkpoint": (_delete_with_checkpoint, "entry_missing"),
    "alter": (_alter, "entry_altered"),
    "alter_and_rehash": (_alter_rehash, "checkpoint_mismatch"),
    "reorder": (_reorder, "checkpoint_mismatch"),
    "truncate": (_truncate, "entry_missing"),
}


@pytest.mark.parametrize("how", sorted(TAMPER))
def test_tampering_is_named_at_the_first_bad_entry(
    tmp_path: Path, pub_pem: Path, twelve: list[Receipt], how: str
) -> None:
    d = tmp_path / "log"
    new_log(d, twelve[:8])
    code, doc = log_verify(d, pub_pem)
    assert code == 0 and doc["ok"] and doc["tree_size"] == 8 and doc["receipts_verified"] == 8
    fn, reason = TAMPER[how]
    for i in (0, 3, 5):
        recs = records(d)
        saved = (d / "entries").read_bytes()
        fn(recs, i)
        write_records(d, recs)
        code, doc = log_verify(d, pub_pem)
        assert code == 1 and not doc["ok"], (how, i, doc)
        assert doc["first_bad_index"] == i, (how, i, doc["problems"])
        assert doc["problems"][0]["reason"] == reason, (how, i, doc["problems"])
        res = cli("log", "verify", d, "--key", pub_pem, "--jobs", "1")
        assert res.exit_code == 1 and f"first bad entry: {i}" in res.stderr
        assert "Traceback" not in res.stderr
        # An appender resumes from the derived files and does not re-hash the whole log
        # (that is this command's job), but a log that lost entries is never signed on.
        if how.startswith(("delete", "truncate")):
            with pytest.raises(LogError):
                ReceiptLog(d, signer=TRUSTED).append(twelve[9])
        (d / "entries").write_bytes(saved)
    assert log_verify(d, pub_pem)[0] == 0


def test_checkpoints_by_another_key_are_rejected(
    tmp_path: Path, pub_pem: Path, twelve: list[Receipt]
) -> None:
    d = tmp_path / "log"
    log = new_log(d, twelve[:4])
    old = tmp_path / "old.checkpoint"
    old.write_bytes(log.checkpoint())
    for r in twelve[4:7]:
        log.append(r)
    code, doc = log_verify(d, pub_pem, "--checkpoint", old)
    assert code == 0 and doc["consistency"]["old_size"] == 4
    assert verify_consistency(
        4, 7, bytes.fromhex(doc["consistency"]["old_root"]), log.root(),
        [bytes.fromhex(h) for h in doc["consistency"]["consistency_path"]],
    )  # fmt: skip
    # the published head re-signed by another key (same tree): rejected
    head = (d / "checkpoint").read_bytes()
    cp = Checkpoint.parse(head)
    (d / "checkpoint").write_bytes(Checkpoint.sign(ORIGIN, cp.size, cp.root, ATTACKER))
    code, doc = log_verify(d, pub_pem)
    assert code == 1 and doc["problems"][0]["reason"] == "bad_checkpoint"
    (d / "checkpoint").write_bytes(head)
    # an old checkpoint by another key, or of another log, is rejected too
    old.write_bytes(Checkpoint.sign(ORIGIN, 4, Checkpoint.parse(old.read_bytes()).root, ATTACKER))
    code, doc = log_verify(d, pub_pem, "--checkpoint", old)
    assert code == 1 and doc["problems"][0]["reason"] == "bad_checkpoint"
    # a log rolled back below the old checkpoint (head replaced by an older signed one)
    old.write_bytes(log.checkpoint())
    recs = records(d)
    write_records(d, recs[: entry_positions(recs)[5]])
    root5 = merkle_root(leaf_hash(r.to_json()) for r in twelve[:5])
    (d / "checkpoint").write_bytes(Checkpoint.sign(ORIGIN, 5, root5, TRUSTED))
    code, doc = log_verify(d, pub_pem, "--checkpoint", old)
    assert code == 1 and doc["first_bad_index"] == 5
    assert doc["problems"][0]["reason"] == "not_consistent"


def test_receipts_that_do_not_verify_are_named(tmp_path: Path, pub_pem: Path) -> None:
    d = tmp_path / "log"
    rs = receipts(3)
    forged = make_receipt(make_statement(receipt_id=str(uuid.UUID(int=99, version=4))), ATTACKER)
    new_log(d, [rs[0], forged, rs[1]])
    code, doc = log_verify(d, pub_pem)
    assert code == 1 and doc["first_bad_index"] == 1
    assert doc["problems"][0]["reason"] == "receipt_invalid"
    assert "untrusted_key" in doc["problems"][0]["message"]


# -- crashes: kill -9 at random and at chosen points ------------------------------------------

CHILD = r"""
import os, signal, sys, uuid
sys.path.insert(0, {tests!r})
from receipt_factory import TRUSTED, make_receipt, make_statement
import erasure_receipts.log as L

d, start, count, crash = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rs = [make_receipt(make_statement(receipt_id=str(uuid.UUID(int=start + i + 1, version=4))))
      for i in range(count)]
log = L.ReceiptLog(d, signer=TRUSTED, origin="example.com/erasures")
if crash != "random":
    point, after = crash.split(":")
    calls = {{"n": 0}}
    def die():
        os.kill(os.getpid(), signal.SIGKILL)
    def due():
        calls["n"] += 1
        return calls["n"] > int(after)
    if point == "mid_write":
        orig_write = L._write_all
        def w(fd, data):
            if len(data) > 1000 and due():
                os.write(fd, data[: len(data) // 2]); die()
            orig_write(fd, data)
        L._write_all = w
    elif point == "after_fsync":
        orig_sync = L._fdatasync
        def s(fd):
            orig_sync(fd)
            if due(): die()
        L._fdatasync = s
    elif point == "before_publish":
        orig_pub = L._publish
        def p(d_, note):
            if due(): die()
            orig_pub(d_, note)
        L._publish = p
    elif point == "mid_derived":
        orig_write2 = L._write_all
        state = {{"derived": 0}}
        orig_app = L.ReceiptLog._append_derived
        def a(self, new):
            if due():
                fd = os.open(os.path.join(d, "index"), os.O_WRONLY | os.O_APPEND)
                os.write(fd, b"\x00" * 20); die()
            orig_app(self, new)
        L.ReceiptLog._append_derived = a
print("ready", flush=True)
for i, r in enumerate(rs):
    idx = log.append(r)
    print(start + i, idx, flush=True)
"""


def run_appender(d: Path, start: int, count: int, crash: str, kill_after: float | None) -> set[int]:
    """Run an appender; kill it after ``kill_after`` s (if given); the receipts whose
    append returned (acknowledged on stdout)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(tests=str(TESTS)), str(d), str(start), str(count),
         crash],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    if kill_after is not None:
        time.sleep(kill_after)
        proc.send_signal(signal.SIGKILL)
    # Not communicate(): it reads the pipe itself, losing what readline() above already
    # buffered (an acknowledgement written right after "ready"). The output is a few lines.
    proc.wait(timeout=60)
    out = proc.stdout.read()
    err = proc.stderr.read() if proc.stderr else ""
    acked = {int(line.split()[0]) for line in out.splitlines() if line.strip()}
    assert "Traceback" not in err, err
    return acked


def check_log(d: Path, acked: set[int]) -> None:
    report = verify_log(d, [TRUSTED.public_key])
    assert report.ok, [p.to_json() for p in report.problems]
    stored = {Receipt.from_json(b).receipt_id for _, b in read_entries(d)}
    want = {str(uuid.UUID(int=i + 1, version=4)) for i in acked}
    assert want <= stored, sorted(want - stored)
    assert len(stored) == report.tree_size  # no duplicates


@pytest.mark.parametrize("point", ["mid_write", "after_fsync", "before_publish", "mid_derived"])
def test_kill_at_each_step_of_an_append(tmp_path: Path, point: str) -> None:
    d = tmp_path / "log"
    acked = run_appender(d, 0, 6, f"{point}:3", None)
    assert acked == {0, 1, 2}
    check_log(d, acked)
    # the next appender repairs what the crash left, and re-appending is idempotent
    acked |= run_appender(d, 0, 8, "random", None)
    check_log(d, acked)
    assert len(list(read_entries(d))) == 8


def test_kill_at_random_points(tmp_path: Path) -> None:
    """~10 trials here; bench/log_bench.py runs >= 100."""
    d = tmp_path / "log"
    rng = random.Random(10)
    acked: set[int] = set()
    start = 0
    for _ in range(10):
        acked |= run_appender(d, start, 40, "random", rng.uniform(0.0, 0.05))
        check_log(d, acked)
        start += 40
    assert len(acked) > 0


def test_concurrent_appenders(tmp_path: Path) -> None:
    """4 processes x 50 appends -> 200 entries, none lost or duplicated (bench: 4 x 1,000)."""
    d = tmp_path / "log"
    ReceiptLog(d, signer=TRUSTED, origin=ORIGIN)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                CHILD.format(tests=str(TESTS)),
                str(d),
                str(w * 50),
                "50",
                "random",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(4)
    ]
    acked: set[int] = set()
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        acked |= {int(line.split()[0]) for line in out.splitlines()[1:]}
    assert len(acked) == 200
    check_log(d, acked)
    assert ReceiptLog(d).size == 200


# -- savers and the verify CLI ---------------------------------------------------------------


def test_saver_archives_into_a_log(tmp_path: Path, signer: Signer) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    from erasure_receipts import AttestingSqliteSaver
    from erasure_receipts._engine import sign_and_archive

    log = ReceiptLog(tmp_path / "log", signer=signer)
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "app.db"), signer=signer, archive=log
    ) as saver:
        saver.setup()
        for t in ("a", "b"):
            cfg = {"configurable": {"thread_id": t, "checkpoint_ns": ""}}
            saver.put(cfg, empty_checkpoint(), {}, {})
        ra = saver.erase_thread("a")
        rb = saver.erase_thread("b")
    assert log.size == 2 and log.index_of(ra) == 0 and log.index_of(rb) == 1
    # a recovery that signs the same statement again appends nothing
    assert sign_and_archive(ra.statement, signer, log) == ra and log.size == 2
    assert verify_log(log.directory, [signer.public_key]).ok


def test_verify_with_log(tmp_path: Path, pub_pem: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rs = receipts(3, start=100)
    d = tmp_path / "log"
    new_log(d, rs[:2])
    files = []
    for i, r in enumerate(rs):
        f = tmp_path / f"r{i}.json"
        f.write_bytes(r.to_json())
        files.append(str(f))
    code = verify_main([*files, "--key", str(pub_pem), "--log", str(d), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [r.get("log_index") for r in doc["results"]] == [0, 1, None]
    assert [r["reason"] for r in doc["results"]] == ["ok", "ok", "not_in_log"]
    assert verify_main([files[0], "--key", str(pub_pem), "--log", str(d)]) == 0
    assert "log index 0" in capsys.readouterr().out
    # a log whose checkpoint is not signed by a trusted key: the run stops (exit 1)
    recs = records(d)
    cp = Checkpoint.parse(recs[-1][1])
    forged = Checkpoint.sign(ORIGIN, cp.size, cp.root, ATTACKER)
    write_records(d, [*recs[:-1], (0x43, forged, leaf_hash(forged))])
    (d / "checkpoint").write_bytes(forged)
    assert verify_main([files[0], "--key", str(pub_pem), "--log", str(d), "--json"]) == 1
    assert "not signed by a trusted key" in json.loads(capsys.readouterr().out)["error"]
    assert verify_main([files[0], "--key", str(pub_pem), "--log", str(tmp_path / "no")]) == 3


def test_log_cli_append_prove_checkpoint(tmp_path: Path, pub_pem: Path) -> None:
    key = tmp_path / "k.pem"
    key.write_bytes(TRUSTED.private_pem())
    key.chmod(0o600)
    rs = receipts(3, start=200)
    files = []
    for i, r in enumerate(rs):
        f = tmp_path / f"r{i}.json"
        f.write_bytes(r.to_json())
        files.append(f)
    d = tmp_path / "log"
    res = cli("log", "append", d, *files[:2], "--key", key, "--origin", ORIGIN, "--json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [e["index"] for e in doc["entries"]] == [0, 1] and doc["tree_size"] == 2
    res = cli("log", "append", d, *files, "--key", key)
    assert res.exit_code == 0 and "(already in the log)" in res.stdout
    res = cli("log", "checkpoint", d)
    assert res.exit_code == 0 and Checkpoint.parse(res.stdout.encode()).size == 3
    res = cli("log", "prove", d, files[2], "--key", pub_pem, "--json")
    assert res.exit_code == 0, res.stderr
    proof = json.loads(res.stdout)
    assert proof["index"] == 2 and proof["checkpoint_verified"]
    other = tmp_path / "other.json"
    other.write_bytes(receipts(1, start=300)[0].to_json())
    res = cli("log", "prove", d, other)
    assert res.exit_code == 1 and "not in the log" in res.stderr
    res = cli("log", "verify", tmp_path / "missing", "--key", pub_pem)
    assert res.exit_code == 3
    res = cli("log", "append", d, files[0], "--key", key, "--origin", "other.example/x")
    assert res.exit_code == 1 and "origin" in res.stderr


def test_log_files_are_ignored_by_directory_verify(
    tmp_path: Path, pub_pem: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "archive" / "log"
    new_log(d, receipts(2, start=400))
    (tmp_path / "archive" / "r.json").write_bytes(receipts(1, start=500)[0].to_json())
    assert verify_main([str(tmp_path / "archive"), "--key", str(pub_pem)]) == 0
    assert capsys.readouterr().out.count("OK ") == 1
    assert os.listdir(d)
