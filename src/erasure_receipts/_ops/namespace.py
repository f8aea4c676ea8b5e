"""Erasure of one store namespace (RECEIPT_SPEC.md 9.7): every item under a prefix,
measured, deleted and verified in one transaction, and (with ``tombstone``) the prefix
tombstoned so the database refuses later ``put``s there or below (8.1).

The operation only builds the request: the scope is the prefix as the engine's single
store namespace, with no thread (``kind="namespace"``); the engine's protocol measures,
deletes, tombstones, journals, checks and signs it as every other kind. The store must
keep its items in the saver's database (a ``SqliteStore`` in the same file, a
``PostgresStore`` in the same database): only there do measurement, deletion and
tombstone share one transaction, and only there do the database's triggers guard the
prefix against every writer.

Concurrency: SQLite's ``BEGIN IMMEDIATE`` excludes every other writer until the commit
(a ``put`` waits, then meets the tombstone, or gives up with "database is locked");
on PostgreSQL the store trigger takes a shared advisory lock per ancestor prefix of the
row written and the erasure the exclusive one of its prefix before it reads, so a
``put`` that started first is measured and one that comes later waits and is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .._engine.eraser import Eraser, ThreadDigest
from .._engine.seams import ResidueScan
from .._engine.types import ErasureRequest
from ..errors import ArgumentTypeError, ConfigurationError, Error, NothingToEraseError
from ..receipt import Receipt
from .subject import _commitment_key

__all__ = [
    "digest_namespace",
    "erase_namespace",
    "namespace_erased",
    "namespace_request",
    "prefix_of",
]


def prefix_of(prefix: Any) -> tuple[str, ...]:
    """``prefix`` as a namespace tuple, or one clear error: LangGraph's own label rules
    (non-empty strings without ``.``), and never the empty prefix (every item)."""
    if isinstance(prefix, str | bytes):
        raise ArgumentTypeError(
            f"a store namespace is a tuple of labels such as ('users', 'alice'), not {prefix!r}"
        )
    try:
        labels = tuple(prefix)
    except TypeError:
        raise ArgumentTypeError(f"a store namespace is a tuple of labels, not {prefix!r}") from None
    if not labels:
        raise ConfigurationError(
            "an empty store namespace would erase every item of the store; name a prefix",
            reason="invalid_namespace",
        )
    for label in labels:
        if not isinstance(label, str):
            raise ArgumentTypeError(f"store namespace {labels!r}: label {label!r} is not a string")
        if not label:
            raise ConfigurationError(
                f"store namespace {labels!r} has an empty label", reason="invalid_namespace"
            )
        if "." in label:
            raise ConfigurationError(
                f"store namespace {labels!r}: label {label!r} contains '.' (LangGraph joins "
                "labels with '.'; give each label separately)",
                reason="invalid_namespace",
            )
    return labels


def namespace_request(
    er: Eraser,
    prefix: Any,
    *,
    tombstone: bool = True,
    allow_empty: bool = False,
    needles: Iterable[str] = (),
    request: Any = None,
    authorization: Any = None,
    privacy: Any = None,
    commitment_key: Any = None,
) -> ErasureRequest:
    """The request of one namespace erasure (refused before anything is read when the
    saver has no store, or when an authorization is given: authorizations name threads
    and subjects only). ``privacy="commitments"``: the receipt, journal and errors name
    the prefix by its commitment (RECEIPT_SPEC.md 9.5, label ``store_namespace``)."""
    labels = prefix_of(prefix)
    key = _commitment_key(privacy, commitment_key)
    if er.store is None:
        raise ConfigurationError("erase_namespace needs the saver's store= (the store to erase)")
    if authorization is not None:
        raise ConfigurationError(
            "authorization= is not supported for namespace erasures (an authorization names "
            "a thread or a subject); pass request= alone"
        )
    values = _needles(needles)
    base = ErasureRequest(
        ".".join(labels), (labels,), bool(tombstone), bool(allow_empty), kind="namespace",
        needles=values, needle_scope="database", privacy=key,
    )  # fmt: skip
    return er.with_context(base, request, None)


def _needles(needles: Iterable[str]) -> tuple[str, ...]:
    if isinstance(needles, str | bytes):
        raise ArgumentTypeError("needles= takes a list of strings, not one string")
    out = []
    for n in needles:
        if not isinstance(n, str) or not n:
            raise ConfigurationError(f"needles: every value must be a non-empty string, not {n!r}")
        out.append(n)
    return tuple(dict.fromkeys(out))


def _in_database(er: Eraser) -> None:
    if not er.db.store_rows():
        raise ConfigurationError(
            f"the saver's store ({type(er.store).__name__}) does not keep its items in the "
            "saver's database: a namespace erasure needs a SqliteStore in the same file or a "
            "PostgresStore in the same database (one transaction, guarded by the database's "
            "triggers)"
        )


def erase_namespace(er: Eraser, request: ErasureRequest, residue_scan: ResidueScan) -> Receipt:
    """Measure, delete, tombstone and sign one namespace (after ``Database.prepare``)."""
    _in_database(er)
    key = request.privacy
    if key is not None:  # recover_receipts() opens the sealed journal entry with it
        er.commitment_keys[key.key_id] = key
    try:
        return er.erase(request, residue_scan)
    except NothingToEraseError as exc:
        exc.args = (
            f"store namespace {request.journal_id!r} holds no items (nothing under it, "
            "sub-namespaces and expired items included); nothing was erased "
            "(allow_empty=True attests an empty scope)",
        )
        raise
    except Error as exc:
        if key is None:
            raise
        concealed = _concealed(exc, request)
    raise concealed


def _concealed(exc: Error, request: ErasureRequest) -> Error:
    """Privacy mode: ``exc`` with the prefix (in any spelling) replaced by its
    commitment, and no chained cause (a database error's text could name it)."""
    labels = request.store_namespaces[0]
    shown = request.journal_id
    spellings = sorted({".".join(labels), "/".join(labels), repr(labels), repr(list(labels))},
                       key=len, reverse=True)  # fmt: skip

    def hide(v: Any) -> Any:
        if isinstance(v, str):
            for raw in spellings:
                v = v.replace(raw, shown)
        return v

    exc.args = tuple(hide(a) for a in exc.args)
    if hasattr(exc, "locations"):
        exc.locations = [{k: hide(x) for k, x in loc.items()} for loc in exc.locations]
    exc.__cause__ = exc.__context__ = None
    exc.__suppress_context__ = True
    return exc


def digest_namespace(er: Eraser, request: ErasureRequest) -> ThreadDigest:
    """What ``erase_namespace`` would measure now (read-only; after ``resolve_store``)."""
    _in_database(er)
    return er.db.run(er.measure, request)


def namespace_erased(er: Eraser, prefix: Sequence[str]) -> str | None:
    """The tombstoned prefix that refuses writes to ``prefix`` (it, or an ancestor)."""
    return er.db.run(er.journal.namespace_erased, ".".join(prefix_of(prefix)))
