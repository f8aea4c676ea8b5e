"""locate(): every stored copy of a value, on SQLite and PostgreSQL, in checkpoints,
writes and the store - a non-ASCII value stored raw (msgpack, orjson, jsonb) in some
places and as JSON ``\\uXXXX`` text (an application that pasted JSON into a message)
in others - and ``receipt locate``."""

from __future__ import annotations

import json
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.store.postgres import PostgresStore
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import AttestingPostgresSaver, AttestingSqliteSaver, Signer
from erasure_receipts.subject import Location, named_forms
from test_subject import build, cfg

CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
NAME = "Zoë Åberg"
PASTED = json.dumps({"customer": NAME, "plan": "pro"})  # Zo\u00eb \u00c5berg
UPPER = "ticket for Zo\\u00EB \\u00C5berg"  # escapes with upper-case hex digits


def fill(saver: Any, store: Any) -> None:
    graph = build(saver, store)
    graph.invoke({"messages": [HumanMessage(content=f"my name is {NAME}")]}, cfg("raw-1", None))
    graph.invoke({"messages": [HumanMessage(content=PASTED)]}, cfg("pasted-2", None))
    graph.invoke({"messages": [HumanMessage(content=UPPER)]}, cfg("upper-3", None))
    graph.invoke({"messages": [HumanMessage(content="nothing here")]}, cfg("clean-4", None))
    store.put(("people", "p1"), "profile", {"name": NAME})
    store.put(("imports", "crm"), "row-7", {"payload": PASTED})


def by_form(found: list[Location]) -> dict[str, set[tuple[str, str | None]]]:
    out: dict[str, set[tuple[str, str | None]]] = {}
    for loc in found:
        out.setdefault(loc.form, set()).add((loc.table, loc.thread_id or loc.prefix))
    return out


def test_forms_are_named() -> None:
    assert [n for n, _ in named_forms("alice@example.com")] == ["raw"]
    assert named_forms(NAME)[:4] == [
        ("raw", NAME.encode()),
        ("json-escaped", b"Zo\\u00eb \\u00c5berg"),
        ("json-escaped-upper", b"Zo\\u00EB \\u00C5berg"),
        ("json-escaped-nested", b"Zo\\\\u00eb \\\\u00c5berg"),
    ]
    # the same four for the decomposed (NFD) spelling of the name
    nfd = unicodedata.normalize("NFD", NAME)
    assert ("raw+unicode-nfd", nfd.encode()) in named_forms(NAME)
    assert ("json-escaped+unicode-nfd", b"Zoe\\u0308 A\\u030aberg") in named_forms(NAME)


def test_sqlite_locate_every_copy(tmp_path: Path, signer: Signer) -> None:
    db = tmp_path / "app.db"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        fill(saver, store)
        found = saver.locate([NAME, "not stored anywhere"])
    forms = by_form(found)
    # Raw UTF-8: the msgpack checkpoint and write of raw-1, the orjson store item.
    assert {("checkpoints", "raw-1"), ("writes", "raw-1"), ("store", "people.p1")} <= forms["raw"]
    # \u-escaped: the pasted JSON text, inside a message (msgpack) and a store value.
    assert {("checkpoints", "pasted-2"), ("writes", "pasted-2")} <= forms["json-escaped"]
    # The same JSON text inside a JSON store value: escaped again (backslashes doubled).
    assert ("store", "imports.crm") in forms["json-escaped-nested"]
    assert {("checkpoints", "upper-3"), ("writes", "upper-3")} <= forms["json-escaped-upper"]
    assert all(loc.needle == 0 for loc in found)  # the second value is nowhere
    assert not any(loc.thread_id == "clean-4" for loc in found)
    write = next(loc for loc in found if loc.table == "writes" and loc.thread_id == "raw-1")
    assert write.checkpoint_id and write.channel == "messages" and dict(write.extra)["task_id"]
    doc = write.to_json()
    assert doc["table"] == "writes" and doc["via"] == "sql" and NAME not in json.dumps(doc)

    res = subprocess.run([*CLI, "locate", str(db), NAME, "--json"], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["found"] == len(found) and out["locations"] == [loc.to_json() for loc in found]
    text = subprocess.run([*CLI, "locate", str(db), NAME], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert text.returncode == 0 and "pasted-2" in text.stdout
    assert f"{len(found)} location(s)" in text.stderr
    assert db.read_bytes()  # the database file is untouched by a read-only locate
    usage = subprocess.run([*CLI, "locate", str(db), ""], capture_output=True, text=True)
    assert usage.returncode == 2


def test_pg_locate_every_copy(pg_db: str, signer: Signer) -> None:
    with (
        PostgresStore.from_conn_string(pg_db) as store,
        AttestingPostgresSaver.from_conn_string(pg_db, signer=signer, store=store) as saver,
    ):
        store.setup()
        saver.setup()
        fill(saver, store)
        found = saver.locate([NAME])
    forms = by_form(found)
    assert {("checkpoint_blobs", "raw-1"), ("checkpoint_writes", "raw-1")} <= forms["raw"]
    assert ("store", "people.p1") in forms["raw"]  # jsonb prints non-ASCII as is
    assert {("checkpoint_blobs", "pasted-2"), ("checkpoint_writes", "pasted-2")} <= forms[
        "json-escaped"
    ]
    assert ("store", "imports.crm") in forms["json-escaped-nested"]
    assert ("checkpoint_blobs", "upper-3") in forms["json-escaped-upper"]
    blobs = [loc for loc in found if loc.table == "checkpoint_blobs"]
    assert {loc.channel for loc in blobs} >= {"messages"} and dict(blobs[0].extra)["version"]
    res = subprocess.run([*CLI, "locate", pg_db, NAME, "--json"], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["found"] == len(found)


def test_locate_arguments(tmp_path: Path, signer: Signer) -> None:
    with AttestingSqliteSaver.from_conn_string(str(tmp_path / "a.db"), signer=signer) as saver:
        saver.setup()
        with pytest.raises(TypeError):
            saver.locate("alice")  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            saver.locate([])
        assert saver.locate(["x"]) == []
