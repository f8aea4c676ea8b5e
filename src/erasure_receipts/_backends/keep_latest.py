"""``keep="latest"``: which rows of a thread a history erasure keeps, for every backend.

The *plan* follows ``prune(strategy="keep_latest")`` of ``langgraph-checkpoint-postgres``:
per checkpoint namespace the latest checkpoint (what ``get_tuple`` loads) is kept, plus,
on PostgreSQL, the parent it reads its pending sends from when it predates checkpoint
format v4. A subgraph *call*'s namespace (its name has a task id after ``:``) whose root
checkpoint is saved and is not the kept root checkpoint is removed entirely; a
``checkpointer=True`` subgraph's namespace (no ``:``) keeps its latest checkpoint.

The plan yields ``K``, the kept ``(checkpoint_ns, checkpoint_id)`` pairs, and the
dropped subgraph calls; inside the erasure transaction everything else is a *rule over
K* (RECEIPT_SPEC.md 9.2; checkpoint ids are uuid6, ordered by time):

* a checkpoint or write ``(ns, id)`` is **removed** when ``ns`` has kept checkpoints,
  ``id`` sorts before the latest kept id of ``ns`` (``H_ns``) and ``(ns, id)`` is not
  kept; when ``ns`` is a removed subgraph call (``dropped``: every row of it, whatever
  its ids, as LangGraph removes it); or when ``ns`` has none, the root namespace ``""``
  has some, and ``id`` sorts before ``H_""``;
* a blob (PostgreSQL ``checkpoint_blobs``) of such a namespace is **removed** when no
  *surviving* checkpoint of its namespace references its ``(channel, version)`` - a
  surviving checkpoint being a kept one or one newer than ``H_ns`` (``H_""`` for a
  namespace without kept checkpoints; none in a dropped call);
* every other row of the thread **remains**, and is measured into ``kept_state``.

After the commit the rule is no longer what is checked: a writer whose clock is behind
can save a checkpoint whose id sorts below ``H_ns`` while (or after) the erasure runs,
and that checkpoint is new data, not history. What the transaction deleted is recorded
by key (:class:`Removed`, journaled with ``K``), and from the commit on the removed set
is exactly those keys: the checkpoints deleted, the writes of those checkpoints
(including writes a still-running graph saves for them later) and, on PostgreSQL, the
blobs deleted. Nothing else is ever deleted or counted after the commit.

Backends turn the rule into SQL (:meth:`KeepLatest.where`, :meth:`KeepLatest.blobs_where`)
with their placeholder style. Nothing here knows about receipts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import DeltaChannelError

__all__ = ["DELTA_KEYS", "DeltaChannelError", "Head", "KeepLatest", "Removed", "plan"]

DELTA_KEYS = ("counters_since_delta_snapshot", "delta_writes_versioned")
"""Checkpoint metadata keys of a thread that uses a ``DeltaChannel`` (as LangGraph's own
``prune`` checks them)."""


@dataclass(frozen=True)
class Head:
    """The latest checkpoint of one namespace, as the plan sees it."""

    checkpoint_ns: str
    checkpoint_id: str
    sends_parent: str | None = None
    """PostgreSQL, checkpoint format < 4: the parent holding the pending sends."""
    root: str | None = None
    """``metadata.parents[""]``: the root checkpoint a subgraph call started from."""
    root_saved: bool = False


@dataclass(frozen=True)
class KeepLatest:
    """``K`` and the rule derived from it (see the module docstring)."""

    kept: tuple[tuple[str, str], ...]
    """Sorted, unique ``(checkpoint_ns, checkpoint_id)``."""
    dropped: tuple[str, ...] = ()
    """Finished subgraph calls: namespaces removed entirely (sorted)."""
    by_ns: dict[str, tuple[str, ...]] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        by_ns: dict[str, list[str]] = {}
        for ns, cid in self.kept:
            by_ns.setdefault(ns, []).append(cid)
        object.__setattr__(self, "by_ns", {ns: tuple(sorted(ids)) for ns, ids in by_ns.items()})

    @classmethod
    def of(cls, kept: Iterable[Sequence[str]], dropped: Iterable[str] = ()) -> KeepLatest:
        """From kept pairs in any order (e.g. a journal entry's)."""
        return cls(
            tuple(sorted({(str(ns), str(cid)) for ns, cid in kept})), tuple(sorted(set(dropped)))
        )

    @property
    def root_bound(self) -> str | None:
        """``H_""``: rows of namespaces without kept checkpoints sorting before it are
        removed; None when the root namespace keeps nothing (then they all remain)."""
        ids = self.by_ns.get("")
        return max(ids) if ids else None

    def removes(
        self, checkpoint_ns: str, checkpoint_id: str, removed: Removed | None = None
    ) -> bool:
        """The rule for one checkpoint or write, in Python (the public-API checks); with
        ``removed`` (after the commit) only what the transaction deleted."""
        if removed is not None:
            return (checkpoint_ns, checkpoint_id) in removed.checkpoints
        if checkpoint_ns in self.dropped:
            return True
        ids = self.by_ns.get(checkpoint_ns)
        if ids:
            return checkpoint_id < max(ids) and checkpoint_id not in ids
        bound = self.root_bound
        return bound is not None and checkpoint_id < bound

    def where(self, ph: str) -> tuple[str, list[str]]:
        """SQL (without the thread condition) true for the *removed* rows of a table with
        ``checkpoint_ns`` and ``checkpoint_id`` columns; ``ph`` is the placeholder."""
        clauses: list[str] = []
        params: list[str] = []
        for ns, ids in self.by_ns.items():
            older = [i for i in ids if i != max(ids)]
            clause = f"checkpoint_ns = {ph} AND checkpoint_id < {ph}"
            params += [ns, max(ids)]
            if older:  # e.g. a sends parent: kept although older than the head
                clause += f" AND checkpoint_id NOT IN ({', '.join([ph] * len(older))})"
                params += older
            clauses.append(f"({clause})")
        bound = self.root_bound
        if bound is not None:
            clauses.append(
                f"(checkpoint_ns NOT IN ({', '.join([ph] * len(self.by_ns))}) "
                f"AND checkpoint_id < {ph})"
            )
            params += [*self.by_ns, bound]
        if self.dropped:
            clauses.append(f"checkpoint_ns IN ({', '.join([ph] * len(self.dropped))})")
            params += list(self.dropped)
        return ("(" + " OR ".join(clauses) + ")" if clauses else "(1 = 0)"), params

    def blobs_where(self, thread_id: str) -> tuple[str, list[str]]:
        """PostgreSQL: true for the *removed* rows of ``checkpoint_blobs`` of
        ``thread_id`` (``%s`` placeholders): in a namespace the rule covers, and
        referenced by no surviving checkpoint of that namespace. The references of the
        surviving checkpoints (a handful) are collected once per statement and probed
        as a hashed set, never joined row by row with the blobs."""
        if not self.by_ns:
            return "(1 = 0)", []
        alive: list[str] = []
        params: list[str] = [thread_id]
        for ns, ids in self.by_ns.items():
            alive.append(f"(c.checkpoint_ns = %s AND (c.checkpoint_id IN "
                         f"({', '.join(['%s'] * len(ids))}) OR c.checkpoint_id > %s))")  # fmt: skip
            params += [ns, *ids, max(ids)]
        kept_ns = ", ".join(["%s"] * len(self.by_ns))
        bound = self.root_bound
        if bound is not None:
            dropped = "".join(" AND c.checkpoint_ns <> %s" for _ in self.dropped)
            alive.append(f"(c.checkpoint_ns NOT IN ({kept_ns}) AND c.checkpoint_id >= %s{dropped})")
            params += [*self.by_ns, bound, *self.dropped]
        refs = (
            "SELECT c.checkpoint_ns, v.key, v.value FROM checkpoints c CROSS JOIN LATERAL "
            "jsonb_each_text(c.checkpoint -> 'channel_versions') AS v "
            f"WHERE c.thread_id = %s AND v.value IS NOT NULL AND ({' OR '.join(alive)})"
        )
        covered = ""
        if bound is None:
            covered = f"checkpoint_ns IN ({kept_ns}) AND "
            params = [*self.by_ns, *params]
        return f"({covered}(checkpoint_ns, channel, version) NOT IN ({refs}))", params


@dataclass(frozen=True)
class Removed:
    """The keys a history erasure's transaction deleted: checkpoints
    ``(checkpoint_ns, checkpoint_id)`` and PostgreSQL blobs ``(checkpoint_ns, channel,
    version)``. After the commit, the removed set is these keys (and the writes of
    these checkpoints), never the rule again."""

    checkpoints: frozenset[tuple[str, str]] = frozenset()
    blobs: frozenset[tuple[str, str, str]] = frozenset()

    def to_json(self) -> dict[str, list[list[str]]]:
        """The journal's form (sorted lists)."""
        return {
            "checkpoints": [list(k) for k in sorted(self.checkpoints)],
            "checkpoint_blobs": [list(k) for k in sorted(self.blobs)],
        }

    @classmethod
    def from_json(cls, obj: dict[str, Sequence[Sequence[str]]]) -> Removed:
        """From :meth:`to_json`'s form."""
        return cls(
            frozenset((str(a), str(b)) for a, b in obj.get("checkpoints", ())),
            frozenset((str(a), str(b), str(c)) for a, b, c in obj.get("checkpoint_blobs", ())),
        )

    def by_ns(self, table: str) -> dict[str, list[tuple[str, ...]]]:
        """The keys a table's late rule matches, per namespace, without the namespace:
        checkpoint ids (``checkpoints`` and writes tables) or ``(channel, version)``."""
        out: dict[str, list[tuple[str, ...]]] = {}
        keys: frozenset[Any] = self.blobs if table == "checkpoint_blobs" else self.checkpoints
        for ns, *rest in sorted(keys):
            out.setdefault(ns, []).append(tuple(rest))
        return out


def plan(heads: Iterable[Head]) -> KeepLatest:
    """LangGraph's ``keep_latest`` choice of ``K`` from each namespace's latest checkpoint:
    a subgraph call whose root checkpoint is saved and not kept is dropped entirely,
    whatever its ids (also a call that finished after the kept root checkpoint was
    saved, or whose writer's clock is ahead)."""
    heads = list(heads)
    kept = {h.checkpoint_ns: [h.checkpoint_id, *([h.sends_parent] if h.sends_parent else [])]
            for h in heads}  # fmt: skip
    root_kept = kept.get("", [])
    calls = {
        h.checkpoint_ns
        for h in heads
        if ":" in h.checkpoint_ns and h.root_saved and h.root not in root_kept and root_kept
    }
    return KeepLatest.of(
        ((ns, cid) for ns, ids in kept.items() if ns not in calls for cid in ids), calls
    )
