"""erase_subject's refusals and edge cases: every form in which a store really writes a needle
is found (and the refusal does not print it); a refusal after a store sweep says what was
swept, not "nothing was deleted"; a subject receipt with store namespaces but no store
table verifies; a receipt that would not verify is refused before anything is deleted; a
recovered privacy-mode receipt names no file path and the journal keeps no raw ids.
"""

from __future__ import annotations

import json
import sqlite3
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import (
    AttestingSqliteSaver,
    ErasureIncompleteError,
    NeedlesFoundError,
    Signer,
    verify_receipt,
)
from erasure_receipts.privacy import CommitmentKey


def put(saver: Any, thread: str, content: str = "hello", meta: Any = None) -> None:
    cp = empty_checkpoint()
    cp["channel_values"] = {"msg": content}
    saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, cp, meta or {}, {})


@pytest.mark.parametrize(
    ("needle", "stored"),
    [
        ('Zoë "Z" Åberg', lambda n: {"v": n}),  # orjson: non-ASCII raw, quotes escaped
        ("Zoë Åberg\nMain St 5", lambda n: {"v": n}),  # a newline escaped, the rest raw
        ("https://x.example/alice", lambda n: {"v": json.dumps(n).replace("/", "\\/")}),
        ("José", lambda n: {"v": unicodedata.normalize("NFD", n)}),  # decomposed é
        ("Zoë", lambda n: {"v": json.dumps({"pasted": n})}),  # JSON pasted into JSON
    ],
)
def test_needle_forms_that_stores_really_write_are_found(
    tmp_path: Path, signer: Signer, needle: str, stored: Any
) -> None:
    db = tmp_path / "app.db"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        put(saver, "alice-1")
        store.put(("other",), "k", stored(needle))
        with pytest.raises(NeedlesFoundError) as ei:
            saver.erase_subject("alice", threads=["alice-1"], needles=[needle])
        assert ei.value.locations[0]["table"] == "store"
        assert needle not in ei.value.message
        assert sqlite3.connect(db).execute("SELECT count(*) FROM checkpoints").fetchone() == (1,)


def test_a_refusal_after_a_store_sweep_says_what_was_swept(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from erasure_receipts._ops import subject as SubjectFlows  # internals

    store = InMemoryStore()
    email = "alice@example.com"
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), signer=signer, store=store
    ) as saver:
        put(saver, "alice-1")
        store.put(("users", "alice"), "profile", {"email": email})
        checked = SubjectFlows.needles_outside

        def then_a_writer_copies_it(self: Any, request: Any) -> None:
            checked(self, request)  # the pre-check passes; a racing writer copies it now
            # (into the store: a copy in the database is found before the sweep)
            store.put(("support", "tickets"), "9", {"text": f"ticket from {email}"})

        monkeypatch.setattr(SubjectFlows, "needles_outside", then_a_writer_copies_it)
        with pytest.raises(NeedlesFoundError) as ei:
            saver.erase_subject(
                "alice", threads=["alice-1"], store_namespaces=[("users", "alice")],
                needles=[email],
            )  # fmt: skip
    assert store.get(("users", "alice"), "profile") is None  # a sweep cannot roll back
    assert ei.value.swept == {"store": 1}
    assert "not restorable" in ei.value.message and "nothing was deleted" not in ei.value.message


def test_subject_with_store_namespaces_but_no_store_table_verifies(
    tmp_path: Path, signer: Signer
) -> None:
    db = tmp_path / "app.db"
    with (
        SqliteStore.from_conn_string(str(db)) as store,  # store.setup() never ran
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        put(saver, "alice-1")
        r = saver.erase_subject("alice", threads=["alice-1"], store_namespaces=[("users", "a")])
    names = [u["name"] for u in r.predicate["units"]]
    assert names == ["store", "thread:alice-1"]
    assert verify_receipt(r.to_json(), [signer.public_key]).thread_id == "alice"


def test_a_receipt_that_would_not_verify_is_refused_before_anything_is_deleted(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from erasure_receipts._engine import protocol as engine

    real = engine._members

    def broken(*a: Any, **k: Any) -> dict[str, Any]:
        out = real(*a, **k)
        out["units"] = out["units"][:-1]  # a unit lost on the way
        return out

    monkeypatch.setattr(engine, "_members", broken)
    db = tmp_path / "app.db"
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        put(saver, "a")
        put(saver, "b")
        with pytest.raises(ErasureIncompleteError, match=r"would not verify.*units_mismatch"):
            saver.erase_subject("alice", threads=["a", "b"])
    assert sqlite3.connect(db).execute("SELECT count(*) FROM checkpoints").fetchone() == (2,)


def test_recovered_privacy_receipt_names_no_path_and_the_journal_is_redacted(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from erasure_receipts._engine import eraser

    db, store_db = tmp_path / "app.db", tmp_path / "memories-of-alice.db"
    key = CommitmentKey.generate()
    with (
        SqliteStore.from_conn_string(str(store_db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        put(saver, "alice-chat-1")
        store.put(("users", "alice"), "p", {"x": 1})

        def crash(*a: Any, **k: Any) -> Any:
            raise RuntimeError("crash after commit")

        with monkeypatch.context() as m:
            m.setattr(eraser, "api_checks", crash)  # the read-back after the commit
            with pytest.raises(ErasureIncompleteError):
                saver.erase_subject(
                    "alice", threads=["alice-chat-1"], store_namespaces=[("users", "alice")],
                    privacy="commitments", commitment_key=key,
                )  # fmt: skip
        [r] = saver.recover_receipts(min_age_seconds=0)
    data = r.to_json()
    assert verify_receipt(data, [signer.public_key])
    for raw in (str(store_db), "memories-of-alice", "alice-chat-1", "users.alice", '"alice"'):
        assert raw.encode() not in data, raw
    journal = sqlite3.connect(db).execute("SELECT thread_id, entry FROM erasure_journal").fetchall()
    assert all("alice" not in tid and "alice-chat-1" not in entry for tid, entry in journal)
