"""Privacy mode keeps raw ids out of the erasure journal's bytes, errors and logs.

The journal row of a privacy-mode erasure is written with commitments from its first
version (the raw request recovery needs is sealed with the commitment key), so no old
row version - a PostgreSQL dead tuple, a SQLite page or WAL frame - holds a raw subject
id, thread id, store namespace or needle. Checked on the raw files: the SQLite main
file and ``-wal`` (the journal's pages, found with ``dbstat``), and on PostgreSQL the
journal's relation files (heap, TOAST, indexes) in the data directory after
``vacuum="full"`` and a ``CHECKPOINT``. A crash-injected privacy erasure is recovered
with the key the saver holds, or with ``commitment_key=`` in a new process; errors and
log records name commitments only; ``--needles-file`` keeps needles off the command
line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from erasure_receipts import (
    AttestingSqliteSaver,
    ErasureIncompleteError,
    NeedlesFoundError,
    NothingToEraseError,
    Signer,
    verify_receipt,
)
from erasure_receipts.privacy import CommitmentKey

SUBJECT = "u-7f3a91c2"  # no thread id contains it: those stay raw in the tombstones
THREADS = ["conv-q81-first", "conv-q81-second"]
OTHER = "conv-bystander-9"
NAMESPACES = [("profiles", SUBJECT), ("crm", "contacts", SUBJECT)]
NEEDLE = "zoe.q81@example.com"
STORE_KEY = "card-of-u-7f3a91c2"
CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]


def raw_values() -> list[str]:
    """What a privacy-mode journal must never hold in clear."""
    namespaces = [".".join(ns) for ns in NAMESPACES]
    return [SUBJECT, *THREADS, *namespaces, NEEDLE]


def assert_clean(data: bytes, values: list[str], where: str) -> None:
    for value in values:
        for form in {value.encode(), json.dumps(value)[1:-1].encode()}:
            assert form not in data, f"{value!r} in {where}"


def put(saver: Any, thread: str, content: str, user: str | None = SUBJECT) -> None:
    cp = empty_checkpoint()
    cp["channel_values"] = {"msg": content}
    meta = {"user_id": user} if user is not None else {}
    saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, cp, meta, {})


def populate(saver: Any, store: Any) -> None:
    for t in THREADS:
        put(saver, t, f"hello, mail me at {NEEDLE}")
    put(saver, OTHER, "nothing personal", user="someone-else")
    for ns in NAMESPACES:
        store.put(ns, "profile", {"email": NEEDLE})


@pytest.fixture
def key() -> CommitmentKey:
    return CommitmentKey.generate()


@pytest.fixture
def app(tmp_path: Path, signer: Signer) -> Path:
    db = tmp_path / "app.db"
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        saver.setup()
        populate(saver, store)
    return db


@pytest.fixture
def saver(app: Path, signer: Signer) -> Iterator[AttestingSqliteSaver]:
    with (
        SqliteStore.from_conn_string(str(app)) as store,
        AttestingSqliteSaver.from_conn_string(str(app), signer=signer, store=store) as s,
    ):
        yield s


def erase(saver: Any, key: CommitmentKey, **kwargs: Any) -> Any:
    return saver.erase_subject(
        SUBJECT, metadata_key="user_id", store_namespaces=NAMESPACES, needles=[NEEDLE],
        privacy="commitments", commitment_key=key, **kwargs,
    )  # fmt: skip


def crash_after_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    from erasure_receipts._engine import eraser

    def crash(*a: Any, **k: Any) -> Any:
        raise RuntimeError("crash after commit")

    monkeypatch.setattr(eraser, "api_checks", crash)  # the read-back after the commit


# -- SQLite: the journal's pages in the main file and the WAL -----------------------------


def sqlite_journal_bytes(db: Path) -> tuple[bytes, bytes]:
    """The journal's pages (table, indexes, overflow) as stored in the main file, and
    every WAL frame of those pages. Files are read before any connection is opened."""
    main = db.read_bytes()
    wal_path = Path(f"{db}-wal")
    wal = wal_path.read_bytes() if wal_path.exists() else b""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = {
            n
            for (n,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name IN "
                "(SELECT name FROM sqlite_master WHERE tbl_name = 'erasure_journal')"
            )
        }
    assert pages
    in_main = b"".join(main[(n - 1) * size : n * size] for n in sorted(pages))
    frames, offset = [], 32  # WAL header, then (24-byte frame header + page) frames
    while offset + 24 + size <= len(wal):
        (page,) = struct.unpack(">I", wal[offset : offset + 4])
        if page in pages:
            frames.append(wal[offset + 24 : offset + 24 + size])
        offset += 24 + size
    return in_main, b"".join(frames)


@pytest.mark.parametrize("residue_scan", [False, "vacuum"])
def test_sqlite_journal_bytes_hold_no_raw_id(
    saver: AttestingSqliteSaver, app: Path, key: CommitmentKey, residue_scan: Any, signer: Signer
) -> None:
    r = erase(saver, key, residue_scan=residue_scan)
    verify_receipt(r.to_json(), [signer.public_key])
    in_main, in_wal = sqlite_journal_bytes(app)
    assert b"erasure_journal" not in in_main  # (table pages, not the schema page)
    assert key.commit("subject", SUBJECT).encode() in in_main + in_wal  # found its rows
    assert_clean(in_main, raw_values(), "the journal's pages in the main file")
    assert_clean(in_wal, raw_values(), "the journal's WAL frames")
    # The journal row as SQL sees it: commitments only; the sealed request recovery
    # would have needed is gone once the statement is journaled.
    [(tid, entry)] = sqlite3.connect(app).execute("SELECT thread_id, entry FROM erasure_journal")
    assert tid == key.commit("subject", SUBJECT)
    assert "sealed" not in json.loads(entry)
    assert json.loads(entry)["thread_id"] == tid


def test_sqlite_crashed_privacy_erasure_is_recovered_with_its_key(
    app: Path, key: CommitmentKey, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        SqliteStore.from_conn_string(str(app)) as store,
        AttestingSqliteSaver.from_conn_string(str(app), signer=signer, store=store) as saver,
    ):
        with monkeypatch.context() as m:
            crash_after_commit(m)
            with pytest.raises(ErasureIncompleteError) as crashed:
                erase(saver, key)
        assert_clean(str(crashed.value).encode(), raw_values(), "the error")
        in_main, in_wal = sqlite_journal_bytes(app)
        assert_clean(in_main + in_wal, raw_values(), "the journal after the crash")
        [(entry,)] = sqlite3.connect(app).execute("SELECT entry FROM erasure_journal")
        assert json.loads(entry)["sealed"]["key_id"] == key.key_id
    # A new process: the saver does not hold the key; the entry stays open, named by its
    # commitment only, until recovery gets the key.
    key_file = tmp_path / "commitment.key"
    key.to_file(key_file)
    with (
        SqliteStore.from_conn_string(str(app)) as store,
        AttestingSqliteSaver.from_conn_string(str(app), signer=signer, store=store) as saver,
    ):
        with pytest.raises(ErasureIncompleteError, match="sealed with commitment key") as ei:
            saver.recover_receipts(min_age_seconds=0)
        assert key.commit("subject", SUBJECT) in ei.value.message
        assert_clean(ei.value.message.encode(), raw_values(), "the recovery error")
        other = CommitmentKey.generate()
        with pytest.raises(ErasureIncompleteError, match="sealed with commitment key"):
            saver.recover_receipts(min_age_seconds=0, commitment_key=other)
        assert len(saver.pending_erasures()) == 1
        [r] = saver.recover_receipts(min_age_seconds=0, commitment_key=key_file)
    verify_receipt(r.to_json(), [signer.public_key])
    checks = {c["name"] for c in r.predicate["checks"]}
    assert {"issued_from_journal", "raw_rows_zero_at_recovery"} <= checks
    assert r.predicate["scope"]["subject"] == key.commit("subject", SUBJECT)
    assert_clean(r.to_json(), raw_values(), "the recovered receipt")
    with sqlite3.connect(app) as conn:
        assert conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id != ?",
                            (OTHER,)).fetchone() == (0,)  # fmt: skip
        [(entry, statement, kept)] = conn.execute(
            "SELECT entry, statement, receipt FROM erasure_journal"
        )
    assert_clean((statement + kept).encode(), raw_values(), "the journaled statement")
    assert "sealed" not in json.loads(entry)
    in_main, in_wal = sqlite_journal_bytes(app)
    assert_clean(in_main + in_wal, raw_values(), "the journal after recovery")


def test_async_crashed_privacy_erasure_is_recovered_with_its_key(
    app: Path, key: CommitmentKey, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    from erasure_receipts import AsyncAttestingSqliteSaver

    def saver(store: Any) -> Any:
        return AsyncAttestingSqliteSaver.from_conn_string(str(app), signer=signer, store=store)

    async def main() -> Any:
        async with AsyncSqliteStore.from_conn_string(str(app)) as store, saver(store) as s:
            with monkeypatch.context() as m:
                crash_after_commit(m)
                with pytest.raises(ErasureIncompleteError) as crashed:
                    await s.aerase_subject(
                        SUBJECT, metadata_key="user_id", store_namespaces=NAMESPACES,
                        privacy="commitments", commitment_key=key,
                    )  # fmt: skip
            assert_clean(str(crashed.value).encode(), raw_values(), "the error")
        async with AsyncSqliteStore.from_conn_string(str(app)) as store, saver(store) as s:
            with pytest.raises(ErasureIncompleteError, match="sealed with commitment key"):
                await s.arecover_receipts(min_age_seconds=0)
            return await s.arecover_receipts(min_age_seconds=0, commitment_key=key)

    [r] = asyncio.run(main())
    verify_receipt(r.to_json(), [signer.public_key])
    assert r.predicate["scope"]["subject"] == key.commit("subject", SUBJECT)
    in_main, in_wal = sqlite_journal_bytes(app)
    assert_clean(in_main + in_wal, raw_values(), "the journal after recovery")


def test_privacy_recovery_errors_name_commitments(
    saver: AttestingSqliteSaver, key: CommitmentKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recovery re-verifies the scope with the raw ids it unsealed; when that fails (an
    item written into an erased namespace meanwhile) the error names commitments."""
    with monkeypatch.context() as m:
        crash_after_commit(m)
        with pytest.raises(ErasureIncompleteError):
            erase(saver, key)
    assert saver.store is not None
    # The erasure tombstoned the namespace (RECEIPT_SPEC.md 8.1): lift it to write there.
    assert saver.reopen_namespace(NAMESPACES[0])
    saver.store.put(NAMESPACES[0], "written-later", {"v": 1})
    with pytest.raises(ErasureIncompleteError, match="present after commit") as ei:
        saver.recover_receipts(min_age_seconds=0)
    assert key.commit("subject", SUBJECT) in ei.value.message
    assert_clean(ei.value.message.encode(), raw_values(), "the recovery error")
    saver.store.delete(NAMESPACES[0], "written-later")
    [r] = saver.recover_receipts(min_age_seconds=0)
    assert r.predicate["scope"]["subject"] == key.commit("subject", SUBJECT)


def test_sqlite_tampered_sealed_entry_is_not_recovered(
    app: Path, key: CommitmentKey, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        SqliteStore.from_conn_string(str(app)) as store,
        AttestingSqliteSaver.from_conn_string(str(app), signer=signer, store=store) as saver,
    ):
        with monkeypatch.context() as m:
            crash_after_commit(m)
            with pytest.raises(ErasureIncompleteError):
                erase(saver, key)
        with sqlite3.connect(app) as conn:
            [(rid, entry)] = conn.execute("SELECT receipt_id, entry FROM erasure_journal")
            e = json.loads(entry)
            c = e["sealed"]["ciphertext"]
            e["sealed"]["ciphertext"] = ("B" if c[0] == "A" else "A") + c[1:]  # never a no-op
            conn.execute("UPDATE erasure_journal SET entry = ?", (json.dumps(e),))
        with pytest.raises(ErasureIncompleteError, match="does not open with this key"):
            saver.recover_receipts(min_age_seconds=0)
        assert [p.receipt_id for p in saver.pending_erasures()] == [rid]


# -- errors and log records --------------------------------------------------------------


def test_privacy_errors_and_logs_name_commitments_only(
    saver: AttestingSqliteSaver, key: CommitmentKey, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="erasure_receipts")
    # A needle left in another thread and in a store item outside the scope whose key
    # names the subject: refused, the locations committed and the store key withheld.
    put(saver, OTHER, f"forwarded: {NEEDLE}", user="someone-else")
    assert saver.store is not None
    saver.store.put(("billing", SUBJECT), STORE_KEY, {"email": NEEDLE})
    with pytest.raises(NeedlesFoundError) as refused:
        erase(saver, key)
    text = f"{refused.value} {refused.value.locations!r}"
    assert key.commit("thread", OTHER) in text
    assert key.commit("store_namespace", f"billing.{SUBJECT}") in text
    assert_clean(text.encode(), [*raw_values(), OTHER, STORE_KEY], "the refusal")
    saver.store.delete(("billing", SUBJECT), STORE_KEY)
    saver.delete_thread(OTHER)

    # No thread found: the subject is named by its commitment.
    with pytest.raises(NothingToEraseError) as nothing:
        saver.erase_subject("u-nobody-41", metadata_key="user_id", privacy="commitments",
                            commitment_key=key)  # fmt: skip
    assert "u-nobody-41" not in str(nothing.value) and "u-nobody-41" not in nothing.value.thread_id
    assert key.commit("subject", "u-nobody-41") in str(nothing.value)

    # A database error naming a thread id, inside the transaction: rolled back, its
    # message concealed, no chained cause carrying the raw text.
    from erasure_receipts._backends import sqlite as sqlite_backend

    def failing(self: Any, receipt_id: str, erased_at: str) -> None:
        raise sqlite3.IntegrityError(f"UNIQUE constraint failed: thread {THREADS[0]!r}")

    with pytest.MonkeyPatch.context() as m:
        m.setattr(sqlite_backend.SqliteBackend, "write_tombstone", failing)
        with pytest.raises(ErasureIncompleteError, match="rolled back") as failed:
            erase(saver, key)
    assert key.commit("thread", THREADS[0]) in str(failed.value)
    assert failed.value.__cause__ is None and failed.value.__suppress_context__
    assert_clean(str(failed.value).encode(), raw_values(), "the wrapped error")

    caplog.clear()
    r = erase(saver, key)
    assert r.predicate["status"] == "erased"
    logged = "\n".join(rec.getMessage() for rec in caplog.records)
    assert key.commit("subject", SUBJECT) in logged
    assert_clean(logged.encode(), [*raw_values(), OTHER, STORE_KEY], "the log records")


def test_needles_outside_an_external_store_are_redacted(
    tmp_path: Path, signer: Signer, key: CommitmentKey
) -> None:
    """The pre-sweep search of a store outside the database names no raw id either."""
    store = InMemoryStore()
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "a.db"), signer=signer, store=store
    ) as saver:
        populate(saver, store)
        store.put(("billing", SUBJECT), STORE_KEY, {"email": NEEDLE})
        with pytest.raises(NeedlesFoundError) as refused:
            erase(saver, key)
    text = f"{refused.value} {refused.value.locations!r}"
    assert key.commit("store_namespace", f"billing.{SUBJECT}") in text
    assert_clean(text.encode(), [*raw_values(), STORE_KEY], "the refusal")


# -- PostgreSQL: the journal's relation files after VACUUM FULL ---------------------------


def pg_journal_files(dsn: str) -> bytes:
    """Every byte of the journal's heap, TOAST and index files, after a CHECKPOINT."""
    from pg_helpers import connect

    with connect(dsn) as conn:
        conn.execute("CHECKPOINT")
        data_dir = Path(conn.execute("SHOW data_directory").fetchone()[0])
        rels = [
            r[0]
            for r in conn.execute(
                "SELECT pg_relation_filepath(c.oid) FROM pg_class c WHERE c.oid IN ("
                " SELECT 'erasure_journal'::regclass UNION"
                " SELECT indexrelid FROM pg_index WHERE indrelid = 'erasure_journal'::regclass"
                " UNION SELECT reltoastrelid FROM pg_class WHERE oid = 'erasure_journal'::regclass"
                " UNION SELECT i.indexrelid FROM pg_index i JOIN pg_class t"
                "  ON t.reltoastrelid = i.indrelid WHERE t.oid = 'erasure_journal'::regclass)"
            )
        ]
    assert len(rels) >= 4  # heap, its primary key, TOAST heap and TOAST index
    out = b""
    for rel in rels:
        base = data_dir / rel
        out += b"".join(p.read_bytes() for p in [base, *base.parent.glob(base.name + ".*")])
    return out


SECOND = [*raw_values(), "u-second-82", "conv-q82-first", "q82@example.org"]


def test_pg_journal_files_hold_no_raw_id_after_vacuum_full(
    pg_db: str, signer: Signer, key: CommitmentKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langgraph.store.postgres import PostgresStore

    from erasure_receipts import AttestingPostgresSaver
    from pg_helpers import connect

    dsn = pg_db
    with (
        PostgresStore.from_conn_string(dsn) as store,
        AttestingPostgresSaver.from_conn_string(dsn, signer=signer, store=store) as saver,
    ):
        store.setup()
        saver.setup()
        populate(saver, store)
        put(saver, "conv-q82-first", "hello, mail me at q82@example.org", user="u-second-82")
    with connect(dsn) as conn:  # uncompressed, so a byte search sees every value stored
        conn.execute(
            "ALTER TABLE erasure_journal ALTER COLUMN entry SET STORAGE EXTERNAL, "
            "ALTER COLUMN statement SET STORAGE EXTERNAL, "
            "ALTER COLUMN receipt SET STORAGE EXTERNAL"
        )
    with (
        PostgresStore.from_conn_string(dsn) as store,
        AttestingPostgresSaver.from_conn_string(
            dsn, signer=signer, store=store, vacuum="full"
        ) as saver,
    ):
        r = erase(saver, key)
        verify_receipt(r.to_json(), [signer.public_key])
        with monkeypatch.context() as m:  # a second subject's erasure crashes after commit
            crash_after_commit(m)
            with pytest.raises(ErasureIncompleteError) as crashed:
                saver.erase_subject("u-second-82", metadata_key="user_id",
                                    needles=["q82@example.org"],
                                    privacy="commitments", commitment_key=key)  # fmt: skip
        assert "u-second-82" not in str(crashed.value)
        data = pg_journal_files(dsn)
        assert key.commit("subject", SUBJECT).encode() in data  # the files hold the rows
        assert_clean(data, SECOND, "journal files")
        [recovered] = saver.recover_receipts(min_age_seconds=0)  # the saver holds the key
    verify_receipt(recovered.to_json(), [signer.public_key])
    assert recovered.predicate["scope"]["subject"] == key.commit("subject", "u-second-82")
    data = pg_journal_files(dsn)
    assert_clean(data, SECOND, "journal files")
    with connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id <> %s",
                            (OTHER,)).fetchone() == (0,)  # fmt: skip


# -- the CLI: --needles-file F | - ------------------------------------------------------


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, timeout=120)


def test_cli_needles_file_and_stdin(app: Path, signer: Signer, tmp_path: Path) -> None:
    # locate, from stdin (CRLF, a BOM and an empty line are fine)
    given = b"\xef\xbb\xbf" + NEEDLE.encode() + b"\r\n\nnot-stored-anywhere\n"
    found = cli("locate", str(app), "--needles-file", "-", "--json", stdin=given)
    assert found.returncode == 0, found.stderr
    doc = json.loads(found.stdout)
    assert doc["found"] > 0 and {loc["needle"] for loc in doc["locations"]} == {0}
    # erase, from a file: the needle is searched (refused while a copy is left outside)
    key_file = tmp_path / "signing.key"
    key_file.write_bytes(signer.private_pem())
    key_file.chmod(0o600)
    needles = tmp_path / "needles.txt"
    needles.write_text(f"{NEEDLE}\n", encoding="utf-8")
    ck = tmp_path / "commitment.key"
    CommitmentKey.generate().to_file(ck)
    base = ["erase", str(app), "--subject", SUBJECT, "--metadata-key", "user_id", "--key",
            str(key_file), "--privacy", "commitments", "--commitment-key", str(ck)]  # fmt: skip
    refused = cli(*base, "--needles-file", str(needles), "--json")
    assert refused.returncode == 1, refused.stderr
    assert json.loads(refused.stdout)["reason"] == "needles_found"  # the store still has it
    done = cli(*base, *[a for ns in NAMESPACES for a in ("--store-ns", "/".join(ns))],
               "--needles-file", "-", "--json", stdin=NEEDLE.encode() + b"\n")  # fmt: skip
    assert done.returncode == 0, done.stderr
    receipt = json.loads(done.stdout)["receipt"]
    assert len(receipt["statement"]["predicate"]["needles"]["values"]) == 1
    assert_clean(done.stdout, raw_values(), "the receipt")


@pytest.mark.parametrize(
    ("content", "code", "says"),
    [
        (None, 3, "cannot"),  # no such file
        (b"ok\n\xff\xfe\n", 2, "line 2 is not valid UTF-8"),
        (b"\n\r\n", 2, "no values"),
    ],
)
def test_cli_bad_needles_file(
    app: Path, tmp_path: Path, signer: Signer, content: bytes | None, code: int, says: str
) -> None:
    path, key_file = tmp_path / "needles.txt", tmp_path / "signing.key"
    if content is not None:
        path.write_bytes(content)
    key_file.write_bytes(signer.private_pem())
    key_file.chmod(0o600)
    erase_args = ["erase", str(app), "--subject", SUBJECT, "--metadata-key", "user_id"]
    for args in (["locate", str(app)], [*erase_args, "--key", str(key_file)]):
        done = cli(*args, "--needles-file", str(path))
        err = done.stderr.decode()
        assert done.returncode == code, err
        assert says in err and len(err.strip().splitlines()) == 1, err
    assert cli("locate", str(app)).returncode == 2  # nothing to find: usage
    thread = cli("erase", str(app), "--thread", THREADS[0], "--key", str(key_file),
                 "--needles-file", str(path))  # fmt: skip
    assert thread.returncode == 2 and b"--needles-file needs --subject" in thread.stderr
    assert sqlite3.connect(app).execute("SELECT count(*) FROM erasure_journal").fetchone() == (0,)


def test_cli_recover_with_commitment_key(
    app: Path, key: CommitmentKey, signer: Signer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        SqliteStore.from_conn_string(str(app)) as store,
        AttestingSqliteSaver.from_conn_string(str(app), signer=signer, store=store) as saver,
    ):
        crash_after_commit(monkeypatch)
        with pytest.raises(ErasureIncompleteError):
            erase(saver, key)
    key_file, ck = tmp_path / "signing.key", tmp_path / "commitment.key"
    key_file.write_bytes(signer.private_pem())
    key_file.chmod(0o600)
    key.to_file(ck)
    args = ["recover", str(app), "--key", str(key_file), "--archive", str(tmp_path / "r"),
            "--min-age", "0"]  # fmt: skip
    without = cli(*args)
    assert without.returncode == 1 and b"--commitment-key" in without.stderr
    assert_clean(without.stderr + without.stdout, raw_values(), "recover's output")
    done = cli(*args, "--commitment-key", str(ck), "--json")
    assert done.returncode == 0, done.stderr
    [rec] = json.loads(done.stdout)["recovered"]
    assert rec["thread_id"] == key.commit("subject", SUBJECT)
    verify_receipt(Path(rec["path"]).read_bytes(), [signer.public_key])
