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
