"""Erasure targets in the engine: a request's targets become parts of its backend (one
table ``target:<name>`` each, per unit), are checked before anything is deleted, are
searched for needles, and - when swept after the commit - are swept by
:func:`sweep_deferred` once the scope's own rows are re-measured empty.
"""

from __future__ import annotations

from typing import Any

from .._backends.targets import guarded, label
from .._parts import Part
from ..errors import ConfigurationError, ErasureIncompleteError
from ..targets import describe, unsearchable
from .types import Check, ErasureBackend, ErasureRequest

__all__ = [
    "applies",
    "check_needle_targets",
    "dependent_note",
    "target_members",
    "target_units",
    "target_values",
]

APPLY_KINDS = ("thread", "subject")
"""Kinds whose erasures erase targets: the whole thread is gone. A history erasure keeps
the thread (its latest checkpoint stays resumable): its targets are kept, and said so."""


def applies(request: ErasureRequest) -> list[Any]:
    """The request's targets that apply to its kind (a subject-keyed target only to a
    subject erasure)."""
    if request.kind not in APPLY_KINDS:
        return []
    return [t for t in request.targets if t.key == "thread" or request.kind == "subject"]


def target_members(request: ErasureRequest) -> list[dict[str, Any]]:
    """The receipt's ``targets`` member (sorted by name), or [] if none applies."""
    out = []
    for t in applies(request):
        entry = describe(t)
        if guarded(request.tombstone, t):  # its table refuses late inserts too
            entry["tombstone"] = True
        out.append(entry)
    return sorted(out, key=lambda d: str(d["name"]))


def target_units(request: ErasureRequest) -> list[str]:
    """Units of a subject receipt that targets add: one per subject-keyed target."""
    if request.kind != "subject":
        return []
    return [label(t) for t in applies(request) if t.key == "subject"]


def kept_check(request: ErasureRequest) -> Check | None:
    """A history erasure's note that its targets were not touched."""
    if request.kind != "history" or not request.targets:
        return None
    names = ", ".join(sorted(label(t) for t in request.targets))
    return {
        "name": "targets_kept", "result": "pass",
        "detail": f"a history erasure keeps the thread: the rows of {names} are kept "
                  "(erased only with the whole thread)",
    }  # fmt: skip


def dependent_note(request: ErasureRequest) -> str:
    """For an error refusing the erasure: the dependent targets it left untouched."""
    deps = sorted(label(t) for t in request.targets if getattr(t, "after", None))
    if not deps:
        return ""
    return f"; the rows of dependent target(s) {', '.join(deps)} are untouched"


def check_needle_targets(request: ErasureRequest) -> None:
    """Before anything is deleted: with needles searched database-wide, every target of
    the request must be searchable (RECEIPT_SPEC.md 9.13) - one that is not would be
    outside the receipt's ``searched``. ``ConfigurationError`` naming it otherwise."""
    if not request.needles or request.needle_scope != "database":
        return
    for t in applies(request):
        why = unsearchable(t)
        if why is not None:
            raise ConfigurationError(
                f"needles= refused: target {t.name!r} cannot be searched for them ({why}); "
                "erase without needles=, or make the target searchable"
            )


def target_values(request: ErasureRequest, target: Any) -> list[tuple[str, str]]:
    """``(key value, unit)`` of a target in a request."""
    if target.key == "subject":
        return [(request.thread_id, label(target))]
    if request.kind == "subject":
        return [(t, f"thread:{t}") for t in request.threads]
    return [(request.thread_id, "")]


def _deferred(part: Part) -> bool:
    return bool(getattr(part, "deferred", False))


def sweep_deferred(backend: ErasureBackend, label_of: str) -> list[Check]:
    """After the commit, the scope's own rows re-measured empty: sweep every part that
    waits for it (another database, item targets); one check each. Raises
    ``ErasureIncompleteError`` (the erasure committed; recovery sweeps again)."""
    parts = [p for p in backend.parts() if _deferred(p)]
    if not parts:
        return []
    own = [p for p in backend.parts() if not _deferred(p) and p.role != "kept"]
    with backend.read_snapshot():
        left = {p.table: n for p in own if (n := p.remaining())}
    if left:
        raise ErasureIncompleteError(
            f"rows of {label_of} present after commit: {left}; the targets swept after "
            "the commit were not swept",
            remaining=left,
        )
    checks: list[Check] = []
    for p in sorted(parts, key=lambda p: (p.table, p.unit)):
        try:
            n, root = p.sweep()  # type: ignore[attr-defined]
        except Exception as exc:
            raise ErasureIncompleteError(
                f"the erasure of {label_of} committed, but sweeping {p.table} failed "
                f"({type(exc).__name__}: {exc}); the erasure journal keeps the measurement: "
                "fix the cause and call recover_receipts(), which sweeps it again"
            ) from None
        unit = f" ({p.unit})" if p.unit else ""
        checks.append(
            {"name": "target_swept_after_commit", "result": "pass",
             "detail": f"{p.table}{unit}: {n} row(s) deleted after the commit"
                       + (f", sha256 of their tree {root.hex()}" if n else
                          " (none left to delete)")}
        )  # fmt: skip
    return checks
