"""Replay after a restore on SQLite (sync and async): a backup copied before the
erasures is restored over the database, and ``replay_erasures`` erases again what came
back, with receipts naming the originals. Assertions are on raw rows read through
separate connections and on the receipts themselves.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    ErasedDataRestoredError,
    ReceiptLog,
    Signer,
    verify_receipt,
)
from scenario import build_graph

ALICE, BOB, DAVE = "alice-chat", "bob-chat", "dave-chat"
CAROL = ("carol-1", "carol-2")
ALICE_NS, CAROL_NS = ("users", "alice"), ("users", "carol")


def rows(db: Path, table: str, where: str, params: tuple[Any, ...] = ()) -> list[Any]:
    with closing(sqlite3.connect(db)) as conn:
        sql = f"SELECT * FROM {table} WHERE {where} ORDER BY 1, 2, 3"
        return conn.execute(sql, params).fetchall()


def thread_rows(db: Path, *threads: str) -> int:
    marks = ", ".join("?" * len(threads))
    return len(rows(db, "checkpoints", f"thread_id IN ({marks})", threads)) + len(
        rows(db, "writes", f"thread_id IN ({marks})", threads)
    )


def checkpoints(db: Path, thread: str) -> list[str]:
    return [r[2] for r in rows(db, "checkpoints", "thread_id = ?", (thread,))]


def tombstoned(db: Path, thread: str) -> bool:
    return bool(rows(db, "erasure_tombstones", "thread_id = ?", (thread,)))


def file_sha(db: Path) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


def backup(db: Path, to: Path) -> None:
    """A consistent copy of the live database (SQLite's online backup API)."""
    with closing(sqlite3.connect(db)) as src, closing(sqlite3.connect(to)) as dst:
        src.backup(dst)


def restore(copy: Path, db: Path) -> None:
    for suffix in ("-wal", "-shm", "-journal"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(copy, db)


def talk(graph: Any, thread: str, *texts: str) -> None:
    for text in texts:
        graph.invoke(
            {"messages": [HumanMessage(content=text)]}, {"configurable": {"thread_id": thread}}
        )


@pytest.fixture
def erased(tmp_path: Path, signer: Signer) -> dict[str, Any]:
    """A database with alice, bob, carol's two threads and dave; a backup copy taken;
    then alice erased (with her store namespace), carol erased as a subject, dave's
    history erased. Returns paths and the original receipts."""
    db, archive, copy = tmp_path / "app.db", tmp_path / "receipts", tmp_path / "backup.db"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, store=store, archive=archive
        ) as saver,
    ):
        store.setup()
        graph = build_graph(saver, store)
        talk(graph, ALICE, "my SSN is 078-05-1120", "thanks")
        talk(graph, BOB, "hello from bob")
        for t in CAROL:
            talk(graph, t, f"carol here on {t}")
        store.put(CAROL_NS, "profile", {"email": "carol@example.com"})
        talk(graph, DAVE, "one", "two", "three")
        backup(db, copy)
        originals = {
            "thread": saver.erase_thread(ALICE, store_namespaces=[ALICE_NS]),
            "subject": saver.erase_subject("carol", threads=CAROL, store_namespaces=[CAROL_NS]),
            "history": saver.erase_history(DAVE),
        }
        kept = checkpoints(db, DAVE)
    bob = rows(db, "checkpoints", "thread_id = ?", (BOB,))
    return {
        "db": db,
        "archive": archive,
        "copy": copy,
        "originals": originals,
        "kept": kept,
        "bob": bob,
    }


def open_saver(db: Path, signer: Signer, archive: Path, **kw: Any) -> Any:
    conn = sqlite3.connect(db, check_same_thread=False)
    store = SqliteStore(conn)
    store.setup()
    return AttestingSqliteSaver(conn, signer=signer, store=store, archive=archive, **kw)


def test_restore_brings_data_back_and_replay_erases_it_again(
    erased: dict[str, Any], signer: Signer
) -> None:
    db, archive = erased["db"], erased["archive"]
    restore(erased["copy"], db)
    assert thread_rows(db, ALICE) > 0 and thread_rows(db, *CAROL) > 0  # the restore's effect
    assert not tombstoned(db, ALICE) and len(checkpoints(db, DAVE)) > len(erased["kept"])

    saver = open_saver(db, signer, archive)
    result = saver.replay_erasures(archive)
    assert result.ok, result.to_json()
    assert (result.checked, result.reappeared, result.re_erased, result.failed) == (3, 3, 3, 0)
    # The rows are gone again, raw; tombstones are back; dave keeps his latest state only.
    assert thread_rows(db, ALICE, *CAROL) == 0
    assert rows(db, "store", "prefix IN ('users.alice', 'users.carol')") == []
    assert tombstoned(db, ALICE) and all(tombstoned(db, t) for t in CAROL)
    assert checkpoints(db, DAVE) == erased["kept"]
    assert rows(db, "checkpoints", "thread_id = ?", (BOB,)) == erased["bob"]  # bystander
    # Each new receipt verifies, names its original, and is of the original's kind.
    by_original = {r.predicate["replay_of"]: r for r in result.receipts}
    for kind, original in erased["originals"].items():
        new = by_original[original.receipt_id]
        v = verify_receipt(new.to_json(), [signer.public_key])
        assert v.statement["predicate"]["kind"] == kind
        assert v.statement["predicate"]["replay_of"] == original.receipt_id
        assert (archive / f"{new.receipt_id}.json").exists()
    assert saver.is_erased(ALICE) and all(saver.is_erased(t) for t in CAROL)

    # A second replay re-erases nothing: this database's journal holds the replays.
    again = saver.replay_erasures(archive)
    assert again.ok and again.re_erased == 0 and again.receipts == []
    assert again.count("postdated") == 3
    saver.conn.close()


def test_dry_run_lists_what_came_back_and_changes_nothing(
    erased: dict[str, Any], signer: Signer
) -> None:
    db, archive = erased["db"], erased["archive"]
    restore(erased["copy"], db)
    before = file_sha(db)
    files_before = sorted(p.name for p in archive.iterdir())
    saver = open_saver(db, signer, archive)
    result = saver.replay_erasures(archive, dry_run=True)
    saver.conn.close()
    assert result.dry_run and result.reappeared == 3 and result.re_erased == 0
    assert {s.outcome for s in result.scopes} == {"reappeared"}
    alice = next(s for s in result.scopes if s.scope == ALICE)
    assert alice.rows == thread_rows(db, ALICE) + len(rows(db, "store", "prefix = 'users.alice'"))
    assert file_sha(db) == before
    assert sorted(p.name for p in archive.iterdir()) == files_before


def test_unrestored_database_is_postdated_and_untouched(
    erased: dict[str, Any], signer: Signer
) -> None:
    db, archive = erased["db"], erased["archive"]
    saver = open_saver(db, signer, archive)
    assert saver.reopen_thread(ALICE)  # reused on purpose after its erasure ...
    talk(build_graph(saver, saver._eraser.store), ALICE, "a new conversation")
    result = saver.replay_erasures(archive)
    saver.conn.close()
    # ... so its new rows are left alone: the journal shows the database saw the erasure.
    assert result.ok and result.count("postdated") == 3 and result.receipts == []
    assert thread_rows(db, ALICE) > 0


def test_receipts_that_do_not_verify_are_not_used_and_fail_the_result(
    erased: dict[str, Any], signer: Signer
) -> None:
    db, archive = erased["db"], erased["archive"]
    restore(erased["copy"], db)
    alice = erased["originals"]["thread"]
    path = archive / f"{alice.receipt_id}.json"
    doc = json.loads(path.read_bytes())
    doc["statement"]["predicate"]["scope"]["thread_id"] = BOB  # tampered: points at bob
    path.write_text(json.dumps(doc, indent=2))
    stranger = Signer.generate()
    saver = open_saver(db, signer, archive)
    result = saver.replay_erasures(archive)
    assert not result.ok and len(result.rejected) == 1 and alice.receipt_id in result.rejected[0][0]
    assert rows(db, "checkpoints", "thread_id = ?", (BOB,)) == erased["bob"]  # never used
    assert thread_rows(db, ALICE) > 0  # its erasure could not be replayed: reported
    # Against another key nothing is trusted, so nothing changes.
    saver.conn.close()
    restore(erased["copy"], db)
    saver = open_saver(db, signer, archive)
    none = saver.replay_erasures(archive, trust=[stranger.public_key])
    saver.conn.close()
    assert result.re_erased == 2  # carol and dave's were replayed: their receipts are 5 files
    assert none.checked == 0 and len(none.rejected) == len(list(archive.glob("*.json"))) == 5
    assert not none.ok and none.receipts == [] and thread_rows(db, *CAROL) > 0


def test_replay_from_a_receipt_log(tmp_path: Path, signer: Signer) -> None:
    db, logdir, copy = tmp_path / "app.db", tmp_path / "log", tmp_path / "backup.db"
    log = ReceiptLog(logdir, signer=signer)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=log) as saver:
        graph = build_graph(saver, None)  # type: ignore[arg-type]
        talk(graph, ALICE, "hello")
        backup(db, copy)
        original = saver.erase_thread(ALICE)
    restore(copy, db)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=log) as saver:
        result = saver.replay_erasures(ReceiptLog(logdir))
    assert result.ok and result.re_erased == 1
    assert result.receipts[0].predicate["replay_of"] == original.receipt_id
    assert thread_rows(db, ALICE) == 0
    assert ReceiptLog(logdir).size == 2  # the replay's receipt was appended


def test_startup_guard_refuses_until_replayed(erased: dict[str, Any], signer: Signer) -> None:
    db, archive = erased["db"], erased["archive"]
    clean = open_saver(db, signer, archive, check_erasures=archive)
    clean.setup()  # nothing came back: serves
    clean.conn.close()
    restore(erased["copy"], db)
    saver = open_saver(db, signer, archive, check_erasures=archive)
    with pytest.raises(ErasedDataRestoredError, match=ALICE):
        saver.setup()
    with pytest.raises(ErasedDataRestoredError):  # LangGraph's own calls set up first
        saver.get_tuple({"configurable": {"thread_id": BOB}})
    assert saver.replay_erasures(archive).ok
    saver.setup()
    assert saver.get_tuple({"configurable": {"thread_id": BOB}}) is not None
    saver.conn.close()


def test_async_replay_and_guard(erased: dict[str, Any], signer: Signer) -> None:
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    db, archive = erased["db"], erased["archive"]
    restore(erased["copy"], db)

    async def main() -> tuple[Any, Any]:
        async with (
            AsyncSqliteStore.from_conn_string(str(db)) as store,
            AsyncAttestingSqliteSaver.from_conn_string(
                str(db), signer=signer, store=store, archive=archive, check_erasures=archive
            ) as saver,
        ):
            with pytest.raises(ErasedDataRestoredError, match="carol"):
                await saver.setup()
            first = await saver.areplay_erasures(archive, dry_run=True)
            second = await saver.areplay_erasures(archive)
            await saver.setup()  # replayed: serves
            assert saver.last_receipt == second.receipts[-1]
            return first, second

    first, second = asyncio.run(main())
    assert first.reappeared == 3 and first.receipts == []
    assert second.ok and second.re_erased == 3
    assert thread_rows(db, ALICE, *CAROL) == 0
    assert checkpoints(db, DAVE) == erased["kept"]


def test_privacy_mode_subject_replays_with_its_key_and_id(tmp_path: Path, signer: Signer) -> None:
    from erasure_receipts import CommitmentKey

    db, archive, copy = tmp_path / "app.db", tmp_path / "receipts", tmp_path / "backup.db"
    key = CommitmentKey.generate()
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as s:
        graph = build_graph(s, None)  # type: ignore[arg-type]
        for t in CAROL:
            talk(graph, t, f"carol here on {t}")
        talk(graph, BOB, "bob")
        backup(db, copy)
        original = s.erase_subject(
            "carol", threads=CAROL, privacy="commitments", commitment_key=key
        )
    assert "carol" not in json.dumps(original.statement)
    restore(copy, db)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as s:
        no_key = s.replay_erasures(archive)
        assert no_key.failed == 1 and "commitment key" in (no_key.scopes[0].reason or "")
        no_id = s.replay_erasures(archive, privacy_key=key, subject_ids=["mallory"])
        assert no_id.failed == 1 and "subject_ids" in (no_id.scopes[0].reason or "")
        assert thread_rows(db, *CAROL) > 0  # nothing happened on a failed scope
        done = s.replay_erasures(archive, privacy_key=key, subject_ids=["mallory", "carol"])
    assert done.ok and done.re_erased == 1 and thread_rows(db, *CAROL) == 0
    [new] = done.receipts
    v = verify_receipt(new.to_json(), [signer.public_key])
    p = v.statement["predicate"]
    assert p["replay_of"] == original.receipt_id
    assert p["scope"]["subject"] == original.predicate["scope"]["subject"]  # same commitment
    assert "carol" not in json.dumps(v.statement)
    assert len(rows(db, "checkpoints", "thread_id = ?", (BOB,))) > 0


def test_history_replay_refuses_a_restore_older_than_the_kept_state(
    tmp_path: Path, signer: Signer
) -> None:
    db, archive, copy = tmp_path / "app.db", tmp_path / "receipts", tmp_path / "backup.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as s:
        graph = build_graph(s, None)  # type: ignore[arg-type]
        talk(graph, DAVE, "one", "two")
        backup(db, copy)  # the backup holds neither the kept state nor what followed
        talk(graph, DAVE, "three")
        s.erase_history(DAVE)
    restore(copy, db)
    before = checkpoints(db, DAVE)
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as s:
        result = s.replay_erasures(archive)
    assert not result.ok and result.failed == 1
    assert "predates the state it kept" in (result.scopes[0].reason or "")
    assert checkpoints(db, DAVE) == before  # nothing erased on a failed scope


def test_namespace_erasure_replays(tmp_path: Path, signer: Signer) -> None:
    db, archive, copy = tmp_path / "app.db", tmp_path / "receipts", tmp_path / "backup.db"
    with SqliteStore.from_conn_string(str(db)) as store:
        store.setup()
        store.put(("users", "erin"), "profile", {"email": "erin@example.com"})
        store.put(("users", "erin", "prefs"), "tone", {"likes": "short"})
        store.put(("users", "erina"), "profile", {"email": "erina@example.com"})
    saver = open_saver(db, signer, archive)
    saver.setup()
    backup(db, copy)
    original = saver.erase_namespace(("users", "erin"))
    saver.conn.close()
    restore(copy, db)
    assert len(rows(db, "store", "prefix LIKE 'users.erin%'")) == 3
    saver = open_saver(db, signer, archive)
    result = saver.replay_erasures(archive)
    assert result.ok and result.re_erased == 1, result.to_json()
    assert [r[0] for r in rows(db, "store", "prefix LIKE 'users.erin%'")] == ["users.erina"]
    assert saver.is_namespace_erased(("users", "erin"))
    [new] = result.receipts
    v = verify_receipt(new.to_json(), [signer.public_key])
    assert v.statement["predicate"]["kind"] == "namespace"
    assert v.statement["predicate"]["replay_of"] == original.receipt_id
    again = saver.replay_erasures(archive)
    saver.conn.close()
    assert again.ok and again.re_erased == 0


def never_had(tmp_path: Path, signer: Signer, **erase: Any) -> tuple[Path, Path, Any]:
    """A backup taken before alice's thread existed (bob only); alice then talks and is
    erased (``erase`` passed to ``erase_thread``); the backup restored: alice has no
    rows, no tombstone and no journal entry."""
    db, archive, copy = tmp_path / "app.db", tmp_path / "receipts", tmp_path / "backup.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as s:
        graph = build_graph(s, None)  # type: ignore[arg-type]
        talk(graph, BOB, "hello from bob")
        backup(db, copy)
        talk(graph, ALICE, "my SSN is 078-05-1120")
        original = s.erase_thread(ALICE, **erase)
    restore(copy, db)
    assert thread_rows(db, ALICE) == 0 and not tombstoned(db, ALICE)
    return db, archive, original


def test_a_scope_still_empty_is_counted_and_not_attested_again(
    tmp_path: Path, signer: Signer
) -> None:
    db, archive, original = never_had(tmp_path, signer, tombstone=False)
    files = sorted(p.name for p in archive.iterdir())
    bob = rows(db, "checkpoints", "thread_id = ?", (BOB,))
    saver = open_saver(db, signer, archive)
    result = saver.replay_erasures(archive)
    journal = rows(db, "erasure_journal", "1 = 1")
    saver.conn.close()
    assert result.ok and result.checked == 1 and result.receipts == []
    [scope] = result.scopes
    assert (scope.outcome, scope.scope, scope.receipt_id) == (
        "still_empty", ALICE, original.receipt_id)  # fmt: skip
    assert scope.new_receipt_id is None and scope.rows == 0
    doc = result.to_json()
    assert (doc["still_empty"], doc["retombstoned"], doc["reappeared"], doc["re_erased"]) == (
        1, 0, 0, 0)  # fmt: skip
    # Nothing attested, journaled, archived or tombstoned; the bystander untouched.
    assert sorted(p.name for p in archive.iterdir()) == files
    assert journal == [] and not tombstoned(db, ALICE)
    assert rows(db, "checkpoints", "thread_id = ?", (BOB,)) == bob


def test_a_lost_tombstone_is_put_back_by_an_attested_empty_erasure(
    tmp_path: Path, signer: Signer
) -> None:
    db, archive, original = never_had(tmp_path, signer)
    assert original.predicate["scope"]["tombstone"] is True
    saver = open_saver(db, signer, archive)
    dry = saver.replay_erasures(archive, dry_run=True)
    assert [s.outcome for s in dry.scopes] == ["retombstoned"] and dry.receipts == []
    assert not tombstoned(db, ALICE)  # a dry run puts nothing back

    result = saver.replay_erasures(archive)
    assert result.ok and result.checked == 1
    [scope] = result.scopes
    assert (scope.outcome, scope.rows) == ("retombstoned", 0)
    doc = result.to_json()
    assert (doc["still_empty"], doc["retombstoned"], doc["reappeared"], doc["re_erased"]) == (
        1, 1, 0, 0)  # fmt: skip
    # The tombstone row exists again, and exactly one new receipt names the original.
    assert tombstoned(db, ALICE) and saver.is_erased(ALICE)
    [new] = result.receipts
    assert scope.new_receipt_id == new.receipt_id
    replays = [p for p in archive.glob("*.json") if "replay_of" in p.read_text()]
    assert [p.name for p in replays] == [f"{new.receipt_id}.json"]
    v = verify_receipt(replays[0].read_bytes(), [signer.public_key])
    p = v.statement["predicate"]
    assert p["replay_of"] == original.receipt_id and p["kind"] == "thread"
    assert p["scope"]["thread_id"] == ALICE and p["scope"]["tombstone"] is True
    assert p["pre_state"]["leaves"] == 0  # an empty erasure, attested
    # A second replay: the journal now holds the replay's receipt.
    again = saver.replay_erasures(archive)
    saver.conn.close()
    assert again.ok and again.receipts == [] and again.count("postdated") == 1
