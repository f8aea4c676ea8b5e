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
