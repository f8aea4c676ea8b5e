"""Every public name the erasure side's modules exported (``__all__``) before the engine,
savers and backends moved to private packages is importable from the same path, and
is the very object the new module holds (deprecated paths are aliases, not copies).

The snapshot below is the ``__all__`` of each module as it was; the mixin classes the
composition replaced (``Attesting``, ``AsyncFlows``, ``HistoryFlows``,
``SubjectFlows``) are the only names gone, and are listed as such.
"""

from __future__ import annotations

import importlib
import warnings

import pytest

OLD_ALL: dict[str, tuple[str, ...]] = {
    "erasure_receipts.attesting": (
        "AsyncFlows",
        "Attesting",
        "NamespacesFor",
        "PendingErasure",
        "ResidueScan",
        "ThreadDigest",
        "check_archive",
    ),
    "erasure_receipts.backends.keep_latest": (
        "DELTA_KEYS",
        "DeltaChannelError",
        "Head",
        "KeepLatest",
        "Removed",
        "plan",
    ),
    "erasure_receipts.backends.postgres": (
        "ADVISORY_CLASS",
        "AsyncBridgeSession",
        "CHECKPOINT_TABLES",
        "LEASE_CLASS",
        "PgTablePart",
        "PlannedPgPart",
        "PostgresBackend",
        "RETRYABLE",
        "Session",
        "SyncSession",
        "TOMBSTONE_MESSAGE",
        "database_label",
        "ensure_schema",
        "horizon_holders",
        "idle_threads",
        "installed_version",
        "is_erased",
        "is_tombstone_error",
        "journal_receipts",
        "latest_checkpoint",
        "leaf_expression",
        "locate",
        "mark_issued",
        "namespace_condition",
        "pending_journal",
        "plan_keep_latest",
        "purge_journal",
        "record_statement",
        "redact_journal",
        "release_lease",
        "reopen",
        "run_in_flight",
        "server_identity",
        "still_pending",
        "take_lease",
        "threads_by_metadata",
    ),
    "erasure_receipts.backends.sqlite": (
        "PlannedSqlPart",
        "SqlTablePart",
        "SqliteBackend",
        "TOMBSTONE_MESSAGE",
        "database_path",
        "ensure_tombstones",
        "find_needles",
        "idle_threads",
        "is_erased",
        "is_tombstone_error",
        "journal_receipts",
        "journal_residue",
        "latest_checkpoint",
        "lease_file",
        "locate",
        "mark_issued",
        "namespace_condition",
        "pending_journal",
        "plan_keep_latest",
        "purge_journal",
        "record_statement",
        "redact_journal",
        "release_lease",
        "reopen",
        "run_in_flight",
        "scrub",
        "still_pending",
        "take_lease",
        "threads_by_metadata",
    ),
    "erasure_receipts.backends.sqlite_residue": (
        "Needles",
        "WINDOW",
        "bounded_checkpoint",
        "clear_journal",
        "dead_space",
        "residue_scan",
    ),
    "erasure_receipts.backends.store": (
        "PAGE_SIZE",
        "StoreSweepPart",
        "acount_items",
        "count_items",
        "hidden_items",
        "hides_expired",
        "item_leaf",
    ),
    "erasure_receipts.engine": (
        "Check",
        "ErasureBackend",
        "ErasureRequest",
        "GuardedBackend",
        "NeedlesFoundError",
        "Part",
        "RowsOutcome",
        "TableCount",
        "erase_rows",
        "export_leaves",
        "final_statement",
        "measure_parts",
        "measure_rows",
        "preflight",
        "request_from_journal",
        "resume_rows",
        "sign_and_archive",
    ),
    "erasure_receipts.history": (
        "AsyncHistoryMethods",
        "DeltaChannelError",
        "HistoryFlows",
        "HistoryMethods",
        "SweepEvent",
        "SweepResult",
        "checkpoint_time",
        "uuid6_floor",
    ),
    "erasure_receipts.lease": (
        "bind",
        "claim",
        "drop",
        "owned",
        "owner_scope",
        "owning",
    ),
    "erasure_receipts.postgres": (
        "AsyncAttestingPostgresSaver",
        "AttestingPostgresSaver",
        "digest_read_only",
    ),
    "erasure_receipts.savers": (
        "AsyncAttestingSqliteSaver",
        "AttestingSqliteSaver",
        "PendingErasure",
        "ThreadDigest",
        "check_archive",
    ),
    "erasure_receipts.subject": (
        "AsyncSubjectMethods",
        "Location",
        "MAX_THREADS",
        "SubjectDigest",
        "SubjectFlows",
        "SubjectMethods",
        "named_forms",
    ),
    "erasure_receipts.thread": (
        "AsyncThreadMethods",
        "ThreadMethods",
    ),
}

REMOVED = {
    ("erasure_receipts.attesting", "Attesting"),
    ("erasure_receipts.attesting", "AsyncFlows"),
    ("erasure_receipts.history", "HistoryFlows"),
    ("erasure_receipts.subject", "SubjectFlows"),
}
"""The mixins of the old inheritance chain: no class holds those flows any more."""

ALIASED = {
    "erasure_receipts.backends.keep_latest": "erasure_receipts._backends.keep_latest",
    "erasure_receipts.backends.postgres": "erasure_receipts._backends.postgres",
    "erasure_receipts.backends.sqlite": "erasure_receipts._backends.sqlite",
    "erasure_receipts.backends.sqlite_residue": "erasure_receipts._backends.sqlite_residue",
    "erasure_receipts.backends.store": "erasure_receipts._backends.store",
    "erasure_receipts.lease": "erasure_receipts._lease",
}
"""Old module paths that are the very module object of the new one."""


def _import(name: str) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(name)


@pytest.mark.parametrize("module", sorted(OLD_ALL))
def test_old_public_names_import_from_their_old_path(module: str) -> None:
    mod = _import(module)
    missing = [
        name for name in OLD_ALL[module] if (module, name) not in REMOVED and not hasattr(mod, name)
    ]
    assert missing == []
    for name in OLD_ALL[module]:
        if (module, name) in REMOVED:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            namespace: dict[str, object] = {}
            exec(f"from {module} import {name}", namespace)
        assert namespace[name] is getattr(mod, name)


@pytest.mark.parametrize("old", sorted(ALIASED))
def test_old_module_paths_are_the_new_modules(old: str) -> None:
    new = _import(ALIASED[old])
    assert _import(old) is new
    for name in getattr(new, "__all__", ()):
        assert getattr(_import(old), name) is getattr(new, name)


def test_old_engine_submodules_are_the_new_ones() -> None:
    engine = _import("erasure_receipts.engine")
    private = _import("erasure_receipts._engine")
    for name in private.__all__:  # type: ignore[attr-defined]
        assert getattr(engine, name) is getattr(private, name)
    for sub in ("codec", "eraser", "measure", "needles", "protocol", "readback", "seams",
                "statement", "types"):  # fmt: skip
        assert _import(f"erasure_receipts.engine.{sub}") is _import(
            f"erasure_receipts._engine.{sub}"
        )


def test_removed_mixins_are_gone() -> None:
    """If one comes back, take it off ``REMOVED``."""
    for module, name in REMOVED:
        assert not hasattr(_import(module), name)


def test_an_old_path_leaves_the_private_module_its_own_spec() -> None:
    """Importing through ``erasure_receipts.backends`` must not give the private module
    the alias's spec (``importlib.reload`` and relative imports rely on it; not reloaded
    here, which would make new classes for the rest of the run)."""
    import importlib
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = importlib.import_module("erasure_receipts.backends.keep_latest")
    new = importlib.import_module("erasure_receipts._backends.keep_latest")
    assert old is new
    assert (
        new.__spec__ is not None and new.__spec__.name == "erasure_receipts._backends.keep_latest"
    )
    assert importlib.reload(new) is new


@pytest.mark.parametrize(("module", "name"), sorted(REMOVED))
def test_a_removed_mixin_says_what_replaced_it(module: str, name: str) -> None:
    import importlib
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        mod = importlib.import_module(module)
    with pytest.raises(AttributeError, match=r"was removed: savers are composed now.*Eraser"):
        getattr(mod, name)
    with pytest.raises(ImportError):
        exec(f"from {module} import {name}", {})
