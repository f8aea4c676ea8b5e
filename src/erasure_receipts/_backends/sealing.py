"""Row encryption for crypto-shredding: AES-256-GCM under the thread's data key, with
the row's identity as associated data.

Why the savers seal values themselves instead of handing LangGraph an encrypting
serializer: a serializer sees a value, never the row it goes to, so it cannot bind the
ciphertext to that row (a ciphertext copied to another thread's row would decrypt
fine), and it cannot tell a plaintext row from an encrypted one it should refuse. So
the savers' ``put``/``put_writes`` encrypt each value with its row identity before the
parent writes it (the parent's serializer only passes the sealed bytes through), and
``get_tuple``/``list`` receive sealed values from the parent (the serializer does not
decrypt) and open each one against the identity of the row it was read from. The
parents' SQL and control flow stay LangGraph's.

Format of a sealed value (column ``type`` = :data:`SEALED_TYPE`)::

    b"ERS1" || key_id (16) || nonce (12) || AES-256-GCM(plaintext, aad)
    plaintext = inner type || 0x00 || inner bytes      (the application serializer's)
    aad       = b"ERS1" || key_id || JSON [kind, thread_id, checkpoint_ns, ...identity]
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..errors import (
    CiphertextRejectedError,
    ConfigurationError,
    KeyShreddedError,
    PlaintextRowError,
)
from .keys import KEY_ID_BYTES, KeyStore, subject_key_name, thread_key_name

__all__ = [
    "SEALED_TYPE",
    "Encryption",
    "Migrated",
    "Sealed",
    "SealingSerde",
    "default_subject_of",
]

SEALED_TYPE = "erasure-receipts-aes256gcm-v1"
MAGIC = b"ERS1"
_HEAD = len(MAGIC) + KEY_ID_BYTES
_NONCE = 12

SubjectOf = Callable[[RunnableConfig], "str | None"]


def default_subject_of(config: RunnableConfig) -> str | None:
    """``config["configurable"]["user_id"]``, or None (the thread gets a key of its own)."""
    value = (config.get("configurable") or {}).get("user_id")
    return None if value is None else str(value)


@dataclass(frozen=True)
class Migrated:
    """What a migration of a plaintext database (``receipt encrypt``) sealed; rows already
    sealed are counted, not rewritten."""

    checkpoints: int
    """SQLite: checkpoint rows sealed. PostgreSQL: checkpoint rows whose inline
    (primitive) channel values were moved out of the checkpoint's JSON into sealed
    ``checkpoint_blobs`` rows."""
    writes: int
    already_sealed: int
    threads: int
    store_plaintext: int = 0
    """Store items (table ``store``) left in plaintext: a migration seals checkpoints and
    pending writes only; a shred does not make these unreadable (it refuses while a
    shredded subject's store namespace holds one)."""
    blobs: int = 0
    """PostgreSQL: ``checkpoint_blobs`` rows sealed in place or created from an inline
    value (SQLite has no such table)."""
    vacuumed: bool = False
    """PostgreSQL: the three tables were rewritten (``VACUUM (FULL)``) after the commit,
    so no live page of theirs keeps a plaintext row version."""


@dataclass(frozen=True, slots=True)
class Sealed:
    """A sealed value on its way into or out of a row (never handed to the application)."""

    blob: bytes


@dataclass(frozen=True, slots=True)
class _Plain:
    """A value the parent read from a row that is not sealed."""

    type: str
    blob: bytes | None


class SealingSerde:
    """The serializer the encrypting savers give their LangGraph parent: it passes sealed
    values through both ways and marks rows that are not sealed; it never encrypts or
    decrypts (that needs the row, see the module docstring)."""

    def __init__(self, inner: SerializerProtocol) -> None:
        self.inner = inner

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if isinstance(obj, Sealed):
            return SEALED_TYPE, obj.blob
        if isinstance(obj, dict) and isinstance(sealed := obj.get("__sealed__"), Sealed):
            return SEALED_TYPE, sealed.blob
        raise ConfigurationError(
            "encryption: a value reached the serializer without being sealed to its row "
            "(a saver path that does not encrypt)"
        )

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, blob = data
        if type_ == SEALED_TYPE:
            return Sealed(bytes(blob))
        return _Plain(type_, blob)


def _aad(key_id: bytes, identity: Sequence[str]) -> bytes:
    return MAGIC + key_id + json.dumps(list(identity), ensure_ascii=False).encode()


class Encryption:
    """Per-subject encryption of every checkpoint and pending write an attesting saver
    stores. ``keys`` is the :class:`KeyStore`; ``subject_of(config)`` names the data
    subject of a write (default: ``config["configurable"]["user_id"]``; None gives the
    thread its own key). A thread stays under the key of its first write.

    ``allow_plaintext=True`` reads rows that are not encrypted (only for migrating a
    plaintext database, ``receipt encrypt``); otherwise they are refused
    (``PlaintextRowError``). Unwrapped data keys are cached in memory for
    ``key_cache_seconds`` (default 30): a shred through this object drops its key at
    once; every other ``Encryption`` (another process) looks the key up again within
    that time and then refuses the rows. ``0`` looks it up on every read and write.
    """

    def __init__(
        self,
        keys: KeyStore,
        subject_of: SubjectOf | None = None,
        *,
        allow_plaintext: bool = False,
        key_cache_seconds: float = 30.0,
    ) -> None:
        if not isinstance(keys, KeyStore):
            raise ConfigurationError("Encryption(keys=...) takes a KeyStore")
        if not isinstance(key_cache_seconds, (int, float)) or key_cache_seconds < 0:
            raise ConfigurationError(
                f"key_cache_seconds= must be a non-negative number, not {key_cache_seconds!r}"
            )
        self.keys = keys
        self.subject_of: SubjectOf = subject_of or default_subject_of
        self.allow_plaintext = allow_plaintext
        self.key_cache_seconds = float(key_cache_seconds)
        self._lock = threading.Lock()
        self._by_thread: dict[str, tuple[bytes, AESGCM, str | None, float]] = {}
        self._by_id: dict[bytes, tuple[AESGCM, float]] = {}

    # -- keys -------------------------------------------------------------------------

    def _thread_key(self, config: RunnableConfig) -> tuple[bytes, AESGCM]:
        thread_id = str(config["configurable"]["thread_id"])
        subject = self.subject_of(config)
        hit = self._by_thread.get(thread_id)
        now = time.monotonic()
        if hit is not None and hit[3] > now and (subject is None or hit[2] == subject):
            return hit[0], hit[1]
        key_id, key = self.keys.key_for_thread(thread_id, subject)  # refuses another subject
        aead = AESGCM(key)
        until = now + self.key_cache_seconds
        with self._lock:
            self._by_thread[thread_id] = (key_id, aead, subject, until)
            self._by_id[key_id] = (aead, until)
        return key_id, aead

    def _key_by_id(self, key_id: bytes, thread_id: str, scope: str = "thread") -> AESGCM:
        hit = self._by_id.get(key_id)
        now = time.monotonic()
        if hit is not None and hit[1] > now:
            return hit[0]
        found = self.keys.key_by_id(key_id)
        if found is None:
            self.forget(key_id)
            raise KeyShreddedError(thread_id, scope=scope)
        aead = AESGCM(found[1])
        with self._lock:
            self._by_id[key_id] = (aead, now + self.key_cache_seconds)
        return aead

    def forget(self, key_id: bytes | None = None) -> None:
        """Drop cached data keys (one, or all)."""
        with self._lock:
            if key_id is None:
                self._by_thread.clear()
                self._by_id.clear()
                return
            self._by_id.pop(key_id, None)
            for t in [t for t, v in self._by_thread.items() if v[0] == key_id]:
                del self._by_thread[t]

    def key_name(self, *, subject: str | None = None, thread_id: str | None = None) -> str:
        """The key store's name of a subject's (or a thread's own) key."""
        return subject_key_name(subject) if subject is not None else thread_key_name(str(thread_id))

    # -- sealing and opening ----------------------------------------------------------

    def seal(
        self, inner: SerializerProtocol, obj: Any, config: RunnableConfig, identity: Sequence[str]
    ) -> Sealed:
        """``obj`` serialized by ``inner`` and encrypted under the thread's key, bound to
        ``identity`` (the row's kind and ids, thread id second)."""
        type_, data = inner.dumps_typed(obj)
        key_id, aead = self._thread_key(config)
        nonce = secrets.token_bytes(_NONCE)
        plain = type_.encode() + b"\x00" + (data or b"")
        ct = aead.encrypt(nonce, plain, _aad(key_id, identity))
        return Sealed(MAGIC + key_id + nonce + ct)

    def open(self, inner: SerializerProtocol, value: Any, identity: Sequence[str]) -> Any:
        """The value of a row read back: decrypted against ``identity`` and deserialized
        by ``inner``; a plaintext row is refused unless ``allow_plaintext``."""
        thread_id = identity[1]
        if isinstance(value, _Plain):
            if self.allow_plaintext:
                return inner.loads_typed((value.type, value.blob))  # type: ignore[arg-type]
            raise PlaintextRowError(
                f"thread {thread_id!r}: a {identity[0]} row is not encrypted (written behind "
                "the encrypting saver's back, or before encryption was turned on); refused "
                "(receipt encrypt migrates a plaintext database)"
            )
        if not isinstance(value, Sealed):
            raise PlaintextRowError(
                f"thread {thread_id!r}: a {identity[0]} row was not read sealed"
            )
        blob = value.blob
        if len(blob) < _HEAD + _NONCE + 16 or blob[: len(MAGIC)] != MAGIC:
            raise CiphertextRejectedError(
                f"thread {thread_id!r}: a {identity[0]} row is not a sealed value"
            )
        key_id = blob[len(MAGIC) : _HEAD]
        aead = self._key_by_id(key_id, thread_id)
        try:
            plain = aead.decrypt(
                blob[_HEAD : _HEAD + _NONCE], blob[_HEAD + _NONCE :], _aad(key_id, identity)
            )
        except InvalidTag:
            raise CiphertextRejectedError(
                f"thread {thread_id!r}: a {identity[0]} row does not authenticate (altered, or "
                "moved from another row)"
            ) from None
        type_, _, data = plain.partition(b"\x00")
        return inner.loads_typed((type_.decode(), data))

    def reseal(
        self, inner: SerializerProtocol, obj: Any, blob: bytes, identity: Sequence[str]
    ) -> bytes:
        """``obj`` sealed again to the row ``blob`` was read from (``identity``), under the
        same data key (a redaction's rewrite: the row keeps its key and binding)."""
        key_id = bytes(blob[len(MAGIC) : _HEAD])
        aead = self._key_by_id(key_id, identity[1])
        type_, data = inner.dumps_typed(obj)
        nonce = secrets.token_bytes(_NONCE)
        plain = type_.encode() + b"\x00" + (data or b"")
        return MAGIC + key_id + nonce + aead.encrypt(nonce, plain, _aad(key_id, identity))

    def open_tuple(
        self, inner: SerializerProtocol, tup: CheckpointTuple | None
    ) -> CheckpointTuple | None:
        """A checkpoint tuple the parent read, its checkpoint and pending writes opened."""
        if tup is None:
            return None
        c = tup.config["configurable"]
        t, ns, cid = str(c["thread_id"]), str(c.get("checkpoint_ns", "")), str(c["checkpoint_id"])
        checkpoint: Any = tup.checkpoint
        if isinstance(checkpoint, (Sealed, _Plain)):  # SQLite: the checkpoint is one value
            checkpoint = self.open(inner, checkpoint, ("checkpoint", t, ns, cid))
        writes = [
            (task, ch, self.open(inner, v, ("write", t, ns, cid, str(task), str(ch))))
            for task, ch, v in (tup.pending_writes or [])
        ]
        return tup._replace(checkpoint=checkpoint, pending_writes=writes)

    def sealed_checkpoint(
        self, inner: SerializerProtocol, config: RunnableConfig, checkpoint: Any
    ) -> dict[str, Any]:
        """What the parent's ``put`` is given: the checkpoint's id and its sealed bytes."""
        c = config["configurable"]
        identity = (
            "checkpoint",
            str(c["thread_id"]),
            str(c.get("checkpoint_ns", "")),
            str(checkpoint["id"]),
        )
        return {
            "id": checkpoint["id"],
            "__sealed__": self.seal(inner, checkpoint, config, identity),
        }

    def sealed_writes(
        self,
        inner: SerializerProtocol,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
    ) -> list[tuple[str, Any]]:
        """What the parent's ``put_writes`` is given: each value sealed to its row."""
        c = config["configurable"]
        t, ns, cid = str(c["thread_id"]), str(c.get("checkpoint_ns", "")), str(c["checkpoint_id"])
        return [
            (ch, self.seal(inner, v, config, ("write", t, ns, cid, str(task_id), str(ch))))
            for ch, v in writes
        ]

    # -- store items (wrap_store) ---------------------------------------------------

    def seal_store_value(
        self, subject: str, namespace: tuple[str, ...], key: str, value: Any
    ) -> dict[str, str]:
        """``value`` (a store item's dict) sealed under ``subject``'s key to its item."""
        ns = ".".join(namespace)
        key_id, data_key = self.keys.key_for_namespace(ns, subject)
        aead = AESGCM(data_key)
        nonce = secrets.token_bytes(_NONCE)
        plain = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
        ct = aead.encrypt(nonce, plain, _aad(key_id, ("store", ns, key)))
        return {SEALED_VALUE_KEY: base64.b64encode(MAGIC + key_id + nonce + ct).decode()}

    def open_store_value(self, namespace: tuple[str, ...], key: str, value: Any) -> Any:
        """A store item's value read back: decrypted against (namespace, key); a value
        that is not sealed is refused (``PlaintextRowError``) unless ``allow_plaintext``."""
        ns = ".".join(namespace)
        if not (isinstance(value, dict) and set(value) == {SEALED_VALUE_KEY}):
            if self.allow_plaintext:
                return value
            raise PlaintextRowError(
                f"store item {ns!r}/{key!r} is not encrypted (written behind the encrypting "
                "store's back); refused"
            )
        try:
            blob = base64.b64decode(value[SEALED_VALUE_KEY], validate=True)
        except (ValueError, TypeError):
            raise CiphertextRejectedError(
                f"store item {ns!r}/{key!r} is not a sealed value"
            ) from None
        if len(blob) < _HEAD + _NONCE + 16 or blob[: len(MAGIC)] != MAGIC:
            raise CiphertextRejectedError(f"store item {ns!r}/{key!r} is not a sealed value")
        key_id = blob[len(MAGIC) : _HEAD]
        aead = self._key_by_id(key_id, ns, "store namespace")
        try:
            plain = aead.decrypt(blob[_HEAD : _HEAD + _NONCE], blob[_HEAD + _NONCE :],
                                 _aad(key_id, ("store", ns, key)))  # fmt: skip
        except InvalidTag:
            raise CiphertextRejectedError(
                f"store item {ns!r}/{key!r} does not authenticate (altered, or moved from "
                "another item)"
            ) from None
        return json.loads(plain)

    def reseal_store_value(
        self, namespace: tuple[str, ...], key: str, value: Any, sealed: Any
    ) -> dict[str, str]:
        """``value`` sealed again to its item under the key of ``sealed`` (the item's
        sealed value as stored; a redaction's rewrite keeps the item's key)."""
        ns = ".".join(namespace)
        blob = base64.b64decode(sealed[SEALED_VALUE_KEY], validate=True)
        key_id = bytes(blob[len(MAGIC) : _HEAD])
        aead = self._key_by_id(key_id, ns)
        nonce = secrets.token_bytes(_NONCE)
        plain = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
        ct = aead.encrypt(nonce, plain, _aad(key_id, ("store", ns, key)))
        return {SEALED_VALUE_KEY: base64.b64encode(MAGIC + key_id + nonce + ct).decode()}

    def wrap_store(self, store: Any, subject_of_namespace: NamespaceSubject) -> Any:
        """``store`` with every item value encrypted under the data key of
        ``subject_of_namespace(namespace)`` (e.g. ``lambda ns: ns[1]`` for
        ``("users", user_id, ...)``), bound to the item's namespace and key; a shred of
        the subject makes them undecryptable too. Pass the result to the graph
        (``compile(store=...)``) and its ``.store`` to the saver (``store=``)."""
        if not callable(subject_of_namespace):
            raise ConfigurationError(
                "subject_of_namespace= must be a function namespace -> subject"
            )
        return _store_class()(store, self, subject_of_namespace)

    # -- PostgreSQL: channel values live in checkpoint_blobs ---------------------------

    def seal_for_thread(
        self, inner: SerializerProtocol, obj: Any, thread_id: str, identity: Sequence[str]
    ) -> bytes:
        """``seal`` for a thread whose key :meth:`bind` resolved (the PostgreSQL savers'
        blob and write rows are built from the thread id alone)."""
        return self.seal(inner, obj, {"configurable": {"thread_id": thread_id}}, identity).blob

    def bind(self, config: RunnableConfig) -> None:
        """Resolve (and cache) the key of the config's thread before its rows are built."""
        self._thread_key(config)

    def open_pg_tuple(
        self, inner: SerializerProtocol, tup: CheckpointTuple, inline: Any
    ) -> CheckpointTuple:
        """A PostgreSQL checkpoint tuple: each channel value (from ``checkpoint_blobs``,
        bound to thread, namespace, channel and version) and pending write opened; a
        value stored inline in the checkpoint's JSON is plaintext (refused unless
        ``allow_plaintext``)."""
        c = tup.config["configurable"]
        t, ns = str(c["thread_id"]), str(c.get("checkpoint_ns", ""))
        checkpoint: dict[str, Any] = dict(tup.checkpoint)
        versions = checkpoint.get("channel_versions") or {}
        values: dict[str, Any] = {}
        for ch, v in (checkpoint.get("channel_values") or {}).items():
            if isinstance(v, (Sealed, _Plain)):
                identity = ("blob", t, ns, str(ch), str(versions.get(ch)))
                values[ch] = self.open(inner, v, identity)
            elif ch in (inline or {}) and not self.allow_plaintext and v is not True:
                raise PlaintextRowError(
                    f"thread {t!r}: channel {ch!r} is stored in plaintext in a checkpoint "
                    "row (written behind the encrypting saver's back); refused"
                )
            else:
                values[ch] = v
        checkpoint["channel_values"] = values
        opened = self.open_tuple(inner, tup._replace(checkpoint=checkpoint))  # type: ignore[arg-type]
        assert opened is not None
        return opened


# -- store items (Encryption.wrap_store) ------------------------------------------------

SEALED_VALUE_KEY = "__erasure_receipts_sealed__"
"""A sealed store value is ``{SEALED_VALUE_KEY: base64(sealed bytes)}``."""

NamespaceSubject = Callable[[tuple[str, ...]], "str | None"]


def _store_class() -> Any:
    from langgraph.store.base import BaseStore, GetOp, Item, PutOp, SearchItem, SearchOp

    class EncryptedStore(BaseStore):
        """A ``BaseStore`` whose item values are AES-256-GCM under the data key of the
        namespace's subject, bound to (namespace, key). Give the graph this store and the
        saver the underlying one (``store=wrapped.store``): erasures read raw rows.
        Content search (``query``, ``filter``) and vector indexing are refused: the values
        are ciphertext to the store."""

        def __init__(
            self, store: BaseStore, encryption: Encryption, subject_of: NamespaceSubject
        ) -> None:
            self.store = store
            self.encryption = encryption
            self.subject_of_namespace = subject_of

        def _seal_op(self, op: Any) -> Any:
            if isinstance(op, PutOp) and op.value is not None:
                ns = tuple(op.namespace)
                subject = self.subject_of_namespace(ns)
                if subject is None:
                    raise ConfigurationError(
                        f"store namespace {'.'.join(ns)!r} has no data subject "
                        "(subject_of_namespace returned None); it cannot be encrypted"
                    )
                value = self.encryption.seal_store_value(subject, ns, op.key, op.value)
                return PutOp(op.namespace, op.key, value, index=False, ttl=op.ttl)
            if isinstance(op, SearchOp) and (op.query is not None or op.filter):
                raise ConfigurationError(
                    "an encrypted store cannot be searched by content (query= or filter=)"
                )
            return op

        def _open(self, item: Any) -> Any:
            if item is None:
                return None
            value = self.encryption.open_store_value(tuple(item.namespace), item.key, item.value)
            if isinstance(item, SearchItem):
                return SearchItem(item.namespace, item.key, value, item.created_at,
                                  item.updated_at, item.score)  # fmt: skip
            return Item(value=value, key=item.key, namespace=item.namespace,
                        created_at=item.created_at, updated_at=item.updated_at)  # fmt: skip

        def _open_results(self, ops: Any, results: list[Any]) -> list[Any]:
            out = []
            for op, res in zip(ops, results, strict=True):
                if isinstance(op, GetOp):
                    out.append(self._open(res))
                elif isinstance(op, SearchOp):
                    out.append([self._open(i) for i in res])
                else:
                    out.append(res)
            return out

        def batch(self, ops: Any) -> list[Any]:
            ops = list(ops)
            return self._open_results(ops, self.store.batch([self._seal_op(o) for o in ops]))

        async def abatch(self, ops: Any) -> list[Any]:
            ops = list(ops)
            res = await self.store.abatch([self._seal_op(o) for o in ops])
            return self._open_results(ops, res)

    return EncryptedStore
