"""Deprecated import path: leases are the private module ``erasure_receipts._lease``
(this name is the very same module object)."""

from __future__ import annotations

import sys
import warnings

from . import _lease

sys.modules[__name__] = _lease

warnings.warn(
    "erasure_receipts.lease is deprecated: it is the private erasure_receipts._lease",
    DeprecationWarning,
    stacklevel=2,
)
