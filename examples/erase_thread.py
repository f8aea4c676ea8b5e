"""End to end on SQLite: run a real LangGraph thread, erase it, verify the receipt.

    python examples/erase_thread.py [WORKDIR]

With WORKDIR the database (``app.db``, bob's thread still in it), the receipt archive
(``receipts/``) and the key pair (``receipt-signing.key``, mode 0600, and
``receipt-signing.pub.pem``: the names ``receipt keygen`` uses) stay there, for the
``receipt`` CLI; without it they go to a temporary directory that is removed.

The graph keeps a chat history with ``add_messages``, remembers a fact about the user in
the store (``get_store()``), and compacts old messages with ``RemoveMessage`` - so, as in
production, the sensitive first message survives in earlier checkpoints and in the
store even after it has been "deleted" from the current state. The script shows that,
erases the thread with a signed receipt, checks the raw database files for the marker,
and verifies the receipt the way an auditor would (``receipt verify``).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import AttestingSqliteSaver, Signer

MARKER = "SSN-078-05-1120"  # the sensitive value the user typed in turn 1


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def remember(state: State) -> dict[str, Any]:
    last = state["messages"][-1]
    if MARKER in str(last.content):
        # Cross-thread memory: survives delete_thread unless erased explicitly.
        get_store().put(("users", "alice"), "identity", {"ssn": MARKER})
    return {"messages": [AIMessage(content=f"noted: {last.content}")]}


def compact(state: State) -> dict[str, Any]:
    # A summariser: keep the last 2 messages in *current* state. Old checkpoints keep all.
    old = state["messages"][:-2]
    return {"messages": [RemoveMessage(id=m.id) for m in old if m.id]}


def build_graph(saver: AttestingSqliteSaver, store: SqliteStore) -> Any:
    g = StateGraph(State)
    g.add_node("remember", remember)
    g.add_node("compact", compact)
    g.add_edge(START, "remember")
    g.add_edge("remember", "compact")
    g.add_edge("compact", END)
    return g.compile(checkpointer=saver, store=store)


def count_marker(db: Path) -> dict[str, int]:
    needle = MARKER.encode()
    return {
        p.name: p.read_bytes().count(needle)
        for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm"))
        if p.exists()
    }


def main(workdir: Path) -> int:
    db, archive = workdir / "app.db", workdir / "receipts"
    signer = Signer.generate()
    key, pub = workdir / "receipt-signing.key", workdir / "receipt-signing.pub.pem"
    key.touch(mode=0o600, exist_ok=False)  # never overwrite a key; 0600 before it is written
    key.write_bytes(signer.private_pem())
    pub.write_bytes(signer.public_pem())

    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, store=store, archive=archive,
            namespaces_for=lambda tid: [("users", "alice")],
        ) as saver,
    ):  # fmt: skip
        store.setup()
        graph = build_graph(saver, store)
        alice = {"configurable": {"thread_id": "alice-chat"}}
        bob = {"configurable": {"thread_id": "bob-chat"}}
        for text in [f"my SSN is {MARKER}", "what's the weather?", "book a table", "thanks"]:
            graph.invoke({"messages": [HumanMessage(content=text)]}, alice)
        graph.invoke({"messages": [HumanMessage(content="hello from bob")]}, bob)

        current = graph.get_state(alice).values["messages"]
        print(f"current state holds the marker: {any(MARKER in str(m.content) for m in current)}")
        history = sum(1 for _ in saver.list(alice))
        print(f"checkpoints in history: {history}; marker in database files: {count_marker(db)}")

        preview = saver.digest_thread("alice-chat", [("users", "alice")])
        receipt = saver.erase_thread("alice-chat", store_namespaces=[("users", "alice")])
        assert receipt.pre_digest == preview.digest

        print(f"after erasure, marker in database files: {count_marker(db)}")
        print(f"bob's thread still there: {graph.get_state(bob).values['messages'][0].content!r}")

    path = archive / f"{receipt.receipt_id}.json"
    print(f"\nreceipt archived at {path}")
    print(subprocess.run(
        [sys.executable, "-c", "from erasure_receipts.cli import main; main()", "show", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout)  # fmt: skip
    verify = subprocess.run(
        [sys.executable, "-c", "from erasure_receipts.cli import main; main()",
         "verify", str(path), "--key", str(pub)],
        capture_output=True, text=True,
    )  # fmt: skip
    print(verify.stdout.strip())
    return verify.returncode


if __name__ == "__main__":
    if len(sys.argv) > 1:
        target = Path(sys.argv[1])
        target.mkdir(parents=True, exist_ok=True)
        if any((target / name).exists() for name in ("app.db", "receipt-signing.key")):
            sys.exit(f"erase_thread.py: {target} holds an earlier run: give a new directory")
        code = main(target)
        print(f"\nkept in {target}/: app.db, receipts/, receipt-signing.key and .pub.pem")
        sys.exit(code)
    with tempfile.TemporaryDirectory() as tmp:
        code = main(Path(tmp))
    print("\n(the files were temporary: give a directory, e.g. "
          "`python examples/erase_thread.py demo`, to keep them)")  # fmt: skip
    sys.exit(code)
