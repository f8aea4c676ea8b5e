"""Crypto-shredding (RECEIPT_SPEC.md 9.16): destroy a data subject's (or a thread's own)
data key in the key store, check that it is gone and that the data database's rows
encrypted under it no longer decrypt, and sign a receipt of kind ``shred``.

Nothing in the data database is deleted: its rows stay as ciphertext, in it and in every
backup of it. The pre-state is the key store's rows (the key and its thread bindings),
read and deleted in one key-store transaction; the post-state re-measures them.

A scope with rows stored in plaintext in the data database (not sealed: written before
encryption and not migrated, or behind the saver's back) is refused before anything is
destroyed: those rows would stay readable.

Order: the statement is built and checked against the verifier's rules before the key is
destroyed (a key is never destroyed for a receipt that could not verify); the key is
then destroyed and the checks run; if signing or archiving then fails, the key is gone
all the same and ``ErasureIncompleteError`` says so.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from typing import Any

from .. import __version__
from .._backends.keys import (
    KEY_COLUMNS,
    NAMESPACE_COLUMNS,
    THREAD_COLUMNS,
    DestroyedKey,
    KeyStore,
)
from .._backends.plaintext import plaintext_rows
from .._backends.sealing import Encryption
from .._clock import format_time
from .._engine.eraser import Eraser
from .._engine.statement import sign_and_archive
from ..digest import EMPTY_ROOT, MerkleTree, encode_row
from ..errors import (
    ConfigurationError,
    ErasureIncompleteError,
    MalformedReceiptError,
    NoDataKeyError,
    PlaintextRowError,
    ReceiptSemanticsError,
)
from ..receipt import OUT_OF_SCOPE, Receipt, build_statement, validate_statement

__all__ = ["KEY_COMMITMENT_PREFIX", "key_commitment", "shred"]

KEY_COMMITMENT_PREFIX = b"erasure-receipts-data-key-id-v1\x00"

KEY_TABLES = ("erasure_data_keys", "erasure_thread_keys", "erasure_namespace_keys")

Probe = Callable[[str], str]
"""``thread_id -> "refused" | "empty" | "readable"``: what reading the thread through the
saver's public API gives now."""


def key_commitment(key_id: bytes) -> str:
    """SHA-256 (hex) of the prefix and the 16-byte key id: the id is in the header of every
    row sealed under the key (bytes 4-20), so a holder of a backup can tell which rows the
    shredded key covered without the receipt revealing the id."""
    return hashlib.sha256(KEY_COMMITMENT_PREFIX + key_id).hexdigest()


def _size(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(bytes(value))
    return 8


def _measure(d: DestroyedKey) -> tuple[bytes, dict[str, dict[str, int]]]:
    """Merkle root and table counts of the destroyed key-store rows (section 4 leaves)."""
    tree = MerkleTree()
    key = dict(zip(KEY_COLUMNS, d.key_row, strict=True))
    tree.append(encode_row("erasure_data_keys", [key["name"]], list(key.items())))
    tables = {
        "erasure_data_keys": {"rows": 1, "bytes": sum(_size(v) for v in d.key_row)},
        "erasure_thread_keys": {"rows": 0, "bytes": 0},
    }
    for row in d.thread_rows:
        cols = dict(zip(THREAD_COLUMNS, row, strict=True))
        tree.append(encode_row("erasure_thread_keys", [cols["thread_id"]], list(cols.items())))
        tables["erasure_thread_keys"]["rows"] += 1
        tables["erasure_thread_keys"]["bytes"] += sum(_size(v) for v in row)
    tables["erasure_namespace_keys"] = {"rows": 0, "bytes": 0}
    for row in d.namespace_rows:
        cols = dict(zip(NAMESPACE_COLUMNS, row, strict=True))
        tree.append(encode_row("erasure_namespace_keys", [cols["namespace"]], list(cols.items())))
        tables["erasure_namespace_keys"]["rows"] += 1
        tables["erasure_namespace_keys"]["bytes"] += sum(_size(v) for v in row)
    return tree.root(), tables


def _out_of_scope(keys: KeyStore, cache: float) -> list[dict[str, str]]:
    retention = keys.backup_retention or "not stated"
    notes = dict(OUT_OF_SCOPE)
    notes["backups"] = (
        "Backups and copies of the data database taken before this shred still hold the "
        "rows, as ciphertext: they cannot be decrypted provided no copy of the data key "
        "survives. Copies of the key store taken before this point hold it: they must have "
        f"expired (the key store's configured backup retention: {retention})."
    )
    notes["other_copies"] = (
        "Another process that unwrapped the key before the shred keeps it in memory for "
        f"up to its key cache time (Encryption key_cache_seconds; this saver's: {cache:g} "
        "s) and can decrypt until then; exports and copies made in plaintext (e.g. by "
        "the application) are outside the named scope. Checkpoint metadata is stored in "
        "plaintext (LangGraph filters on it)."
    )
    return [{"id": i, "note": notes[i]} for i, _ in OUT_OF_SCOPE] + [
        {
            "id": "key_store_backups",
            "note": "Backups, replicas and point-in-time recovery of the key store itself "
            f"(retention: {retention}) can bring the key back until they expire.",
        }
    ]


def _scope(
    keys: KeyStore, subject: str, key_scope: str, d: DestroyedKey, commitment: str, scrub: str
) -> dict[str, Any]:
    return {
        "subject": subject,
        "key_scope": key_scope,
        "threads": sorted(d.threads),
        "key_commitment": commitment,
        "checkpoint_namespaces": "all",
        "store_namespaces": [str(r[0]).split(".") for r in d.namespace_rows],
        "tombstone": False,
        "key_store": {
            "kind": keys.kind,
            "scrub": scrub,
            "backup_retention": keys.backup_retention,
        },
    }


def _statement(
    eraser: Eraser,
    keys: KeyStore,
    saver: str,
    *,
    subject: str,
    key_scope: str,
    receipt_id: str,
    issued_at: str,
    d: DestroyedKey,
    post: dict[str, dict[str, int]],
    checks: list[dict[str, str]],
    residue: list[dict[str, Any]],
    scrub: str,
    cache: float,
) -> dict[str, Any]:
    root, tables = _measure(d)
    prefix = "langgraph-shred:" if key_scope == "subject" else "langgraph-shred-thread:"
    st = build_statement(
        receipt_id=receipt_id,
        issued_at=issued_at,
        thread_id=None,
        store_namespaces=[],
        tombstone=False,
        backend={
            "kind": f"key-store-{keys.kind}",
            "saver": saver,
            "store": "EncryptedStore" if d.namespace_rows else None,
            "database": keys.label,
            "versions": {"langgraph-erasure-receipts": __version__},
        },
        pre_digest=root.hex(),
        pre_tables=tables,
        post_digest=EMPTY_ROOT.hex(),
        post_tables=post,
        methods={"key_store": "atomic-transaction"},
        checks=checks,
        residue=residue,
        generator_version=__version__,
        kind="shred",
        scope=_scope(keys, subject, key_scope, d, key_commitment(d.key_id), scrub),
        subject_name=prefix + subject,
    )
    st["predicate"]["out_of_scope"] = _out_of_scope(keys, cache)
    return st


def _check(st: dict[str, Any], *, residue: bool) -> None:
    from ..verify import check_residue, check_semantics

    try:
        check_semantics(validate_statement(json.loads(json.dumps(st))))
        if residue:
            check_residue(st["predicate"])
    except (MalformedReceiptError, ReceiptSemanticsError) as exc:
        raise ErasureIncompleteError(
            f"the shred receipt would not verify ({exc.reason}: {exc.message})"
        ) from None


PLAINTEXT_SHOWN = 5
"""Plaintext rows named in a shred's refusal (then ``+N more``)."""


def _refuse_plaintext(eraser: Eraser, name: str, threads: list[str], namespaces: list[str]) -> None:
    """Before the key is destroyed: refuse a scope with plaintext rows in the data
    database (a shred would claim rows unreadable that are not)."""
    found = eraser.db.run(plaintext_rows, threads, namespaces)
    if not found:
        return
    shown = "; ".join(found[:PLAINTEXT_SHOWN])
    more = f" (+{len(found) - PLAINTEXT_SHOWN} more)" if len(found) > PLAINTEXT_SHOWN else ""
    raise PlaintextRowError(
        f"shred of key {name!r} refused, nothing was destroyed: {len(found)} row(s) of its "
        f"scope are stored in plaintext in the data database and would stay readable: "
        f"{shown}{more}; seal them (receipt encrypt; store items through "
        "Encryption.wrap_store) or erase them first"
    )


def key_to_shred(encryption: Encryption, *, subject: str | None, thread_id: str | None) -> str:
    """The key store name of the key a shred destroys; refuses what it cannot shred."""
    keys = encryption.keys
    if subject is not None:
        if not isinstance(subject, str) or not subject:
            raise ConfigurationError(f"subject must be a non-empty string, not {subject!r}")
        name = encryption.key_name(subject=subject)
        if not keys.has_key(name):
            raise NoDataKeyError(
                f"no data key for subject {subject!r} in the key store (never written "
                "with encryption, or already shredded); nothing was destroyed"
            )
        return name
    if not isinstance(thread_id, str) or not thread_id:
        raise ConfigurationError(f"thread_id must be a non-empty string, not {thread_id!r}")
    bound = keys.name_of_thread(thread_id)
    own = encryption.key_name(thread_id=thread_id)
    if bound is not None and bound != own:
        raise ConfigurationError(
            f"thread {thread_id!r} is encrypted under {bound.split(':', 1)[0]} key "
            f"{bound.split(':', 1)[1]!r}: shred_subject shreds it (with the subject's other "
            "threads); erase_thread deletes it alone"
        )
    if not keys.has_key(own):
        raise NoDataKeyError(
            f"no data key of thread {thread_id!r} in the key store (never written with "
            "encryption, or already shredded); nothing was destroyed"
        )
    return own


def shred(
    eraser: Eraser,
    encryption: Encryption,
    saver: str,
    name: str,
    probe: Probe,
) -> Receipt:
    """Destroy key ``name`` (see the module docstring) and return its signed receipt."""
    keys = encryption.keys
    key_scope, _, subject = name.partition(":")
    receipt_id = str(uuid.uuid4())
    issued_at = format_time(eraser.now())
    zero = {t: {"rows": 0, "bytes": 0} for t in KEY_TABLES}
    # Preflight: the key unwraps with this key-encryption key (the key store and the KEK
    # are the pair the application uses: CiphertextRejectedError otherwise), and the
    # statement this shred will sign passes the verifier's rules, with the rows as they
    # are now (read without deleting).
    keys.unwrap_check(name)
    threads = keys.threads_of(name)
    _refuse_plaintext(eraser, name, list(threads), list(keys.namespaces_of(name)))
    draft = DestroyedKey(
        name=name, key_id=b"\x00" * 16, threads=threads, wrapped_sha256="",
        key_row=(name, b"\x00" * 16, b"\x00", keys.wrapper.key_id, issued_at),
        thread_rows=[(t, name) for t in threads],
        namespace_rows=[(n, name) for n in keys.namespaces_of(name)],
    )  # fmt: skip
    _check(
        _statement(eraser, keys, saver, subject=subject, key_scope=key_scope,
                   receipt_id=receipt_id, issued_at=issued_at, d=draft, post=zero,
                   checks=[{"name": "preflight", "result": "pass"}], residue=[],
                   scrub="applied", cache=encryption.key_cache_seconds),
        residue=False,
    )  # fmt: skip

    destroyed = keys.destroy(name)
    if destroyed is None:
        raise ConfigurationError(f"key {name!r} vanished before it could be destroyed")
    encryption.forget(destroyed.key_id)

    left = {
        "erasure_data_keys": 1 if keys.has_key(name) else 0,
        "erasure_thread_keys": len(keys.threads_of(name)),
        "erasure_namespace_keys": len(keys.namespaces_of(name)),
    }
    post = {k: {"rows": n, "bytes": n} for k, n in left.items()}
    outcomes = {t: probe(t) for t in destroyed.threads}
    readable = sorted(t for t, o in outcomes.items() if o == "readable")
    refused = sum(1 for o in outcomes.values() if o == "refused")
    checks = [
        {"name": "key_store_rows_zero_after_commit",
         "result": "pass" if destroyed.gone and not any(left.values()) else "fail",
         "detail": "no erasure_data_keys row of the key (by name and by key id), no "
                   "erasure_thread_keys or erasure_namespace_keys row bound to it"},
        {"name": "api_reads_refused",
         "result": "fail" if readable else "pass",
         "detail": f"{len(outcomes)} thread(s) read through the saver's API: {refused} "
                   f"refused (KeyShreddedError), {len(outcomes) - refused - len(readable)} "
                   f"without rows, {len(readable)} readable"},
    ]  # fmt: skip
    scan = [r for r in destroyed.residue if r["action"] == "key_store.residue_scan"]
    scrub = scan[0]["status"] if scan else "skipped"
    st = _statement(
        eraser, keys, saver, subject=subject, key_scope=key_scope, receipt_id=receipt_id,
        issued_at=issued_at, d=destroyed, post=post, checks=checks,
        residue=destroyed.residue, scrub=scrub, cache=encryption.key_cache_seconds,
    )  # fmt: skip
    if readable or any(left.values()):
        raise ErasureIncompleteError(
            f"the key {name!r} was destroyed but the shred did not verify: "
            + (f"threads still readable: {', '.join(readable)}" if readable else "rows remain")
        )
    _check(st, residue=True)
    try:
        return sign_and_archive(st, eraser.signer, eraser.archive)
    except Exception as exc:
        raise ErasureIncompleteError(
            f"the key {name!r} is destroyed (its rows no longer decrypt), but the shred "
            f"receipt could not be signed or archived: {exc}"
        ) from exc
