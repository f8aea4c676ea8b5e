"""``receipt digest|erase|recover`` with a PostgreSQL DSN instead of a SQLite file.

Runs the real CLI (in process through typer's CliRunner, or as a subprocess) against the
throw-away PostgreSQL server of ``tests/pg_server.py``; assertions are on exit codes,
stdout/stderr, raw row counts read through separate connections, and the catalog.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import quote

import psycopg
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.store.memory import InMemoryStore
from langgraph.store.postgres import PostgresStore
from typer.testing import CliRunner, Result

from erasure_receipts import AttestingPostgresSaver, Signer, verify_receipt
from erasure_receipts._engine import eraser as attesting  # internals: where the flow signs
from erasure_receipts.app import app
from erasure_receipts.app_postgres import EXTRA, is_dsn
from pg_helpers import connect, count, fingerprint, independent_digest
from scenario import TURNS, build_graph, human

CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
T = "alice-chat"
NS = ("users", "alice")
STORE_WHERE = "prefix = %s OR prefix LIKE %s"
STORE_PARAMS = ("users.alice", "users.alice.%")
SCOPE = {t: ("thread_id = %s", (T,)) for t in ("checkpoints", "checkpoint_blobs",
                                               "checkpoint_writes")}  # fmt: skip
SCOPE["store"] = (STORE_WHERE, STORE_PARAMS)
OTHERS = {t: ("thread_id <> %s", (T,)) for t in ("checkpoints", "checkpoint_blobs",
                                                 "checkpoint_writes")}  # fmt: skip
OTHERS["store"] = ("NOT (" + STORE_WHERE + ")", STORE_PARAMS)
PASSWORD = "s3cr3t-Pa55word"


def cli(*args: Any) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def one_error(res: Result, code: int, *needles: str) -> str:
    """Exit ``code`` with exactly one ``receipt: error:`` line, no traceback."""
    assert res.exit_code == code, (res.exit_code, res.stdout, res.stderr, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("receipt: error: "), res.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def as_uri(dsn: str) -> str:
    """The same database as a ``postgresql://`` URI (Unix socket as ``?host=``)."""
    p = psycopg.conninfo.conninfo_to_dict(dsn)
    query = f"host={quote(str(p['host']), safe='/')}&port={p.get('port', 5432)}"
    return f"postgresql://{p['user']}@/{p['dbname']}?{query}"


def catalog(dsn: str) -> dict[str, Any]:
    """This database's relations (with xmin: a rewrite or ALTER shows), triggers and
    functions, and the public tables' contents."""
    with connect(dsn) as c:
        rels = c.execute(
            "SELECT relname, relkind, xmin::text FROM pg_class "
            "WHERE relnamespace = 'public'::regnamespace ORDER BY relname"
        ).fetchall()
        trigs = c.execute(
            "SELECT tgrelid::regclass::text, tgname, xmin::text FROM pg_trigger "
            "WHERE NOT tgisinternal ORDER BY 1, 2"
        ).fetchall()
        procs = c.execute(
            "SELECT proname, xmin::text FROM pg_proc "
            "WHERE pronamespace = 'public'::regnamespace ORDER BY 1"
        ).fetchall()
        contents = {
            r[0]: c.execute(f'SELECT t::text FROM "{r[0]}" t ORDER BY 1').fetchall()
            for r in rels
            if r[1] == "r"
        }
    return {"rels": rels, "triggers": trigs, "procs": procs, "contents": contents}


def erasure_objects(dsn: str) -> list[str]:
    with connect(dsn) as c:
        rows = c.execute(
            "SELECT relname FROM pg_class WHERE relname LIKE 'erasure%' UNION ALL "
            "SELECT tgname FROM pg_trigger WHERE tgname LIKE 'erasure%' UNION ALL "
            "SELECT proname FROM pg_proc WHERE proname LIKE 'erasure%'"
        ).fetchall()
    return sorted(r[0] for r in rows)


def populate(dsn: str, signer: Signer, *, erasure_schema: bool, store: bool = True) -> None:
    """A real graph run on two threads and a store under ``users/alice`` (beyond one
    page, nested, and look-alike namespaces), through LangGraph's own savers."""
    with (
        PostgresStore.from_conn_string(dsn) as st,
        PostgresSaver.from_conn_string(dsn) as plain,
    ):  # fmt: skip
        plain.setup()
        if store:
            st.setup()
        graph = build_graph(plain, st if store else InMemoryStore())
        for text in TURNS[:3]:
            graph.invoke(human(text), {"configurable": {"thread_id": T}})
        graph.invoke(human("hello from bob"), {"configurable": {"thread_id": "bob-chat"}})
        if store:
            for i in range(14):
                st.put(NS, f"k{i:02d}", {"i": i})
            st.put((*NS, "notes"), "n", {"n": 1})
            st.put(("users", "alice2"), "identity", {"name": "not alice"})
    if erasure_schema:
        with AttestingPostgresSaver.from_conn_string(dsn, signer=signer) as saver:
            saver.setup()


@pytest.fixture
def key(tmp_path: Path, signer: Signer) -> Path:
    path = tmp_path / "k.pem"
    path.write_bytes(signer.private_pem())
    path.chmod(0o600)
    return path


@pytest.fixture
def read_only_spy() -> Iterator[list[str]]:
    """``transaction_read_only`` of every connection the CLI opens (as it opened it)."""
    seen: list[str] = []
    real = psycopg.Connection.connect

    def spy(cls: Any, *args: Any, **kwargs: Any) -> Any:
        conn = real(*args, **kwargs)
        row = conn.execute("SHOW transaction_read_only").fetchone()
        seen.append(row["transaction_read_only"] if isinstance(row, dict) else row[0])
        return conn

    with mock.patch.object(psycopg.Connection, "connect", classmethod(spy)):
        yield seen


# -- which arguments are DSNs ----------------------------------------------------------


@pytest.mark.parametrize(
    ("arg", "dsn"),
    [
        ("postgresql://u@h/db", True),
        ("POSTGRES://u@h/db", True),
        ("host=/tmp dbname=x", True),
        ("  dbname = x", True),
        ("app.db", False),
        ("./data/app.sqlite", False),
        (Path("postgresql://u@h/db"), False),
    ],
)
def test_is_dsn(arg: Any, dsn: bool) -> None:
    assert is_dsn(arg) is dsn


def test_a_file_named_like_a_keyword_string_is_a_file(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    Path("dbname=x").write_bytes(b"")
    assert not is_dsn("dbname=x")
    one_error(cli("digest", "dbname=x", "--thread", "t"), 3, "empty file")


# -- digest, erase, verify ---------------------------------------------------------------


def test_pg_cli_digest_erase_verify(
    pg_db: str, signer: Signer, key: Path, pub_pem: Path, tmp_path: Path
) -> None:
    populate(pg_db, signer, erasure_schema=True)
    expected = independent_digest(pg_db, SCOPE)
    pre = {t: count(pg_db, t, w, p) for t, (w, p) in SCOPE.items()}
    assert all(pre.values()) and pre["store"] == 14 + 1 + 1  # the graph's own item too
    others = {t: fingerprint(pg_db, t, w, p) for t, (w, p) in OTHERS.items()}

    res = cli("digest", as_uri(pg_db), "--thread", T, "--store-ns", "users/alice", "--json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["digest"] == expected
    assert {t: doc["tables"][t]["rows"] for t in SCOPE} == pre

    archive = tmp_path / "receipts"
    res = cli("erase", pg_db, "--thread", T, "--store-ns", "users/alice", "--key", key,
              "--archive", archive, "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["ok"] is True and doc["pre_digest"] == expected and doc["rows"] == sum(pre.values())
    receipt = doc["receipt"]["statement"]["predicate"]
    assert receipt["methods"] == {"checkpoints": "atomic-transaction",
                                  "store": "atomic-transaction"}  # fmt: skip
    assert receipt["backend"]["kind"] == "postgres" and receipt["backend"]["store"] == (
        "PostgresStore"
    )
    assert {t: count(pg_db, t, w, p) for t, (w, p) in SCOPE.items()} == dict.fromkeys(SCOPE, 0)
    assert {t: fingerprint(pg_db, t, w, p) for t, (w, p) in OTHERS.items()} == others
    [path] = archive.iterdir()
    assert verify_receipt(path.read_bytes(), [signer.public_key]).pre_digest == expected
    done = subprocess.run([*CLI, "verify", str(path), "--key", str(pub_pem)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("OK")
    # The tombstone refuses a plain PostgresSaver worker continuing the erased
    # conversation (a run from before the erasure); a second erase finds nothing.
    before = "1ef00000-0000-6000-8000-000000000000"  # a checkpoint id from 2024
    with (
        PostgresSaver.from_conn_string(pg_db) as plain,
        pytest.raises(psycopg.errors.RaiseException, match="thread erased"),
    ):
        plain.put({"configurable": {"thread_id": T, "checkpoint_ns": "", "checkpoint_id": before}},
                  empty_checkpoint(), {}, {})  # fmt: skip
    one_error(cli("erase", pg_db, "--thread", T, "--key", key), 1, "already erased")


def test_pg_cli_erase_refusals_change_nothing(pg_db: str, signer: Signer, key: Path) -> None:
    populate(pg_db, signer, erasure_schema=True, store=False)
    before = catalog(pg_db)
    one_error(cli("erase", pg_db, "--thread", "no-such-thread", "--key", key), 1,
              "no stored rows")  # fmt: skip
    one_error(cli("erase", pg_db, "--thread", T, "--key", key, "--store-ns", "users/alice"), 2,
              "store")  # fmt: skip
    assert catalog(pg_db) == before
    assert count(pg_db, "erasure_tombstones", "true", ()) == 0


# -- digest is read-only -------------------------------------------------------------------


@pytest.mark.parametrize("erasure_schema", [False, True], ids=["plain-langgraph", "set-up"])
def test_pg_cli_digest_is_read_only(
    pg_db: str, signer: Signer, key: Path, erasure_schema: bool, read_only_spy: list[str]
) -> None:
    populate(pg_db, signer, erasure_schema=erasure_schema)
    before = catalog(pg_db)
    objects = erasure_objects(pg_db)
    read_only_spy.clear()
    res = cli("digest", pg_db, "--thread", T, "--store-ns", "users/alice", "--json")
    assert res.exit_code == 0, res.stderr
    digest = json.loads(res.stdout)["digest"]
    assert read_only_spy and set(read_only_spy) == {"on"}, read_only_spy
    assert catalog(pg_db) == before
    assert erasure_objects(pg_db) == objects
    assert bool(objects) is erasure_schema  # a plain LangGraph database got nothing
    assert digest == independent_digest(pg_db, SCOPE)
    # What digest previewed is what erase measures (erase installs the schema if needed).
    read_only_spy.clear()
    res = cli("erase", pg_db, "--thread", T, "--store-ns", "users/alice", "--key", key, "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["pre_digest"] == digest
    assert "off" in read_only_spy
    assert "erasure_tombstones" in erasure_objects(pg_db)


# -- not a LangGraph database ----------------------------------------------------------------


@pytest.mark.parametrize("cmd", ["digest", "erase", "recover"])
def test_pg_cli_foreign_database_is_untouched(
    cmd: str, pg_db: str, key: Path, tmp_path: Path
) -> None:
    with connect(pg_db) as c:
        c.execute("CREATE TABLE notes (id serial PRIMARY KEY, body text)")
        c.execute("CREATE TABLE checkpoints (id int)")  # a name alone is not LangGraph
        c.execute("INSERT INTO notes (body) VALUES ('keep me')")
    before = catalog(pg_db)
    archive = tmp_path / "archive"
    extra = {"digest": ["--thread", "t"], "erase": ["--thread", "t", "--key", key],
             "recover": ["--key", key, "--archive", archive]}[cmd]  # fmt: skip
    for args in ([pg_db], [as_uri(pg_db)], [pg_db, "--json"]):
        res = cli(cmd, *args, *extra)
        line = one_error(res, 3, "not a LangGraph database", "checkpoint_blobs",
                         "nothing was changed")  # fmt: skip
        assert "checkpoints," not in line  # it has a table of that name
        if "--json" in args:
            doc = json.loads(res.stdout)
            assert doc["exit_code"] == 3 and doc["reason"] == "not_langgraph_database"
        else:
            assert res.stdout == ""
    assert catalog(pg_db) == before and erasure_objects(pg_db) == []
    assert not archive.exists()


# -- connection failures never print the password -------------------------------------------


def test_pg_cli_connection_failure_is_one_line_without_password(
    pg_db: str, key: Path, tmp_path: Path
) -> None:
    p = psycopg.conninfo.conninfo_to_dict(pg_db)
    sock = quote(str(p["host"]), safe="")
    enc = quote(PASSWORD, safe="")
    failing = [
        # no server on that socket / port
        f"host={tmp_path} port=5432 user=bob password={PASSWORD} dbname=x",
        f"postgresql://bob:{enc}@127.0.0.1:1/x?connect_timeout=5",
        # a server that is there, a database that is not
        psycopg.conninfo.make_conninfo(pg_db, dbname="no_such_db", password=PASSWORD),
        f"postgresql://postgres:{enc}@/no_such_db?host={sock}&port={p.get('port', 5432)}",
    ]
    archive = tmp_path / "archive"
    for dsn in failing:
        for cmd, extra in (("digest", ["--thread", "t"]),
                           ("erase", ["--thread", "t", "--key", key]),
                           ("recover", ["--key", key, "--archive", archive])):  # fmt: skip
            res = cli(cmd, dsn, *extra)
            line = one_error(res, 3, "cannot connect to")
            assert PASSWORD not in res.stdout + res.stderr and enc not in line, line
            res = cli(cmd, dsn, *extra, "--json")
            doc = json.loads(res.stdout)
            assert res.exit_code == 3 and doc["reason"] == "connection_failed", doc
            assert PASSWORD not in res.stdout + res.stderr
    assert not archive.exists()
    # A malformed string is a usage error, password redacted from libpq's message too.
    bad = f"host=/tmp password={PASSWORD} bogus"
    res = cli("digest", bad, "--thread", "t")
    one_error(res, 2, "malformed PostgreSQL connection string")
    assert PASSWORD not in res.stderr
    # As a subprocess (the console script's path), the same one line.
    done = subprocess.run([*CLI, "digest", failing[1], "--thread", "t"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and PASSWORD not in done.stderr, done.stderr


# -- recover -------------------------------------------------------------------------------


def test_pg_cli_recover_after_a_crash(
    pg_db: str, signer: Signer, key: Path, pub_pem: Path, tmp_path: Path
) -> None:
    populate(pg_db, signer, erasure_schema=True)
    archive = tmp_path / "archive"
    res = cli("digest", pg_db, "--thread", T, "--store-ns", "users/alice", "--json")
    digest = json.loads(res.stdout)["digest"]
    # The process "dies" after the commit, before the receipt is signed and archived.
    with mock.patch.object(attesting, "sign_and_archive", side_effect=OSError("disk full")):
        res = cli("erase", pg_db, "--thread", T, "--store-ns", "users/alice", "--key", key,
                  "--archive", archive)  # fmt: skip
    one_error(res, 1, "recover")
    assert {t: count(pg_db, t, w, p) for t, (w, p) in SCOPE.items()} == dict.fromkeys(SCOPE, 0)
    assert not archive.exists() or not any(archive.iterdir())
    assert count(pg_db, "erasure_journal", "receipt IS NULL", ()) == 1

    res = cli("recover", pg_db, "--key", key, "--archive", archive, "--min-age", "3600")
    assert res.exit_code == 0 and "1 journal entry skipped" in res.stderr, res.stderr
    res = cli("recover", as_uri(pg_db), "--key", key, "--archive", archive, "--min-age", "0",
              "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    [rec] = doc["recovered"]
    assert rec["thread_id"] == T and doc["exported"] == []
    path = archive / f"{rec['receipt_id']}.json"
    assert verify_receipt(path.read_bytes(), [signer.public_key]).pre_digest == digest
    done = subprocess.run([*CLI, "verify", str(path), "--key", str(pub_pem)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert count(pg_db, "erasure_journal", "receipt IS NULL", ()) == 0
    res = cli("recover", pg_db, "--key", key, "--archive", archive, "--min-age", "0")
    assert res.exit_code == 0 and "0 receipt(s) recovered" in res.stderr
    # An archive that lost the file gets it back from the journal, byte for byte.
    saved = path.read_bytes()
    path.unlink()
    res = cli("recover", pg_db, "--key", key, "--archive", archive, "--min-age", "0", "--json")
    assert json.loads(res.stdout)["exported"] == [rec["receipt_id"]]
    assert path.read_bytes() == saved


def test_pg_cli_recover_without_journal_installs_nothing(
    pg_db: str, signer: Signer, key: Path, tmp_path: Path
) -> None:
    populate(pg_db, signer, erasure_schema=False, store=False)
    before = catalog(pg_db)
    res = cli("recover", pg_db, "--key", key, "--archive", tmp_path / "a", "--min-age", "0",
              "--json")  # fmt: skip
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout) == {"ok": True, "exit_code": 0, "recovered": [],
                                      "exported": [],
                                      "skipped": {"count": 0, "min_age_seconds": 0.0}}  # fmt: skip
    assert catalog(pg_db) == before and erasure_objects(pg_db) == []


# -- without the postgres extra ------------------------------------------------------------


def test_dsn_without_the_postgres_extra_is_a_usage_error(
    key: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg -> ImportError
    dsn = f"postgresql://bob:{PASSWORD}@db.example/app"
    for cmd, extra in (("digest", ["--thread", "t"]),
                       ("erase", ["--thread", "t", "--key", key]),
                       ("recover", ["--key", key, "--archive", tmp_path / "a"])):  # fmt: skip
        for target in (dsn, "host=db.example dbname=app"):
            res = cli(cmd, target, *extra)
            one_error(res, 2, "postgres extra", EXTRA)
            assert PASSWORD not in res.stderr
    assert not (tmp_path / "a").exists()


def test_sqlite_commands_never_import_psycopg(tmp_path: Path) -> None:
    """A SQLite-only install: psycopg blocked in a fresh interpreter, SQLite works and a
    DSN is refused with the install hint."""
    db = tmp_path / "app.db"
    from langgraph.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(str(db)) as saver:
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
                  empty_checkpoint(), {}, {})  # fmt: skip
    code = ("import sys; sys.modules['psycopg'] = None; "
            "from erasure_receipts.cli import main; main()")  # fmt: skip
    ok = subprocess.run([sys.executable, "-c", code, "digest", str(db), "--thread", "t"],
                        capture_output=True, text=True)  # fmt: skip
    assert ok.returncode == 0 and "1 rows" in ok.stdout, ok.stderr
    bad = subprocess.run([sys.executable, "-c", code, "digest", "dbname=app", "--thread", "t"],
                         capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().count("\n") == 0 and EXTRA in bad.stderr, bad.stderr
