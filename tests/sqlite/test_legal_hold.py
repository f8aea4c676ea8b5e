"""Legal hold: export rows with audit paths before an erasure, prove them afterwards."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import AsyncAttestingSqliteSaver, AttestingSqliteSaver, Signer
from erasure_receipts.digest import inclusion_proof, inclusion_proofs, leaf_hash
from erasure_receipts.proof import (
    InclusionProofError,
    LeafRecord,
    decode_leaf,
    verify_leaf_record,
)
from scenario import TURNS, build_graph, human

CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
T = "alice-chat"
NS = ("users", "alice")


@pytest.fixture
def held(tmp_path: Path, signer: Signer) -> Iterator[dict[str, Any]]:
    """A real scenario; every row exported before the erasure, bob's too; then erased."""
    db = tmp_path / "app.db"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        graph = build_graph(saver, store)
        for text in TURNS:
            graph.invoke(human(text), {"configurable": {"thread_id": T}})
        graph.invoke(human("hello"), {"configurable": {"thread_id": "bob-chat"}})
        records = saver.export_leaves(T, [NS])
        preview = saver.digest_thread(T, [NS])
        bob = saver.export_leaves("bob-chat")
        receipt = saver.erase_thread(T, store_namespaces=[NS])
        (tmp_path / "R.json").write_bytes(receipt.to_json())
        yield {
            "dir": tmp_path,
            "records": records,
            "bob": bob,
            "receipt": receipt,
            "preview": preview,
            "saver": saver,
        }


def prove(d: Path, record: bytes, pub: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    row = d / "ROW.json"
    row.write_bytes(record)
    return subprocess.run(
        [*CLI, "prove", str(row), "--receipt", str(d / "R.json"), "--key", str(pub), *extra],
        capture_output=True,
        text=True,
    )


def edited(record: LeafRecord, **changes: Any) -> bytes:
    doc = {**record.to_dict(), **changes}
    return json.dumps(doc).encode()


def test_export_covers_the_scope_with_valid_proofs(held: dict[str, Any]) -> None:
    records, receipt = held["records"], held["receipt"]
    pre = receipt.predicate["pre_state"]
    assert len(records) == pre["leaves"] == held["preview"].leaves
    assert [r.index for r in records] == list(range(pre["leaves"]))
    assert {r.root for r in records} == {receipt.pre_digest}
    tables = [r.table for r in records]
    assert tables == sorted(tables)
    assert {t: tables.count(t) for t in set(tables)} == {
        t: c["rows"] for t, c in pre["tables"].items() if c["rows"]
    }
    store_row = next(r for r in records if r.table == "store")
    assert store_row.primary_key == ("users.alice", "identity")
    assert dict((n, v) for n, v in decode_leaf(store_row.leaf).columns)["key"] == ("t", b"identity")


def test_prove_succeeds_for_every_exported_row(
    held: dict[str, Any], pub_pem: Path, signer: Signer
) -> None:
    for record in held["records"]:
        proven = verify_leaf_record(
            record.to_json(), held["receipt"].to_json(), [signer.public_key]
        )
        assert (proven.table, proven.index) == (record.table, record.index)
        assert proven.receipt.receipt_id == held["receipt"].receipt_id
    first, last = held["records"][0], held["records"][-1]
    res = prove(held["dir"], first.to_json(), pub_pem)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("OK") and "leaf 0 of" in res.stdout
    res = prove(held["dir"], last.to_json(), pub_pem, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["ok"] and doc["index"] == last.index and doc["table"] == last.table
    assert doc["tree_size"] == held["receipt"].predicate["pre_state"]["leaves"]


def _flip_last_byte(b64: str) -> str:
    data = bytearray(base64.b64decode(b64))
    data[-1] ^= 1
    return base64.b64encode(bytes(data)).decode()


def test_tampering_fails_with_exit_1(held: dict[str, Any], pub_pem: Path) -> None:
    d, records = held["dir"], held["records"]
    rec = next(r for r in records if r.table == "writes" and r.audit_path)
    size = rec.tree_size
    cases = {
        # a stored value changed (the last byte is inside the last column's value)
        "row value": (edited(rec, leaf=_flip_last_byte(rec.to_dict()["leaf"])), "not_included"),
        "audit path": (
            edited(rec, audit_path=[("0" * 64)] + [h.hex() for h in rec.audit_path[1:]]),
            "not_included",
        ),
        "path truncated": (
            edited(rec, audit_path=[h.hex() for h in rec.audit_path[:-1]]),
            "not_included",
        ),
        "index": (edited(rec, index=(rec.index + 1) % size), "not_included"),
        "another row's leaf": (
            edited(
                rec,
                leaf=records[(rec.index + 1) % size].to_dict()["leaf"],
                table=records[(rec.index + 1) % size].table,
                primary_key=records[(rec.index + 1) % size].to_dict()["primary_key"],
            ),
            "not_included",
        ),
        "tree size": (edited(rec, tree_size=size + 1), "tree_mismatch"),
        "claimed key differs from leaf": (edited(rec, primary_key=["x"]), "malformed_record"),
        "not json": (b"{", "malformed_record"),
        "extra member": (edited(rec, extra=1), "malformed_record"),
    }
    for label, (data, reason) in cases.items():
        res = prove(d, data, pub_pem, "--json")
        assert res.returncode == 1, (label, res.stdout, res.stderr)
        assert json.loads(res.stdout)["reason"] == reason, label


def test_row_of_another_thread_fails(held: dict[str, Any], pub_pem: Path, signer: Signer) -> None:
    d, bob, receipt = held["dir"], held["bob"][0], held["receipt"]
    res = prove(d, bob.to_json(), pub_pem, "--json")
    assert res.returncode == 1 and json.loads(res.stdout)["reason"] == "wrong_thread"
    # Relabelled as alice's, with alice's tree size and root: the proof itself fails.
    pre = receipt.predicate["pre_state"]
    forged = edited(bob, thread_id=T, tree_size=pre["leaves"], root=receipt.pre_digest)
    res = prove(d, forged, pub_pem, "--json")
    assert res.returncode == 1 and json.loads(res.stdout)["reason"] == "not_included"
    with pytest.raises(InclusionProofError):
        verify_leaf_record(forged, receipt.to_json(), [signer.public_key])


def test_receipt_and_usage_errors(held: dict[str, Any], pub_pem: Path, tmp_path: Path) -> None:
    d, rec = held["dir"], held["records"][0]
    other = tmp_path / "other.pub.pem"
    other.write_bytes(Signer.from_seed(bytes(32)).public_pem())
    res = prove(d, rec.to_json(), other, "--json")
    assert res.returncode == 1 and json.loads(res.stdout)["reason"] == "untrusted_key"
    receipt = json.loads((d / "R.json").read_bytes())
    receipt["statement"]["predicate"]["pre_state"]["leaves"] += 1
    (d / "R.json").write_text(json.dumps(receipt))
    res = prove(d, rec.to_json(), pub_pem)
    assert res.returncode == 1, res.stderr
    (d / "ROW.json").write_bytes(rec.to_json())
    res = subprocess.run(
        [*CLI, "prove", str(d / "ROW.json"), "--receipt", str(d / "R.json")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2
    res = subprocess.run(
        [
            *CLI,
            "prove",
            str(d / "missing.json"),
            "--receipt",
            str(d / "R.json"),
            "--key",
            str(pub_pem),
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 3


def test_select_keeps_only_some_rows_with_the_same_proofs(held: dict[str, Any]) -> None:
    saver, everything = held["saver"], held["records"]
    assert saver.export_leaves(T, [NS]) == []  # erased: the scope is now empty
    # (selection is checked against a fresh thread below)
    saver.put(
        {"configurable": {"thread_id": "carol", "checkpoint_ns": ""}},
        _checkpoint("1ef00000000000000000000000000009"),
        {},
        {},
    )
    full = saver.export_leaves("carol")
    some = saver.export_leaves("carol", select=lambda table, pk: table == "checkpoints")
    assert some and some == [r for r in full if r.table == "checkpoints"]
    assert everything  # the fixture's export is unaffected


def _checkpoint(checkpoint_id: str) -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    return {**empty_checkpoint(), "id": checkpoint_id}


def test_swept_store_rows_can_be_proven(tmp_path: Path, signer: Signer) -> None:
    store = InMemoryStore()
    store.put(NS, "identity", {"ssn": "x", "score": 0.25})
    store.put((*NS, "notes"), "n", {"t": "below"})
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), signer=signer, store=store
    ) as saver:
        saver.put(
            {"configurable": {"thread_id": T, "checkpoint_ns": ""}},
            _checkpoint("1ef00000000000000000000000000001"),
            {},
            {},
        )
        records = saver.export_leaves(T, [NS])
        receipt = saver.erase_thread(T, store_namespaces=[NS])
    assert receipt.predicate["methods"]["store"] == "sweep"
    assert [r.table for r in records] == ["checkpoints", "store", "store"]
    for r in records:
        verify_leaf_record(r.to_json(), receipt.to_json(), [signer.public_key])


def test_async_export_equals_sync(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        for i in range(3):
            saver.put(
                {"configurable": {"thread_id": T, "checkpoint_ns": ""}},
                _checkpoint(f"1ef0000000000000000000000000000{i}"),
                {},
                {},
            )
        sync = saver.export_leaves(T)

    async def run() -> list[LeafRecord]:
        async with aiosqlite.connect(db) as conn:
            asaver = AsyncAttestingSqliteSaver(conn, signer=signer)
            return await asaver.aexport_leaves(T)

    assert asyncio.run(run()) == sync and len(sync) == 3


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 70), st.data())
def test_inclusion_proofs_equal_single_proofs(n: int, data: st.DataObject) -> None:
    hashes = [leaf_hash(i.to_bytes(4, "big")) for i in range(n)]
    wanted = data.draw(st.lists(st.integers(0, n - 1), max_size=n))
    got = inclusion_proofs(hashes, wanted)
    assert got == {i: inclusion_proof(hashes, i) for i in set(wanted)}


def test_subject_receipt_rows_prove_into_their_threads_units(
    tmp_path: Path, signer: Signer
) -> None:
    """RECEIPT_SPEC.md 9.3: a row exported with ``export_leaves(thread)`` before a real
    subject erasure proves into that thread's unit; a row of a thread the subject
    receipt did not erase, or one exported before the thread changed, does not."""
    db = tmp_path / "app.db"
    (tmp_path / "pub.pem").write_bytes(signer.public_pem())
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        graph = build_graph(saver, store)
        for tid in ("alice-1", "alice-2", "bob-1"):
            for text in TURNS[:2]:
                graph.invoke(human(text), {"configurable": {"thread_id": tid}})
        records = {t: saver.export_leaves(t) for t in ("alice-1", "alice-2", "bob-1")}
        changed = saver.export_leaves("alice-2")[:1]
        receipt = saver.erase_subject(
            "alice", threads=["alice-1", "alice-2"], store_namespaces=[NS]
        )
    r_json = receipt.to_json()
    (tmp_path / "R.json").write_bytes(r_json)
    units = {u["name"]: u for u in receipt.predicate["units"]}
    for tid in ("alice-1", "alice-2"):
        assert records[tid] and {r.root for r in records[tid]} == {
            units[f"thread:{tid}"]["digest"]["sha256"]
        }
        for record in records[tid]:
            proven = verify_leaf_record(record.to_json(), r_json, [signer.public_key])
            assert proven.unit == f"thread:{tid}"
            assert (proven.table, proven.index) == (record.table, record.index)
            assert proven.tree_size == units[f"thread:{tid}"]["leaves"]
    # the CLI, text and JSON
    row = tmp_path / "ROW.json"
    row.write_bytes(records["alice-2"][-1].to_json())
    args = [*CLI, "prove", str(row), "--receipt", str(tmp_path / "R.json"), "--key",
            str(tmp_path / "pub.pem")]  # fmt: skip
    res = subprocess.run(args, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "unit 'thread:alice-2' of receipt" in res.stdout and "(subject 'alice'" in res.stdout
    res = subprocess.run([*args, "--json"], capture_output=True, text=True)
    assert res.returncode == 0 and json.loads(res.stdout)["unit"] == "thread:alice-2"
    # negatives: bob's row, a row of a tree that changed, a tampered audit path
    with pytest.raises(InclusionProofError) as exc:
        verify_leaf_record(records["bob-1"][0].to_json(), r_json, [signer.public_key])
    assert exc.value.reason == "wrong_thread"
    bad = records["alice-1"][0]
    forged = edited(bad, audit_path=["0" * 64] + [h.hex() for h in bad.audit_path[1:]])
    with pytest.raises(InclusionProofError) as exc:
        verify_leaf_record(forged, r_json, [signer.public_key])
    assert exc.value.reason == "not_included"
    relabelled = edited(records["bob-1"][0], thread_id="alice-1",
                        tree_size=units["thread:alice-1"]["leaves"],
                        root=units["thread:alice-1"]["digest"]["sha256"])  # fmt: skip
    with pytest.raises(InclusionProofError) as exc:
        verify_leaf_record(relabelled, r_json, [signer.public_key])
    assert exc.value.reason == "not_included"
    assert changed[0].root == records["alice-2"][0].root  # nothing written in between
    stale = edited(changed[0], tree_size=changed[0].tree_size + 1)
    with pytest.raises(InclusionProofError) as exc:
        verify_leaf_record(stale, r_json, [signer.public_key])
    assert exc.value.reason == "tree_mismatch"
