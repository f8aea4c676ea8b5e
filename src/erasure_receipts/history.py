"""Deprecated module: history erasure, attested ``prune`` and retention sweeps are the
operation :mod:`erasure_receipts._ops.history` over the saver's eraser; time in
checkpoint ids is :mod:`erasure_receipts._clock`. These names stay importable here."""

from __future__ import annotations

import warnings

from ._clock import checkpoint_time, uuid6_floor
from ._ops.history import MAX_FAILURES_LISTED, PAGE, SweepEvent, SweepResult
from ._surface import AsyncErasureMethods, ErasureMethods
from .errors import DeltaChannelError

HistoryMethods = ErasureMethods
AsyncHistoryMethods = AsyncErasureMethods

__all__ = [
    "MAX_FAILURES_LISTED",
    "PAGE",
    "AsyncHistoryMethods",
    "DeltaChannelError",
    "HistoryMethods",
    "SweepEvent",
    "SweepResult",
    "checkpoint_time",
    "uuid6_floor",
]

warnings.warn(
    "erasure_receipts.history is deprecated: import from erasure_receipts (the package root)",
    DeprecationWarning,
    stacklevel=2,
)
