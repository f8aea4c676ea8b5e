"""Namespace erasure and store tombstones on SQLite (RECEIPT_SPEC.md 8.1, 9.7).

Real database files, a real ``SqliteStore`` in the saver's file, plain stores in other
processes, a real LangGraph graph; every assertion on data reads raw rows through a
separate connection.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.sqlite import SqliteStore
from langgraph.store.sqlite.base import VECTOR_MIGRATIONS

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    NothingToEraseError,
    Signer,
    verify_receipt,
)
from erasure_receipts.errors import ArgumentTypeError, ConfigurationError, NeedlesFoundError

ALICE = ("users", "alice")
PREFS = ("users", "alice", "prefs")
ALICIA = ("users", "alicia")
SECRET = "alice-secret-4242-4242-4242"


def rows(db: Path, table: str, where: str = "1", params: tuple[Any, ...] = ()) -> list[Any]:
    """Raw rows (every column, stored bytes), in key order; [] if the table is absent."""
    with sqlite3.connect(db) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
            return []
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        sel = ", ".join(f"CAST({c} AS BLOB)" for c in cols)
        order = ", ".join(str(i + 1) for i in range(min(len(cols), 3)))
        return conn.execute(
            f"SELECT {sel} FROM {table} WHERE {where} ORDER BY {order}", params
        ).fetchall()


def under(db: Path, prefix: str, table: str = "store") -> list[Any]:
    return rows(db, table, "prefix = ? OR substr(prefix, 1, ?) = ?",
                (prefix, len(prefix) + 1, prefix + "."))  # fmt: skip


def everything(db: Path) -> dict[str, list[Any]]:
    with sqlite3.connect(db) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {n: rows(db, n) for n in sorted(names)}


def seed(db: Path) -> SqliteStore:
    """alice (two items, one with an embedding), alice's prefs (one TTL-expired), and
    bystanders whose names share alice's letters or hold LIKE/GLOB wildcards."""
    store = SqliteStore(sqlite3.connect(db, check_same_thread=False, isolation_level=None))
    store.setup()
    store.conn.executescript(VECTOR_MIGRATIONS[0])
    store.put(ALICE, "profile", {"name": "alice", "card": SECRET})
    store.put(ALICE, "notes", {"text": "likes tea"})
    store.put(PREFS, "theme", {"mode": "dark"}, ttl=60)
    store.conn.execute(
        "UPDATE store SET expires_at = datetime('now', '-1 day') WHERE prefix = 'users.alice.prefs'"
    )
    store.conn.execute(
        "INSERT INTO store_vectors(prefix, key, field_name, embedding) "
        "VALUES ('users.alice', 'notes', 'text', x'0000803f0000803f')"
    )
    for ns in [ALICIA, ("users", "al"), ("users", "a_ice"), ("users", "a%"), ("users", "a*")]:
        store.put(ns, "k", {"who": ns[-1]})
    store.conn.execute(
        "INSERT INTO store_vectors(prefix, key, field_name, embedding) "
        "VALUES ('users.alicia', 'k', 'text', x'0000803f00000040')"
    )
    return store


@contextmanager
def saver_on(
    db: Path, signer: Signer, store: BaseStore, **kw: Any
) -> Iterator[AttestingSqliteSaver]:
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store, **kw) as saver:
        yield saver


def bystanders(db: Path) -> dict[str, list[Any]]:
    return {t: [r for r in rows(db, t) if r[0] not in (b"users.alice", b"users.alice.prefs")]
            for t in ("store", "store_vectors")}  # fmt: skip


# -- Must show: alice's items 0 rows, alicia byte-identical, the receipt counts them ----


def test_erase_namespace_alice(tmp_path: Path, signer: Signer) -> None:
    db, archive = tmp_path / "app.db", tmp_path / "receipts"
    store = seed(db)
    kept = bystanders(db)
    assert len(kept["store"]) == 5 and len(kept["store_vectors"]) == 1
    with saver_on(db, signer, store, archive=archive) as saver:
        preview = saver.digest_namespace(ALICE)
        receipt = saver.erase_namespace(ALICE)
    # raw SQL: nothing of alice, sub-namespace and the expired item included
    assert under(db, "users.alice") == [] and under(db, "users.alice", "store_vectors") == []
    assert bystanders(db) == kept  # alicia, al, a_ice, a%, a* byte-identical
    p = receipt.predicate
    assert p["kind"] == "namespace"
    assert p["scope"] == {"namespace": ["users", "alice"],
                          "store_namespaces": [["users", "alice"]], "tombstone": True}  # fmt: skip
    assert receipt.statement["subject"][0]["name"] == "langgraph-store-namespace:users.alice"
    assert p["pre_state"]["tables"]["store"]["rows"] == 3  # profile, notes, expired theme
    assert p["pre_state"]["tables"]["store_vectors"]["rows"] == 1
    assert p["pre_state"]["leaves"] == 4
    assert receipt.pre_digest == preview.digest and preview.leaves == 4
    assert p["methods"] == {"store": "atomic-transaction"}
    assert {c["name"] for c in p["checks"]} >= {
        "raw_rows_zero_in_transaction", "raw_rows_zero_after_commit", "api_store_search_empty"
    }  # fmt: skip
    v = verify_receipt((archive / f"{receipt.receipt_id}.json").read_bytes(), [signer.public_key])
    assert v.receipt_id == receipt.receipt_id
    assert rows(db, "erasure_store_tombstones", "prefix = 'users.alice'") != []
    store.conn.close()


@pytest.mark.parametrize(
    "prefix", [("users", "al"), ("users", "a_ice"), ("users", "a%"), ("users", "a*")]
)
def test_whole_labels_and_literal_wildcards(
    tmp_path: Path, signer: Signer, prefix: tuple[str, ...]
) -> None:
    """``("users", "al")`` never touches alice; ``_``, ``%`` and ``*`` are plain characters."""
    db = tmp_path / "app.db"
    store = seed(db)
    before = everything(db)
    with saver_on(db, signer, store) as saver:
        receipt = saver.erase_namespace(prefix)
    assert receipt.predicate["pre_state"]["tables"]["store"]["rows"] == 1
    after = everything(db)
    text = ".".join(prefix).encode()
    assert [r for r in before["store"] if r[0] != text] == after["store"]
    assert before["store_vectors"] == after["store_vectors"]
    # the tombstone refuses that prefix only: alice and the others still accept puts
    store.put(ALICE, "new", {"x": 1})
    store.put(("users", "alicia", "x"), "new", {"x": 1})
    with pytest.raises(sqlite3.IntegrityError, match="store namespace erased"):
        store.put((*prefix, "below"), "new", {"x": 1})
    store.conn.close()


def test_digest_namespace_is_read_only(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "app.db"
    store = seed(db)
    with saver_on(db, signer, store) as saver:
        saver.setup()
        before = everything(db)
        d = saver.digest_namespace(PREFS)
        assert d.tables["store"].rows == 1  # the expired item
        assert everything(db) == before


# -- Must show: a plain SqliteStore in another process is refused, then accepted ------

PLAIN_PUT = """
import sqlite3, sys
from langgraph.store.sqlite import SqliteStore
with SqliteStore.from_conn_string(sys.argv[1]) as store:
    try:
        store.put(tuple(sys.argv[2].split(".")), "k", {"v": 1})
    except sqlite3.IntegrityError as exc:
        print("refused:", exc)
        sys.exit(7)
print("accepted")
"""


def plain_put(db: Path, prefix: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PLAIN_PUT, str(db), prefix],
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_plain_store_in_another_process_is_refused_until_reopened(
    tmp_path: Path, signer: Signer
) -> None:
    db = tmp_path / "app.db"
    store = seed(db)
    with saver_on(db, signer, store) as saver:
        saver.erase_namespace(ALICE)
        for prefix in ("users.alice.x", "users.alice"):
            out = plain_put(db, prefix)
            assert out.returncode == 7, out.stderr
            assert "store namespace erased" in out.stdout
        assert under(db, "users.alice") == []
        assert plain_put(db, "users.alicia.x").returncode == 0  # a bystander writes on
        assert saver.is_namespace_erased(("users", "alice", "x"))
        assert not saver.reopen_namespace(("users", "alice", "x"))  # not that prefix's
        assert saver.reopen_namespace(ALICE)
        assert not saver.is_namespace_erased(ALICE)
        out = plain_put(db, "users.alice.x")
        assert out.returncode == 0 and "accepted" in out.stdout, out.stderr
    assert len(under(db, "users.alice")) == 1
    store.conn.close()


def test_tombstone_false_leaves_the_prefix_open(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "app.db"
    store = seed(db)
    with saver_on(db, signer, store) as saver:
        r = saver.erase_namespace(ALICE, tombstone=False)
        assert r.predicate["scope"]["tombstone"] is False
        assert not saver.is_namespace_erased(ALICE)
    assert rows(db, "erasure_store_tombstones") == []
    store.put(ALICE, "again", {"v": 1})
    assert len(under(db, "users.alice")) == 1
    store.conn.close()


# -- Must show: a concurrent writer process: measured or refused, never unmeasured ------

# A writer that pauses between puts, as an application does: a loop with no gap at all
# starves any other SQLite writer (the busy handler polls), which is SQLite's behaviour and
# not what this test is about. It stops on its own after 60 s so a failed erasure cannot
# leave it running.
WRITER = """
import json, sqlite3, sys, pathlib, time
from langgraph.store.sqlite import SqliteStore
db, started, log = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
ok, refused, other, i = [], 0, [], 0
deadline = time.monotonic() + 60
with SqliteStore.from_conn_string(db) as store:
    while refused < 3 and time.monotonic() < deadline:
        key = f"w{i}"
        try:
            store.put(("users", "alice", "w"), key, {"i": i})
            ok.append(key)
            if len(ok) == 5:
                started.write_text("go")
        except sqlite3.IntegrityError as exc:
            if "store namespace erased" not in str(exc):
                raise
            refused += 1
        except sqlite3.OperationalError as exc:  # busy: the eraser holds the lock
            other.append(str(exc))
        i += 1
        time.sleep(0.002)
log.write_text(json.dumps({"ok": ok, "refused": refused, "other": other}))
"""


def test_concurrent_writer_process_is_measured_or_refused(tmp_path: Path, signer: Signer) -> None:
    db, started, log = tmp_path / "app.db", tmp_path / "started", tmp_path / "log.json"
    store = seed(db)
    with saver_on(db, signer, store) as saver:
        saver.setup()  # the store triggers exist before the writer starts
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(started), str(log)])
        try:
            while not started.exists():  # the writer is writing (no timing assumed)
                if proc.poll() is not None:
                    pytest.fail("the writer process ended before it wrote")
                threading.Event().wait(0.01)
            receipt = saver.erase_namespace(ALICE)
        except BaseException:
            proc.kill()  # the erasure's own error is the one to see, not a wait timeout
            proc.wait()
            raise
        assert proc.wait(timeout=120) == 0
    written = json.loads(log.read_text())
    assert written["refused"] == 3
    # every committed put of the writer is in the receipt's count; none survives
    measured = receipt.predicate["pre_state"]["tables"]["store"]["rows"]
    assert measured == 3 + len(written["ok"])
    assert under(db, "users.alice") == []
    assert verify_receipt(receipt.to_json(), [signer.public_key])
    store.conn.close()


# -- Must show: a graph still running during the erasure has its write refused ---------


class State(TypedDict):
    text: str


def test_running_graph_write_is_refused_and_the_receipt_verifies(
    tmp_path: Path, signer: Signer
) -> None:
    db = tmp_path / "app.db"
    store = seed(db)
    entered, resume = threading.Event(), threading.Event()

    def remember(state: State, *, store: BaseStore) -> State:
        entered.set()
        resume.wait(60)
        store.put(ALICE, "memory", {"text": state["text"]})
        return state

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    with saver_on(db, signer, store) as saver:
        graph = builder.compile(checkpointer=saver, store=store)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                graph.invoke({"text": "alice likes jazz"}, {"configurable": {"thread_id": "chat"}})
            except BaseException as exc:
                errors.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        assert entered.wait(60)  # the node runs: the graph started before the erasure
        receipt = saver.erase_namespace(ALICE)
        resume.set()
        worker.join(60)
    assert len(errors) == 1 and "store namespace erased" in str(errors[0])
    assert isinstance(errors[0], sqlite3.IntegrityError)
    assert under(db, "users.alice") == []
    assert verify_receipt(receipt.to_json(), [signer.public_key])
    store.conn.close()


# -- Must show: erase_thread(store_namespaces=...) tombstones the namespace too ----------


def test_erase_thread_with_store_namespaces_tombstones_them(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "app.db"
    store = seed(db)
    with saver_on(db, signer, store) as saver:
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                  _checkpoint(), {}, {})  # fmt: skip
        r = saver.erase_thread("t", store_namespaces=[ALICE])
        assert r.predicate["scope"]["store_tombstone"] is True
        assert saver.is_namespace_erased(PREFS)
        out = plain_put(db, "users.alice.prefs")
        assert out.returncode == 7, out.stderr
        assert verify_receipt(r.to_json(), [signer.public_key])
        # without a tombstone the namespace stays open, and the receipt says so
        saver.reopen_namespace(ALICE)
        store.put(ALICE, "k", {"v": 1})
        saver.put({"configurable": {"thread_id": "u", "checkpoint_ns": ""}}, _checkpoint(), {}, {})
        r2 = saver.erase_thread("u", store_namespaces=[ALICE], tombstone=False)
        assert r2.predicate["scope"]["store_tombstone"] is False
        assert not saver.is_namespace_erased(ALICE)
    store.conn.close()


def _checkpoint() -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    return empty_checkpoint()


# -- bad input: one clear error, nothing changed ------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "error", "match"),
    [
        ((), ConfigurationError, "every item"),
        (("users", ""), ConfigurationError, "empty label"),
        (("users.alice",), ConfigurationError, "contains '.'"),
        ("users.alice", ArgumentTypeError, "tuple of labels"),
        (("users", 3), ArgumentTypeError, "not a string"),
        (("users", "nobody"), NothingToEraseError, "holds no items"),
    ],
)
def test_bad_prefixes_change_nothing(
    tmp_path: Path, signer: Signer, prefix: Any, error: type[Exception], match: str
) -> None:
    db, archive = tmp_path / "app.db", tmp_path / "receipts"
    store = seed(db)
    with saver_on(db, signer, store, archive=archive) as saver:
        saver.setup()
        before = everything(db)
        with pytest.raises(error, match=match):
            saver.erase_namespace(prefix)
        assert everything(db) == before
    assert not list(archive.glob("*.json")) if archive.exists() else True
    store.conn.close()


def test_empty_erasure_only_with_allow_empty(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "app.db"
    store = seed(db)
    with saver_on(db, signer, store) as saver:
        r = saver.erase_namespace(("users", "nobody"), allow_empty=True)
    assert r.predicate["pre_state"]["leaves"] == 0
    assert verify_receipt(r.to_json(), [signer.public_key])
    store.conn.close()


def test_store_outside_the_database_is_refused(tmp_path: Path, signer: Signer) -> None:
    from langgraph.store.memory import InMemoryStore

    mem = InMemoryStore()
    mem.put(ALICE, "k", {"v": 1})
    with (
        saver_on(tmp_path / "app.db", signer, mem) as saver,
        pytest.raises(ConfigurationError, match="does not keep its items"),
    ):
        saver.erase_namespace(ALICE)
    assert mem.get(ALICE, "k") is not None
    with (
        AttestingSqliteSaver.from_conn_string(str(tmp_path / "x.db"), signer=signer) as bare,
        pytest.raises(ConfigurationError, match="store="),
    ):
        bare.erase_namespace(ALICE)


def test_authorization_is_refused_before_anything(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "app.db"
    store = seed(db)
    with (
        saver_on(db, signer, store) as saver,
        pytest.raises(ConfigurationError, match="authorization"),
    ):
        saver.erase_namespace(ALICE, authorization=object())  # type: ignore[arg-type]
    assert len(under(db, "users.alice")) == 3
    store.conn.close()


# -- needles and locate cover the namespace's items -----------------------------------


def test_locate_and_needles(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "app.db"
    store = seed(db)
    store.put(ALICIA, "copy", {"card": SECRET})  # a copy outside the prefix
    with saver_on(db, signer, store) as saver:
        found = saver.locate([SECRET])
        assert {loc.prefix for loc in found if loc.table == "store"} == {
            "users.alice", "users.alicia"
        }  # fmt: skip
        saver.setup()
        before = everything(db)
        with pytest.raises(NeedlesFoundError):
            saver.erase_namespace(ALICE, needles=[SECRET])
        assert everything(db) == before
        store.delete(ALICIA, "copy")
        r = saver.erase_namespace(ALICE, needles=[SECRET])
        assert r.predicate["needles"]["searched"] == "database"
        assert r.predicate["needles"]["occurrences_after"] == 0
        assert saver.locate([SECRET]) == []
    store.conn.close()


# -- async ---------------------------------------------------------------------------


def test_async_saver(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "app.db"
    store = seed(db)
    kept = bystanders(db)

    async def main() -> None:
        async with AsyncAttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, store=store
        ) as saver:
            d = await saver.adigest_namespace(ALICE)
            r = await saver.aerase_namespace(ALICE)
            assert r.pre_digest == d.digest
            assert r.predicate["pre_state"]["leaves"] == 4
            assert saver.last_receipt is r
            assert await saver.ais_namespace_erased(PREFS)
            assert plain_put(db, "users.alice.x").returncode == 7
            assert await saver.areopen_namespace(ALICE)
            assert not await saver.ais_namespace_erased(PREFS)

    asyncio.run(main())
    assert under(db, "users.alice") == []
    assert bystanders(db) == kept
    assert plain_put(db, "users.alice.x").returncode == 0
    store.conn.close()


def test_recovery_issues_the_receipt(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal entry committed with the deletion: a receipt lost after the commit
    is issued by ``recover_receipts`` as a namespace receipt."""
    from erasure_receipts._engine import eraser as eraser_mod

    db = tmp_path / "app.db"
    store = seed(db)
    with saver_on(db, signer, store) as saver:
        monkeypatch.setattr(eraser_mod, "sign_and_archive", _boom)
        with pytest.raises(Exception, match="recover_receipts"):
            saver.erase_namespace(ALICE)
        monkeypatch.undo()
        assert under(db, "users.alice") == []
        (r,) = saver.recover_receipts(min_age_seconds=0)
    assert r.predicate["kind"] == "namespace"
    assert r.predicate["pre_state"]["leaves"] == 4
    assert verify_receipt(r.to_json(), [signer.public_key])
    store.conn.close()


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise OSError("disk full")


def test_namespaces_for_mapping_is_erased_but_not_tombstoned(
    tmp_path: Path, signer: Signer
) -> None:
    """A thread the saver's ``namespaces_for`` maps to alice's memory: deleting that one
    conversation erases the memory but does not close alice's namespace for good (her
    next session writes memory again); the receipt says it is not tombstoned."""
    db = tmp_path / "app.db"
    store = seed(db)
    with saver_on(db, signer, store, namespaces_for=lambda t: [ALICE]) as saver:
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, _checkpoint(), {}, {})
        r = saver.erase_thread("t")
        assert r.predicate["scope"]["store_namespaces"] == [["users", "alice"]]
        assert r.predicate["scope"]["store_tombstone"] is False
        assert not saver.is_namespace_erased(ALICE)
    assert under(db, "users.alice") == []
    assert plain_put(db, "users.alice").returncode == 0
    store.conn.close()


def test_privacy_mode_names_the_prefix_by_its_commitment(tmp_path: Path, signer: Signer) -> None:
    """The receipt and the journal name the prefix by its commitment; the tombstone keeps
    the raw prefix (a trigger cannot compute an HMAC), and still refuses plain writers."""
    from erasure_receipts import CommitmentKey

    db = tmp_path / "app.db"
    store = seed(db)
    key = CommitmentKey.generate()
    c = key.commit("store_namespace", "users.alice")
    with saver_on(db, signer, store) as saver:
        r = saver.erase_namespace(ALICE, privacy="commitments", commitment_key=key)
        with pytest.raises(NothingToEraseError) as err:
            saver.erase_namespace(("users", "alicia", "x"), privacy="commitments",
                                  commitment_key=key)  # fmt: skip
    assert "alicia" not in err.value.message
    assert r.predicate["scope"]["namespace"] == [c]
    assert r.statement["subject"][0]["name"] == f"langgraph-store-namespace:{c}"
    assert verify_receipt(r.to_json(), [signer.public_key])
    text = json.dumps(rows(db, "erasure_journal"), default=lambda b: b.decode("utf-8", "replace"))
    assert "users.alice" not in text and c in text
    assert rows(db, "erasure_store_tombstones", "prefix = 'users.alice'") != []
    assert plain_put(db, "users.alice.x").returncode == 7
    store.conn.close()


def test_async_store_on_the_savers_own_connection(tmp_path: Path, signer: Signer) -> None:
    """An ``AsyncSqliteStore`` sharing the async saver's aiosqlite connection: erased in
    the saver's transaction, and refused afterwards on that very connection."""
    import aiosqlite
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    db = tmp_path / "app.db"

    async def main() -> None:
        # autocommit, as AsyncSqliteStore's own BEGIN/COMMIT need
        async with aiosqlite.connect(db, isolation_level=None) as conn:
            store = AsyncSqliteStore(conn)
            await store.setup()
            await store.aput(ALICE, "a", {"v": 1})
            await store.aput(PREFS, "b", {"v": 2})
            await store.aput(ALICIA, "c", {"v": 3})
            saver = AsyncAttestingSqliteSaver(conn, signer=signer, store=store)
            r = await saver.aerase_namespace(ALICE)
            assert r.predicate["pre_state"]["tables"]["store"]["rows"] == 2
            with pytest.raises(sqlite3.IntegrityError, match="store namespace erased"):
                await store.aput(PREFS, "again", {"v": 1})
            assert [i.key for i in await store.asearch(ALICIA)] == ["c"]

    asyncio.run(main())
    assert under(db, "users.alice") == []
    assert len(under(db, "users.alicia")) == 1


def test_subject_erasure_tombstones_its_store_namespaces(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "app.db"
    store = seed(db)
    with saver_on(db, signer, store) as saver:
        saver.put({"configurable": {"thread_id": "alice-1", "checkpoint_ns": ""}},
                  _checkpoint(), {}, {})  # fmt: skip
        r = saver.erase_subject("alice", threads=["alice-1"], store_namespaces=[ALICE])
        assert r.predicate["scope"]["store_tombstone"] is True
        assert verify_receipt(r.to_json(), [signer.public_key])
        assert saver.is_namespace_erased(PREFS)
    assert plain_put(db, "users.alice.prefs").returncode == 7
    assert plain_put(db, "users.alicia").returncode == 0
    store.conn.close()
