"""The SQLite attesting savers (``AttestingSqliteSaver``, ``AsyncAttestingSqliteSaver``),
also importable from the package root; they live in :mod:`erasure_receipts._savers.sqlite`."""

from __future__ import annotations

from ._engine.eraser import PendingErasure, ThreadDigest, check_archive
from ._savers.sqlite import AsyncAttestingSqliteSaver, AttestingSqliteSaver

__all__ = [
    "AsyncAttestingSqliteSaver",
    "AttestingSqliteSaver",
    "PendingErasure",
    "ThreadDigest",
    "check_archive",
]
