"""UTF-16 SQLite databases (``PRAGMA encoding`` set before LangGraph creates its tables):
every operation works on a real file - subject discovery, locate, erasures of every
kind, the residue scan, retention sweeps and the CLI - asserted on raw rows and bytes.

TEXT columns are stored in UTF-16 there, while LangGraph's checkpoints and metadata are
UTF-8 BLOBs, so a marker is looked for in both encodings.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.sqlite import SqliteStore
from typer.testing import CliRunner

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    ConfigurationError,
    NeedlesFoundError,
    Signer,
    verify_receipt,
)
from erasure_receipts._backends.sqlite import idle_threads
from erasure_receipts.app import app
from scenario import MARKER, TURNS, build_graph, human, raw_rows

NS = ("users", "alice")
ALICE = ("alice-1", "alice-2")
CODEC = {"UTF-16le": "utf-16-le", "UTF-16be": "utf-16-be"}


def cfg(thread: str, user: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": user}}


@pytest.fixture(params=sorted(CODEC))
def u16(request: pytest.FixtureRequest, tmp_path: Path, signer: Signer) -> tuple[Path, str]:
    """A UTF-16 database with two threads of alice (user_id in their metadata), one of
    bob, and alice's store item - all written by a real LangGraph graph."""
    db = tmp_path / "u16.db"
    with sqlite3.connect(db) as c:
        c.execute(f"PRAGMA encoding = '{request.param}'")
        c.execute("CREATE TABLE app_settings (k TEXT)")  # the encoding is fixed from here
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        graph = build_graph(saver, store)
        for thread in ALICE:
            for text in TURNS[:3]:
                graph.invoke(human(text), cfg(thread, "alice"))
        graph.invoke(human("hello from bob"), cfg("bob-1", "bob"))
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA encoding").fetchone()[0] == request.param
    return db, CODEC[request.param]


def marker_bytes(db: Path, codec: str, marker: str = MARKER) -> int:
    """Occurrences of the marker, as UTF-8 and in the database's encoding, in the main
    file and its -wal."""
    n = 0
    for suffix in ("", "-wal"):
        p = Path(f"{db}{suffix}")
        if p.exists():
            data = p.read_bytes()
            n += data.count(marker.encode()) + data.count(marker.encode(codec))
    return n


def rows(db: Path, thread: str) -> int:
    return len(raw_rows(db, "checkpoints", "thread_id = ?", (thread,))) + len(
        raw_rows(db, "writes", "thread_id = ?", (thread,))
    )


def residue(receipt: Any, action: str) -> dict[str, Any]:
    [entry] = [r for r in receipt.predicate["residue"] if r["action"] == action]
    return entry


def test_subject_discovery_digest_and_locate(u16: tuple[Path, str], signer: Signer) -> None:
    db, _ = u16
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
        d = s.digest_subject("alice", metadata_key="user_id")
        found = s.locate([MARKER])
    assert d.threads == ALICE
    assert {f"thread:{t}" for t in ALICE} <= set(d.units)
    assert found and {loc.thread_id for loc in found if loc.table != "store"} == set(ALICE)


def test_erase_subject_with_needles_and_residue_scan(u16: tuple[Path, str], signer: Signer) -> None:
    db, codec = u16
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, store=store, residue_scan=True
        ) as s,
    ):
        r = s.erase_subject(
            "alice", metadata_key="user_id", store_namespaces=[NS], needles=[MARKER]
        )
    v = verify_receipt(r.to_json(), [signer.public_key])
    assert v.thread_id == "alice" and r.predicate["scope"]["threads"] == list(ALICE)
    assert residue(r, "residue_scan")["status"] == "applied"
    assert all(rows(db, t) == 0 for t in ALICE) and rows(db, "bob-1") > 0
    assert raw_rows(db, "store", "prefix = ?", ("users.alice",)) == []
    assert marker_bytes(db, codec) == 0


def test_erase_thread_and_history(u16: tuple[Path, str], signer: Signer) -> None:
    db, _ = u16
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer, residue_scan=True) as s:
        h = s.erase_history("alice-1", needles=[])
        kept = rows(db, "alice-1")
        t = s.erase_thread("alice-2")
        digest = s.digest_thread("bob-1")
    for r in (h, t):
        verify_receipt(r.to_json(), [signer.public_key])
        assert residue(r, "residue_scan")["status"] == "applied"
    assert kept > 0 and rows(db, "alice-2") == 0 and digest.leaves == rows(db, "bob-1")


def test_retention_sweeps_page_past_the_first_thread(u16: tuple[Path, str], signer: Signer) -> None:
    db, _ = u16
    with sqlite3.connect(db) as c:
        # The page after "alice-1" (before the fix, the same page again: a sweep loops).
        assert [t for t, *_ in idle_threads(c, "z", "alice-1", 10)] == ["alice-2", "bob-1"]
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
        assert s.erase_idle_threads(timedelta(0), dry_run=True).threads == 3
        pruned = s.prune_histories(timedelta(0))
        assert pruned.threads == 3 and pruned.failed == 0
        swept = s.erase_idle_threads(timedelta(0))
    assert swept.threads == 3 and swept.failed == 0
    assert all(rows(db, t) == 0 for t in (*ALICE, "bob-1"))


def test_async_saver_finds_the_subject(u16: tuple[Path, str], signer: Signer) -> None:
    db, _ = u16

    async def go() -> Any:
        async with AsyncAttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
            return await s.aerase_subject("alice", metadata_key="user_id")

    r = asyncio.run(go())
    assert r.predicate["scope"]["threads"] == list(ALICE)
    assert all(rows(db, t) == 0 for t in ALICE)


def test_cli_digest_locate_erase(u16: tuple[Path, str], tmp_path: Path, signer: Signer) -> None:
    db, codec = u16
    key = tmp_path / "k.pem"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    runner = CliRunner()
    d = runner.invoke(app, ["digest", str(db), "--subject", "alice", "--metadata-key", "user_id",
                            "--json"])  # fmt: skip
    assert d.exit_code == 0, d.output
    assert json.loads(d.stdout)["threads"] == list(ALICE)
    loc = runner.invoke(app, ["locate", str(db), MARKER, "--json"])
    assert loc.exit_code == 0, loc.output
    e = runner.invoke(app, ["erase", str(db), "--subject", "alice", "--metadata-key", "user_id",
                            "--key", str(key), "--store-ns", "users/alice",
                            "--archive", str(tmp_path / "r")])  # fmt: skip
    assert e.exit_code == 0, e.output
    [path] = (tmp_path / "r").iterdir()
    assert verify_receipt(path.read_bytes(), [signer.public_key]).thread_id == "alice"
    assert all(rows(db, t) == 0 for t in ALICE) and rows(db, "bob-1") > 0
    e2 = runner.invoke(app, ["erase", str(db), "--thread", "bob-1", "--key", str(key),
                             "--out", str(tmp_path / "bob.json")])  # fmt: skip
    assert e2.exit_code == 0, e2.output
    assert rows(db, "bob-1") == 0 and marker_bytes(db, codec) == 0
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
        for t in ("carol-1", "dave-1"):  # dated (uuid6) checkpoints, idle from now on
            s.put({"configurable": {"thread_id": t, "checkpoint_ns": ""}}, empty_checkpoint(),
                  {}, {})  # fmt: skip
    sweep = runner.invoke(app, ["retention", str(db), "--idle", "0s", "--key", str(key),
                                "--archive", str(tmp_path / "sweep"), "--json"])  # fmt: skip
    assert sweep.exit_code == 0, sweep.output
    assert len(list((tmp_path / "sweep").iterdir())) == 2, sweep.output
    assert rows(db, "carol-1") == rows(db, "dave-1") == 0


@pytest.mark.parametrize("encoding", ["UTF-8", "UTF-16le"])
def test_metadata_written_as_text_and_unparsable_metadata(
    tmp_path: Path, signer: Signer, encoding: str
) -> None:
    """Another writer's metadata: TEXT in the database's encoding is read; metadata
    holding the value that is not JSON is refused with a clear error, before anything
    is deleted (it was a raw ``sqlite3.OperationalError``)."""
    db = tmp_path / "m.db"
    with sqlite3.connect(db) as c:
        c.execute(f"PRAGMA encoding = '{encoding}'")
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as s:
        s.setup()
        row = "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, " \
              "checkpoint, metadata) VALUES (?, '', '1', 'msgpack', x'00', ?)"  # fmt: skip
        s.conn.execute(row, ("as-text", '{"user_id": "carol", "step": 1}'))
        s.conn.execute(row, ("as-int", b'{"user_id": 42}'))
        s.conn.execute(row, ("other", b'{"user_id": "carolyn"}'))
        s.conn.commit()
        assert s.digest_subject("carol", metadata_key="user_id").threads == ("as-text",)
        assert s.digest_subject("42", metadata_key="user_id").threads == ("as-int",)
        s.conn.execute(row, ("broken", b'{"user_id": "carol"'))
        s.conn.commit()
        with pytest.raises(ConfigurationError, match="not JSON"):
            s.erase_subject("carol", metadata_key="user_id")
    assert rows(db, "as-text") == 1 and rows(db, "broken") == 1


def test_needles_in_text_columns_are_found(u16: tuple[Path, str], signer: Signer) -> None:
    """TEXT is UTF-16 in such a database (e.g. a store key), BLOBs stay UTF-8: a
    needle is searched for in both encodings, so a copy in a key is not missed."""
    db, codec = u16
    email = "carol@example.com"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as s,
    ):
        store.put(("contacts", "carol"), email, {"n": 1})
        assert Path(db).read_bytes().count(email.encode(codec)) + Path(
            f"{db}-wal"
        ).read_bytes().count(email.encode(codec))
        found = s.locate([email])
        assert [(loc.table, loc.column, loc.form) for loc in found] == [("store", "key", "raw")]
        with pytest.raises(NeedlesFoundError, match="column=key"):
            s.erase_subject("alice", metadata_key="user_id", needles=[email])
        assert rows(db, "alice-1") > 0  # nothing deleted
        r = s.erase_subject(
            "alice", metadata_key="user_id", needles=[email],
            store_namespaces=[NS, ("contacts", "carol")],
        )  # fmt: skip
    assert r.predicate["needles"]["occurrences_after"] == 0
    assert raw_rows(db, "store", "prefix = ?", ("contacts.carol",)) == []


def utf16_file(path: Path) -> Path:
    with sqlite3.connect(path) as c:
        c.execute("PRAGMA encoding = 'UTF-16le'")
        c.execute("CREATE TABLE app_settings (k TEXT)")
    return path


def test_delta_channel_thread_is_refused(tmp_path: Path, signer: Signer) -> None:
    """The marks are looked for in the metadata BLOB as UTF-8 (they were looked for as
    UTF-16, never found, and the thread's history was erased)."""
    from erasure_receipts.history import DeltaChannelError
    from test_history_graphs import cfg as hcfg
    from test_history_graphs import delta_graph

    db = utf16_file(tmp_path / "d.db")
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        graph = delta_graph(saver)
        for i in range(3):
            graph.invoke({"items": [f"i{i}"]}, hcfg("d"))
        before = rows(db, "d")
        with pytest.raises(DeltaChannelError, match="DeltaChannel: d"):
            saver.erase_history("d")
    assert rows(db, "d") == before


def test_history_of_a_thread_with_subgraph_calls(tmp_path: Path, signer: Signer) -> None:
    """The kept subgraph call is found from the metadata's ``parents`` (read as UTF-16,
    it was no JSON, so the plan differed from the same thread in a UTF-8 file)."""
    from langgraph.types import Command

    from test_history_graphs import cfg as hcfg
    from test_history_graphs import human as hhuman
    from test_history_graphs import nested_graph

    db = utf16_file(tmp_path / "s.db")
    with AttestingSqliteSaver.from_conn_string(str(db), signer=signer) as saver:
        graph = nested_graph(saver)
        for i in range(3):
            graph.invoke(hhuman(f"turn {i}"), hcfg("t"))
            graph.invoke(Command(resume=f"yes {i}"), hcfg("t"))
        graph.invoke(hhuman("last turn"), hcfg("t"))  # interrupted inside the subgraph call
        snap = graph.get_state(hcfg("t"), subgraphs=True)
        current_call = snap.tasks[0].state.config["configurable"]["checkpoint_ns"]  # type: ignore[union-attr]
        receipt = saver.erase_history("t")
        kept = [c["checkpoint_ns"] for c in receipt.predicate["kept_state"]["checkpoints"]]
        assert kept == ["", current_call]
        out = graph.invoke(Command(resume="yes finally"), hcfg("t"))
    assert out["messages"][-1].content == "approved: yes finally" and out["turns"] == 4
