"""erase_history / prune on the SQLite savers, with real graphs (issue 8).

Assertions read the database files and raw rows through separate connections, and
recompute digests independently (tests/scenario.py), not from what the saver reports.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.sqlite import SqliteStore
from langgraph.types import Command

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    ErasureIncompleteError,
    NothingToEraseError,
    Signer,
    verify_receipt,
)
from erasure_receipts._backends import sqlite as sqlite_backend
from erasure_receipts._engine import NeedlesFoundError
from erasure_receipts.digest import encode_row, leaf_hash
from erasure_receipts.history import DeltaChannelError
from faults import inject
from scenario import columns, independent_digest, marker_in_files, naive_root, pk_columns
from test_history_graphs import (
    CARD,
    CHAT_TURNS,
    NS,
    cfg,
    chat_graph,
    delta_graph,
    human,
    nested_graph,
)

T = "alice-chat"
THREAD = {"checkpoints": ("thread_id = ?", (T,)), "writes": ("thread_id = ?", (T,))}


def rows_holding(db: Path, needle: str, thread: str = T) -> int:
    """Rows of the thread (checkpoints, writes) whose raw bytes contain ``needle``."""
    with sqlite3.connect(db) as conn:
        n = 0
        for table in ("checkpoints", "writes"):
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            cond = " OR ".join(f"instr(CAST({c} AS BLOB), ?) > 0" for c in cols)
            n += conn.execute(
                f"SELECT count(*) FROM {table} WHERE thread_id = ? AND ({cond})",
                [thread, *[needle.encode()] * len(cols)],
            ).fetchone()[0]
    return int(n)


def leaves(
    db: Path, tables: dict[str, tuple[str, tuple[Any, ...]]]
) -> dict[tuple[Any, ...], bytes]:
    """``(table, *pk) -> leaf hash`` of the matching rows, read raw (spec section 4)."""
    out: dict[tuple[Any, ...], bytes] = {}
    with sqlite3.connect(db) as conn:
        for table in sorted(tables):
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
                continue
            cols, pk = columns(db, table), pk_columns(db, table)
            where, params = tables[table]
            order = ", ".join(pk)
            for row in conn.execute(
                f"SELECT * FROM {table} WHERE {where} ORDER BY {order}", params
            ):
                pkv = [row[cols.index(c)] for c in pk]
                out[(table, *pkv)] = leaf_hash(
                    encode_row(table, pkv, list(zip(cols, row, strict=True)))
                )
    return out


def fingerprint(db: Path, thread: str) -> list[Any]:
    with sqlite3.connect(db) as conn:
        return [
            conn.execute(
                f"SELECT * FROM {t} WHERE thread_id = ? ORDER BY 1, 2, 3", (thread,)
            ).fetchall()
            for t in ("checkpoints", "writes")
        ]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "app.db"


def run_chat(saver: Any, store: Any, thread: str = T, turns: list[str] = CHAT_TURNS) -> Any:
    graph = chat_graph(saver, store)
    for text in turns:
        graph.invoke(human(text), cfg(thread))
    return graph


def test_compaction_scenario(db: Path, signer: Signer, tmp_path: Path) -> None:
    """The value is gone from the state but in > 10 stored rows; erase_history with the
    value as a needle leaves it in 0 rows and 0 bytes of the files, the conversation
    goes on from the kept state, and both digests are recomputed independently."""
    archive = tmp_path / "receipts"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store,
                                              archive=archive) as saver,
    ):  # fmt: skip
        store.setup()
        graph = run_chat(saver, store)
        run_chat(saver, store, "bob-chat", ["hello from bob"])
        state = graph.get_state(cfg(T)).values["messages"]
        assert not any(CARD in str(m.content) for m in state)  # "removed" by the summarizer
        assert rows_holding(db, CARD) > 10  # ... yet still stored
        bob = fingerprint(db, "bob-chat")
        scope = {**THREAD, "store": ("prefix = ?", ("users.alice",))}
        before = leaves(db, scope)

        receipt = saver.erase_history(T, needles=[CARD], store_namespaces=[NS],
                                      residue_scan=True)  # fmt: skip

        assert rows_holding(db, CARD) == 0
        assert sum(marker_in_files(db, CARD).values()) == 0  # db, -wal, -shm
        scan = next(r for r in receipt.predicate["residue"] if r["action"] == "residue_scan")
        assert scan["status"] == "applied"
        assert fingerprint(db, "bob-chat") == bob
        p = receipt.predicate
        assert p["kind"] == "history" and p["scope"]["keep"] == "latest"
        assert p["scope"]["tombstone"] is False and not saver.is_erased(T)
        assert p["needles"]["occurrences_after"] == 0 and CARD not in receipt.to_json().decode()
        assert p["post_state"]["leaves"] == 0
        assert {c["name"] for c in p["checks"]} >= {"api_list_no_removed", "api_get_tuple_kept",
                                                    "api_store_search_empty"}  # fmt: skip
        verify_receipt(receipt.to_json(), [signer.public_key])
        assert (archive / f"{receipt.receipt_id}.json").read_bytes() == receipt.to_json()

        # Kept state: exactly the rows that remain, recomputed from raw rows.
        kept = p["kept_state"]
        assert independent_digest(db, THREAD) == kept["digest"]["sha256"]
        listed = [(c["checkpoint_ns"], c["checkpoint_id"]) for c in kept["checkpoints"]]
        with sqlite3.connect(db) as conn:
            stored = conn.execute(
                "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id FROM checkpoints "
                "WHERE thread_id = ? ORDER BY 1, 2", (T,)).fetchall()  # fmt: skip
        assert [(a, b) for a, b, _ in stored] == listed == [("", listed[0][1])]
        assert stored[0][2] is None  # its parent was removed: no dangling parent
        # Removed rows: the pre-state digest is the tree over the rows that vanished.
        after = leaves(db, scope)
        removed = [h for k, h in before.items() if k not in after]
        assert naive_root(removed).hex() == receipt.pre_digest
        assert p["pre_state"]["leaves"] == len(removed) > 10

        # The conversation continues from the kept state.
        kept_messages = [m.content for m in state]
        kept_step = saver.get_tuple(cfg(T)).metadata["step"]  # type: ignore[union-attr]
        out = graph.invoke(human("one more thing"), cfg(T))
        assert "noted: one more thing" in [m.content for m in out["messages"]]
        (chatted,) = [s for s in graph.get_state_history(cfg(T)) if s.next == ("summarize",)]
        assert [m.content for m in chatted.values["messages"]] == [
            *kept_messages,
            "one more thing",
            "noted: one more thing",
        ]
        assert chatted.metadata is not None and chatted.metadata["step"] == kept_step + 3


def test_needle_in_latest_state_is_refused(db: Path, signer: Signer) -> None:
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        run_chat(saver, None, turns=[*CHAT_TURNS, "my email is alice@example.com"])
        before = fingerprint(db, T)
        with pytest.raises(NeedlesFoundError) as err:
            saver.erase_history(T, needles=["alice@example.com", CARD])
        assert fingerprint(db, T) == before  # nothing deleted
        assert saver.last_receipt is None
        msg = err.value.message
        assert "nothing was deleted" in msg and "alice@example.com" not in msg
        (cp,) = [loc for loc in err.value.locations if loc["table"] == "checkpoints"]
        latest = saver.get_tuple(cfg(T))
        assert latest is not None
        assert cp["checkpoint_id"] == latest.config["configurable"]["checkpoint_id"]
        assert f"checkpoint_id={cp['checkpoint_id']}" in msg and "column=checkpoint" in msg


def test_subgraph_calls_interrupt_and_resume(db: Path, signer: Signer) -> None:
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        graph = nested_graph(saver)
        for i in range(3):
            graph.invoke(human(f"turn {i}"), cfg(T))
            graph.invoke(Command(resume=f"yes {i}"), cfg(T))
        graph.invoke(human("last turn"), cfg(T))  # interrupted inside the subgraph call
        snap = graph.get_state(cfg(T), subgraphs=True)
        assert snap.interrupts and snap.tasks[0].state is not None
        with sqlite3.connect(db) as conn:
            calls = {
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE checkpoint_ns <> ''"
                )
            }
        assert len(calls) == 4 and all(ns.startswith("sub:") for ns in calls)

        receipt = saver.erase_history(T)

        kept = receipt.predicate["kept_state"]["checkpoints"]
        sub = snap.tasks[0].state
        assert sub is not None and not isinstance(sub, dict)
        current_call = sub.config["configurable"]["checkpoint_ns"]
        assert [c["checkpoint_ns"] for c in kept] == ["", current_call]
        with sqlite3.connect(db) as conn:
            namespaces = {r[0] for r in conn.execute("SELECT checkpoint_ns FROM checkpoints")}
            pending = conn.execute(
                "SELECT checkpoint_ns, channel FROM writes WHERE thread_id = ?", (T,)
            ).fetchall()
        assert namespaces == {"", current_call}  # finished calls: removed entirely
        assert ("", "__interrupt__") in pending and (current_call, "__interrupt__") in pending
        verify_receipt(receipt.to_json(), [signer.public_key])
        # The interrupt is still pending, and resuming works.
        after = graph.get_state(cfg(T), subgraphs=True)
        assert after.interrupts == snap.interrupts
        out = graph.invoke(Command(resume="yes finally"), cfg(T))
        assert out["messages"][-1].content == "approved: yes finally" and out["turns"] == 4


def test_checkpointer_true_subgraph_keeps_its_latest(db: Path, signer: Signer) -> None:
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        graph = nested_graph(saver, child_checkpointer=True)
        for i in range(2):
            graph.invoke(human(f"turn {i}"), cfg(T))
            graph.invoke(Command(resume=f"ok {i}"), cfg(T))
        receipt = saver.erase_history(T)
        kept = [(c["checkpoint_ns"], c["checkpoint_id"]) for c in
                receipt.predicate["kept_state"]["checkpoints"]]  # fmt: skip
        assert [ns for ns, _ in kept] == ["", "sub"]
        assert saver.get_tuple(cfg(T, checkpoint_ns="sub")) is not None
        graph.invoke(human("again"), cfg(T))
        out = graph.invoke(Command(resume="ok"), cfg(T))
        assert out["messages"][-1].content == "approved: ok"


def test_nothing_to_remove_and_bad_arguments(db: Path, signer: Signer) -> None:
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        saver.setup()
        saver.put(cfg("one", checkpoint_ns=""), _checkpoint(), {"step": 0}, {})
        with pytest.raises(NothingToEraseError):
            saver.erase_history("one")
        with pytest.raises(NothingToEraseError):
            saver.erase_history("unknown")
        with pytest.raises(ValueError, match="keep"):
            saver.erase_history("one", keep="none")
        with pytest.raises(TypeError):
            saver.erase_history("one", needles="a string")
        with pytest.raises(ValueError, match="needle"):
            saver.erase_history("one", needles=[""])


def _checkpoint() -> Any:
    from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

    return create_checkpoint(empty_checkpoint(), None, 0)


def test_rows_written_after_commit_are_not_the_removed_set(
    db: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread lives on: a run that writes between the commit and the post-commit
    re-measurement adds newer checkpoints, which are not in the removed set."""
    other = sqlite3.connect(db, check_same_thread=False)
    runner = chat_graph(SqliteSaver(other))
    original = sqlite_backend.SqliteBackend.reduce_residue

    def write_then_scrub(self: Any) -> list[dict[str, Any]]:
        runner.invoke(human("written right after the commit"), cfg(T))
        return original(self)

    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        run_chat(saver, None)
        monkeypatch.setattr(sqlite_backend.SqliteBackend, "reduce_residue", write_then_scrub)
        receipt = saver.erase_history(T)
        monkeypatch.undo()
        assert receipt.predicate["post_state"]["leaves"] == 0
        verify_receipt(receipt.to_json(), [signer.public_key])
        listed = list(saver.list(cfg(T)))
        assert len(listed) == 1 + 4  # the kept checkpoint + the new turn's
        latest = [m.content for m in listed[0].checkpoint["channel_values"]["messages"]]
        assert "noted: written right after the commit" in latest
    other.close()


def test_recovery_reproduces_the_removed_set(
    db: Path, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the commit (no receipt): the journal keeps the kept checkpoint ids, and
    a later recovery - after the thread went on - re-measures exactly the removed set."""
    archive = tmp_path / "receipts"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        graph = run_chat(saver, None)

        def crash(*args: Any) -> Any:
            raise OSError("disk gone")

        inject(monkeypatch, saver, record_statement=crash)
        with pytest.raises(ErasureIncompleteError, match="recover_receipts"):
            saver.erase_history(T, needles=[CARD])
        monkeypatch.undo()
        assert rows_holding(db, CARD) == 0  # committed
        graph.invoke(human("the thread goes on"), cfg(T))
        (receipt,) = saver.recover_receipts(min_age_seconds=0)
        p = receipt.predicate
        assert p["kind"] == "history" and p["post_state"]["leaves"] == 0
        names = {c["name"] for c in p["checks"]}
        assert {"issued_from_journal", "raw_rows_zero_at_recovery", "api_list_no_removed"} <= names
        assert p["needles"]["occurrences_after"] == 0
        verify_receipt(receipt.to_json(), [signer.public_key])
        assert saver.pending_erasures() == []


def test_delta_channel_thread_is_refused(db: Path, signer: Signer) -> None:
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        graph = delta_graph(saver)
        for i in range(3):
            graph.invoke({"items": [f"i{i}"]}, cfg("d"))
        run_chat(saver, None)
        before = fingerprint(db, "d"), fingerprint(db, T)
        with pytest.raises(DeltaChannelError, match="DeltaChannel: d"):
            saver.erase_history("d")
        with pytest.raises(NotImplementedError):  # LangGraph's own error type
            saver.prune([T, "d"])
        assert (fingerprint(db, "d"), fingerprint(db, T)) == before  # nothing pruned


def test_prune_keep_latest_and_delete(db: Path, signer: Signer, tmp_path: Path) -> None:
    archive = tmp_path / "receipts"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, archive=archive) as saver:
        for t in ("a", "b", "c"):
            run_chat(saver, None, t, CHAT_TURNS[:2])
        saver.put(cfg("single", checkpoint_ns=""), _checkpoint(), {"step": 0}, {})
        receipts = saver.prune(["a", "b", "single", "missing"])
        assert [r.thread_id for r in receipts] == ["a", "b"]  # nothing to prune: no receipt
        assert {r.predicate["kind"] for r in receipts} == {"history"}
        assert len(list(saver.list(cfg("a")))) == 1
        deleted = saver.prune(["c", "missing"], strategy="delete")
        assert [r.thread_id for r in deleted] == ["c"]
        assert deleted[0].predicate.get("kind", "thread") == "thread"
        assert deleted[0].predicate["scope"]["tombstone"] is True and saver.is_erased("c")
        assert saver.get_tuple(cfg("c")) is None
        for r in [*receipts, *deleted]:
            verify_receipt((archive / f"{r.receipt_id}.json").read_bytes(), [signer.public_key])
        with pytest.raises(ValueError, match="strategy"):
            saver.prune(["a"], strategy="all")
        with pytest.raises(TypeError):
            saver.prune("a")
        assert saver.prune([]) == []


async def test_async_saver(db: Path, signer: Signer, tmp_path: Path) -> None:
    async with AsyncAttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        graph = chat_graph(saver)
        for text in CHAT_TURNS:
            await graph.ainvoke(human(text), cfg(T))
        for t in ("x", "y"):
            await graph.ainvoke(human("hi"), cfg(t))
        receipt = await saver.aerase_history(T, needles=[CARD])
        assert saver.last_receipt == receipt
        assert rows_holding(db, CARD) == 0
        verify_receipt(receipt.to_json(), [signer.public_key])
        assert independent_digest(db, THREAD) == receipt.predicate["kept_state"]["digest"]["sha256"]
        out = await graph.ainvoke(human("more"), cfg(T))
        assert "noted: more" in [m.content for m in out["messages"]]
        pruned = await saver.aprune(["x", "y"])
        assert [r.thread_id for r in pruned] == ["x", "y"]
        with pytest.raises(NeedlesFoundError):
            await saver.aerase_history(T, needles=["more"])


async def test_prune_passes_langgraph_conformance() -> None:
    """LangGraph's conformance suite detects ``prune`` on the SQLite saver now, and its
    prune tests pass against the attested implementation."""
    from langgraph.checkpoint.conformance import checkpointer_test, validate

    @checkpointer_test(name="AsyncAttestingSqliteSaver")
    async def factory() -> Any:
        async with AsyncAttestingSqliteSaver.from_conn_string(
            ":memory:", signer=Signer.generate()
        ) as saver:
            yield saver

    report = await validate(factory)
    prune = report.results["prune"]
    assert prune.detected and prune.passed and prune.tests_passed >= 8


def test_recipe_remove_message_then_erase_history(db: Path, signer: Signer) -> None:
    """The documented recipe: update_state with RemoveMessage, then erase_history with the
    removed text as a needle. Removing only some copies is refused, naming the rest."""
    from langchain_core.messages import RemoveMessage

    secret = "my new address is 12 Rue de Rivoli"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        graph = run_chat(saver, None, turns=["hi", secret])
        holding = [m for m in graph.get_state(cfg(T)).values["messages"] if secret in m.content]
        assert len(holding) == 2  # the user's message and the assistant's echo
        graph.update_state(cfg(T), {"messages": [RemoveMessage(id=holding[0].id)]})
        with pytest.raises(NeedlesFoundError) as err:
            saver.erase_history(T, needles=[secret])
        assert {loc["table"] for loc in err.value.locations} == {"checkpoints"}
        graph.update_state(cfg(T), {"messages": [RemoveMessage(id=holding[1].id)]})
        receipt = saver.erase_history(T, needles=[secret])
        assert rows_holding(db, secret) == 0
        verify_receipt(receipt.to_json(), [signer.public_key])
        out = graph.invoke(human("where do I live?"), cfg(T))
        assert [m.content for m in out["messages"]] == [
            "hi",
            "noted: hi",
            "where do I live?",
            "noted: where do I live?",
        ]
