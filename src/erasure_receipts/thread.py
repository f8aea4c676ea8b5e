"""Deprecated module: the savers' public erasure methods are written once in
:mod:`erasure_receipts._surface` (``ErasureMethods``, ``AsyncErasureMethods``). The old
mixin names stay importable from here, as aliases."""

from __future__ import annotations

import warnings

from ._surface import AsyncErasureMethods, ErasureMethods

ThreadMethods = ErasureMethods
AsyncThreadMethods = AsyncErasureMethods

__all__ = ["AsyncThreadMethods", "ThreadMethods"]

warnings.warn(
    "erasure_receipts.thread is deprecated: import from erasure_receipts (the package root)",
    DeprecationWarning,
    stacklevel=2,
)
