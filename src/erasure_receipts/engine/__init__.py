"""Deprecated import path: the engine is the private package ``erasure_receipts._engine``.

``erasure_receipts.engine`` and its submodules (``erasure_receipts.engine.eraser``, ...)
are the very same module objects, so old imports keep working unchanged (patching a
function through an old path patches the module it lives in, not its callers' copies).
"""

from __future__ import annotations

import importlib
import sys
import warnings

from .._engine import *  # noqa: F403
from .._engine import __all__ as __all__

_SUBMODULES = (
    "codec", "eraser", "measure", "needles", "protocol", "readback", "seams", "statement",
    "types",
)  # fmt: skip
for _name in _SUBMODULES:
    _module = importlib.import_module(f"erasure_receipts._engine.{_name}")
    sys.modules[f"{__name__}.{_name}"] = _module
    globals()[_name] = _module

warnings.warn(
    "erasure_receipts.engine is deprecated: it is the private erasure_receipts._engine",
    DeprecationWarning,
    stacklevel=2,
)
