"""The redaction's rewrite of decoded objects (erasure_receipts._ops.redact): every
string and UTF-8 byte string of LangChain messages, dataclasses, named tuples, dicts
(keys too) and nested containers; untouched objects are returned as they are; rows
through LangGraph's real serde; needle validation."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, NamedTuple

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Interrupt, Send

from erasure_receipts import MIN_NEEDLE_CHARS, ArgumentTypeError, ConfigurationError
from erasure_receipts._ops.redact import _needles, _pairs, _Rewriter, rewrite

SECRET = "alice@example.com"
RW = _Rewriter(_pairs([SECRET]), "[r]")


@dataclasses.dataclass(frozen=True)
class Note:
    text: str
    tags: tuple[str, ...] = ()


class Pair(NamedTuple):
    left: str
    right: bytes


def test_every_string_is_rewritten() -> None:
    value = {
        "messages": [
            HumanMessage(content=f"mail {SECRET}", id="h1"),
            AIMessage(
                content=[{"type": "text", "text": f"ok {SECRET}"}],
                id="a1",
                additional_kwargs={"note": SECRET},
            ),
            ToolMessage(content="tool", tool_call_id="c1"),
        ],
        SECRET: Note(f"note {SECRET}", (SECRET, "x")),
        "pair": Pair(SECRET, f"b {SECRET}".encode()),
        "send": Send("node", {"arg": SECRET}),
        "set": {f"{SECRET}!"},
        "n": 3,
    }
    out = RW.value(value)
    assert SECRET not in repr(out)
    assert out["messages"][0].content == "mail [r]" and out["messages"][0].id == "h1"
    assert out["messages"][1].content == [{"type": "text", "text": "ok [r]"}]
    assert out["messages"][2] is value["messages"][2]  # untouched: the same object
    assert out["[r]"] == Note("note [r]", ("[r]", "x"))
    assert out["pair"] == Pair("[r]", b"b [r]") and isinstance(out["pair"], Pair)
    assert out["send"].arg == {"arg": "[r]"} and out["set"] == {"[r]!"}
    assert RW.contains(value) and not RW.contains(out)


def test_nothing_to_rewrite_returns_the_same_object() -> None:
    value = {"messages": [HumanMessage(content="hello there")], "x": [1, 2.5, None, True]}
    assert RW.value(value) is value and not RW.contains(value)


def test_unicode_spellings() -> None:
    needle = "Zoë Müller"
    rw = _Rewriter(_pairs([needle]), "[r]")
    import unicodedata

    nfd = unicodedata.normalize("NFD", needle)
    assert rw.value(f"a {nfd} b") == "a [r] b"


def test_rows_through_the_real_serde() -> None:
    serde = JsonPlusSerializer()
    state = {"channel_values": {"messages": [HumanMessage(content=f"mail {SECRET}")],
                                "interrupt": Interrupt(value=SECRET)}}  # fmt: skip
    kind, blob = serde.dumps_typed(state)
    meta = json.dumps({"source": "loop", "note": SECRET})
    row = {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "1", "type": kind,
           "checkpoint": blob, "metadata": meta.encode()}  # fmt: skip
    new, blocked = rewrite("checkpoints", row, ["thread_id", "checkpoint_ns", "checkpoint_id"],
                           RW, serde)  # fmt: skip
    assert not blocked and new is not None
    back = serde.loads_typed((new["type"], new["checkpoint"]))
    assert SECRET not in repr(back) and "mail [r]" in repr(back)
    assert json.loads(new["metadata"]) == {"source": "loop", "note": "[r]"}
    assert isinstance(new["metadata"], bytes)  # stored as it was: a BLOB stays a BLOB
    # a needle in a key column cannot be rewritten: blocked, named
    _, blocked = rewrite("checkpoints", {**row, "thread_id": SECRET}, ["thread_id"], RW, serde)
    assert blocked == ["thread_id"]
    # a value this serde cannot decode: blocked, whatever its bytes
    _, blocked = rewrite("writes", {"type": "msgpack+aes", "value": b"\x00" * 8}, [], RW, serde)
    assert blocked == ["value"]


def test_needle_validation() -> None:
    assert _needles([SECRET, SECRET, "", "\n"]) == (SECRET,)
    with pytest.raises(ConfigurationError) as err:
        _needles(["x" * (MIN_NEEDLE_CHARS - 1)])
    assert err.value.reason == "needle_too_short"
    with pytest.raises(ConfigurationError) as err:
        _needles([])
    assert err.value.reason == "no_needles"
    for bad in (SECRET, b"x", 3, [3]):
        with pytest.raises(ArgumentTypeError):
            _needles(bad)  # type: ignore[arg-type]


def test_value_depth_is_bounded() -> None:
    deep: Any = SECRET
    for _ in range(500):
        deep = [deep]
    RW.value(deep)  # no RecursionError
