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

_REMOVED = frozenset({"HistoryFlows"})


def __getattr__(name: str) -> object:
    if name in _REMOVED:
        raise AttributeError(
            f"erasure_receipts.history.{name} was removed: savers are composed now - an "
            "erasure_receipts._engine.eraser.Eraser over a Database, a Journal and a Reader "
            "(erasure_receipts._engine.seams) - instead of mixins with hooks"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
