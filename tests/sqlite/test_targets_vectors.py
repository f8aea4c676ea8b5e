"""Derived copies as targets: a real LangGraph graph embeds every message of a
conversation into a vector store (LangChain's ``InMemoryVectorStore``, and FAISS through
``langchain_community``); a subject erasure clears the subject's documents - the marker
is in none of the store's documents afterwards - and a function target (files of a
cache directory) is erased with a thread.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from erasure_receipts import (
    AttestingSqliteSaver,
    ConfigurationError,
    FunctionTarget,
    NeedlesFoundError,
    Signer,
    VectorStoreTarget,
    verify_receipt,
)
from erasure_receipts.digest import encode_row, leaf_hash
from scenario import columns, naive_root, pk_columns, raw_rows

MARKER = "IBAN DE44 5001 0517 5407 3249 31"
THREADS = ["carol-1", "carol-2"]
OTHER = "dave-1"


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def faiss_store() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.vectorstores import FAISS
    emb = DeterministicFakeEmbedding(size=32)
    return FAISS.from_documents([Document("seed", metadata={"user_id": "seed"})], emb)


def memory_store() -> Any:
    return InMemoryVectorStore(DeterministicFakeEmbedding(size=32))


def build(saver: Any, vs: Any) -> Any:
    """``reply`` answers; ``index`` embeds the turn's messages for retrieval later."""

    def reply(state: State) -> dict[str, Any]:
        return {"messages": [AIMessage(content="Noted.")]}

    def index(state: State, config: RunnableConfig) -> dict[str, Any]:
        c = config["configurable"]
        vs.add_documents([
            Document(str(m.content), metadata={"user_id": c["user_id"],
                                                "thread_id": c["thread_id"]})
            for m in state["messages"][-2:]
        ])  # fmt: skip
        return {}

    g = StateGraph(State)
    g.add_node("reply", reply)
    g.add_node("index", index)
    g.add_edge(START, "reply")
    g.add_edge("reply", "index")
    g.add_edge("index", END)
    return g.compile(checkpointer=saver)


def chat(graph: Any, thread: str, user: str) -> None:
    for text in (f"my account is {MARKER}", "thanks"):
        graph.invoke({"messages": [HumanMessage(content=text)]},
                     {"configurable": {"thread_id": thread, "user_id": user}})  # fmt: skip


def table_leaves(db: Path, table: str, thread: str) -> list[bytes]:
    cols, pk = columns(db, table), pk_columns(db, table)
    return [
        leaf_hash(
            encode_row(table, [r[cols.index(c)] for c in pk], list(zip(cols, r, strict=True)))
        )
        for r in raw_rows(db, table, "thread_id = ?", (thread,))
    ]


def documents(vs: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    if isinstance(vs, InMemoryVectorStore):
        return {k: (v["text"], v["metadata"]) for k, v in vs.store.items()}
    return {k: (d.page_content, d.metadata) for k, d in vs.docstore._dict.items()}


@pytest.mark.parametrize("make", [memory_store, faiss_store], ids=["in-memory", "faiss"])
def test_subject_erasure_clears_the_subjects_embeddings(
    tmp_path: Path, signer: Signer, make: Any
) -> None:
    vs = make()
    target = VectorStoreTarget(vs, metadata_key="user_id")
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "app.db"), signer=signer, targets=[target]
    ) as saver:
        graph = build(saver, vs)
        for t in THREADS:
            chat(graph, t, "carol")
        chat(graph, OTHER, "dave")
        before = documents(vs)
        carol = {k for k, (_, m) in before.items() if m.get("user_id") == "carol"}
        assert len(carol) == 8 and any(MARKER in text for text, _ in before.values())
        receipt = saver.erase_subject("carol", threads=THREADS)
    after = documents(vs)
    assert not carol & set(after)
    assert not any(MARKER in text for text, m in after.values() if m.get("user_id") == "carol")
    assert {k: v for k, v in before.items() if k not in carol} == after  # dave's untouched
    if make is faiss_store:
        assert vs.index.ntotal == len(after)  # gone from the index, not only the docstore
    p = receipt.statement["predicate"]
    assert p["methods"]["target:vectors"] == "sweep"
    units = {u["name"]: u for u in p["units"]}
    assert units["target:vectors"]["leaves"] == 8
    assert p["targets"] == [{"name": "vectors", "type": "vectorstore", "key": "subject",
                             "method": "sweep", "store": type(vs).__name__,
                             "metadata_key": "user_id"}]  # fmt: skip
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_dave_keeps_the_marker_so_the_needle_check_refuses(tmp_path: Path, signer: Signer) -> None:
    """A needle still in a document outside the erased scope refuses the erasure before
    anything is deleted (the vector store included)."""
    vs = memory_store()
    with AttestingSqliteSaver.from_conn_string(str(tmp_path / "app.db"), signer=signer) as saver:
        graph = build(saver, vs)
        chat(graph, THREADS[0], "carol")
        chat(graph, OTHER, "dave")
        before = documents(vs)
        with pytest.raises(NeedlesFoundError) as err:
            saver.erase_subject(
                "carol",
                threads=[THREADS[0]],
                needles=[MARKER],
                targets=[VectorStoreTarget(vs, metadata_key="user_id")],
            )
        assert "target:vectors" in str(err.value) and MARKER not in str(err.value)
        assert documents(vs) == before
        assert saver.get_tuple({"configurable": {"thread_id": THREADS[0]}}) is not None


def test_ids_for_by_thread(tmp_path: Path, signer: Signer) -> None:
    vs = memory_store()
    with AttestingSqliteSaver.from_conn_string(str(tmp_path / "app.db"), signer=signer) as saver:
        graph = build(saver, vs)
        chat(graph, THREADS[0], "carol")
        chat(graph, THREADS[1], "carol")

        def ids_for(thread_id: str) -> list[str]:
            return [k for k, (_, m) in documents(vs).items() if m["thread_id"] == thread_id]

        target = VectorStoreTarget(vs, ids_for=ids_for, key="thread", name="chunks")
        receipt = saver.erase_thread(THREADS[0], targets=[target])
    assert {m["thread_id"] for _, m in documents(vs).values()} == {THREADS[1]}
    assert receipt.statement["predicate"]["pre_state"]["tables"]["target:chunks"]["rows"] == 4
    verify_receipt(receipt.to_json(), [signer.public_key])


def test_vector_target_arguments(signer: Signer) -> None:
    vs = memory_store()
    with pytest.raises(ConfigurationError, match="exactly one of"):
        VectorStoreTarget(vs)
    with pytest.raises(TypeError, match="LangChain VectorStore"):
        VectorStoreTarget(object(), metadata_key="user_id")


def test_function_target_files_of_a_cache(tmp_path: Path, signer: Signer) -> None:
    """Any target through the protocol: cached answers as files per thread."""
    cache = tmp_path / "cache"

    def items(thread_id: str) -> dict[str, bytes]:
        d = cache / thread_id
        return {p.name: p.read_bytes() for p in sorted(d.glob("*.json"))} if d.exists() else {}

    def delete(thread_id: str, keys: Any) -> None:
        for k in keys:
            (cache / thread_id / k).unlink()

    target = FunctionTarget("answer-cache", items=items, delete=delete)
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "app.db"), signer=signer, targets=[target]
    ) as saver:
        graph = build(saver, memory_store())
        for t in THREADS:
            chat(graph, t, "carol")
            (cache / t).mkdir(parents=True)
            for i in range(3):
                (cache / t / f"a{i}.json").write_text(json.dumps({"answer": i, "t": t}))
        files = [
            leaf_hash(encode_row("answer-cache", [k], [("key", k), ("data", v)]))
            for k, v in sorted(items(THREADS[0]).items())
        ]
        # tables in name order: checkpoints, target:answer-cache, writes (9.13)
        expected = naive_root(
            table_leaves(tmp_path / "app.db", "checkpoints", THREADS[0]) + files
            + table_leaves(tmp_path / "app.db", "writes", THREADS[0])
        )  # fmt: skip
        receipt = saver.erase_thread(THREADS[0])
    assert items(THREADS[0]) == {} and len(items(THREADS[1])) == 3
    p = receipt.statement["predicate"]
    assert p["methods"]["target:answer-cache"] == "sweep"
    assert p["pre_state"]["tables"]["target:answer-cache"]["rows"] == 3
    assert expected.hex() == p["pre_state"]["digest"]["sha256"]
    verify_receipt(receipt.to_json(), [signer.public_key])
