"""Deprecated module: the saver operations' flows now live in the engine's
:class:`~erasure_receipts._engine.eraser.Eraser`, which a saver holds (composition, no
mixin chain). These names stay importable from here."""

from __future__ import annotations

import warnings

from ._engine.eraser import (
    MAX_ATTEMPTS,
    NamespacesFor,
    PendingErasure,
    ThreadDigest,
    check_archive,
    residue_mode,
)
from ._engine.readback import API_CHECK
from ._engine.seams import ResidueScan
from ._engine.statement import sign_and_archive

__all__ = [
    "API_CHECK",
    "MAX_ATTEMPTS",
    "NamespacesFor",
    "PendingErasure",
    "ResidueScan",
    "ThreadDigest",
    "check_archive",
    "residue_mode",
    "sign_and_archive",
]

warnings.warn(
    "erasure_receipts.attesting is deprecated: import from erasure_receipts (the package root)",
    DeprecationWarning,
    stacklevel=2,
)

_REMOVED = frozenset({"Attesting", "AsyncFlows"})


def __getattr__(name: str) -> object:
    if name in _REMOVED:
        raise AttributeError(
            f"erasure_receipts.attesting.{name} was removed: savers are composed now - an "
            "erasure_receipts._engine.eraser.Eraser over a Database, a Journal and a Reader "
            "(erasure_receipts._engine.seams) - instead of mixins with hooks"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
