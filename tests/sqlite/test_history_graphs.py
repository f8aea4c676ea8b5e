"""Real graphs for the history-erasure tests (imported by tests/*/test_history_*.py and
tests/*/test_retention*.py), and unit tests of the keep-latest rule and uuid6 time."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypedDict

import langgraph.checkpoint.base.id as lg_id
import pytest
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)
from langgraph.channels.delta import DeltaChannel
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

from erasure_receipts._backends.keep_latest import Head, KeepLatest, plan
from erasure_receipts.history import checkpoint_time, uuid6_floor

CARD = "4111-1111-1111-1111"  # what the user typed in turn 1, then "removed"
NS = ("users", "alice")
CHAT_TURNS = [f"my card is {CARD}", "what's the weather?", "book a table", "thanks", "bye"]


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _chat(state: Chat) -> dict[str, Any]:
    last = state["messages"][-1]
    store = get_store()
    if store is not None and CARD in str(last.content):
        store.put(NS, "card", {"card": CARD})
    return {"messages": [AIMessage(content=f"noted: {last.content}")]}


def _summarize(state: Chat) -> dict[str, Any]:
    # A summarizer: past 6 messages, the old ones are replaced by a summary that holds
    # none of their content. Earlier checkpoints and writes still hold all of it.
    msgs = state["messages"]
    if len(msgs) <= 6:
        return {}
    old = msgs[:-2]
    summary = SystemMessage(content=f"summary of {len(old)} earlier messages")
    return {"messages": [*(RemoveMessage(id=m.id) for m in old if m.id), summary]}


def chat_graph(saver: Any, store: Any = None) -> Any:
    g = StateGraph(Chat)
    g.add_node("chat", _chat)
    g.add_node("summarize", _summarize)
    g.add_edge(START, "chat")
    g.add_edge("chat", "summarize")
    g.add_edge("summarize", END)
    return g.compile(checkpointer=saver, store=store)


class Nested(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turns: int


def _ask(state: Nested) -> dict[str, Any]:
    answer = interrupt("approve?")
    return {"messages": [AIMessage(content=f"approved: {answer}")]}


def _plan(state: Nested) -> dict[str, Any]:
    return {"messages": [AIMessage(content="planning")], "turns": state.get("turns", 0) + 1}


def nested_graph(saver: Any, *, child_checkpointer: bool | None = None) -> Any:
    """A root graph calling a subgraph that interrupts: subgraph *call* namespaces
    (``sub:<task id>``), or with ``child_checkpointer=True`` one persistent ``sub``."""
    child = StateGraph(Nested)
    child.add_node("ask", _ask)
    child.add_edge(START, "ask")
    child.add_edge("ask", END)
    g = StateGraph(Nested)
    g.add_node("plan", _plan)
    g.add_node("sub", child.compile(checkpointer=child_checkpointer))
    g.add_edge(START, "plan")
    g.add_edge("plan", "sub")
    g.add_edge("sub", END)
    return g.compile(checkpointer=saver)


def _fold(state: list[str] | None, writes: list[Any]) -> list[str]:
    out = list(state or [])
    for w in writes:
        out += w if isinstance(w, list) else [w]
    return out


class Deltas(TypedDict):
    items: Annotated[list[str], DeltaChannel(_fold)]


def delta_graph(saver: Any) -> Any:
    g = StateGraph(Deltas)
    g.add_node("n", lambda s: {"items": ["x"]})
    g.add_edge(START, "n")
    g.add_edge("n", END)
    return g.compile(checkpointer=saver)


def human(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(content=text)]}


def cfg(thread: str, **extra: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, **extra}}


@contextmanager
def checkpoint_clock(monkeypatch: pytest.MonkeyPatch, at: datetime) -> Any:
    """Checkpoint ids LangGraph makes inside the block carry time ``at`` (uuid6 reads
    ``time.time_ns``): old threads without waiting."""

    class _Clock:
        def __init__(self) -> None:
            epoch = datetime(1970, 1, 1, tzinfo=UTC)
            self.ns = (at - epoch) // timedelta(microseconds=1) * 1000

        def time_ns(self) -> int:
            self.ns += 1000  # strictly increasing, 1 us apart
            return self.ns - 1000

    with monkeypatch.context() as m:
        m.setattr(lg_id, "time", _Clock())
        m.setattr(lg_id, "_last_v6_timestamp", None)
        yield


# -- unit tests --------------------------------------------------------------------------


def test_uuid6_floor_orders_checkpoint_ids_by_time() -> None:
    t = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
    floor = uuid6_floor(t)
    assert len(floor) == 36 and floor[14] == "6"
    assert checkpoint_time(floor) == t
    with checkpoint_clock(pytest.MonkeyPatch(), t - timedelta(microseconds=1)):
        before = str(lg_id.uuid6())
    with checkpoint_clock(pytest.MonkeyPatch(), t + timedelta(microseconds=1)):
        after = str(lg_id.uuid6(clock_seq=0))
    assert before < floor < after
    assert checkpoint_time("1ef00000000000000000000000000000000") is None
    assert checkpoint_time(str(lg_id.uuid6())) is not None


def test_keep_latest_plan_follows_langgraph() -> None:
    heads = [
        Head("", "r9"),
        Head("child", "c5"),  # checkpointer=True subgraph: keeps its latest
        Head("sub:old", "p2", root="r3", root_saved=True),  # a finished call: removed
        Head("sub:now", "t1", root="r9", root_saved=True),  # the call in progress: kept
        Head("sub:unsaved", "u1", root="rX", root_saved=False),  # root not saved yet: kept
        # finished, ids not before r9 (it ended after r9 was saved, or its writer's clock
        # is ahead): removed entirely all the same, as LangGraph's prune removes it
        Head("sub:late", "zz", root="r3", root_saved=True),
        Head("v3", "h8", sends_parent="h7"),
    ]
    k = plan(heads)
    assert k.kept == (("", "r9"), ("child", "c5"), ("sub:now", "t1"),
                      ("sub:unsaved", "u1"), ("v3", "h7"), ("v3", "h8"))  # fmt: skip
    assert k.dropped == ("sub:late", "sub:old")
    assert k.removes("sub:late", "zz") and k.removes("sub:late", "a0")
    assert k.removes("", "r1") and not k.removes("", "r9") and not k.removes("", "s1")
    assert not k.removes("", "z0")  # newer than the kept head: written after, not removed
    assert k.removes("sub:old", "p2") and k.removes("gone:x", "a")
    assert not k.removes("sub:new", "s0")  # a call newer than the kept root: not removed
    assert not k.removes("v3", "h7") and k.removes("v3", "h6")
    where, params = k.where("?")
    assert where.count("?") == len(params)
    assert KeepLatest.of([]).where("?") == ("(1 = 0)", [])
