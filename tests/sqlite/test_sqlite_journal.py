"""Erasures that commit but cannot issue their receipt are recoverable from the database."""

from __future__ import annotations

import errno
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    ConfigurationError,
    ErasureIncompleteError,
    Receipt,
    Signer,
    verify_receipt,
)
from scenario import MARKER, raw_rows

T = "t-journal"


class FullDisk:
    """Receipts cannot be written (e.g. the archive's disk is full) until ``fixed``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.broken = True
        original = Receipt.save

        def save(receipt: Receipt, *a: Any, **k: Any) -> str:
            if self.broken:
                raise OSError(errno.ENOSPC, "No space left on device")
            return original(receipt, *a, **k)

        monkeypatch.setattr(Receipt, "save", save)

    def fix(self) -> None:
        self.broken = False


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> FullDisk:
    return FullDisk(monkeypatch)


def recover_args(db: Path, key: Path, archive: Path) -> list[str]:
    return [str(db), "--key", str(key), "--archive", str(archive), "--min-age", "0"]


def put(saver: Any, thread: str, i: int) -> None:
    cp = empty_checkpoint()
    cp["id"] = f"1ef{i:029d}"
    cp["channel_values"] = {"v": MARKER}
    saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, cp, {}, {})


def journal(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as c:
        return c.execute(
            "SELECT receipt_id, thread_id, receipt_sha256 FROM erasure_journal"
        ).fetchall()


def test_archive_failure_after_commit_is_recoverable(
    tmp_path: Path, signer: Signer, full_disk: FullDisk
) -> None:
    db, archive = tmp_path / "a.db", tmp_path / "archive"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as s:
        for i in range(3):
            put(s, T, i)
        preview = s.digest_thread(T)
        with pytest.raises(ErasureIncompleteError, match="recover_receipts"):
            s.erase_thread(T)
        assert s.last_receipt is None
        # The data is gone and the measurement survived in the journal.
        assert raw_rows(db, "checkpoints", "thread_id = ?", (T,)) == []
        [(rid, thread, sha)] = journal(db)
        assert thread == T and sha is None
        full_disk.fix()
        [receipt] = s.recover_receipts(min_age_seconds=0)
        assert s.recover_receipts(min_age_seconds=0) == []  # closed: nothing pending any more
    assert receipt.receipt_id == rid
    assert receipt.pre_digest == preview.digest
    assert receipt.predicate["pre_state"]["tables"]["checkpoints"]["rows"] == 3
    # The statement was journaled before signing failed, so the recovered receipt is
    # exactly the one the erasure would have returned (same checks, same bytes).
    names = [c["name"] for c in receipt.predicate["checks"]]
    assert "raw_rows_zero_after_commit" in names and "issued_from_journal" not in names
    assert verify_receipt((archive / f"{rid}.json").read_bytes(), [signer.public_key])
    assert journal(db)[0][2] is not None


CRASH = textwrap.dedent(
    """
    import os, sys
    from erasure_receipts import AttestingSqliteSaver, Signer
    from erasure_receipts._engine import eraser as attesting
    from erasure_receipts._backends import sqlite as sqlite_backend
    from langgraph.checkpoint.base import empty_checkpoint

    def die(*a, **k):
        os._exit(17)  # the process dies after the commit, before any receipt exists

    setattr(attesting if sys.argv[2] == "sign_and_archive" else sqlite_backend, sys.argv[2], die)
    signer = Signer.from_seed(bytes(range(32)))
    with AttestingSqliteSaver.from_conn_string(sys.argv[1], signer=signer) as s:
        for i in range(4):
            cp = empty_checkpoint(); cp["id"] = f"1ef{i:029d}"
            s.put({"configurable": {"thread_id": "t-journal", "checkpoint_ns": ""}}, cp, {}, {})
        print(s.digest_thread("t-journal").digest, flush=True)
        s.erase_thread("t-journal")
    """
)


@pytest.mark.parametrize(
    ("dies_in", "post_check"),
    [
        ("record_statement", "raw_rows_zero_at_recovery"),  # nothing but the journal entry
        ("sign_and_archive", "raw_rows_zero_after_commit"),  # statement already journaled
    ],
)
def test_process_killed_after_commit_recovers_in_another_process(
    tmp_path: Path, signer: Signer, dies_in: str, post_check: str
) -> None:
    db = tmp_path / "a.db"
    proc = subprocess.run([sys.executable, "-c", CRASH, str(db), dies_in],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 17, proc.stderr
    preview = proc.stdout.strip()
    assert raw_rows(db, "checkpoints", "thread_id = ?", (T,)) == []
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=tmp_path / "r") as s:
        assert s.is_erased(T)  # the tombstone committed with the deletion
        [receipt] = s.recover_receipts(min_age_seconds=0)
    assert receipt.pre_digest == preview
    assert receipt.predicate["pre_state"]["leaves"] == 4
    names = [c["name"] for c in receipt.predicate["checks"]]
    assert post_check in names
    assert ("issued_from_journal" in names) == (post_check == "raw_rows_zero_at_recovery")
    v = verify_receipt((tmp_path / "r" / f"{receipt.receipt_id}.json").read_bytes(),
                       [signer.public_key])  # fmt: skip
    assert v.thread_id == T


def test_receipt_archived_but_not_marked_is_not_issued_twice(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from faults import inject

    db, archive = tmp_path / "a.db", tmp_path / "r"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as s:
        put(s, T, 1)

        def fail(*a: Any) -> None:
            raise sqlite3.OperationalError("injected: database is locked")

        inject(monkeypatch, s, mark_issued=fail)
        first = s.erase_thread(T)  # the receipt is returned and archived regardless
        assert journal(db)[0][2] is None
        monkeypatch.undo()
        [again] = s.recover_receipts(min_age_seconds=0)
    assert again.to_json() == first.to_json()  # the archived one, not a second receipt
    assert len(list(archive.iterdir())) == 1
    assert journal(db)[0][2] is not None


def test_tampered_archive_is_not_overwritten(tmp_path: Path, signer: Signer, monkeypatch) -> None:
    from faults import inject

    db, archive = tmp_path / "a.db", tmp_path / "r"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as s:
        put(s, T, 1)
        inject(monkeypatch, s, mark_issued=sqlite3.OperationalError("injected"))
        r = s.erase_thread(T)
        monkeypatch.undo()
        path = archive / f"{r.receipt_id}.json"
        path.write_bytes(path.read_bytes().replace(b'"erased"', b'"ERASED"'))
        with pytest.raises(ErasureIncompleteError, match="not overwriting"):
            s.recover_receipts(min_age_seconds=0)
    assert b"ERASED" in path.read_bytes()


def test_preflight_refuses_unattestable_scope_before_deleting(
    tmp_path: Path, signer: Signer
) -> None:
    db = tmp_path / "a.db"
    long_id = "x" * 5000
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
        put(s, long_id, 1)
        with pytest.raises(ValueError, match="cannot attest"):
            s.erase_thread(long_id)
        assert len(raw_rows(db, "checkpoints", "thread_id = ?", (long_id,))) == 1
        assert journal(db) == []


async def test_async_recover(tmp_path: Path, signer: Signer, full_disk: FullDisk) -> None:
    db, archive = tmp_path / "a.db", tmp_path / "archive"
    async with AsyncAttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, archive=archive
    ) as s:
        cp = empty_checkpoint()
        await s.aput({"configurable": {"thread_id": T, "checkpoint_ns": ""}}, cp, {}, {})
        preview = await s.adigest_thread(T)
        with pytest.raises(ErasureIncompleteError):
            await s.aerase_thread(T)
        full_disk.fix()
        [receipt] = await s.arecover_receipts(min_age_seconds=0)
        assert await s.arecover_receipts(min_age_seconds=0) == []
    assert receipt.pre_digest == preview.digest
    assert (archive / f"{receipt.receipt_id}.json").exists()


def test_cli_recover(tmp_path: Path, signer: Signer, full_disk: FullDisk) -> None:
    db, archive = tmp_path / "a.db", tmp_path / "archive"
    key = tmp_path / "k.pem"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as s:
        put(s, T, 1)
        with pytest.raises(ErasureIncompleteError):
            s.erase_thread(T)
    assert list(archive.iterdir()) == []
    cli = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
    res = subprocess.run(
        [*cli, "recover", *recover_args(db, key, archive)], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert "1 receipt(s) recovered" in res.stderr
    [path] = archive.iterdir()
    assert verify_receipt(path.read_bytes(), [signer.public_key]).thread_id == T
    again = subprocess.run(
        [*cli, "recover", *recover_args(db, key, archive)], capture_output=True, text=True
    )
    assert again.returncode == 0 and "0 receipt(s) recovered" in again.stderr


def test_unwritable_archive_is_refused_before_deleting(tmp_path: Path, signer: Signer) -> None:
    db, archive = tmp_path / "a.db", tmp_path / "archive"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
        put(s, T, 1)
        put(s, T, 2)
        archive.write_text("a file, not a directory")
        s.archive = archive
        with pytest.raises(ConfigurationError, match="not a directory"):
            s.erase_thread(T)
        assert len(raw_rows(db, "checkpoints", "thread_id = ?", (T,))) == 2
        assert journal(db) == []
    with pytest.raises(ConfigurationError, match="not a directory"):
        AttestingSqliteSaver(sqlite3.connect(":memory:"), signer=signer, archive=archive)
