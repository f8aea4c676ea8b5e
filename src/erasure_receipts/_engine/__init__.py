"""The erasure engine: the protocol written once, for every backend and operation.

* :mod:`.types` - the request (scope), the backend seam, phase one's outcome;
* :mod:`.measure` - parts into one RFC 9162 tree;
* :mod:`.protocol` - measure, delete, check, tombstone, journal, commit, re-measure;
* :mod:`.statement` - the statement's members, preflight, self check, signing;
* :mod:`.needles`, :mod:`.codec` - needle forms; the journal entry format;
* :mod:`.seams` - the typed seams a saver composes an :class:`Eraser` from;
* :mod:`.eraser` - every operation's flow over those seams (erase, recover, preview).

The names below were importable from ``erasure_receipts._engine`` when it was one module
and stay so.
"""

from __future__ import annotations

from .._clock import format_time, fresh_after
from .._parts import LeafSink, Part, TableCount, iter_pages
from ..errors import NeedlesFoundError
from .codec import redact_entry, request_from_journal, request_to_journal
from .eraser import Eraser
from .measure import export_leaves, measure_parts, measure_rows
from .needles import NEEDLE_FORMS, named_needle_forms, needle_forms
from .protocol import PASS_THROUGH, GuardedBackend, erase_rows, resume_rows
from .seams import Database, Journal, Reader
from .statement import final_statement, preflight, sign_and_archive
from .types import (
    RECEIPT_HEADROOM,
    Check,
    ErasureBackend,
    ErasureRequest,
    Measurement,
    RowsOutcome,
)

__all__ = [
    "NEEDLE_FORMS",
    "PASS_THROUGH",
    "RECEIPT_HEADROOM",
    "Check",
    "Database",
    "Eraser",
    "ErasureBackend",
    "ErasureRequest",
    "GuardedBackend",
    "Journal",
    "LeafSink",
    "Measurement",
    "NeedlesFoundError",
    "Part",
    "Reader",
    "RowsOutcome",
    "TableCount",
    "erase_rows",
    "export_leaves",
    "final_statement",
    "format_time",
    "fresh_after",
    "iter_pages",
    "measure_parts",
    "measure_rows",
    "named_needle_forms",
    "needle_forms",
    "preflight",
    "redact_entry",
    "request_from_journal",
    "request_to_journal",
    "resume_rows",
    "sign_and_archive",
]
