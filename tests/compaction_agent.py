"""A real LangChain agent (``create_agent`` with the real ``SummarizationMiddleware``) on
a deterministic fake chat model, for the ``erase_compacted=`` tests (SQLite and
PostgreSQL): ten turns, a marker in the first, the summarizer compacting twice."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

MARKER = "MARKER-7f3a-4111-1111-1111-1111"
TURNS = 10
COMPACTIONS = 2
"""Turns at which the summarizer (8 messages, keep 2) fires: the 5th and the 8th."""


class FakeChat(BaseChatModel):
    """Answers each turn, summarizes when asked to; never repeats what the user said
    in a summary (the marker leaves the state with the first compaction)."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "fake-chat"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.calls += 1
        text = " ".join(str(m.content) for m in messages)
        if "Messages to summarize" in text:
            out = f"summary #{self.calls}: the user asked {len(messages)} things"
        else:
            out = f"answer #{self.calls}"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=out))])


def agent(checkpointer: Any) -> Any:
    model = FakeChat()
    summarizer = SummarizationMiddleware(model=model, trigger=("messages", 8), keep=("messages", 2))
    return create_agent(model, tools=[], middleware=[summarizer], checkpointer=checkpointer)


def turn(i: int) -> dict[str, Any]:
    text = f"my card is {MARKER}, turn 0" if i == 0 else f"question {i}"
    return {"messages": [HumanMessage(content=text)]}


def cfg(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def contents(state: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in state["messages"]]
