"""Deprecated module: erasure per data subject is the operation
:mod:`erasure_receipts._ops.subject` over the saver's eraser. These names stay
importable here."""

from __future__ import annotations

import warnings

from ._ops.subject import MAX_THREADS, Location, SubjectDigest, named_forms
from ._surface import AsyncErasureMethods, ErasureMethods

SubjectMethods = ErasureMethods
AsyncSubjectMethods = AsyncErasureMethods

__all__ = [
    "MAX_THREADS",
    "AsyncSubjectMethods",
    "Location",
    "SubjectDigest",
    "SubjectMethods",
    "named_forms",
]

warnings.warn(
    "erasure_receipts.subject is deprecated: import from erasure_receipts (the package root)",
    DeprecationWarning,
    stacklevel=2,
)

_REMOVED = frozenset({"SubjectFlows"})


def __getattr__(name: str) -> object:
    if name in _REMOVED:
        raise AttributeError(
            f"erasure_receipts.subject.{name} was removed: savers are composed now - an "
            "erasure_receipts._engine.eraser.Eraser over a Database, a Journal and a Reader "
            "(erasure_receipts._engine.seams) - instead of mixins with hooks"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
