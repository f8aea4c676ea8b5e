"""The erasure journal's entries: what recovery needs of a request, sealed in privacy
mode, and redacted once the statement is journaled.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._backends.keep_latest import Removed
from ..errors import (
    ErasureIncompleteError,
)
from .types import ErasureRequest, _committed

__all__ = ["redact_entry", "request_from_journal", "request_to_journal"]


def redact_entry(entry_json: str) -> tuple[str, str] | None:
    """Privacy mode: the journal entry with its raw ids replaced by the commitments its
    statement uses (a sealed entry: without its sealed request), and the committed scope
    id - or None outside privacy mode. Only for an entry whose statement is journaled:
    recovery then just signs that statement."""
    entry = json.loads(entry_json)
    scope = (entry.get("members") or {}).get("scope") or {}
    if "privacy" not in scope:
        return None
    if "sealed" in entry:  # no raw id in clear; the sealed request is needed no more
        del entry["sealed"]
        return str(entry["thread_id"]), json.dumps(entry, sort_keys=True)
    committed = str(scope.get("subject") or scope.get("thread_id"))
    entry.update(
        thread_id=committed,
        threads=list(scope.get("threads", [])),
        store_namespaces=scope["store_namespaces"],
    )
    return committed, json.dumps(entry, sort_keys=True)


def _withhold_paths(residue: list[dict[str, Any]], database: str) -> list[dict[str, Any]]:
    """Privacy mode at recovery (the commitment key is not at hand): residue details
    that name a file are withheld rather than committed."""
    out = []
    for r in residue:
        detail = {
            k: "withheld (privacy mode)"
            if k == "database" or (isinstance(v, str) and database and database in v)
            else v
            for k, v in r["detail"].items()
        }
        out.append({**r, "detail": detail})
    return out


def request_to_journal(request: ErasureRequest) -> dict[str, Any]:
    """The parts of a request recovery needs (never its needles or commitment key)."""
    return {
        "thread_id": request.thread_id,
        "store_namespaces": [list(ns) for ns in request.store_namespaces],
        "tombstone": request.tombstone,
        "kind": request.kind,
        "threads": list(request.threads),
        "keep": request.keep,
        "kept": [list(k) for k in request.kept],
        **({"removed": request.removed.to_json()} if request.removed is not None else {}),
        **({"replay_of": request.replay_of} if request.replay_of is not None else {}),
        **({"targets": [_target_entry(t) for t in request.targets]} if request.targets else {}),
    }


def _target_entry(target: Any) -> dict[str, Any]:
    """What recovery needs of a target: its receipt entry (the saver's target of that
    name is used again; a table target can also be rebuilt from it, a DSN without its
    password)."""
    from ..targets import describe

    return describe(target)


class JournaledTarget:
    """A target recovery knows by its journal entry only (not a table): the saver's
    target of the same name takes its place (``Eraser``), else recovery says so."""

    def __init__(self, entry: Mapping[str, Any]) -> None:
        self.entry = dict(entry)
        self.name = str(entry["name"])
        self.key = str(entry["key"])
        self.after = entry.get("after")

    def describe(self) -> dict[str, Any]:
        """The journaled receipt entry."""
        return dict(self.entry)

    def items(self, key_value: str) -> Mapping[str, bytes]:
        """Refused: the target itself is needed."""
        raise ErasureIncompleteError(
            f"this journal entry covers target {self.name!r} ({self.entry.get('type')}); "
            "recover with a saver given the same targets="
        )

    def delete(self, key_value: str, item_keys: Any) -> None:
        """Refused (see :meth:`items`)."""
        self.items(key_value)


def _target_from_journal(entry: Mapping[str, Any]) -> Any:
    from ..targets import SqlTarget

    if entry.get("type") == "sql":
        return SqlTarget(
            str(entry["table"]), str(entry["key_column"]), key=str(entry["key"]),
            database=entry.get("database"), after=entry.get("after"), name=str(entry["name"]),
        )  # fmt: skip
    return JournaledTarget(entry)


def _sealed_request(request: ErasureRequest, receipt_id: str) -> dict[str, Any]:
    """Privacy mode: the journal entry's request members as commitments (as the
    statement names them), and the raw request recovery needs, sealed under a key
    derived from the commitment key (bound to the receipt id)."""
    key = request.privacy
    raw = json.dumps(request_to_journal(request), sort_keys=True, ensure_ascii=False)
    return {
        "thread_id": request.journal_id,
        "threads": sorted(_committed(request, "thread", t) for t in request.threads),
        "store_namespaces": [
            [_committed(request, "store_namespace", ".".join(ns))]
            for ns in request.store_namespaces
        ],
        "sealed": key.seal(raw.encode("utf-8", "surrogatepass"), receipt_id.encode("ascii")),
    }


def request_from_journal(
    entry_json: str, receipt_id: str = "", keys: Mapping[str, Any] | None = None
) -> ErasureRequest:
    """The request a journal entry recorded, for recovery (``allow_empty`` is not kept:
    the rows are already deleted, so it no longer matters; entries from before kinds
    existed are thread erasures). A privacy-mode entry's request is sealed: it opens
    with its commitment key from ``keys`` (key id -> ``CommitmentKey``)."""
    entry = json.loads(entry_json)
    key = None
    if "sealed" in entry:
        key = (keys or {}).get(str(entry["sealed"].get("key_id")))
        if key is None:
            raise ErasureIncompleteError(
                f"privacy-mode erasure of {entry.get('kind', 'thread')} "
                f"{entry.get('thread_id')}: its journal entry is sealed with commitment key "
                f"{str(entry['sealed'].get('key_id'))[:16]}...; recover with that key "
                "(recover_receipts(commitment_key=K), receipt recover --commitment-key K)"
            )
        entry = json.loads(key.unseal(entry["sealed"], receipt_id.encode("ascii")))
    return ErasureRequest(
        str(entry["thread_id"]),
        tuple(tuple(ns) for ns in entry["store_namespaces"]),
        bool(entry["tombstone"]),
        kind=str(entry.get("kind", "thread")),
        threads=tuple(entry.get("threads", ())),
        keep=str(entry.get("keep", "none")),
        kept=tuple((str(a), str(b)) for a, b in entry.get("kept", ())),
        privacy=key,  # so recovery's errors name commitments too
        # Entries from before it was journaled: the rule over ``kept`` (as then).
        removed=Removed.from_json(entry["removed"]) if "removed" in entry else None,
        replay_of=str(entry["replay_of"]) if entry.get("replay_of") else None,
        targets=tuple(_target_from_journal(t) for t in entry.get("targets", ())),
    )
