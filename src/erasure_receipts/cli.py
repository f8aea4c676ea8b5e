"""``receipt`` console entry point: ``main`` (the command line is the private package
``erasure_receipts._cli``). ``receipt verify`` never imports typer, LangGraph or a
database driver; every other command is loaded only when needed.

Exit codes: 0 all verified, 1 any receipt invalid or untrusted, 2 usage error,
3 an input could not be read, or stdout/stderr was closed early (a broken pipe).
"""

from __future__ import annotations

from typing import Any

from ._batch import BATCH as BATCH
from ._batch import PARALLEL_MIN as PARALLEL_MIN
from ._batch import _expand as _expand
from ._batch import _read_arg as _read_arg
from ._batch import default_jobs as default_jobs
from ._batch import fork_map as fork_map
from ._cli import main
from ._cli.verify_fast import EXIT_INVALID, EXIT_IO, EXIT_OK, EXIT_USAGE, verify_main
from .verify import _display as _display

__all__ = ["EXIT_INVALID", "EXIT_IO", "EXIT_OK", "EXIT_USAGE", "main", "verify_main"]


def __getattr__(name: str) -> Any:
    """The rest of the former module, found where it lives now (without importing it
    on every start)."""
    if name == "LogCheck":
        from .log import LogCheck

        return LogCheck
    from ._cli import verify_fast

    try:
        return getattr(verify_fast, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
