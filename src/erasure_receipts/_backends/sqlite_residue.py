"""Deprecated path: the SQLite residue scan lives in
:mod:`erasure_receipts._backends.sqlite.residue`; this module re-exports its names (every
other name of that module is reachable here as an attribute too)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .sqlite import residue as _residue
from .sqlite.residue import (
    WINDOW,
    Needles,
    bounded_checkpoint,
    clear_journal,
    dead_space,
    residue_scan,
)

__all__ = [
    "WINDOW",
    "Needles",
    "bounded_checkpoint",
    "clear_journal",
    "dead_space",
    "residue_scan",
]


if not TYPE_CHECKING:  # typed callers see only the names above

    def __getattr__(name: str) -> Any:
        """Any other name of :mod:`erasure_receipts._backends.sqlite.residue`."""
        return getattr(_residue, name)
