"""AttestingSqliteSaver on real SQLite files, asserting on raw rows and raw file bytes."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import (
    AttestingSqliteSaver,
    ErasureIncompleteError,
    NothingToEraseError,
    Receipt,
    Signer,
    ThreadErasedError,
    verify_receipt,
)
from erasure_receipts.digest import EMPTY_ROOT
from scenario import (
    MARKER,
    TURNS,
    build_graph,
    human,
    independent_digest,
    marker_in_files,
    raw_rows,
)

SCHEMA = json.loads((Path(__file__).parents[2] / "schemas" / "receipt.schema.json").read_text())
CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
T = "alice-chat"
NS = ("users", "alice")


def cfg(thread: str, ns: str = "") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}


def checkpoint(i: int, payload: str = "x") -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": payload}
    cp["id"] = f"1ef{i:029d}"
    return cp


def put(saver: Any, thread: str, i: int, payload: str = "x", ns: str = "") -> Any:
    return saver.put(cfg(thread, ns), checkpoint(i, payload), {"step": i}, {})


def other_rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {
        "checkpoints": raw_rows(db, "checkpoints", "thread_id != ?", (T,)),
        "writes": raw_rows(db, "writes", "thread_id != ?", (T,)),
        "store": raw_rows(db, "store", "prefix NOT LIKE ?", ("users.alice%",)),
    }


@pytest.fixture
def world(tmp_path: Path, signer: Signer):
    """A file database shared by a SqliteStore and an AttestingSqliteSaver."""
    db = tmp_path / "app.db"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, store=store, archive=tmp_path / "receipts",
            namespaces_for=lambda tid: [NS] if tid == T else [],
        ) as saver,
    ):  # fmt: skip
        store.setup()
        yield db, saver, store


def run_scenario(saver: Any, store: Any) -> Any:
    graph = build_graph(saver, store)
    for text in TURNS:
        graph.invoke(human(text), {"configurable": {"thread_id": T}})
    graph.invoke(human("hello from bob"), {"configurable": {"thread_id": "bob-chat"}})
    store.put(("users", "bob"), "identity", {"name": "bob"})
    store.put(("users", "alice2"), "identity", {"name": "not alice"})  # prefix look-alike
    return graph


def test_scenario_erases_every_trace(world, tmp_path: Path, pub_pem: Path) -> None:
    db, saver, store = world
    graph = run_scenario(saver, store)
    # The compaction removed the marker from the current state...
    current = graph.get_state({"configurable": {"thread_id": T}}).values["messages"]
    assert not any(MARKER in str(m.content) for m in current)
    # ...but it is still stored: in many checkpoints, a write and the store.
    saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # push it into the main file too
    with sqlite3.connect(db) as c:
        m = MARKER.encode()
        n_cp = c.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id=? AND instr(checkpoint, ?)", (T, m)
        ).fetchone()[0]
        n_wr = c.execute(
            "SELECT count(*) FROM writes WHERE thread_id=? AND instr(value, ?)", (T, m)
        ).fetchone()[0]
        pre_counts = {
            t: c.execute(f"SELECT count(*) FROM {t} WHERE thread_id=?", (T,)).fetchone()[0]
            for t in ("checkpoints", "writes")
        }
    assert n_cp >= 5 and n_wr >= 1
    assert store.get(NS, "identity").value == {"ssn": MARKER}
    assert marker_in_files(db)["app.db"] > 0
    before_other = other_rows(db)
    expected_digest = independent_digest(
        db,
        {
            "checkpoints": ("thread_id = ?", (T,)),
            "writes": ("thread_id = ?", (T,)),
            "store": ("prefix = ? OR prefix GLOB ?", ("users.alice", "users.alice.*")),
        },
    )

    preview = saver.digest_thread(T, [NS])
    receipt = saver.erase_thread(T, store_namespaces=[NS])

    # Digest: equals the preview and an independent recomputation from the raw rows.
    assert receipt.pre_digest == preview.digest == expected_digest
    pre = receipt.predicate["pre_state"]["tables"]
    assert pre["checkpoints"]["rows"] == pre_counts["checkpoints"]
    assert pre["writes"]["rows"] == pre_counts["writes"]
    assert pre["store"]["rows"] == 1
    assert receipt.predicate["post_state"]["digest"]["sha256"] == EMPTY_ROOT.hex()
    assert receipt.predicate["methods"] == {"checkpoints": "atomic-transaction",
                                            "store": "atomic-transaction"}  # fmt: skip
    # Raw rows: nothing of the thread, nothing of the namespace.
    assert raw_rows(db, "checkpoints", "thread_id = ?", (T,)) == []
    assert raw_rows(db, "writes", "thread_id = ?", (T,)) == []
    assert (
        raw_rows(db, "store", "prefix = ? OR prefix GLOB ?", ("users.alice", "users.alice.*")) == []
    )
    # Raw bytes: the marker is nowhere in the database, its WAL or shared memory.
    assert marker_in_files(db) == {"app.db": 0, "app.db-wal": 0, "app.db-shm": 0}
    # Other threads and look-alike namespaces are byte-identical.
    assert other_rows(db) == before_other
    assert store.get(("users", "alice2"), "identity") is not None
    # The receipt is archived, schema-valid and verifies with the CLI.
    archived = tmp_path / "receipts" / f"{receipt.receipt_id}.json"
    assert archived.read_bytes() == receipt.to_json()
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(archived.read_bytes()))
    res = subprocess.run([*CLI, "verify", str(archived), "--key", str(pub_pem), "--json"],
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["results"][0]["thread_id"] == T
    residue = {r["action"]: r for r in receipt.predicate["residue"]}
    assert residue["sqlite.wal_checkpoint"]["status"] == "applied"
    assert residue["sqlite.wal_checkpoint"]["detail"]["wal_bytes_after"] == 0
    assert residue["sqlite.secure_delete"]["detail"]["value"] == 1


def test_normal_operation_matches_parent(tmp_path: Path, signer: Signer) -> None:
    results = []
    for cls, kwargs in ((SqliteSaver, {}), (AttestingSqliteSaver, {"signer": signer})):
        with cls.from_conn_string(str(tmp_path / f"{cls.__name__}.db"), **kwargs) as saver:
            c1 = put(saver, "t", 1, "a")
            saver.put_writes(c1, [("ch", {"k": 1}), ("__error__", "boom")], "task-1")
            c2 = saver.put({"configurable": {**c1["configurable"]}}, checkpoint(2, "b"), {}, {})
            put(saver, "t", 3, "c", ns="child")
            got = saver.get_tuple(cfg("t"))
            listed = list(saver.list({"configurable": {"thread_id": "t"}}))
            results.append(
                (c1, c2, got.checkpoint["channel_values"], got.pending_writes, got.parent_config,
                 [(t.config, t.checkpoint["channel_values"], t.metadata) for t in listed])
            )  # fmt: skip
    assert results[0] == results[1]


def test_store_sweep_beats_the_limit_10_trap(tmp_path: Path, signer: Signer) -> None:
    store = InMemoryStore()
    for i in range(30):
        store.put(NS, f"k{i:02d}", {"i": i})
    for i in range(5):
        store.put((*NS, "notes"), f"n{i}", {"i": i})
    store.put(("users", "alice2"), "x", {"keep": True})
    assert len(store.search(NS)) == 10  # the trap: the default limit truncates silently
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), signer=signer, store=store
    ) as saver:
        put(saver, T, 1)
        preview = saver.digest_thread(T, [NS])
        receipt = saver.erase_thread(T, store_namespaces=[NS])
    assert receipt.predicate["pre_state"]["tables"]["store"]["rows"] == 35
    assert receipt.predicate["methods"]["store"] == "sweep"
    assert receipt.pre_digest == preview.digest
    assert store.search(NS, limit=1000) == []
    assert store.get(("users", "alice2"), "x") is not None


def test_sqlite_store_in_same_file_is_atomic_and_complete(world) -> None:
    db, saver, store = world
    for i in range(40):
        store.put(NS, f"k{i}", {"i": i, "secret": MARKER})
    put(saver, T, 1)
    receipt = saver.erase_thread(T, store_namespaces=[NS])
    assert receipt.predicate["pre_state"]["tables"]["store"]["rows"] == 40
    assert receipt.predicate["methods"]["store"] == "atomic-transaction"
    assert raw_rows(db, "store", "prefix = ?", ("users.alice",)) == []
    assert marker_in_files(db)["app.db"] == 0


def test_sqlite_store_in_other_file_is_swept(tmp_path: Path, signer: Signer) -> None:
    with (
        SqliteStore.from_conn_string(str(tmp_path / "store.db")) as store,
        AttestingSqliteSaver.from_conn_string(str(tmp_path / "cp.db"), signer=signer,
                                              store=store) as saver,
    ):  # fmt: skip
        store.setup()
        for i in range(25):
            store.put(NS, f"k{i}", {"i": i})
        receipt = saver.erase_thread(T, store_namespaces=[NS])
    assert receipt.predicate["methods"]["store"] == "sweep"
    assert receipt.predicate["pre_state"]["tables"]["store"]["rows"] == 25
    assert raw_rows(tmp_path / "store.db", "store", "1", ()) == []


def test_tombstone_rejects_late_writes_everywhere(world, tmp_path: Path) -> None:
    db, saver, store = world
    saver.tombstone_policy = "refuse_all"  # every write refused until reopen_thread()
    graph = run_scenario(saver, store)
    c = put(saver, T, 99)
    saver.erase_thread(T, store_namespaces=[NS])
    assert saver.is_erased(T) and not saver.is_erased("bob-chat")
    with pytest.raises(ThreadErasedError):
        put(saver, T, 100)
    with pytest.raises(ThreadErasedError):
        saver.put_writes(c, [("ch", 1)], "task")
    with pytest.raises(ThreadErasedError):  # a still-running graph resurrecting the thread
        graph.invoke(human("late"), {"configurable": {"thread_id": T}})
    # A plain SqliteSaver in another connection (another worker process) is refused too.
    with SqliteSaver.from_conn_string(str(db)) as plain, pytest.raises(sqlite3.IntegrityError):
        put(plain, T, 101)
    assert raw_rows(db, "checkpoints", "thread_id = ?", (T,)) == []
    put(saver, "bob-chat", 102)  # other threads are unaffected
    # Explicit opt-in to reuse the id.
    assert saver.reopen_thread(T)
    put(saver, T, 103)
    assert len(raw_rows(db, "checkpoints", "thread_id = ?", (T,))) == 1


def test_tombstone_false_allows_reuse(world) -> None:
    db, saver, _ = world
    put(saver, T, 1)
    r = saver.erase_thread(T, tombstone=False)
    assert r.predicate["scope"]["tombstone"] is False
    put(saver, T, 2)
    assert len(raw_rows(db, "checkpoints", "thread_id = ?", (T,))) == 1


def test_delete_thread_is_attested_and_archived(world, tmp_path: Path, signer: Signer) -> None:
    _db, saver, store = world
    run_scenario(saver, store)
    assert saver.delete_thread(T) is None
    receipts = list((tmp_path / "receipts").glob("*.json"))
    assert len(receipts) == 1
    v = verify_receipt(receipts[0].read_bytes(), [signer.public_key])
    assert v.thread_id == T
    assert v.statement["predicate"]["scope"]["store_namespaces"] == [list(NS)]
    assert store.search(NS, limit=100) == []  # namespaces_for was applied
    assert saver.last_receipt is not None and saver.last_receipt.receipt_id == v.receipt_id


def test_all_checkpoint_namespaces_are_erased(world) -> None:
    db, saver, _ = world
    for i, ns in enumerate(["", "child:1", "child:2|grand:3"]):
        c = put(saver, T, i, MARKER, ns=ns)
        saver.put_writes(c, [("ch", MARKER)], f"task-{i}")
    r = saver.erase_thread(T, store_namespaces=[])  # the thread's rows alone, no store
    assert r.predicate["pre_state"]["tables"] == {
        "checkpoints": {
            "rows": 3,
            "bytes": r.predicate["pre_state"]["tables"]["checkpoints"]["bytes"],
        },
        "writes": {"rows": 3, "bytes": r.predicate["pre_state"]["tables"]["writes"]["bytes"]},
    }
    assert raw_rows(db, "checkpoints", "thread_id = ?", (T,)) == []
    assert raw_rows(db, "writes", "thread_id = ?", (T,)) == []


class ExplodingStore(InMemoryStore):
    def __init__(self, fail_after: int) -> None:
        super().__init__()
        self.fail_after = fail_after
        self.deletes = 0

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        if self.deletes >= self.fail_after:
            raise OSError("injected: store backend unavailable")
        self.deletes += 1
        super().delete(namespace, key)


def test_injected_store_failure_issues_no_receipt(tmp_path: Path, signer: Signer) -> None:
    store = ExplodingStore(fail_after=3)
    for i in range(12):
        store.put(NS, f"k{i}", {"i": i})
    db, archive = tmp_path / "a.db", tmp_path / "receipts"
    with AttestingSqliteSaver.from_conn_string(
        str(db), signer=signer, store=store, archive=archive
    ) as saver:
        put(saver, T, 1, MARKER)
        with pytest.raises(ErasureIncompleteError) as ei:
            saver.erase_thread(T, store_namespaces=[NS])
        assert "injected" in str(ei.value) and "not restorable" in str(ei.value)
        assert ei.value.remaining.get("checkpoints") == 1
        assert ei.value.remaining.get("store") == 9
        assert saver.last_receipt is None
        # The checkpoint transaction was rolled back; the thread is not tombstoned.
        assert len(raw_rows(db, "checkpoints", "thread_id = ?", (T,))) == 1
        assert not saver.is_erased(T)
        # Once the store recovers, a retry completes and covers what was left.
        store.fail_after = 10**9
        r = saver.erase_thread(T, store_namespaces=[NS])
        assert r.predicate["pre_state"]["tables"]["store"]["rows"] == 9
    assert [p.name for p in archive.glob("*.json")] == [f"{r.receipt_id}.json"]


def test_injected_failure_inside_transaction_rolls_back(world, monkeypatch, tmp_path) -> None:
    db, saver, store = world
    run_scenario(saver, store)
    before = raw_rows(db, "checkpoints", "thread_id = ?", (T,))
    from erasure_receipts._backends import sqlite as backend

    def boom(self: Any, *a: Any) -> None:
        raise sqlite3.OperationalError("injected: disk I/O error")

    monkeypatch.setattr(backend.SqliteBackend, "write_tombstone", boom)
    with pytest.raises(ErasureIncompleteError, match="rolled back"):
        saver.erase_thread(T, store_namespaces=[NS])
    assert raw_rows(db, "checkpoints", "thread_id = ?", (T,)) == before
    assert store.get(NS, "identity") is not None
    assert not (tmp_path / "receipts").exists() or not list((tmp_path / "receipts").iterdir())


def test_api_residue_after_commit_issues_no_receipt(world, monkeypatch, tmp_path) -> None:
    _db, saver, store = world
    run_scenario(saver, store)
    real = saver.get_tuple(cfg("bob-chat"))
    monkeypatch.setattr(type(saver), "get_tuple", lambda self, config: real)
    with pytest.raises(ErasureIncompleteError, match="public API still returns"):
        saver.erase_thread(T, store_namespaces=[NS])
    assert saver.last_receipt is None
    assert not (tmp_path / "receipts").exists() or not list((tmp_path / "receipts").iterdir())


def test_concurrent_writers_never_leave_untracked_rows(tmp_path: Path, signer: Signer) -> None:
    """Another worker (own connection) keeps writing the target and another thread."""
    db = tmp_path / "a.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        put(saver, T, 0)
        put(saver, "other", 0)
        stop = threading.Event()
        outcomes: dict[str, list[Any]] = {"target_ok": [], "target_rejected": [],
                                          "other_ok": [], "errors": []}  # fmt: skip

        def writer() -> None:
            with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as w:
                i = 1
                while not stop.is_set() and i < 5000:
                    try:
                        if not outcomes["target_rejected"]:
                            put(w, T, i, MARKER)
                            outcomes["target_ok"].append(i)
                    except ThreadErasedError:
                        outcomes["target_rejected"].append(i)
                    except Exception as exc:  # anything else is a failure of the test
                        outcomes["errors"].append(repr(exc))
                    put(w, "other", i)
                    outcomes["other_ok"].append(i)
                    i += 1

        t = threading.Thread(target=writer)
        t.start()
        while len(outcomes["target_ok"]) < 30:
            time.sleep(0.005)
        receipt = saver.erase_thread(T)
        time.sleep(0.05)
        stop.set()
        t.join(30)
    assert outcomes["errors"] == []
    assert outcomes["target_rejected"], "the writer never hit the tombstone"
    # Every successful target write happened before the erasure and was measured.
    covered = receipt.predicate["pre_state"]["tables"]["checkpoints"]["rows"]
    assert covered == 1 + len(outcomes["target_ok"])
    assert raw_rows(db, "checkpoints", "thread_id = ?", (T,)) == []
    # Every write to the other thread survived.
    assert len(raw_rows(db, "checkpoints", "thread_id = ?", ("other",))) == 1 + len(
        outcomes["other_ok"]
    )


def test_erasing_nothing_is_refused_and_names_the_earlier_receipt(world) -> None:
    _db, saver, _ = world
    with pytest.raises(NothingToEraseError, match="no stored rows") as unknown:
        saver.erase_thread("never-existed")
    assert unknown.value.previous_receipt_id is None
    assert not saver.is_erased("never-existed")  # a typo gets no tombstone
    put(saver, T, 1)
    first = saver.erase_thread(T)
    with pytest.raises(NothingToEraseError, match=first.receipt_id) as again:
        saver.erase_thread(T)
    assert again.value.previous_receipt_id == first.receipt_id
    saver.delete_thread("never-existed")  # LangGraph's contract: a no-op
    assert saver.last_receipt is first
    r = saver.erase_thread("never-existed", allow_empty=True)  # on purpose
    assert r.predicate["pre_state"]["leaves"] == 0
    assert r.pre_digest == EMPTY_ROOT.hex()
    assert saver.is_erased("never-existed")


def test_bad_arguments_are_rejected_before_touching_data(world) -> None:
    db, saver, _ = world
    put(saver, T, 1)
    with pytest.raises(ValueError, match="empty"):
        saver.erase_thread(T, store_namespaces=[()])
    with pytest.raises(TypeError):
        saver.erase_thread(T, store_namespaces=["users"])  # a str, not a tuple
    with (
        AttestingSqliteSaver.from_conn_string(":memory:", signer=Signer.generate()) as bare,
        pytest.raises(ValueError, match="no store"),
    ):
        bare.erase_thread(T, store_namespaces=[NS])
    assert len(raw_rows(db, "checkpoints", "thread_id = ?", (T,))) == 1


def test_receipt_round_trips_through_json(world, signer: Signer) -> None:
    _, saver, store = world
    run_scenario(saver, store)
    r = saver.erase_thread(T, store_namespaces=[NS])
    again = Receipt.from_json(r.to_json())
    assert again.statement == r.statement and again.payload == r.payload
    assert verify_receipt(r.to_json(), [signer.public_key]).pre_digest == r.pre_digest


def test_busy_reader_is_reported_not_hidden(world) -> None:
    """A reader pinning an old snapshot keeps the WAL from being truncated: the receipt
    must say "partial" with the raw figures - and the bytes really are still there."""
    db, saver, store = world
    run_scenario(saver, store)
    reader = sqlite3.connect(db)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM checkpoints").fetchone()  # holds a snapshot
        receipt = saver.erase_thread(T, store_namespaces=[NS])
        wal = {r["action"]: r for r in receipt.predicate["residue"]}["sqlite.wal_checkpoint"]
        assert wal["status"] == "partial"
        assert wal["detail"]["busy"] == 1 and wal["detail"]["wal_bytes_after"] > 0
        assert marker_in_files(db)["app.db-wal"] > 0  # what "partial" warns about
    finally:
        reader.rollback()
        reader.close()
    # Rows are gone regardless (the receipt's rows claims hold), and the next
    # checkpoint, with no reader left, clears the WAL.
    assert raw_rows(db, "checkpoints", "thread_id = ?", (T,)) == []
    saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert marker_in_files(db) == {"app.db": 0, "app.db-wal": 0, "app.db-shm": 0}
