"""Crypto-shredding on SQLite (sync and async), through real LangGraph graphs.

A subject's two threads (and other subjects' threads) are written through the encrypting
saver; a backup of the data database is taken; ``shred_subject`` destroys the key. In the
backup the ciphertext is intact but no row of the subject decrypts with everything the
application still has (key store, key-encryption key), the other subjects' rows decrypt,
the subject's marker never occurs in a byte of the data database's files, the key is in
no byte of the key store's files, and the receipt verifies.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from erasure_receipts import (
    AsyncAttestingSqliteSaver,
    AttestingSqliteSaver,
    ConfigurationError,
    Encryption,
    KeyShreddedError,
    KeyStore,
    LocalKeyWrapper,
    NoDataKeyError,
    Receipt,
    Signer,
    ThreadErasedError,
    VerificationError,
    verify_receipt,
)
from test_encryption_sqlite import MARKER, build, cfg, raw_bytes

THREADS = (("alice-1", "alice"), ("alice-2", "alice"), ("bob-1", "bob"), ("anon-1", None))


def backup(src: Path, dst: Path) -> None:
    """A consistent copy through SQLite's backup API (the WAL included)."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()


def sealed_key_ids(db: Path, thread: str) -> set[bytes]:
    """The key id in the header of every sealed row of ``thread`` (bytes 4-20)."""
    with sqlite3.connect(db) as c:
        blobs = [
            r[0]
            for r in c.execute("SELECT checkpoint FROM checkpoints WHERE thread_id=?", (thread,))
        ]
        blobs += [r[0] for r in c.execute("SELECT value FROM writes WHERE thread_id=?", (thread,))]
    c.close()
    assert blobs
    return {bytes(b[4:20]) for b in blobs}


def commitment(key_id: bytes) -> str:
    return hashlib.sha256(b"erasure-receipts-data-key-id-v1\x00" + key_id).hexdigest()


def setup_app(
    tmp_path: Path, signer: Signer
) -> tuple[Path, KeyStore, AttestingSqliteSaver, sqlite3.Connection]:
    keys = KeyStore(
        tmp_path / "keys.sqlite",
        LocalKeyWrapper.generate(tmp_path / "master.key"),
        backup_retention="P30D",
    )
    db = tmp_path / "data.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = AttestingSqliteSaver(
        conn, signer=signer, encryption=Encryption(keys), archive=tmp_path / "receipts"
    )
    graph = build(saver)
    for thread, user in THREADS:
        for turn in ("hello", f"my secret is {MARKER} ({thread})"):
            graph.invoke({"messages": [HumanMessage(content=turn)]}, cfg(thread, user))
    return db, keys, saver, conn


def test_shred_subject_reaches_a_backup(tmp_path: Path, signer: Signer) -> None:
    db, keys, saver, conn = setup_app(tmp_path, signer)
    with sqlite3.connect(tmp_path / "keys.sqlite") as k:
        (wrapped,) = k.execute(
            "SELECT wrapped FROM erasure_data_keys WHERE name='subject:alice'"
        ).fetchone()
    k.close()
    alice_ids = sealed_key_ids(db, "alice-1") | sealed_key_ids(db, "alice-2")
    assert len(alice_ids) == 1
    backup(db, tmp_path / "backup.sqlite")
    before = (tmp_path / "backup.sqlite").read_bytes()

    receipt = saver.shred_subject("alice")

    # The receipt verifies and says what it covered.
    v = verify_receipt(receipt, [signer.public_key])
    p = receipt.predicate
    assert p["kind"] == "shred" and v.receipt_id == p["receipt_id"]
    sc = p["scope"]
    assert sc["subject"] == "alice" and sc["key_scope"] == "subject"
    assert sc["threads"] == ["alice-1", "alice-2"]
    assert sc["key_commitment"] == commitment(next(iter(alice_ids)))
    assert sc["key_store"] == {"kind": "sqlite", "scrub": "applied", "backup_retention": "P30D"}
    assert p["pre_state"]["tables"]["erasure_data_keys"]["rows"] == 1
    assert p["pre_state"]["tables"]["erasure_thread_keys"]["rows"] == 2
    assert {c["name"]: c["result"] for c in p["checks"]} == {
        "key_store_rows_zero_after_commit": "pass",
        "api_reads_refused": "pass",
    }
    backups_note = next(o["note"] for o in p["out_of_scope"] if o["id"] == "backups")
    assert "provided no copy of the data key survives" in backups_note and "P30D" in backups_note
    assert (tmp_path / "receipts" / f"{p['receipt_id']}.json").exists()

    # The key is gone from the key store, in no byte of its files.
    assert not keys.has_key("subject:alice") and keys.threads_of("subject:alice") == []
    files = b"".join(
        Path(str(tmp_path / "keys.sqlite") + s).read_bytes()
        for s in ("", "-wal", "-journal")
        if Path(str(tmp_path / "keys.sqlite") + s).exists()
    )
    assert wrapped not in files and wrapped[12:44] not in files
    assert next(iter(alice_ids)) not in files

    # The live database: alice's threads read as shredded (a ThreadErasedError), bob's read.
    graph = build(saver)
    with pytest.raises(KeyShreddedError, match="alice-1"):
        graph.get_state(cfg("alice-1", "alice"))
    with pytest.raises(ThreadErasedError):
        saver.get_tuple(cfg("alice-2", None))
    assert MARKER in graph.get_state(cfg("bob-1", "bob")).values["messages"][-2].content

    # The backup: ciphertext intact, byte for byte; no row of alice decrypts with what the
    # application still has (key store + key-encryption key); bob's and anon's do.
    assert (tmp_path / "backup.sqlite").read_bytes() == before
    assert sealed_key_ids(tmp_path / "backup.sqlite", "alice-1") == alice_ids
    kek = LocalKeyWrapper.from_file(tmp_path / "master.key")
    still = KeyStore(tmp_path / "keys.sqlite", kek)
    bconn = sqlite3.connect(tmp_path / "backup.sqlite", check_same_thread=False)
    restored = AttestingSqliteSaver(bconn, signer=signer, encryption=Encryption(still))
    for t in ("alice-1", "alice-2"):
        with pytest.raises(KeyShreddedError):
            restored.get_tuple(cfg(t, None))
        with pytest.raises(KeyShreddedError):
            list(restored.list(cfg(t, None)))
    for t in ("bob-1", "anon-1"):
        tup = restored.get_tuple(cfg(t, None))
        assert tup is not None and MARKER in str(tup.checkpoint["channel_values"]["messages"])
    bconn.close()

    # The subject's marker never occurs in any byte of the data database's files.
    conn.commit()
    for f in (db, tmp_path / "backup.sqlite"):
        assert MARKER.encode() not in raw_bytes(f)

    # A second shred of the same subject: nothing to destroy.
    with pytest.raises(NoDataKeyError, match="already shredded"):
        saver.shred_subject("alice")
    conn.close()
    still.close()


def test_shred_thread_and_refusals(tmp_path: Path, signer: Signer) -> None:
    _, _, saver, conn = setup_app(tmp_path, signer)
    with pytest.raises(ConfigurationError, match="shred_subject shreds it"):
        saver.shred_thread("alice-1")
    with pytest.raises(NoDataKeyError, match="no data key for subject 'carol'"):
        saver.shred_subject("carol")
    with pytest.raises(ConfigurationError, match="non-empty"):
        saver.shred_subject("")
    plain = AttestingSqliteSaver(sqlite3.connect(tmp_path / "other.sqlite"), signer=signer)
    with pytest.raises(ConfigurationError, match="no encryption"):
        plain.shred_subject("alice")

    receipt = saver.shred_thread("anon-1")
    verify_receipt(receipt, [signer.public_key])
    sc = receipt.predicate["scope"]
    assert sc["key_scope"] == "thread" and sc["threads"] == ["anon-1"]
    assert receipt.statement["subject"][0]["name"] == "langgraph-shred-thread:anon-1"
    with pytest.raises(KeyShreddedError):
        saver.get_tuple(cfg("anon-1", None))
    # A new conversation under a shredded thread id is refused too (its binding is gone,
    # but its old rows are there): writing creates a new key, reading the old rows fails.
    assert saver.get_tuple(cfg("bob-1", "bob")) is not None
    conn.close()


def test_a_tampered_shred_receipt_fails(tmp_path: Path, signer: Signer) -> None:
    _, _, saver, conn = setup_app(tmp_path, signer)
    receipt = saver.shred_subject("bob")
    env = json.loads(receipt.to_json())
    env["statement"]["predicate"]["scope"]["threads"] = []
    with pytest.raises(VerificationError):
        verify_receipt(json.dumps(env).encode(), [signer.public_key])
    env = json.loads(receipt.to_json())
    env["statement"]["predicate"]["scope"]["key_store"]["backup_retention"] = "P1D"
    with pytest.raises(VerificationError, match="signature"):
        verify_receipt(json.dumps(env).encode(), [signer.public_key])
    with pytest.raises(VerificationError):
        verify_receipt(receipt, [Signer.generate().public_key])
    assert isinstance(Receipt.from_json(receipt.to_json()), Receipt)
    conn.close()


def test_async_shred_subject(tmp_path: Path, signer: Signer) -> None:
    keys = KeyStore(tmp_path / "keys.sqlite", LocalKeyWrapper.generate(tmp_path / "master.key"))
    db = tmp_path / "data.sqlite"

    async def main() -> Any:
        async with AsyncAttestingSqliteSaver.from_conn_string(
            str(db), signer=signer, encryption=Encryption(keys)
        ) as saver:
            graph = build(saver)
            for thread, user in THREADS[:3]:
                for turn in ("hello", f"my secret is {MARKER}"):
                    await graph.ainvoke(
                        {"messages": [HumanMessage(content=turn)]}, cfg(thread, user)
                    )
            await asyncio.to_thread(backup, db, tmp_path / "backup.sqlite")
            receipt = await saver.ashred_subject("alice")
            with pytest.raises(KeyShreddedError):
                await graph.aget_state(cfg("alice-2", "alice"))
            assert (await graph.aget_state(cfg("bob-1", "bob"))).values["messages"]
            return receipt

    receipt = asyncio.run(main())
    verify_receipt(receipt, [signer.public_key])
    assert receipt.predicate["scope"]["threads"] == ["alice-1", "alice-2"]
    bconn = sqlite3.connect(tmp_path / "backup.sqlite", check_same_thread=False)
    restored = AttestingSqliteSaver(bconn, signer=signer, encryption=Encryption(keys))
    with pytest.raises(KeyShreddedError):
        restored.get_tuple(cfg("alice-1", None))
    assert restored.get_tuple(cfg("bob-1", None)) is not None
    bconn.close()


def _writer(args: tuple[str, str, int]) -> int:
    """One application process: its own data file, the shared key store, subject alice."""
    tmp, kek_path, i = args
    keys = KeyStore(Path(tmp) / "keys.sqlite", LocalKeyWrapper.from_file(kek_path))
    conn = sqlite3.connect(Path(tmp) / f"data-{i}.sqlite", check_same_thread=False)
    saver = AttestingSqliteSaver(conn, signer=Signer.generate(), encryption=Encryption(keys))
    graph = build(saver)
    for j in range(3):
        for thread in (f"alice-p{i}-{j}", "alice-shared"):
            graph.invoke(
                {"messages": [HumanMessage(content=f"{MARKER} {j}")]}, cfg(thread, "alice")
            )
    conn.close()
    keys.close()
    return i


def test_concurrent_processes_share_one_subject_key(tmp_path: Path, signer: Signer) -> None:
    """Four processes write the same subject's threads at once: one key is created (the
    first insert wins, the others read it), every process's rows decrypt, and one shred
    covers all of them."""
    import multiprocessing

    kek = tmp_path / "master.key"
    LocalKeyWrapper.generate(kek)
    KeyStore(tmp_path / "keys.sqlite", LocalKeyWrapper.from_file(kek)).close()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        done = pool.map_async(_writer, [(str(tmp_path), str(kek), i) for i in range(4)])
        assert sorted(done.get(timeout=240)) == [0, 1, 2, 3]
    keys = KeyStore(tmp_path / "keys.sqlite", LocalKeyWrapper.from_file(kek))
    with sqlite3.connect(tmp_path / "keys.sqlite") as k:
        assert k.execute("SELECT count(*) FROM erasure_data_keys").fetchone() == (1,)
    k.close()
    assert len(keys.threads_of("subject:alice")) == 13  # 4 x 3 + the shared one
    savers = []
    for i in range(4):  # the other "processes" look the key up on every read
        conn = sqlite3.connect(tmp_path / f"data-{i}.sqlite", check_same_thread=False)
        enc = Encryption(keys, key_cache_seconds=30 if i == 0 else 0)
        saver = AttestingSqliteSaver(conn, signer=signer, encryption=enc)
        assert saver.get_tuple(cfg("alice-shared", None)) is not None
        savers.append((saver, conn))
    receipt = savers[0][0].shred_subject("alice")
    assert len(receipt.predicate["scope"]["threads"]) == 13
    for saver, conn in savers:
        with pytest.raises(KeyShreddedError):
            saver.get_tuple(cfg("alice-shared", None))
        conn.close()
    keys.close()


def test_a_failure_after_the_key_is_destroyed_says_so(
    tmp_path: Path, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Signing or archiving fails after the key is gone: the error says the key is
    destroyed (its rows no longer decrypt) and that no receipt was issued."""
    from erasure_receipts import ErasureIncompleteError
    from erasure_receipts._ops import shred as shred_op

    _, keys, saver, conn = setup_app(tmp_path, signer)

    def broken(*a: Any, **k: Any) -> Any:
        raise OSError("disk full")

    monkeypatch.setattr(shred_op, "sign_and_archive", broken)
    with pytest.raises(ErasureIncompleteError, match=r"is destroyed.*disk full"):
        saver.shred_subject("alice")
    assert not keys.has_key("subject:alice")
    with pytest.raises(KeyShreddedError):
        saver.get_tuple(cfg("alice-1", None))
    conn.close()


def test_erasing_an_encrypted_thread_works_as_without(tmp_path: Path, signer: Signer) -> None:
    """The row erasures (erase_thread, erase_subject) measure the ciphertext rows and
    delete them as they delete any row; their receipts verify."""
    _, _, saver, conn = setup_app(tmp_path, signer)
    r = saver.erase_thread("bob-1")
    verify_receipt(r, [signer.public_key])
    assert r.predicate["pre_state"]["leaves"] > 0
    assert saver.get_tuple(cfg("bob-1", None)) is None
    r2 = saver.erase_subject("alice", threads=["alice-1", "alice-2"])
    verify_receipt(r2, [signer.public_key])
    assert saver.get_tuple(cfg("alice-1", None)) is None
    conn.close()


def test_another_encryption_sees_the_shred_after_its_key_cache_time(
    tmp_path: Path, signer: Signer
) -> None:
    import time

    _, keys, saver, conn = setup_app(tmp_path, signer)
    other_conn = sqlite3.connect(tmp_path / "data.sqlite", check_same_thread=False)
    other = AttestingSqliteSaver(
        other_conn, signer=signer, encryption=Encryption(keys, key_cache_seconds=0.3)
    )
    assert other.get_tuple(cfg("alice-1", None)) is not None  # its key cached now
    receipt = saver.shred_subject("alice")
    note = next(o["note"] for o in receipt.predicate["out_of_scope"] if o["id"] == "other_copies")
    assert "this saver's: 30 s" in note
    time.sleep(0.4)
    with pytest.raises(KeyShreddedError):
        other.get_tuple(cfg("alice-1", None))
    with pytest.raises(ConfigurationError, match="key_cache_seconds"):
        Encryption(keys, key_cache_seconds=-1)
    other_conn.close()
    conn.close()


def test_store_items_are_encrypted_and_shredded(tmp_path: Path, signer: Signer) -> None:
    """Encryption.wrap_store: a real graph writes memories through the encrypting store;
    the raw store rows hold no marker, a value moved to another item fails, a plaintext
    item is refused; shred_subject covers the subject's namespaces, in the live file and
    in a backup."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.config import get_store
    from langgraph.graph import END, START, StateGraph
    from langgraph.store.sqlite import SqliteStore

    from erasure_receipts import CiphertextRejectedError, PlaintextRowError
    from test_encryption_sqlite import State

    keys = KeyStore(tmp_path / "keys.sqlite", LocalKeyWrapper.generate(tmp_path / "kek"))
    enc = Encryption(keys)
    db = tmp_path / "data.sqlite"
    sconn = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
    raw_store = SqliteStore(sconn)
    raw_store.setup()
    store = enc.wrap_store(
        raw_store, lambda ns: ns[1] if len(ns) > 1 and ns[0] == "users" else None
    )
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = AttestingSqliteSaver(conn, signer=signer, encryption=enc, store=raw_store)

    def remember(state: State, config: RunnableConfig) -> dict[str, Any]:
        uid = config["configurable"]["user_id"]
        get_store().put(("users", uid), "profile", {"email": f"{uid}@{MARKER}.example"})
        return {"note": "ok"}

    g = StateGraph(State)
    g.add_node("remember", remember)
    g.add_edge(START, "remember")
    g.add_edge("remember", END)
    graph = g.compile(checkpointer=saver, store=store)
    for thread, user in (("alice-1", "alice"), ("bob-1", "bob")):
        graph.invoke({"messages": [HumanMessage(content="hi")]}, cfg(thread, user))

    assert store.get(("users", "alice"), "profile").value["email"].startswith("alice@")
    rows = sconn.execute("SELECT prefix, key, value FROM store").fetchall()
    assert rows and all(MARKER not in str(v) for _, _, v in rows)
    assert MARKER.encode() not in raw_bytes(db)
    assert keys.namespaces_of("subject:alice") == ["users.alice"]
    with pytest.raises(ConfigurationError, match="no data subject"):
        store.put(("global",), "k", {"v": 1})
    with pytest.raises(ConfigurationError, match="searched by content"):
        store.search(("users",), filter={"email": "x"})

    # bob's sealed value copied onto another item fails; a plaintext item is refused.
    (bob,) = sconn.execute("SELECT value FROM store WHERE prefix='users.bob'").fetchone()
    sconn.execute("UPDATE store SET value=? WHERE prefix='users.bob' AND key='profile'", (bob,))
    raw_store.put(("users", "bob"), "copy", {"x": 1})
    sconn.execute("UPDATE store SET value=? WHERE prefix='users.bob' AND key='copy'", (bob,))
    with pytest.raises(CiphertextRejectedError, match="copy"):
        store.get(("users", "bob"), "copy")
    raw_store.put(("users", "bob"), "plain", {"x": 1})
    with pytest.raises(PlaintextRowError, match="plain"):
        store.get(("users", "bob"), "plain")
    raw_store.delete(("users", "bob"), "copy")
    raw_store.delete(("users", "bob"), "plain")

    backup(db, tmp_path / "backup.sqlite")
    receipt = saver.shred_subject("alice")
    verify_receipt(receipt, [signer.public_key])
    p = receipt.predicate
    assert p["scope"]["store_namespaces"] == [["users", "alice"]]
    assert p["pre_state"]["tables"]["erasure_namespace_keys"]["rows"] == 1
    assert p["backend"]["store"] == "EncryptedStore"
    with pytest.raises(KeyShreddedError, match=r"^store namespace 'users.alice' was crypto"):
        store.get(("users", "alice"), "profile")
    assert store.get(("users", "bob"), "profile").value["email"].startswith("bob@")
    bstore = enc.wrap_store(
        SqliteStore(sqlite3.connect(tmp_path / "backup.sqlite", check_same_thread=False,
                                    isolation_level=None)),
        lambda ns: ns[1],
    )  # fmt: skip
    with pytest.raises(KeyShreddedError):
        bstore.get(("users", "alice"), "profile")
    assert bstore.get(("users", "bob"), "profile") is not None
    conn.close()
    sconn.close()


def test_a_plaintext_row_in_the_subjects_threads_refuses_the_shred(
    tmp_path: Path, signer: Signer
) -> None:
    """A row of the subject's threads stored in plaintext (behind the saver's back) would
    stay readable after the key is gone: the shred refuses, naming it, destroys nothing."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from erasure_receipts import PlaintextRowError

    db, keys, saver, conn = setup_app(tmp_path, signer)
    type_, blob = JsonPlusSerializer().dumps_typed({"v": f"plain {MARKER}"})
    conn.execute(
        "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, "
        "type, value) SELECT thread_id, checkpoint_ns, checkpoint_id, 'plain-task', 0, 'x', ?, ? "
        "FROM checkpoints WHERE thread_id = 'alice-2' LIMIT 1",
        (type_, blob),
    )
    conn.commit()
    with sqlite3.connect(db) as c:
        before = c.execute("SELECT * FROM writes ORDER BY 1, 2, 3, 4, 5").fetchall()
    c.close()
    with pytest.raises(PlaintextRowError, match=r"nothing was destroyed.*writes thread 'alice-2'"):
        saver.shred_subject("alice")
    assert keys.has_key("subject:alice")
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT * FROM writes ORDER BY 1, 2, 3, 4, 5").fetchall() == before
    c.close()
    conn.execute("DELETE FROM writes WHERE task_id = 'plain-task'")
    conn.commit()
    verify_receipt(saver.shred_subject("alice"), [signer.public_key])


# -- key sources: an environment variable, a wrapper of the application's own --------------


def test_local_key_wrapper_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import base64

    from erasure_receipts.errors import KeyFormatError

    from_file = LocalKeyWrapper.generate(tmp_path / "master.key")
    monkeypatch.setenv("ERS_TEST_KEK", (tmp_path / "master.key").read_text())
    from_env = LocalKeyWrapper.from_env("ERS_TEST_KEK")
    assert from_env.key_id == from_file.key_id
    wrapped = from_file.wrap(b"k" * 32, b"ctx")
    assert from_env.unwrap(wrapped, b"ctx") == b"k" * 32
    # A key store written under the file's key reads under the variable's.
    with KeyStore(tmp_path / "keys.sqlite", from_file) as keys:
        key_id, data_key = keys.key_for_thread("t", "alice")
    with KeyStore(tmp_path / "keys.sqlite", from_env) as keys:
        assert keys.key_by_id(key_id) == ("subject:alice", data_key)

    monkeypatch.delenv("ERS_TEST_KEK")
    with pytest.raises(ConfigurationError, match="environment variable ERS_TEST_KEK is not set"):
        LocalKeyWrapper.from_env("ERS_TEST_KEK")
    prefix = "erasure-receipts-kek-v1:"
    for value, message in (
        ("not a key", r"\$ERS_TEST_KEK: not a key-encryption key"),
        (prefix + "!!not base64!!", r"\$ERS_TEST_KEK: the key-encryption key is not base64"),
        (prefix + base64.b64encode(bytes(16)).decode(), "is not 32 bytes"),
    ):
        monkeypatch.setenv("ERS_TEST_KEK", value)
        with pytest.raises(KeyFormatError, match=message):
            LocalKeyWrapper.from_env("ERS_TEST_KEK")


class KmsWrapper:
    """A key-encryption key the application keeps itself (as an external KMS would):
    AES-256-GCM under its own key, counting its calls."""

    def __init__(self, key: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = AESGCM(key)
        self._id = "kms-" + hashlib.sha256(key).hexdigest()[:12]
        self.wraps = self.unwraps = 0

    @property
    def key_id(self) -> str:
        return self._id

    def wrap(self, data_key: bytes, context: bytes) -> bytes:
        import os

        self.wraps += 1
        nonce = os.urandom(12)
        return nonce + self._aead.encrypt(nonce, data_key, b"kms\x00" + context)

    def unwrap(self, wrapped: bytes, context: bytes) -> bytes:
        from cryptography.exceptions import InvalidTag

        from erasure_receipts import CiphertextRejectedError

        self.unwraps += 1
        try:
            return self._aead.decrypt(wrapped[:12], wrapped[12:], b"kms\x00" + context)
        except InvalidTag:
            raise CiphertextRejectedError("the KMS refuses this data key") from None


def test_a_custom_key_wrapper_end_to_end(tmp_path: Path, signer: Signer) -> None:
    from erasure_receipts import CiphertextRejectedError, KeyWrapper

    kms = KmsWrapper(bytes(range(32)))
    assert isinstance(kms, KeyWrapper)
    keys = KeyStore(tmp_path / "keys.sqlite", kms)
    db = tmp_path / "data.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = AttestingSqliteSaver(conn, signer=signer, encryption=Encryption(keys))
    graph = build(saver)
    for thread, user in THREADS[:3]:
        graph.invoke({"messages": [HumanMessage(content=f"{MARKER} {thread}")]}, cfg(thread, user))
    assert kms.wraps == 2  # one data key per subject, wrapped by the KMS
    with sqlite3.connect(tmp_path / "keys.sqlite") as k:
        assert {r[0] for r in k.execute("SELECT kek_id FROM erasure_data_keys")} == {kms.key_id}
    k.close()
    assert MARKER.encode() not in raw_bytes(db)

    receipt = saver.shred_subject("alice")
    verify_receipt(receipt, [signer.public_key])
    assert receipt.predicate["scope"]["threads"] == ["alice-1", "alice-2"]
    conn.close()
    keys.close()

    # Everything the application still has (the KMS, the key store): alice's rows do not
    # decrypt, bob's do; under another KMS key no data key unwraps at all.
    for wrapper, alice_error in ((kms, KeyShreddedError), (KmsWrapper(bytes(32)), None)):
        with KeyStore(tmp_path / "keys.sqlite", wrapper) as again:
            conn = sqlite3.connect(db, check_same_thread=False)
            reader = AttestingSqliteSaver(conn, signer=signer, encryption=Encryption(again))
            if alice_error is None:
                with pytest.raises(CiphertextRejectedError, match="the KMS refuses"):
                    reader.get_tuple(cfg("bob-1", None))
            else:
                for t in ("alice-1", "alice-2"):
                    with pytest.raises(alice_error):
                        reader.get_tuple(cfg(t, None))
                tup = reader.get_tuple(cfg("bob-1", None))
                assert tup is not None and MARKER in str(tup.checkpoint["channel_values"])
            conn.close()
    assert kms.unwraps > 0


def test_a_custom_subject_of(tmp_path: Path, signer: Signer) -> None:
    keys = KeyStore(tmp_path / "keys.sqlite", LocalKeyWrapper.generate(tmp_path / "master.key"))

    def tenant_user(config: Any) -> str | None:
        return (config.get("configurable") or {}).get("tenant_user")

    db = tmp_path / "data.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    saver = AttestingSqliteSaver(
        conn, signer=signer, encryption=Encryption(keys, subject_of=tenant_user)
    )
    graph = build(saver)
    configs = {
        "t-1": {"thread_id": "t-1", "tenant_user": "alice"},
        "t-2": {"thread_id": "t-2", "tenant_user": "alice", "user_id": "bob"},
        "t-3": {"thread_id": "t-3", "user_id": "alice"},  # the default's key: ignored
    }
    for c in configs.values():
        graph.invoke({"messages": [HumanMessage(content=MARKER)]}, {"configurable": c})
    assert keys.name_of_thread("t-1") == keys.name_of_thread("t-2") == "subject:alice"
    assert keys.name_of_thread("t-3") == "thread:t-3"
    assert not keys.has_key("subject:bob")

    receipt = saver.shred_subject("alice")
    verify_receipt(receipt, [signer.public_key])
    assert receipt.predicate["scope"]["threads"] == ["t-1", "t-2"]
    for t in ("t-1", "t-2"):
        with pytest.raises(KeyShreddedError):
            saver.get_tuple(cfg(t, None))
    assert saver.get_tuple(cfg("t-3", None)) is not None
    conn.close()
    keys.close()
