"""PostgreSQL databases for the ``receipt`` commands, for imports of its former location:
it is ``erasure_receipts._cli.postgres`` now."""

from __future__ import annotations

from ._cli.postgres import EXTRA, LANGGRAPH_TABLES, Probe, is_dsn, open_saver, probe

__all__ = ["EXTRA", "LANGGRAPH_TABLES", "Probe", "is_dsn", "open_saver", "probe"]
