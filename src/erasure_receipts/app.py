"""The ``receipt`` typer app, for imports of its former location: the command line is
the private package ``erasure_receipts._cli`` (``app`` in ``_cli.commands``, one module
per command group). Any other name of the former module is looked up there."""

from __future__ import annotations

from typing import Any

from ._cli._app import _Group as _Group
from ._cli.commands import app

__all__ = ["app"]

_MODULES = ("_app", "_base", "keys", "inspect", "erase", "retention", "log", "verify_fast")


def __getattr__(name: str) -> Any:
    import importlib

    for mod in _MODULES:
        found = getattr(importlib.import_module(f"._cli.{mod}", __package__), name, _MISSING)
        if found is not _MISSING:
            return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_MISSING = object()
