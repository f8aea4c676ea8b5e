"""Writing trust files: ``TrustFile`` and ``window_text`` live in
:mod:`erasure_receipts.trust` (the one trust module) and are re-exported here."""

from __future__ import annotations

from .trust import TrustFile, window_text
from .trust import _instant as _instant

__all__ = ["TrustFile", "window_text"]
