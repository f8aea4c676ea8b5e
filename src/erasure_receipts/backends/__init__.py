"""Deprecated import path: the backends are the private package
``erasure_receipts._backends``.

``erasure_receipts.backends.sqlite`` (and every other submodule) is the very same
module object as ``erasure_receipts._backends.sqlite``, imported on first use (the
PostgreSQL one needs the ``postgres`` extra), so old imports keep working. (Patching a
function through an old path patches the module it lives in, not its callers' copies.)
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

_OLD, _NEW = __name__ + ".", "erasure_receipts._backends."


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``erasure_receipts.backends.X`` to the module ``..._backends.X``."""

    def __init__(self) -> None:
        self._specs: dict[str, Any] = {}

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(_OLD):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(_NEW + spec.name[len(_OLD) :])
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the module is the private one, already imported); the import
        system gave it this alias's spec: give it back its own (``reload`` works)."""
        original = self._specs.pop(getattr(module.__spec__, "name", ""), None)
        if original is not None:
            module.__spec__ = original


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.insert(0, _Alias())


def __getattr__(name: str) -> Any:
    try:
        return importlib.import_module(_NEW + name)
    except ModuleNotFoundError as exc:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from exc


warnings.warn(
    "erasure_receipts.backends is deprecated: it is the private erasure_receipts._backends",
    DeprecationWarning,
    stacklevel=2,
)
