"""Erasure targets in the engine, over the in-memory fake backend (tests/fake_backend.py):
an item target is measured in the transaction, swept after the commit, and a process
that dies in between is completed by recovery in a new process - one receipt, the
items gone; a target that raises refuses the erasure with nothing deleted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from erasure_receipts import FunctionTarget, Signer, verify_receipt
from erasure_receipts.digest import encode_row, leaf_hash
from erasure_receipts.errors import ErasureIncompleteError
from fake_backend import Memory, ProcessDied, fake_eraser

SIGNER = Signer.from_seed(bytes(range(1, 33)))


def populated() -> Memory:
    mem = Memory()
    for n in (1, 2):
        mem.put("t1", "", n, b"t1-state-%d" % n, writes=1)
    mem.put("t2", "", 3, b"t2-state")
    return mem


class Cache:
    """Items per thread; ``delete`` can be made to kill the process once."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, bytes]] = {
            "t1": {"answer-1": b'{"a": 1}', "answer-2": b'{"a": 2}'},
            "t2": {"answer-3": b'{"a": 3}'},
        }
        self.die = False
        self.fail_read = False

    def read(self, thread_id: str) -> dict[str, bytes]:
        if self.fail_read:
            raise ConnectionError("cache unreachable")
        return dict(self.items.get(thread_id, {}))

    def delete(self, thread_id: str, keys: Any) -> None:
        if self.die:
            self.die = False
            raise ProcessDied("between the commit and the sweep")
        for k in keys:
            del self.items[thread_id][k]

    def target(self) -> FunctionTarget:
        return FunctionTarget("cache", items=self.read, delete=self.delete)


def test_item_target_swept_after_the_commit(tmp_path: Path) -> None:
    mem, cache = populated(), Cache()
    er = fake_eraser(mem, SIGNER, tmp_path / "archive", targets=[cache.target()])
    leaves = [
        leaf_hash(encode_row("cache", [k], [("key", k), ("data", v)]))
        for k, v in sorted(cache.items["t1"].items())
    ]
    receipt = er.erase(er.request("t1", (), True), False)
    v = verify_receipt(receipt.to_json(), [SIGNER.public_key])
    p = v.statement["predicate"]
    assert p["methods"]["target:cache"] == "sweep"
    assert p["pre_state"]["tables"]["target:cache"]["rows"] == len(leaves) == 2
    assert cache.items == {"t1": {}, "t2": {"answer-3": b'{"a": 3}'}}
    assert "target_swept_after_commit" in {c["name"] for c in p["checks"]}


def test_death_between_commit_and_sweep_is_recovered_once(tmp_path: Path) -> None:
    mem, cache = populated(), Cache()
    archive = tmp_path / "archive"
    er = fake_eraser(mem, SIGNER, archive, targets=[cache.target()])
    cache.die = True
    with pytest.raises(ProcessDied):
        er.erase(er.request("t1", (), True), False)
    mem.restart()
    assert mem.rows("t1")["checkpoints"] == []  # committed
    assert len(cache.items["t1"]) == 2  # not swept
    assert len(mem.open_entries()) == 1
    # A new process without the target cannot complete it, and says so.
    with pytest.raises(ErasureIncompleteError, match="same targets="):
        fake_eraser(mem, SIGNER, archive).recover(0)
    [receipt] = fake_eraser(mem, SIGNER, archive, targets=[cache.target()]).recover(0)
    assert cache.items["t1"] == {}
    assert mem.open_entries() == []
    assert fake_eraser(mem, SIGNER, archive, targets=[cache.target()]).recover(0) == []
    v = verify_receipt(receipt.to_json(), [SIGNER.public_key])
    checks = {c["name"] for c in v.statement["predicate"]["checks"]}
    assert {"issued_from_journal", "target_swept_after_commit"} <= checks
    assert len(list(archive.glob("*.json"))) == 1


def test_a_target_that_raises_deletes_nothing(tmp_path: Path) -> None:
    mem, cache = populated(), Cache()
    before = mem.rows()
    cache.fail_read = True
    er = fake_eraser(mem, SIGNER, tmp_path / "archive", targets=[cache.target()])
    with pytest.raises(ErasureIncompleteError, match="cache unreachable") as err:
        er.erase(er.request("t1", (), True), False)
    assert "nothing was deleted" in err.value.message
    assert mem.rows() == before and mem.journal == {} and mem.tombstones == {}
    assert len(cache.items["t1"]) == 2
