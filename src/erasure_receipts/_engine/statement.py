"""The statement of an erasure: its kind-specific members, the checks before
anything is deleted (preflight) and before commit (self check), and signing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .._parts import Part, TableCount
from ..canonical import MAX_INPUT_BYTES, canonicalize_ascii_keys
from ..digest import EMPTY_ROOT
from ..errors import (
    ConfigurationError,
    ErasureIncompleteError,
    MalformedReceiptError,
    ReceiptSemanticsError,
)
from ..receipt import Receipt, build_statement, validate_statement
from ..signing import Signer
from .needles import NEEDLE_FORMS
from .targets import check_needle_targets, target_members, target_units
from .types import (
    RECEIPT_HEADROOM,
    ErasureBackend,
    ErasureRequest,
    Measurement,
    RowsOutcome,
    _committed,
)

if TYPE_CHECKING:
    from ..log import ReceiptLog

__all__ = ["final_statement", "preflight", "sign_and_archive"]


def _self_check(
    backend: ErasureBackend,
    request: ErasureRequest,
    members: Mapping[str, Any],
    root: bytes,
    tables: Mapping[str, TableCount],
    methods: dict[str, str],
    generator_version: str,
    *,
    receipt_id: str,
    issued_at: str,
    checks: Sequence[Mapping[str, str]],
    post: tuple[bytes, Mapping[str, TableCount]] | None = None,
) -> dict[str, Any]:
    """Inside the transaction, before anything commits: the statement this erasure will
    sign, built once, must pass the verifier's own rules (structure and semantics), or
    the erasure is refused - data is never deleted for a receipt that could not verify.
    Returned as the draft :func:`final_statement` completes (post-state, checks,
    residue) after the commit."""
    from ..verify import check_semantics

    post_root, post_tables = EMPTY_ROOT, {k: {"rows": 0, "bytes": 0} for k in tables}
    if post is not None:  # a redaction: the same rows, rewritten
        post_root, post_tables = post[0], {k: v.to_json() for k, v in post[1].items()}
    st = _statement(
        members, request=request, backend=backend, receipt_id=receipt_id,
        issued_at=issued_at, pre_digest=root.hex(),
        pre_tables={k: v.to_json() for k, v in tables.items()},
        post_digest=post_root.hex(), post_tables=post_tables, methods=methods,
        checks=checks, residue=[], generator_version=generator_version,
    )  # fmt: skip
    try:
        check_semantics(validate_statement(json.loads(json.dumps(st))))
    except (MalformedReceiptError, ReceiptSemanticsError) as exc:
        raise ErasureIncompleteError(
            f"the receipt of this erasure would not verify ({exc.reason}: {exc.message})"
        ) from None
    return st


def _kept_checkpoints(
    backend: ErasureBackend, request: ErasureRequest
) -> tuple[tuple[str, str], ...]:
    if request.keep == "none":
        return ()
    return tuple(sorted(backend.kept_checkpoints()))


def _members(
    backend: ErasureBackend,
    request: ErasureRequest,
    m: Measurement,
    kept: tuple[tuple[str, str], ...],
    needles: dict[str, Any] | None,
) -> dict[str, Any]:
    """The kind-specific parts of the statement, fixed while the rows are known."""
    ns = [list(n) for n in request.store_namespaces]
    if request.privacy is not None:
        ns = [[_committed(request, "store_namespace", ".".join(n))] for n in ns]
    scope: dict[str, Any]
    if request.kind == "namespace":  # RECEIPT_SPEC.md 9.7
        scope = {"namespace": ns[0], "store_namespaces": ns, "tombstone": request.tombstone}
        name = "langgraph-store-namespace:" + ".".join(ns[0])
    elif request.kind == "subject":
        subject = _committed(request, "subject", request.thread_id)
        threads = {t: _committed(request, "thread", t) for t in request.threads}
        scope = {
            "subject": subject,
            "threads": sorted(threads.values()),
            "discovery": None if request.discovery is None else {"metadata_key": request.discovery},
            "checkpoint_namespaces": "all", "store_namespaces": ns,
            "tombstone": request.tombstone,
        }  # fmt: skip
        name = f"langgraph-subject:{subject}"
    else:
        tid = _committed(request, "thread", request.thread_id)
        scope = {"thread_id": tid, "checkpoint_namespaces": "all",
                 "store_namespaces": ns, "tombstone": request.tombstone}  # fmt: skip
        if request.kind == "history":
            scope["keep"] = request.keep
        prefix = {
            "history": "langgraph-thread-history:",
            "redaction": "langgraph-thread-redaction:",
        }.get(request.kind, "langgraph-thread:")
        name = prefix + tid  # fmt: skip
    if request.privacy is not None:
        scope["privacy"] = {"mode": "hmac-sha256", "key_id": request.privacy.key_id}
    if request.tombstone and request.kind != "namespace":  # what the triggers enforce
        scope["tombstone_policy"] = backend.tombstone_policy
    if request.kind not in ("namespace", "redaction") and ns:  # 8.1: prefixes tombstoned?
        scope["store_tombstone"] = request.tombstone and backend.store_tombstoned
    out: dict[str, Any] = {"kind": request.kind, "scope": scope, "subject_name": name}
    if request.privacy is not None:
        out["database"] = _committed(request, "database", backend.database)
    if request.kind == "subject":
        rename = {f"thread:{t}": f"thread:{c}" for t, c in threads.items()}
        present = {unit for unit, _, _ in m.units}
        missing = [f"thread:{t}" for t in request.threads if f"thread:{t}" not in present]
        if request.store_namespaces and "store" not in present:
            missing.append("store")  # e.g. the store's tables do not exist (yet): 0 rows
        missing += [u for u in target_units(request) if u not in present]
        m = replace(m, units=[*m.units, *((u, EMPTY_ROOT, {}) for u in missing)])
        units = [
            {"name": rename.get(unit, unit), "digest": {"sha256": root.hex()},
             "leaves": sum(c.rows for c in t.values()),
             "tables": {k: c.to_json() for k, c in t.items()}}
            for unit, root, t in m.units
        ]  # fmt: skip
        out["units"] = sorted(units, key=lambda u: u["name"])
    if request.kind == "history":
        out["kept_state"] = {
            "digest": {"sha256": m.kept_root.hex()},
            "leaves": sum(c.rows for c in m.kept_tables.values()),
            "tables": {k: c.to_json() for k, c in m.kept_tables.items()},
            "checkpoints": [{"checkpoint_ns": a, "checkpoint_id": b} for a, b in kept],
        }
    if needles is not None:
        out["needles"] = needles
    if request.context is not None:
        out["request"] = request.context
    if request.authorization is not None:
        out["authorization"] = request.authorization
    if request.replay_of is not None:
        out["replay_of"] = request.replay_of
    targets = target_members(request)
    if targets:  # 9.13
        out["targets"] = targets
    if request.deferral_of is not None:
        out["deferral_of"] = request.deferral_of
    return out


def preflight(
    backend: ErasureBackend,
    request: ErasureRequest,
    parts: Sequence[Part],
    methods: dict[str, str],
    generator_version: str,
) -> None:
    """Refuse, before deleting anything, an erasure whose receipt could not be written.

    (A thread id over 4,096 characters, a lone surrogate in a namespace, ...: the data
    would be gone and the receipt impossible.) And needles= a target cannot be searched
    for: the receipt would say ``searched`` over data nobody looked at.
    """
    check_needle_targets(request)
    zero = {p.table: {"rows": 0, "bytes": 0} for p in parts}
    units: list[tuple[str, bytes, dict[str, TableCount]]] = [
        (f"thread:{t}", EMPTY_ROOT, {}) for t in request.threads
    ]
    if request.store_namespaces and request.kind == "subject":
        units.append(("store", EMPTY_ROOT, {}))
    units += [(u, EMPTY_ROOT, {}) for u in target_units(request)]
    placeholder = {
        "commitment": "hmac-sha256", "salt": None, "values": ["0" * 64] * len(request.needles),
        "forms": list(NEEDLE_FORMS), "searched": request.needle_scope, "occurrences_after": 0,
    }  # fmt: skip
    kept = tuple(("", "0" * 36) for _ in request.kept)
    members = _members(
        backend, request, Measurement(EMPTY_ROOT, {}, units), kept,
        placeholder if request.needles else None,
    )  # fmt: skip
    if request.kind == "redaction":  # its counts are known in the transaction only
        members["redaction"] = {"checkpoints_before": 0, "checkpoints_after": 0,
                                "replacement": {"sha256": "0" * 64}}  # fmt: skip
    try:
        st = _statement(
            members,
            request=request,
            backend=backend,
            receipt_id="00000000-0000-4000-8000-000000000000",
            issued_at="2000-01-01T00:00:00Z",
            pre_digest=EMPTY_ROOT.hex(),
            pre_tables=zero,
            post_digest=EMPTY_ROOT.hex(),
            post_tables=zero,
            methods=methods,
            checks=[{"name": "preflight", "result": "pass"}],
            residue=[],
            generator_version=generator_version,
        )
        # A valid statement (ASCII member names) has the fast canonical form; what it
        # refuses (a lone surrogate, ...) is what the receipt could not be written with.
        canonicalize_ascii_keys(validate_statement(st))
        size = len(orjson.dumps(st, option=orjson.OPT_INDENT_2))  # the file's layout
    except (MalformedReceiptError, ValueError, TypeError) as exc:
        raise ConfigurationError(f"cannot attest an erasure of this scope: {exc}") from None
    if size + RECEIPT_HEADROOM > MAX_INPUT_BYTES:
        raise ConfigurationError(
            f"cannot attest an erasure of this scope: its receipt (~{size} bytes) would be "
            f"over the {MAX_INPUT_BYTES}-byte limit verifiers enforce"
        )


_EXTRA = (
    "kept_state", "units", "needles", "request", "authorization", "replay_of", "targets",
    "redaction", "deferral_of",
)  # fmt: skip


def _statement(
    members: Mapping[str, Any],
    *,
    request: ErasureRequest,
    backend: ErasureBackend,
    **fields: Any,
) -> dict[str, Any]:
    """Build the statement from the counts and the kind-specific ``members`` (an entry
    journaled before kinds existed has none: a thread receipt without ``kind``)."""
    info = _backend_info(backend)
    if "database" in members:
        info["database"] = members["database"]
    return build_statement(
        thread_id=request.thread_id,
        store_namespaces=request.store_namespaces,
        tombstone=request.tombstone,
        backend=info,
        kind=members.get("kind"),
        scope=members.get("scope"),
        subject_name=members.get("subject_name"),
        extra={k: members[k] for k in _EXTRA if k in members},
        **fields,
    )


def _backend_info(backend: ErasureBackend) -> dict[str, Any]:
    return {
        "kind": backend.kind,
        "saver": backend.saver,
        "store": backend.store,
        "database": backend.database,
        "versions": dict(backend.versions),
    }


def final_statement(
    outcome: RowsOutcome,
    api_checks: Sequence[tuple[str, int, str]],
    *,
    generator_version: str,
) -> dict[str, Any]:
    """Phase two, part one: add the public-API checks and build the statement.

    ``api_checks`` holds ``(name, items_found, detail)``; any non-zero count aborts.
    The statement is journaled before it is signed: Ed25519 is deterministic, so every
    process that signs a journaled statement with the same key produces the same bytes
    (a recovery racing the original erasure can only ever issue the identical receipt).
    """
    found = {name: n for name, n, _ in api_checks if n}
    if found:
        raise ErasureIncompleteError(
            f"public API still returns data for {outcome.request.label}: {found}",
            remaining=found,
        )
    checks = outcome.checks + [
        {"name": name, "result": "pass", "detail": detail} for name, _, detail in api_checks
    ]
    redaction = outcome.request.kind == "redaction"  # the rows stay, rewritten
    if not redaction and outcome.post_digest != EMPTY_ROOT.hex():  # pragma: no cover
        raise ErasureIncompleteError("post-state digest is not the empty root")
    post_tables = {k: v.to_json() for k, v in outcome.post_tables.items()}
    if outcome.draft is not None:  # built and checked in the transaction: complete it
        st = json.loads(json.dumps(outcome.draft))
        predicate = st["predicate"]
        predicate["post_state"] = {
            "digest": {"sha256": outcome.post_digest},
            "leaves": sum(t["rows"] for t in post_tables.values()),
            "tables": post_tables,
        }
        predicate["checks"] = [dict(c) for c in checks]
        predicate["residue"] = [dict(r) for r in outcome.residue]
        return st  # type: ignore[no-any-return]
    return _statement(
        outcome.members,
        request=outcome.request,
        backend=outcome.backend,
        receipt_id=outcome.receipt_id,
        issued_at=outcome.issued_at,
        pre_digest=outcome.pre_digest,
        pre_tables={k: v.to_json() for k, v in outcome.pre_tables.items()},
        post_digest=outcome.post_digest,
        post_tables=post_tables,
        methods=outcome.methods,
        checks=checks,
        residue=outcome.residue,
        generator_version=generator_version,
    )


def sign_and_archive(
    statement: Mapping[str, Any], signer: Signer, archive: Path | ReceiptLog | None
) -> Receipt:
    """Phase two, part two: sign and write ``<archive>/<receipt_id>.json`` durably, or
    append the receipt to a :class:`~erasure_receipts.log.ReceiptLog`.

    Idempotent: if the file already holds this very receipt (another process signed the
    same journaled statement), that is success; anything else there is never replaced.
    A log returns the existing entry for identical bytes and refuses a different receipt
    under the same id.
    """
    receipt = Receipt.sign(statement, signer)
    if archive is None:
        return receipt
    if not isinstance(archive, Path):
        from ..errors import LogConflictError

        try:
            archive.append(receipt)
        except LogConflictError as exc:
            raise ErasureIncompleteError(exc.message) from None
        return receipt
    archive.mkdir(parents=True, exist_ok=True)
    path = archive / f"{receipt.receipt_id}.json"
    try:
        receipt.save(path)
    except FileExistsError:
        if path.read_bytes() != receipt.to_json():
            raise ErasureIncompleteError(
                f"{path} already exists with different content; not overwriting it"
            ) from None
    return receipt
