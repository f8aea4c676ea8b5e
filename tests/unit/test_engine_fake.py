"""The engine's flows over the in-memory fake backend (tests/fake_backend.py): a real
``Eraser``, real Ed25519 receipts and the real verifier, faults injected through the
seams. For every crash point of an erasure: what the tables, the journal and the
archive hold afterwards, and what recovery in a new process issues."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from erasure_receipts import Receipt, Signer, verify_receipt
from erasure_receipts._engine import eraser as eraser_module
from erasure_receipts._engine.eraser import Eraser
from erasure_receipts._engine.protocol import _Abort
from erasure_receipts._engine.types import ErasureRequest
from erasure_receipts.digest import EMPTY_ROOT
from erasure_receipts.errors import ErasureIncompleteError, NothingToEraseError
from fake_backend import (
    CHECKPOINTS,
    DIE,
    WRITES,
    FakeConflict,
    FakeTuple,
    Memory,
    ProcessDied,
    checkpoint_id,
    fake_eraser,
    once,
)

SIGNER = Signer.from_seed(bytes(range(1, 33)))

BEFORE_COMMIT = ["begin", "lease_entry", "erase", "finish", "remaining", "write_tombstone",
                 "write_journal", "commit"]  # fmt: skip
"""Faults that hit while the erasure transaction is open: it rolls back."""
AFTER_COMMIT = ["after_commit", "reduce_residue", "re_measure", "api_read_back",
                "record_statement", "sign", "archive"]  # fmt: skip
"""Faults between the commit and the signed receipt: the journal entry stays open."""
AFTER_RECEIPT = ["mark_issued", "release_lease"]
"""Faults once the receipt is signed and archived."""
STATEMENT_JOURNALED = {"sign", "archive"}
DIE_ONLY = {"after_commit"}
ERROR_ONLY = {"archive"}  # a real archive path that cannot be written to

POINTS = [
    (point, mode)
    for point in BEFORE_COMMIT + AFTER_COMMIT + AFTER_RECEIPT
    for mode in ("error", "die")
    if not (mode == "error" and point in DIE_ONLY) and not (mode == "die" and point in ERROR_ONLY)
]


@pytest.fixture(autouse=True)
def no_retry_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries back off with ``time.sleep``; here they need not wait."""
    monkeypatch.setattr(eraser_module.time, "sleep", lambda _s: None)


def populated() -> Memory:
    """Thread t1: three checkpoints in "" and one in "sub", with writes; t2 besides."""
    mem = Memory()
    for n in (1, 2, 3):
        mem.put("t1", "", n, b"t1-state-%d" % n, writes=2)
    mem.put("t1", "sub", 4, b"t1-sub-state")
    mem.put("t2", "", 5, b"t2-state")
    return mem


def thread_request(thread_id: str = "t1", **kw: Any) -> ErasureRequest:
    return ErasureRequest(thread_id, **kw)


def history_request() -> ErasureRequest:
    return ErasureRequest("t1", tombstone=False, kind="history", keep="latest")


def digest_now(mem: Memory, request: ErasureRequest) -> str:
    er = fake_eraser(mem, SIGNER)
    return er.db.run(er.measure, request).digest


def verified(receipt: Receipt | bytes) -> Any:
    """Verify with the real verifier, and check the receipt claims no more than the
    engine established: an empty post-state and the checks that measured it."""
    data = receipt.to_json() if isinstance(receipt, Receipt) else receipt
    v = verify_receipt(data, [SIGNER.public_key])
    post = v.statement["predicate"]["post_state"]
    assert post["digest"]["sha256"] == EMPTY_ROOT.hex()
    assert post["leaves"] == 0
    assert all(t["rows"] == 0 for t in post["tables"].values())
    checks = {c["name"] for c in v.statement["predicate"]["checks"]}
    assert all(c["result"] == "pass" for c in v.statement["predicate"]["checks"])
    assert "raw_rows_zero_in_transaction" in checks
    assert {"raw_rows_zero_after_commit", "raw_rows_zero_at_recovery"} & checks
    assert checks & {"api_get_tuple_none", "api_get_tuple_kept"}
    return v


def check_names(v: Any) -> set[str]:
    return {c["name"] for c in v.statement["predicate"]["checks"]}


def archived(archive: Path) -> list[Path]:
    return sorted(archive.glob("*.json")) if archive.is_dir() else []


# -- the happy path -------------------------------------------------------------------------


def test_erase_issues_a_verified_receipt(tmp_path: Path) -> None:
    mem = populated()
    pre = digest_now(mem, thread_request())
    er = fake_eraser(mem, SIGNER, tmp_path / "archive")
    receipt = er.erase(thread_request(), False)
    v = verified(receipt)
    assert v.pre_digest == pre
    assert v.statement["predicate"]["pre_state"]["leaves"] == 4 + 7  # checkpoints + writes of t1
    assert "raw_rows_zero_after_commit" in check_names(v)
    assert mem.rows("t1") == {CHECKPOINTS: [], WRITES: []}
    assert len(mem.rows("t2")[CHECKPOINTS]) == 1
    assert mem.open_entries() == []
    assert mem.tombstones["t1"][0] == receipt.receipt_id
    assert mem.leases == {}
    assert [p.name for p in archived(tmp_path / "archive")] == [f"{receipt.receipt_id}.json"]
    assert [r.to_json() for r in er.journal_receipts("t1")] == [receipt.to_json()]
    assert fake_eraser(mem, SIGNER).recover(0) == []


# -- every crash point of one erasure ----------------------------------------------------------


@pytest.mark.parametrize(("point", "mode"), POINTS)
def test_crash_point(point: str, mode: str, tmp_path: Path) -> None:
    mem = populated()
    rows_before = mem.rows()
    pre = digest_now(mem, thread_request())
    archive = tmp_path / "archive"
    faults: dict[str, Any] = {}
    if point != "archive":
        faults[point] = DIE if mode == "die" else RuntimeError(f"injected at {point}")
    er = fake_eraser(mem, SIGNER, archive, faults)
    if point == "archive":
        archive.write_text("not a directory")  # after the eraser checked it
    receipt: Receipt | None = None
    try:
        receipt = er.erase(thread_request(), False)
    except ProcessDied as exc:
        assert mode == "die"
        assert str(exc) == point
        mem.restart()
    except ErasureIncompleteError as exc:  # every error, before or after the commit
        assert mode == "error"
        assert point not in AFTER_RECEIPT
        if point in BEFORE_COMMIT:
            assert "rolled back" in exc.message and "nothing was deleted" in exc.message
        else:
            assert "committed" in exc.message and "recover_receipts()" in exc.message
    else:
        assert mode == "error" and point in AFTER_RECEIPT
    if point == "archive":
        archive.unlink()
    assert not mem.in_transaction

    if point in BEFORE_COMMIT:
        # Rolled back: every row, no journal entry, no tombstone, no receipt.
        assert mem.rows() == rows_before
        assert mem.journal == {}
        assert mem.tombstones == {}
        assert archived(archive) == []
        assert mem.leases == {}
        assert fake_eraser(mem, SIGNER, archive).recover(0) == []
        return

    # Committed: t1's rows are gone (t2's kept), tombstoned, one journal entry.
    assert mem.rows("t1") == {CHECKPOINTS: [], WRITES: []}
    assert mem.rows("t2") == {t: [k for k in rows_before[t] if k[0] == "t2"] for t in rows_before}
    (rid,) = mem.journal
    assert mem.tombstones["t1"][0] == rid
    row = mem.journal[rid]
    json.loads(row.entry)  # the measurement, journaled with the deletion
    if point in AFTER_COMMIT:
        assert receipt is None
        assert mem.open_entries() == [rid]
        assert (row.statement is not None) == (point in STATEMENT_JOURNALED)
        assert archived(archive) == []
    elif point == "mark_issued":
        # Signed and archived, not marked: the entry stays open with its statement.
        assert mem.open_entries() == [rid]
        assert row.statement is not None
        (path,) = archived(archive)
        if receipt is not None:
            assert path.read_bytes() == receipt.to_json()
        first = path.read_bytes()
    else:  # release_lease: the receipt is issued and marked
        assert mem.open_entries() == []
        assert row.receipt is not None
        if receipt is not None:
            assert row.receipt == receipt.to_json()
    if point == "release_lease" and mode == "error":
        assert list(mem.leases) == [rid]  # not released: it ends with the process
        mem.restart()
    assert mem.leases == {}  # released, or gone with the dead process

    # A new process completes what is open: exactly one receipt, the original one.
    recovered = fake_eraser(mem, SIGNER, archive).recover(0)
    if point == "release_lease":
        assert recovered == []
    else:
        (r,) = recovered
        v = verified(r)
        assert v.receipt_id == rid
        assert v.pre_digest == pre
        assert v.issued_at == row.issued_at
        if point == "mark_issued":
            assert r.to_json() == first  # the journaled statement, signed again
        elif point in STATEMENT_JOURNALED:
            assert "raw_rows_zero_after_commit" in check_names(v)  # measured then
        else:
            # Measured again at recovery, and said so; nothing claimed about the
            # moment after the commit that nobody measured.
            names = check_names(v)
            assert {"issued_from_journal", "raw_rows_zero_at_recovery"} <= names
            assert "raw_rows_zero_after_commit" not in names
        assert [p.name for p in archived(archive)] == [f"{rid}.json"]
    assert mem.open_entries() == []
    assert len(fake_eraser(mem, SIGNER).journal_receipts("t1")) == 1
    assert fake_eraser(mem, SIGNER, archive).recover(0) == []


# -- crashes during recovery -----------------------------------------------------------------

RECOVERY_POINTS = ["pending_journal", "take_lease", "still_pending", "re_measure",
                   "api_read_back", "record_statement", "sign", "mark_issued",
                   "release_lease"]  # fmt: skip


@pytest.mark.parametrize("point", RECOVERY_POINTS)
def test_recovery_dies_and_the_next_one_completes(point: str, tmp_path: Path) -> None:
    mem = populated()
    pre = digest_now(mem, thread_request())
    archive = tmp_path / "archive"
    with pytest.raises(ProcessDied):
        fake_eraser(mem, SIGNER, archive, {"record_statement": DIE}).erase(thread_request(), False)
    mem.restart()
    (rid,) = mem.open_entries()
    with pytest.raises(ProcessDied):
        fake_eraser(mem, SIGNER, archive, {point: DIE}).recover(0)
    mem.restart()
    recovered = fake_eraser(mem, SIGNER, archive).recover(0)
    if point == "release_lease":  # the dead recovery had issued and marked it
        assert recovered == []
        blob = mem.journal[rid].receipt
        assert blob is not None
    else:
        (r,) = recovered
        blob = r.to_json()
    v = verified(blob)
    assert (v.receipt_id, v.pre_digest) == (rid, pre)
    assert [p.read_bytes() for p in archived(archive)] == [blob]
    assert mem.open_entries() == []
    assert fake_eraser(mem, SIGNER, archive).recover(0) == []


def test_recovery_error_is_reported_and_retried(tmp_path: Path) -> None:
    mem = populated()
    with pytest.raises(ProcessDied):
        fake_eraser(mem, SIGNER, None, {"api_read_back": DIE}).erase(thread_request(), False)
    mem.restart()
    (rid,) = mem.open_entries()
    faults = {"record_statement": RuntimeError("journal unavailable")}
    with pytest.raises(ErasureIncompleteError) as info:
        fake_eraser(mem, SIGNER, None, faults).recover(0)
    assert rid in info.value.message and info.value.recovered == []
    assert mem.open_entries() == [rid] and mem.leases == {}
    (r,) = fake_eraser(mem, SIGNER).recover(0)
    assert verified(r).receipt_id == rid


def test_entry_held_by_a_live_process_is_skipped() -> None:
    mem = populated()
    with pytest.raises(ProcessDied):
        fake_eraser(mem, SIGNER, None, {"record_statement": DIE}).erase(thread_request(), False)
    mem.restart()
    (rid,) = mem.open_entries()
    mem.leases[rid] = "another process"
    assert fake_eraser(mem, SIGNER).recover(0) == []
    assert mem.open_entries() == [rid]
    del mem.leases[rid]
    assert len(fake_eraser(mem, SIGNER).recover(0)) == 1


def test_young_entry_waits_for_min_age() -> None:
    mem = populated()
    with pytest.raises(ProcessDied):
        fake_eraser(mem, SIGNER, None, {"sign": DIE}).erase(thread_request(), False)
    mem.restart()
    assert fake_eraser(mem, SIGNER).recover(3600) == []
    assert len(mem.open_entries()) == 1
    (p,) = fake_eraser(mem, SIGNER).pending()
    assert p.receipt_id == mem.open_entries()[0] and p.age_seconds < 3600


# -- never more than was verified -----------------------------------------------------------


def test_rows_back_after_commit_refuse_the_receipt_until_gone() -> None:
    mem = populated()

    def late_write(_backend: Any) -> None:
        mem.put("t1", "", 9, b"late")

    with pytest.raises(ErasureIncompleteError, match="present after commit"):
        fake_eraser(mem, SIGNER, None, {"reduce_residue": late_write}).erase(
            thread_request(), False
        )
    (rid,) = mem.open_entries()
    with pytest.raises(ErasureIncompleteError, match="present after commit"):
        fake_eraser(mem, SIGNER).recover(0)
    assert mem.open_entries() == [rid]
    for table in (CHECKPOINTS, WRITES):
        for key in [k for k in mem.tables[table] if k[0] == "t1"]:
            del mem.tables[table][key]
    (r,) = fake_eraser(mem, SIGNER).recover(0)
    assert verified(r).receipt_id == rid


def test_stale_public_api_refuses_the_receipt() -> None:
    mem = populated()
    stale = FakeTuple({"configurable": {"thread_id": "t1", "checkpoint_ns": "",
                                        "checkpoint_id": checkpoint_id(3)}}, b"cached")  # fmt: skip
    with pytest.raises(ErasureIncompleteError, match="public API still returns data"):
        fake_eraser(mem, SIGNER, None, {"api_read_back": lambda _c: stale}).erase(
            thread_request(), False
        )
    (rid,) = mem.open_entries()
    assert mem.journal[rid].statement is None
    (r,) = fake_eraser(mem, SIGNER).recover(0)
    assert "issued_from_journal" in check_names(verified(r))


def test_rows_left_inside_the_transaction_roll_back() -> None:
    mem = populated()
    before = mem.rows()
    with pytest.raises(ErasureIncompleteError, match="rows remain inside"):
        fake_eraser(mem, SIGNER, None, {"remaining": lambda _p: 1}).erase(thread_request(), False)
    assert mem.rows() == before and mem.journal == {} and mem.tombstones == {}


# -- retries, aborts, refusals ----------------------------------------------------------------


def test_transient_conflict_is_retried() -> None:
    mem = populated()
    er = fake_eraser(mem, SIGNER, None, {"begin": once(FakeConflict("deadlock detected"))})
    receipt = er.erase(thread_request(), False)
    verified(receipt)
    assert len(er.db.backends) == 2  # type: ignore[attr-defined]
    assert len(mem.journal) == 1 and mem.open_entries() == []


def test_persistent_conflict_gives_up_with_nothing_deleted() -> None:
    mem = populated()
    before = mem.rows()
    er = fake_eraser(mem, SIGNER, None, {"begin": FakeConflict("deadlock detected")})
    with pytest.raises(ErasureIncompleteError, match="gave up after 5 attempts") as info:
        er.erase(thread_request(), False)
    assert "nothing was deleted" in info.value.message
    assert len(er.db.backends) == 5  # type: ignore[attr-defined]
    assert mem.rows() == before and mem.journal == {}


def test_other_errors_are_not_retried() -> None:
    mem = populated()
    er = fake_eraser(mem, SIGNER, None, {"commit": RuntimeError("disk I/O error")})
    with pytest.raises(ErasureIncompleteError, match="disk I/O error"):
        er.erase(thread_request(), False)
    assert len(er.db.backends) == 1  # type: ignore[attr-defined]


class Busy(_Abort):
    reason = "busy"


def test_guard_abort_passes_through_unwrapped_and_rolls_back() -> None:
    mem = populated()
    before = mem.rows()
    seen = []

    def guard(handle: Memory) -> None:
        seen.append(handle.in_transaction)
        raise Busy("the thread became active")

    er = fake_eraser(mem, SIGNER)
    with pytest.raises(Busy) as info:
        er.erase(thread_request(), False, guard=guard)
    assert type(info.value) is Busy and info.value.reason == "busy"
    assert seen == [True]  # inside the transaction, once (an abort is not retried)
    assert mem.rows() == before and mem.journal == {} and mem.tombstones == {}
    assert not mem.in_transaction and mem.leases == {}


def test_nothing_to_erase() -> None:
    mem = populated()
    er = fake_eraser(mem, SIGNER)
    with pytest.raises(NothingToEraseError) as info:
        er.erase(thread_request("nobody"), False)
    assert info.value.previous_receipt_id is None
    assert mem.journal == {} and mem.tombstones == {}
    receipt = er.erase(thread_request(), False)
    with pytest.raises(NothingToEraseError) as info:
        er.erase(thread_request(), False)
    assert info.value.previous_receipt_id == receipt.receipt_id
    assert len(mem.journal) == 1


def test_allow_empty_attests_an_empty_scope() -> None:
    mem = populated()
    receipt = fake_eraser(mem, SIGNER).erase(thread_request("nobody", allow_empty=True), False)
    v = verified(receipt)
    assert v.pre_digest == EMPTY_ROOT.hex()
    assert mem.tombstones["nobody"][0] == receipt.receipt_id


# -- history: kept rows ---------------------------------------------------------------------


def test_history_keeps_the_latest_checkpoint_of_each_namespace() -> None:
    mem = populated()
    pre = digest_now(mem, history_request())
    receipt = fake_eraser(mem, SIGNER).erase(history_request(), False)
    v = verified(receipt)
    assert v.pre_digest == pre
    kept = v.statement["predicate"]["kept_state"]
    assert kept["checkpoints"] == [
        {"checkpoint_ns": "", "checkpoint_id": checkpoint_id(3)},
        {"checkpoint_ns": "sub", "checkpoint_id": checkpoint_id(4)},
    ]
    assert kept["leaves"] == 2 + 3  # two checkpoints, their writes
    assert [k[1:3] for k in mem.rows("t1")[CHECKPOINTS]] == [
        ("", checkpoint_id(3)), ("sub", checkpoint_id(4))
    ]  # fmt: skip
    assert mem.tombstones == {}


def test_history_crash_after_commit_recovers_with_the_kept_set() -> None:
    mem = populated()
    pre = digest_now(mem, history_request())
    with pytest.raises(ProcessDied):
        fake_eraser(mem, SIGNER, None, {"api_read_back": DIE}).erase(history_request(), False)
    mem.restart()
    (rid,) = mem.open_entries()
    # A checkpoint saved meanwhile, older than the kept head (a writer's clock behind):
    # new data, not part of the removed set, left alone.
    mem.put("t1", "", 0, b"clock-behind", writes=0)
    (r,) = fake_eraser(mem, SIGNER).recover(0)
    v = verified(r)
    assert (v.receipt_id, v.pre_digest) == (rid, pre)
    assert len(v.statement["predicate"]["kept_state"]["checkpoints"]) == 2
    assert checkpoint_id(0) in {k[2] for k in mem.rows("t1")[CHECKPOINTS]}


# -- the seams are the only way in ------------------------------------------------------------


def test_eraser_composes_the_fake_seams() -> None:
    er = fake_eraser(Memory(), SIGNER)
    assert isinstance(er, Eraser)
    assert type(er.db).__name__ == "FakeDatabase"
    assert type(er.journal).__name__ == "FakeJournal"
    assert type(er.reader).__name__ == "FakeReader"


# -- subject: one unit per thread -------------------------------------------------------------


def test_subject_erasure_crash_and_recovery() -> None:
    mem = populated()
    request = ErasureRequest("alice", kind="subject", threads=("t1", "t2"))
    pre = digest_now(mem, request)
    with pytest.raises(ProcessDied):
        fake_eraser(mem, SIGNER, None, {"record_statement": DIE}).erase(request, False)
    mem.restart()
    assert mem.rows() == {CHECKPOINTS: [], WRITES: []}
    assert set(mem.tombstones) == {"t1", "t2"}
    (r,) = fake_eraser(mem, SIGNER).recover(0)
    v = verified(r)
    assert v.pre_digest == pre
    units = {u["name"]: u["leaves"] for u in v.statement["predicate"]["units"]}
    assert units == {"thread:t1": 11, "thread:t2": 2}
