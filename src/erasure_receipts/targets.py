"""Erasure targets: the application's own data about a thread or a data subject,
erased with it and attested in the same receipt (RECEIPT_SPEC.md 9.13).

A target is given to a saver (``targets=[...]``) or to one call (``erase_thread(...,
targets=[...])``, ``erase_subject``). Each appears in the receipt as its own table
``target:<name>`` in the digest (and, for a subject, in the units) and in ``methods``,
and in the receipt's ``targets`` member, which says what it is.

* :class:`SqlTarget` - a table keyed by the thread id or the subject: in the saver's own
  database it is measured and deleted inside the erasure transaction
  (``atomic-transaction``); in another database (``database=`` a SQLite file or a
  PostgreSQL DSN) it is measured in the transaction, journaled, and swept after the
  checkpoints' commit (``sweep``; a crash in between is completed by
  ``recover_receipts()``).
* :class:`VectorStoreTarget` - documents of a LangChain ``VectorStore`` derived from the
  conversation (embeddings, chunks), selected by a metadata key or by a function that
  returns their ids (``sweep``).
* Anything else implementing :class:`ErasureTarget` (files, caches, a third-party API):
  items with stable keys and raw bytes, deleted after the commit (``sweep``).

``after="threads_verified_gone"`` (any target): its rows are erased only with the whole
thread, after every check of the thread's erasure passed - never by a history erasure
(the latest checkpoint stays resumable), never when the erasure is refused.

This module holds only descriptions; the engine measures and deletes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .errors import ArgumentTypeError, ConfigurationError

__all__ = [
    "AFTER",
    "KEYS",
    "ErasureTarget",
    "FunctionTarget",
    "SqlTarget",
    "VectorStoreTarget",
    "check_targets",
]

KEYS = ("thread", "subject")
"""What a target's rows are keyed by: the thread id, or the data subject's id."""
AFTER = ("threads_verified_gone",)
"""``after=``: the only dependency a target can have."""
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,56}$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


@runtime_checkable
class ErasureTarget(Protocol):
    """What the engine needs of a target that is not a table: its items under one key
    value (a thread id or a subject), each with a stable key and its raw bytes (the
    digest's leaf, RECEIPT_SPEC.md 9.13), and a way to delete them. Such a target is
    measured inside the erasure transaction (before anything is deleted: one that
    raises stops the erasure there) and swept after the commit."""

    name: str
    """The receipt's name for it (``target:<name>``): letters, digits, ``_.-``."""
    key: str
    """``thread`` or ``subject``."""
    after: str | None
    """None, or ``threads_verified_gone``."""

    def items(self, key_value: str) -> Mapping[str, bytes]:
        """Every item of ``key_value``: stable key -> raw bytes."""
        ...

    def delete(self, key_value: str, item_keys: Sequence[str]) -> None:
        """Delete those items (of ``key_value``)."""
        ...


def _name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(
            f"{what}: a target name is 1-56 letters, digits, '_', '.' or '-', not {name!r}"
        )
    return name


def _key(key: Any) -> str:
    if key not in KEYS:
        raise ConfigurationError(f'key= must be "thread" or "subject", not {key!r}')
    return str(key)


def _after(after: Any) -> str | None:
    if after is not None and after not in AFTER:
        raise ConfigurationError(f'after= must be None or "threads_verified_gone", not {after!r}')
    return None if after is None else str(after)


@dataclass(frozen=True)
class SqlTarget:
    """A table keyed by thread id or subject: ``DELETE FROM table WHERE key_column = ?``.

    ``database=None``: the saver's own database (SQLite file or PostgreSQL database),
    measured and deleted inside the erasure transaction. ``database=`` a SQLite file path
    or a ``postgresql://`` DSN: another database, measured in the transaction and swept
    after the commit. The table needs a primary key (its rows' order in the digest) and
    ``key_column`` must hold text.
    """

    table: str
    key_column: str
    key: str = "thread"
    database: str | None = None
    after: str | None = None
    name: str = ""

    def __post_init__(self) -> None:
        for what, v in (("table", self.table), ("key_column", self.key_column)):
            if not isinstance(v, str) or not _IDENT.match(v):
                raise ConfigurationError(
                    f"SqlTarget {what}= must be a plain SQL identifier (letters, digits, "
                    f"'_'), not {v!r}"
                )
        _key(self.key)
        _after(self.after)
        if self.database is not None and (not isinstance(self.database, str) or not self.database):
            raise ConfigurationError("SqlTarget database= is a SQLite file path or a DSN")
        object.__setattr__(self, "name", _name(self.name or self.table, "SqlTarget"))

    @property
    def method(self) -> str:
        """``atomic-transaction`` in the saver's database, else ``sweep``."""
        return "atomic-transaction" if self.database is None else "sweep"

    @property
    def postgres_dsn(self) -> bool:
        """Whether ``database`` is a PostgreSQL DSN (else a SQLite file)."""
        d = self.database or ""
        return d.startswith(("postgresql://", "postgres://")) or ("=" in d and " " in d)

    def describe(self) -> dict[str, Any]:
        """The receipt's ``targets`` entry (and what the journal keeps to rebuild it)."""
        out: dict[str, Any] = {"name": self.name, "type": "sql", "key": self.key,
                               "method": self.method, "table": self.table,
                               "key_column": self.key_column}  # fmt: skip
        if self.database is not None:
            out["database"] = _shown_database(self.database)
        if self.after is not None:
            out["after"] = self.after
        return out


def _shown_database(database: str) -> str:
    """A database as a receipt names it: a DSN without its password."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", re.sub(r"password=\S+", "", database))


class VectorStoreTarget:
    """Documents of a LangChain ``VectorStore`` derived from a thread or a subject.

    The documents are those whose metadata ``metadata_key`` equals the key value, or
    those whose ids ``ids_for(key_value)`` returns. Each is measured by its id, text and
    metadata (RFC 8785 JSON) and deleted with ``delete(ids=...)`` after the commit.
    Finding documents by metadata needs a store whose documents can be listed:
    LangChain's ``InMemoryVectorStore`` and FAISS (``langchain_community``) are read
    directly; any other store needs ``ids_for``.
    """

    def __init__(
        self,
        vectorstore: Any,
        *,
        ids_for: Callable[[str], Iterable[str]] | None = None,
        metadata_key: str | None = None,
        key: str = "subject",
        after: str | None = None,
        name: str = "vectors",
    ) -> None:
        if (ids_for is None) == (metadata_key is None):
            raise ConfigurationError(
                "VectorStoreTarget needs exactly one of ids_for= and metadata_key="
            )
        if ids_for is not None and not callable(ids_for):
            raise ArgumentTypeError("ids_for= must be a function key_value -> document ids")
        if not callable(getattr(vectorstore, "delete", None)) or not callable(
            getattr(vectorstore, "get_by_ids", None)
        ):
            raise ArgumentTypeError(
                "VectorStoreTarget needs a LangChain VectorStore (get_by_ids and delete)"
            )
        self.vectorstore = vectorstore
        self.ids_for = ids_for
        self.metadata_key = metadata_key
        self.key = _key(key)
        self.after = _after(after)
        self.name = _name(name, "VectorStoreTarget")

    def _ids(self, key_value: str) -> list[str]:
        if self.ids_for is not None:
            ids = self.ids_for(key_value)
            if isinstance(ids, str):
                raise ArgumentTypeError("ids_for= returns a list of ids, not one string")
            return sorted({str(i) for i in ids})
        mk = str(self.metadata_key)
        return sorted(i for i, meta in _documents(self.vectorstore) if meta.get(mk) == key_value)

    def items(self, key_value: str) -> dict[str, bytes]:
        """Each document of ``key_value``: id -> RFC 8785 JSON of ``{id, text, metadata}``."""
        from .canonical import canonicalize

        ids = self._ids(key_value)
        out: dict[str, bytes] = {}
        for doc in self.vectorstore.get_by_ids(ids) if ids else ():
            doc_id = str(doc.id)
            body = {"id": doc_id, "text": doc.page_content, "metadata": dict(doc.metadata)}
            out[doc_id] = canonicalize(body, floats=True)
        return out

    @property
    def searchable(self) -> bool:
        """Whether the needle check can search the store: its documents can be listed
        (``InMemoryVectorStore``, FAISS)."""
        try:
            _all_documents(self.vectorstore)
        except ConfigurationError:
            return False
        return True

    def locate(self, forms: Sequence[bytes]) -> list[str]:
        """Ids of every document whose text or metadata (as JSON) holds one of ``forms``
        (the needle check). ``ConfigurationError`` if the store's documents cannot be
        listed (see :attr:`searchable`): never an empty answer for a store not searched."""
        import json

        docs = _all_documents(self.vectorstore)
        out = []
        for i, text, meta in docs:
            for v in (text, json.dumps(meta, ensure_ascii=False, default=str, sort_keys=True)):
                data = v.encode("utf-8", "surrogatepass")
                if any(f in data for f in forms):
                    out.append(i)
                    break
        return out

    def delete(self, key_value: str, item_keys: Sequence[str]) -> None:
        """``vectorstore.delete(ids=...)``."""
        if item_keys:
            self.vectorstore.delete(ids=list(item_keys))

    def describe(self) -> dict[str, Any]:
        """The receipt's ``targets`` entry."""
        store = type(self.vectorstore).__name__
        out: dict[str, Any] = {"name": self.name, "type": "vectorstore", "key": self.key,
                               "method": "sweep", "store": store}  # fmt: skip
        if self.metadata_key is not None:
            out["metadata_key"] = self.metadata_key
        if self.after is not None:
            out["after"] = self.after
        return out


def _documents(vs: Any) -> Iterable[tuple[str, dict[str, Any]]]:
    """``(id, metadata)`` of every document of a store that can be listed."""
    return [(i, meta) for i, _, meta in _all_documents(vs)]


def _all_documents(vs: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """``(id, text, metadata)`` of every document of a store that can be listed."""
    store = getattr(vs, "store", None)
    if isinstance(store, dict):  # langchain_core InMemoryVectorStore
        return [
            (str(k), str(v.get("text", "")), dict(v.get("metadata") or {}))
            for k, v in store.items()
        ]
    docstore = getattr(getattr(vs, "docstore", None), "_dict", None)
    if isinstance(docstore, dict):  # langchain_community FAISS
        return [
            (str(k), str(getattr(d, "page_content", "")), dict(getattr(d, "metadata", {}) or {}))
            for k, d in docstore.items()
        ]
    raise ConfigurationError(
        f"{type(vs).__name__}: its documents cannot be listed to match metadata; "
        "give VectorStoreTarget ids_for= instead"
    )


class FunctionTarget:
    """A target from two functions: ``items(key_value) -> {item key: raw bytes}`` and
    ``delete(key_value, item_keys)`` (files, a cache, a third-party API).

    ``locate(forms) -> item keys`` (optional): the keys of every item, of any key value,
    whose bytes hold one of ``forms`` (byte strings) - what the needle check
    (``needles=``) and ``locate`` search. Without it the target cannot be searched, and
    an erasure with ``needles=`` that includes it is refused."""

    def __init__(
        self,
        name: str,
        *,
        items: Callable[[str], Mapping[str, bytes]],
        delete: Callable[[str, Sequence[str]], None],
        key: str = "thread",
        after: str | None = None,
        locate: Callable[[Sequence[bytes]], Iterable[str]] | None = None,
    ) -> None:
        if not callable(items) or not callable(delete):
            raise ArgumentTypeError("FunctionTarget items= and delete= must be functions")
        if locate is not None and not callable(locate):
            raise ArgumentTypeError("FunctionTarget locate= must be a function forms -> keys")
        self.name = _name(name, "FunctionTarget")
        self._items = items
        self._delete = delete
        self._locate = locate
        self.key = _key(key)
        self.after = _after(after)

    @property
    def searchable(self) -> bool:
        """Whether it was given ``locate=``."""
        return self._locate is not None

    def locate(self, forms: Sequence[bytes]) -> list[str]:
        """``locate(forms)``; ``ConfigurationError`` without ``locate=``."""
        if self._locate is None:
            raise ConfigurationError(f"target {self.name!r} has no locate= to search it")
        found = self._locate(forms)
        if isinstance(found, str | bytes):
            raise ArgumentTypeError("locate= returns a list of item keys, not one string")
        return sorted({str(k) for k in found})

    def items(self, key_value: str) -> Mapping[str, bytes]:
        """``items(key_value)``."""
        return self._items(key_value)

    def delete(self, key_value: str, item_keys: Sequence[str]) -> None:
        """``delete(key_value, item_keys)``."""
        self._delete(key_value, item_keys)

    def describe(self) -> dict[str, Any]:
        """The receipt's ``targets`` entry."""
        out: dict[str, Any] = {"name": self.name, "type": "function", "key": self.key,
                               "method": "sweep"}  # fmt: skip
        if self.after is not None:
            out["after"] = self.after
        return out


def describe(target: Any) -> dict[str, Any]:
    """A target's receipt entry (an :class:`ErasureTarget` without ``describe``: a
    function target's)."""
    if callable(getattr(target, "describe", None)):
        return dict(target.describe())
    out: dict[str, Any] = {"name": target.name, "type": "function", "key": target.key,
                           "method": "sweep"}  # fmt: skip
    if getattr(target, "after", None) is not None:
        out["after"] = target.after
    return out


def unsearchable(target: Any) -> str | None:
    """Why the needle check cannot search ``target`` (None: it can). A table can always
    be searched; a vector store whose documents can be listed; any other target with a
    ``locate(forms)`` method (``FunctionTarget(locate=...)``)."""
    if isinstance(target, SqlTarget):
        return None
    if isinstance(target, VectorStoreTarget):
        if target.searchable:
            return None
        return (
            f"the documents of its {type(target.vectorstore).__name__} cannot be listed "
            "(only InMemoryVectorStore and FAISS can)"
        )
    if not callable(getattr(target, "locate", None)) or not getattr(target, "searchable", True):
        return "it has no locate(forms) (FunctionTarget: give it locate=)"
    return None


def check_targets(targets: Any, what: str = "targets=") -> tuple[Any, ...]:
    """``targets=`` as a tuple of targets with unique names (or a clear error)."""
    if targets is None:
        return ()
    if isinstance(targets, str | bytes) or not isinstance(targets, Iterable):
        raise ArgumentTypeError(f"{what} is a list of targets")
    out: list[Any] = []
    for t in targets:
        if not isinstance(t, SqlTarget | VectorStoreTarget | FunctionTarget) and not isinstance(
            t, ErasureTarget
        ):
            raise ArgumentTypeError(
                f"{what}: {type(t).__name__} is no erasure target (SqlTarget, "
                "VectorStoreTarget, FunctionTarget or an ErasureTarget)"
            )
        _name(t.name, type(t).__name__)
        _key(t.key)
        _after(getattr(t, "after", None))
        out.append(t)
    names = [t.name for t in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigurationError(f"{what}: target names must be unique; repeated: {dup}")
    tables = [(t.database, t.table) for t in out if isinstance(t, SqlTarget)]
    twice = sorted({t for _, t in tables if sum(1 for x in tables if x[1] == t) > 1})
    if len(set(tables)) < len(tables):  # its rows would be measured (and erased) twice
        raise ConfigurationError(f"{what}: a table is one target; given twice: {twice}")
    return tuple(out)
