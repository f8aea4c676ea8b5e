"""PostgreSQL: the residue of an erasure - ``VACUUM`` of the erased tables and what it
could verify (dead tuples left, sessions holding the xmin horizon back), the WAL note.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from .session import Session

__all__ = ["WAL_RESIDUE", "horizon_holders", "vacuum_residue"]

WAL_RESIDUE: dict[str, Any] = {
    "action": "postgres.wal",
    "status": "skipped",
    "detail": {
        "reason": "the deleted rows stay in WAL segments until they are recycled, and in "
        "archived WAL, replicas and backups (out of scope); PostgreSQL offers no WAL scrub"
    },
}
"""Stated in every PostgreSQL receipt: the WAL is not scrubbed."""


def vacuum_residue(
    session: Session, tables: Sequence[str], vacuum: bool | str, erasure_xids: Sequence[int]
) -> list[dict[str, Any]]:
    """The ``postgres.vacuum`` entry: ``VACUUM`` (or ``VACUUM (FULL)``) of ``tables`` if
    ``vacuum`` asks and the connection is not in pipeline mode, with what it verified -
    dead tuples left, sessions holding the horizon back from ``erasure_xids`` (the
    erasure transactions' ids; none at recovery), tables the server skipped."""
    if not vacuum:
        return [
            {"action": "postgres.vacuum", "status": "skipped",
             "detail": {"tables": ",".join(tables),
                        "reason": "not requested (vacuum=False): the deleted rows remain "
                                  "as dead tuples in the table files until VACUUM or "
                                  "autovacuum removes them"}}
        ]  # fmt: skip
    full = vacuum == "full"
    verb = "VACUUM (FULL)" if full else "VACUUM"
    detail: dict[str, Any] = {"mode": verb, "tables": ",".join(tables)}
    if session.in_pipeline:
        detail["reason"] = (
            "the saver's connection is in pipeline mode, where every statement runs "
            "in an implicit transaction block and VACUUM cannot run; the deleted rows "
            "remain as dead tuples until VACUUM or autovacuum removes them"
        )
        return [{"action": "postgres.vacuum", "status": "skipped", "detail": detail}]
    version = int(session.info.server_version)
    # Plain VACUUM may skip index vacuuming when few tuples died (PostgreSQL 14+);
    # INDEX_CLEANUP ON makes it remove the erased keys from the indexes too.
    command = verb if full or version < 120000 else "VACUUM (INDEX_CLEANUP ON)"
    xid = max(erasure_xids) if erasure_xids else None
    try:
        before = horizon_holders(session, xid)
        marks = _vacuum_marks(session, tables, full, version)
        if not full and version >= 150000:
            # Our own DELETE's statistics must reach the server before VACUUM sets
            # n_dead_tup, or they would be added to it afterwards.
            session.outside_transaction("SELECT pg_stat_force_next_flush()")
        for t in tables:
            session.outside_transaction(f'{command} "{t}"')
        after = horizon_holders(session, xid)
        holders = {h[0]: h[1] for h in [*before, *after]}  # by kind and id, latest
        moved = _vacuum_marks(session, tables, full, version)
        outcome = _vacuum_outcome(session, tables, full, version)
    except psycopg.Error as exc:
        detail["error"] = str(exc).strip()[:200] or type(exc).__name__
        return [{"action": "postgres.vacuum", "status": "failed", "detail": detail}]
    # A role that neither owns a table nor the database gets a WARNING and VACUUM
    # skips the table: seen as an unchanged file (FULL) or vacuum count (plain).
    skipped = [t for t in marks if marks[t] == moved.get(t)]
    if skipped:
        outcome["not_vacuumed"] = ",".join(skipped)
        outcome["unverified"] = (
            "the server skipped VACUUM of these tables (only their owner, the database "
            "owner or a superuser may vacuum them)"
        )
    detail["snapshots_holding_horizon"] = len(holders)
    if holders:
        detail["horizon_holders"] = "; ".join(holders.values())[:4096]
    if xid is None:
        detail["horizon_reference"] = (
            "the erasure's transaction id is not known here (receipt issued from the "
            "journal): every session with a transaction id or snapshot is counted"
        )
    detail.update(outcome)
    if not full:
        detail["index_cleanup"] = command != "VACUUM"
        detail["note"] = (
            "VACUUM makes the space of dead tuples reusable but does not zero it; "
            "bytes may remain in the table files until overwritten (VACUUM FULL "
            "rewrites the tables)"
        )
    if outcome.get("dead_tuples_after"):
        detail["reason"] = (
            "dead tuples remain after VACUUM (kept for a horizon holder, on pages "
            "a concurrent reader pinned, or other rows deleted meanwhile); the "
            "erased rows may be among them"
        )
    verified = not holders and outcome.get("dead_tuples_after", 0) == 0
    status = "applied" if verified and "unverified" not in outcome else "partial"
    return [{"action": "postgres.vacuum", "status": status, "detail": detail}]


_HORIZON_SQL = """
SELECT 'backend:' || a.pid, 'session pid ' || a.pid || ' (' ||
       coalesce(a.state, 'state hidden') ||
       coalesce(', transaction ' ||
                extract(epoch FROM clock_timestamp() - a.xact_start)::bigint || ' s old', '') ||
       ', xid age ' || greatest(age(a.backend_xid), age(a.backend_xmin)) || ')'
FROM pg_stat_activity a
WHERE a.pid <> pg_backend_pid()
  AND a.pid NOT IN (SELECT v.pid FROM pg_stat_progress_vacuum v)
  AND (coalesce(age(a.backend_xid) >= {ref}, a.backend_xid IS NOT NULL)
       OR ((a.datid IS NULL OR a.datid = (SELECT oid FROM pg_database
                                          WHERE datname = current_database()))
           AND coalesce(age(a.backend_xmin) >= {ref}, a.backend_xmin IS NOT NULL)))
UNION ALL
SELECT 'slot:' || s.slot_name, 'replication slot ' || s.slot_name ||
       ' (xid age ' || age(s.xmin) || ')'
FROM pg_replication_slots s
WHERE coalesce(age(s.xmin) >= {ref}, s.xmin IS NOT NULL)
UNION ALL
SELECT 'prepared:' || p.gid, 'prepared transaction ' || p.gid || ' (' ||
       extract(epoch FROM clock_timestamp() - p.prepared)::bigint || ' s old, xid age ' ||
       age(p.transaction) || ')'
FROM pg_prepared_xacts p
WHERE coalesce(age(p.transaction) >= {ref}, true)
UNION ALL
SELECT 'setting:vacuum_defer_cleanup_age', 'vacuum_defer_cleanup_age = ' || v.setting
FROM pg_settings v WHERE v.name = 'vacuum_defer_cleanup_age' AND v.setting <> '0'
"""
"""What keeps VACUUM from removing tuples deleted by transaction ``{ref}`` (its age):
a session whose transaction id is that old or older, *in any database* (a transaction
still running there is in every new snapshot here, VACUUM FULL's own included), and a
session of this database (or of none: walsenders relaying hot-standby feedback) whose
snapshot is - an idle-in-transaction session that has written has an xid but no
snapshot; a running lazy VACUUM (autovacuum too) is left out, as VACUUM leaves it out
of the horizon -, a replication slot's ``xmin``, a prepared transaction (any database),
``vacuum_defer_cleanup_age``. With no reference (``NULL``), every transaction id and
snapshot counts."""


def horizon_holders(session: Session, xid: int | None) -> list[tuple[str, str]]:
    """``(id, description)`` of everything that holds the xmin horizon at or before
    ``xid`` (a ``txid_current()``), see :data:`_HORIZON_SQL`; pid, state and age of
    each session (the state is hidden for other roles' sessions without
    ``pg_read_all_stats``; the ids and ages are not)."""
    params: tuple[str, ...] = ()
    if xid is None:
        sql = _HORIZON_SQL.replace("{ref}", "NULL::int")
    else:
        sql = _HORIZON_SQL.replace("{ref}", "age(%s::text::xid)")
        params = (str(xid % 2**32),) * 4
    with session.transaction():  # never left open: VACUUM must run outside one
        return [(str(a), str(b)) for a, b in session.query(sql, params)]


def _vacuum_marks(
    session: Session, tables: Sequence[str], full: bool, version: int
) -> dict[str, Any]:
    """What changes when VACUUM processes a table: its file node (``VACUUM FULL``
    writes a new file), else its ``vacuum_count`` (set at once from PostgreSQL 15 on;
    before that nothing reliable is compared)."""
    if not full and version < 150000:
        return {}
    sql = (
        "SELECT pg_relation_filenode(to_regclass(%s))::int8"
        if full
        else "SELECT vacuum_count FROM pg_stat_all_tables WHERE relid = to_regclass(%s)"
    )
    with session.transaction():
        if not full:
            session.query("SELECT pg_stat_clear_snapshot()")
        return {t: r[0][0] if (r := session.query(sql, (t,))) else None for t in tables}


def _vacuum_outcome(
    session: Session, tables: Sequence[str], full: bool, version: int
) -> dict[str, Any]:
    """What VACUUM left: dead tuples still in the tables (and their TOAST tables).

    ``pgstattuple`` (contrib; ``pg_stat_scan_tables`` may run it) counts them when it is
    installed and callable - after ``VACUUM FULL`` (it reads the whole table, which the
    rewrite has just done anyway) or before PostgreSQL 15. Otherwise plain ``VACUUM`` is
    read back from ``n_dead_tup``, which VACUUM itself sets to the dead tuples it could
    not remove (immediately from PostgreSQL 15 on; any role may read it). ``VACUUM FULL``
    does not
    set it: the horizon check before and after the rewrite (exact under its ACCESS
    EXCLUSIVE lock: it copies a dead tuple only if the horizon keeps it) is then the
    evidence. A count includes other threads' dead rows: non-zero is reported as
    ``partial``, never explained away.
    """
    with session.transaction():
        return _dead_after(session, tables, full, version)


def _dead_after(
    session: Session, tables: Sequence[str], full: bool, version: int
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    relids = [
        int(r)
        for t in tables
        for row in session.query(
            "SELECT oid::int8, reltoastrelid::int8 FROM pg_class WHERE oid = to_regclass(%s)",
            (t,),
        )
        for r in row
        if r
    ]
    schema = session.query(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'pgstattuple'"
    )
    if schema and (full or version < 150000):
        fn = '"' + str(schema[0][0]).replace('"', '""') + '".pgstattuple'
        try:
            with session.transaction():  # a savepoint: a refusal must not end the check
                dead = sum(
                    int(session.query(f"SELECT dead_tuple_count FROM {fn}(%s::oid::regclass)",
                                      (r,))[0][0])
                    for r in relids
                )  # fmt: skip
        except psycopg.Error as exc:
            out["pgstattuple_error"] = str(exc).strip().splitlines()[0][:200]
        else:
            out["verified_by"] = "pgstattuple"
            out["dead_tuples_after"] = dead
            return out
    if full:
        out["verified_by"] = "horizon"
        return out
    if version < 150000:
        out["unverified"] = (
            "before PostgreSQL 15 n_dead_tup reaches the statistics collector "
            "asynchronously, and pgstattuple is not available: what VACUUM left cannot "
            "be read back"
        )
        return out
    session.query("SELECT pg_stat_clear_snapshot()")
    rows = session.query(
        "SELECT coalesce(sum(n_dead_tup), 0)::int8 FROM pg_stat_all_tables "
        "WHERE relid = ANY(%s::int8[]::oid[])",
        (relids,),
    )
    out["verified_by"] = "n_dead_tup"
    out["dead_tuples_after"] = int(rows[0][0])
    return out
