"""The statement an erasure signs is the draft built (and self-checked) inside its
transaction, completed after the commit: it must be exactly the statement built from
the outcome's members and counts after the commit (the path recovery still takes),
for every kind - thread, history, subject, privacy mode, request and authorization."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import AttestingSqliteSaver, RequestContext, Signer, authorize
from erasure_receipts._engine import eraser, statement
from erasure_receipts.privacy import CommitmentKey
from test_history_graphs import CHAT_TURNS, NS, cfg, chat_graph, human
from test_subject import EMAIL, NAMESPACES, SUBJECT, SUPPORT, build, populate

COMPARED: list[str] = []


@pytest.fixture(autouse=True)
def both_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every final statement is compared with the one built without the draft."""
    original = statement.final_statement

    def compared(outcome: Any, api: Any, **kw: Any) -> dict[str, Any]:
        st = original(outcome, api, **kw)
        if outcome.draft is not None:
            rebuilt = original(replace(outcome, draft=None), api, **kw)
            assert json.dumps(st, sort_keys=True) == json.dumps(rebuilt, sort_keys=True)
            COMPARED.append(st["predicate"].get("kind", "thread"))
        return st

    monkeypatch.setattr(eraser, "final_statement", compared)
    COMPARED.clear()


def test_thread_and_history_statements(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "app.db"
    approver = Signer.from_seed(bytes(range(1, 33)))
    ctx = RequestContext("DSR-1", "gdpr-art17-1b")
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        graph = chat_graph(saver, store)
        for t in ("a", "b"):
            for text in CHAT_TURNS:
                graph.invoke(human(text), cfg(t))
        store.put(NS, "memory", {"likes": "tea"})
        saver.erase_history("a", needles=[CHAT_TURNS[0]], store_namespaces=[NS])
        scope = {"kind": "thread", "thread_id": "b", "store_namespaces": []}
        auth = authorize(approver, request_id="DSR-1", scope=scope,
                         not_after=datetime.now(UTC) + timedelta(days=1))  # fmt: skip
        saver.erase_thread("b", store_namespaces=[], request=ctx, authorization=auth)
    assert COMPARED == ["history", "thread"]


@pytest.mark.parametrize("privacy", [None, "commitments"])
def test_subject_statements(tmp_path: Path, signer: Signer, privacy: str | None) -> None:
    db = tmp_path / "app.db"
    key = CommitmentKey.generate() if privacy else None
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        populate(build(saver, store))
        saver.erase_subject(
            SUBJECT, threads=[SUPPORT], metadata_key="user_id", store_namespaces=NAMESPACES,
            needles=[EMAIL], privacy=privacy, commitment_key=key,
            request=RequestContext("DSR-2", "gdpr-art17-1a"),
        )  # fmt: skip
    assert COMPARED == ["subject"]
