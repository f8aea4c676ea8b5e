"""The ``receipt`` typer app with every command group registered, in the order
``receipt --help`` lists them."""

from __future__ import annotations

from . import (  # noqa: F401  (they register commands)
    defer,
    erase,
    inspect,
    keys,
    log,
    redact,
    replay,
    report,
    retention,
    shred,
    witness,
)
from ._app import app

__all__ = ["app"]

_ORDER = (
    "verify", "keygen", "show", "export", "digest", "erase", "recover", "authorize", "prove",
    "index_cmd", "locate_cmd", "keygen_commitment", "open_receipt", "retention", "replay",
    "redact", "report_cmd",
    "defer", "deferrals", "release_deferral",
    "shred", "encrypt",
)  # fmt: skip
"""Each group module registers its own commands; the help page keeps one fixed order."""

app.registered_commands.sort(key=lambda c: _ORDER.index(getattr(c.callback, "__name__", "")))
app.registered_groups.sort(key=lambda g: ("trust", "log", "witness").index(g.name or ""))
