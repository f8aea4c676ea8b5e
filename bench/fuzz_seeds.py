"""Seed receipts of every kind for ``fuzz_verify.py``, issued by the library itself.

A real LangGraph graph writes threads and store memories into a real SQLite file; the
attesting saver then erases them in every way it can (thread with and without a store,
a store in another file, the residue scan, history with kept state and needles, subject
with units and needles, privacy mode, request context and a four-eyes authorization,
empty scopes) and signs each receipt with the fuzzer's trusted key. Checkpoint ids,
store timestamps and the temporary path differ from run to run, so the seeds are made
once per process (``seeds()``) and can be saved and replayed (``save``/``load``) to
reproduce a run exactly.
"""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import AttestingSqliteSaver, CommitmentKey, RequestContext, authorize
from erasure_receipts.request import erasure_scope
from erasure_receipts.signing import Signer

COMMITMENT_KEY = bytes(range(64, 96))
NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
"""The savers' clock: every seed is issued at this instant."""
RECEIVED = "2026-11-20T09:30:00Z"
DUE = "2026-12-20T09:30:00Z"
NOT_AFTER = "2026-12-15T00:00:00Z"

_CACHE: dict[str, dict[str, Any]] | None = None


def seeds(signer: Signer, approver: Signer) -> dict[str, dict[str, Any]]:
    """``{label: statement}`` of receipts freshly issued by ``signer`` (authorized by
    ``approver``), made once per process."""
    global _CACHE
    if _CACHE is None:
        _CACHE = generate(signer, approver)
    return _CACHE


def save(path: Path, statements: dict[str, dict[str, Any]]) -> None:
    path.write_text(json.dumps(statements, indent=1, sort_keys=True) + "\n", "utf-8")


def load(path: Path) -> dict[str, dict[str, Any]]:
    global _CACHE
    _CACHE = json.loads(path.read_text("utf-8"))
    return _CACHE


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class Draft(TypedDict):
    text: str  # overwritten each turn: older drafts live only in the history


def generate(signer: Signer, approver: Signer) -> dict[str, dict[str, Any]]:
    def reply(state: Chat, config: RunnableConfig) -> dict[str, Any]:
        uid = config["configurable"].get("user_id")
        if uid is not None:
            get_store().put(("users", uid), "profile", {"email": f"{uid}@example.com"})
            get_store().put(("memories", uid), "tone", {"likes": "short answers"})
        return {"messages": [AIMessage(content=f"noted: {state['messages'][-1].content}")]}

    def redraft(state: Draft) -> dict[str, Any]:
        return {"text": f"draft: {state['text']}"}

    def chat_graph(saver: Any, store: Any) -> Any:
        g = StateGraph(Chat)
        g.add_node("reply", reply)
        g.add_edge(START, "reply")
        g.add_edge("reply", END)
        return g.compile(checkpointer=saver, store=store)

    def draft_graph(saver: Any) -> Any:
        g = StateGraph(Draft)
        g.add_node("redraft", redraft)
        g.add_edge(START, "redraft")
        g.add_edge("redraft", END)
        return g.compile(checkpointer=saver)

    def chat(graph: Any, thread: str, user: str | None, *texts: str) -> None:
        c: dict[str, Any] = {"thread_id": thread}
        if user is not None:
            c["user_id"] = user
        for text in texts:
            graph.invoke({"messages": [HumanMessage(content=text)]}, {"configurable": c})

    def request(n: int, requester: str | None = "dpo@example.com") -> Any:
        return RequestContext(f"DSR-2026-{n:04d}", "gdpr-art17-1b", requester, RECEIVED, DUE)

    def approve(n: int, scope: dict[str, Any]) -> Any:
        return authorize(approver, request_id=f"DSR-2026-{n:04d}", scope=scope,
                         not_after=NOT_AFTER)  # fmt: skip

    out: dict[str, Any] = {}
    key = CommitmentKey(COMMITMENT_KEY)
    with tempfile.TemporaryDirectory(prefix="fuzz-seeds-") as tmp:
        db, other = str(Path(tmp) / "state.db"), str(Path(tmp) / "store.db")
        with (
            SqliteStore.from_conn_string(db) as store,
            AttestingSqliteSaver.from_conn_string(
                db, signer=signer, store=store, clock=lambda: NOW
            ) as saver,  # fmt: skip
        ):
            store.setup()
            graph, drafts = chat_graph(saver, store), draft_graph(saver)
            for user in ("alice", "bob", "carol", "dave", "frank"):
                chat(graph, f"{user}-1", user, f"hi, I am {user}@example.com", "thanks")
            chat(graph, "alice-2", "alice", "book a table")
            chat(graph, "alice-support", None, "ticket: alice@example.com locked out")
            chat(graph, "bob-2", "bob", "more")
            chat(graph, "erin-1", None, "hello", "again")
            for t in ("hist-1", "hist-2"):
                for text in ("my email is erin@example.com", "call me", "thanks"):
                    drafts.invoke({"text": text}, {"configurable": {"thread_id": t}})

            nss = [("users", "carol"), ("memories", "carol")]
            out["thread_kind"] = saver.erase_thread("carol-1", store_namespaces=nss)
            out["thread_nostore"] = saver.erase_thread(
                "erin-1", store_namespaces=[], residue_scan=True
            )
            scope = erasure_scope("thread", "dave-1", [("users", "dave")])
            out["thread_request_auth"] = saver.erase_thread(
                "dave-1", store_namespaces=[("users", "dave")], request=request(1),
                authorization=approve(1, scope),
            )  # fmt: skip
            out["thread_empty"] = saver.erase_thread(
                "ghost-1", store_namespaces=[("users", "ghost")], allow_empty=True
            )
            out["history"] = saver.erase_history("hist-1", needles=["erin@example.com"])
            hscope = {**erasure_scope("history", "hist-2", []), "keep": "latest"}
            out["history_request_auth"] = saver.erase_history(
                "hist-2", needles=["erin@example.com"], store_namespaces=[],
                request=request(2, None), authorization=approve(2, hscope),
            )  # fmt: skip
            out["subject"] = saver.erase_subject(
                "alice", threads=["alice-support"], metadata_key="user_id",
                store_namespaces=[("users", "alice"), ("memories", "alice")],
                needles=["alice@example.com"],
            )  # fmt: skip
            out["subject_privacy"] = saver.erase_subject(
                "bob", metadata_key="user_id",
                store_namespaces=[("users", "bob"), ("memories", "bob")],
                needles=["bob@example.com"], privacy="commitments", commitment_key=key,
                request=request(3),
            )  # fmt: skip
            fns = [("users", "frank")]
            sscope = erasure_scope("subject", "frank", fns, threads=["frank-1"], discovery=None)
            out["subject_request_auth"] = saver.erase_subject(
                "frank", threads=["frank-1"], store_namespaces=fns, request=request(4),
                authorization=approve(4, sscope),
            )  # fmt: skip
            out["subject_empty"] = saver.erase_subject(
                "nobody", threads=["nobody-1"], allow_empty=True
            )
        # A store in another file: swept through the BaseStore API, not in the transaction.
        with (
            SqliteStore.from_conn_string(other) as store,
            AttestingSqliteSaver.from_conn_string(
                db, signer=signer, store=store, clock=lambda: NOW
            ) as saver,  # fmt: skip
        ):
            store.setup()
            chat(chat_graph(saver, store), "gina-1", "gina", "hi, I am gina@example.com")
            out["thread_store_sweep"] = saver.erase_thread(
                "gina-1", store_namespaces=[("users", "gina"), ("memories", "gina")]
            )
    return {label: r.statement for label, r in out.items()}


if __name__ == "__main__":
    for label, st in seeds(Signer.from_seed(bytes(range(32))), Signer.generate()).items():
        p = st["predicate"]
        print(label, p.get("kind", "-"), p["pre_state"]["leaves"], sorted(p["methods"].items()),
              [(x["action"], x["status"]) for x in p["residue"]])  # fmt: skip
