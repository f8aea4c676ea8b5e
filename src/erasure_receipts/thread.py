"""Thread erasure's public methods, once for every saver (SQLite and PostgreSQL).

Mixins over the :mod:`erasure_receipts.attesting` flows, like ``history`` and
``subject``: a saver only provides the hooks below, and puts the mixin before its
LangGraph parent class so ``delete_thread`` / ``adelete_thread`` override the parent's.

* sync: ``_prepare()`` (set up, find where the store lives), ``_ensure_journal()``
  (the library's tables exist), ``_resolve_store_rows()``, ``_preview(handle,
  request)`` (the read-only measurement);
* async: ``_aprepare()``, ``_aensure_journal()``, ``_resolve_store_rows_async()``,
  ``_adb``, ``_flow``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .attesting import AsyncFlows, Attesting, PendingErasure, ResidueScan, ThreadDigest, log
from .errors import NothingToEraseError
from .privacy import CommitmentKey
from .proof import LeafRecord
from .receipt import Receipt
from .request import Authorization, RequestContext

__all__ = ["AsyncThreadMethods", "ThreadMethods"]


def _key_or_none(key: CommitmentKey | str | os.PathLike[str] | None) -> CommitmentKey | None:
    from .subject import _commitment_key

    return None if key is None else _commitment_key("commitments", key)


Select = Callable[[str, tuple[Any, ...]], bool]


class ThreadMethods(Attesting):
    """``erase_thread``, attested ``delete_thread``, recovery, previews, legal hold.

    (No hook stubs here: this mixin precedes the saver's own base classes in the MRO, so
    a stub would hide their implementations; ``Attesting`` declares them.)"""

    def erase_thread(
        self,
        thread_id: str,
        *,
        store_namespaces: Iterable[Sequence[str]] | None = None,
        tombstone: bool = True,
        allow_empty: bool = False,
        residue_scan: ResidueScan | None = None,
        request: RequestContext | None = None,
        authorization: Authorization | None = None,
    ) -> Receipt:
        """Erase every row of the thread (all tables, all namespaces) and its store items.

        The store items are those under ``store_namespaces`` - or, if it is not given,
        under the saver's ``namespaces_for(thread_id)``, which are erased only with rows
        of the thread itself: a thread id with no stored rows raises
        ``NothingToEraseError`` and erases nothing (even with ``allow_empty``; name the
        namespaces to erase them on their own).

        Returns the signed receipt (also written to ``archive`` if set). Raises
        ``ErasureIncompleteError`` - and issues no receipt - if anything fails or remains;
        ``NothingToEraseError`` (nothing deleted, no tombstone) if the scope holds no rows,
        unless ``allow_empty``; ``ConfigurationError`` before deleting if the receipt could
        not be archived. ``residue_scan`` overrides the saver's setting for this call
        (PostgreSQL records it as ``not_applicable``). ``request`` (a
        :class:`RequestContext`) and ``authorization`` (an approver's
        :class:`Authorization`) become the receipt's ``request``/``authorization``
        (RECEIPT_SPEC.md 9.6); an authorization for another scope or request id, or past
        its ``not_after`` by the saver's clock, is refused before anything is deleted
        (``AuthorizationError``).
        """
        erasure = self._request(
            thread_id, store_namespaces, tombstone, allow_empty,
            request=request, authorization=authorization,
        )  # fmt: skip
        self._preflight()
        self._prepare()
        return self._erase_flow(erasure, self._scan(residue_scan))

    def delete_thread(self, thread_id: str) -> None:
        """Attested ``delete_thread``: ``erase_thread(thread_id)``, so with its
        ``namespaces_for`` store namespaces.

        The receipt is archived (if ``archive`` is set) and kept in ``last_receipt``. A
        thread with no stored rows is a no-op, as for LangGraph's savers: nothing is
        erased - not its ``namespaces_for`` store items either -, no receipt, no
        tombstone.
        """
        try:
            self.erase_thread(thread_id)
        except NothingToEraseError as exc:
            log.info("delete_thread: %s", exc.message)

    def recover_receipts(
        self,
        *,
        min_age_seconds: float = 300.0,
        commitment_key: CommitmentKey | str | os.PathLike[str] | None = None,
    ) -> list[Receipt]:
        """Issue the receipts of erasures that committed but never got one.

        Only entries older than ``min_age_seconds`` are touched, and only those whose
        erasure is gone: a running erasure holds the lease of its entry until its
        receipt is issued (``lease.py``), so it is never attested twice. An entry whose
        statement was journaled is simply signed (the same receipt the original process
        would have produced); otherwise the scope is re-verified now
        (``raw_rows_zero_at_recovery``) and the receipt issued under the original id,
        time and pre-state digest. Entries that cannot be attested stay open and are
        listed in the ``ErasureIncompleteError`` raised at the end, whose ``recovered``
        attribute holds the receipts that were issued and ``unparsable`` the receipt
        ids of entries that could not be read (not UTF-8, a time or JSON that does not
        parse: left as they are, the others still recovered).
        A privacy-mode erasure's entry holds its request sealed: it opens with the
        ``commitment_key`` (key or key file; the saver that ran the erasure already
        holds it), otherwise that entry is listed as not attested.
        """
        key = _key_or_none(commitment_key)
        self._prepare()
        return self._recover_flow(min_age_seconds, key)

    def pending_erasures(self) -> list[PendingErasure]:
        """Erasures that committed but have no receipt yet, oldest first, with their age
        (``recover_receipts(min_age_seconds=...)`` skips the younger ones)."""
        self._ensure_journal()
        return self._pending_flow()

    def journal_receipts(self, thread_id: str | None = None) -> list[Receipt]:
        """Every receipt this database's erasure journal holds (optionally of one thread).

        Receipts are kept in the journal as well as returned/archived, so one is never
        lost with the process that received it.
        """
        self._ensure_journal()
        return self._journal_receipts_flow(thread_id)

    def digest_thread(
        self, thread_id: str, store_namespaces: Iterable[Sequence[str]] | None = None
    ) -> ThreadDigest:
        """The measurement an erasure would take now, without deleting anything (the
        store scope as for ``erase_thread``: ``namespaces_for`` unless given).

        Read-only: it writes nothing and installs nothing (SQLite: it also works on a
        ``mode=ro`` connection and raises ``NotALangGraphDatabaseError`` for a database
        without checkpoint tables).
        """
        request = self._request(thread_id, store_namespaces, False)
        self._resolve_store_rows()
        return self._db(self._preview, request)

    def export_leaves(
        self,
        thread_id: str,
        store_namespaces: Iterable[Sequence[str]] | None = None,
        *,
        select: Select | None = None,
    ) -> list[LeafRecord]:
        """Legal hold: the scope's rows with their inclusion proofs, before an erasure.

        Every row an erasure with the same arguments would measure now - or those for
        which ``select(table, primary_key)`` is true - as a :class:`LeafRecord`: its
        exact leaf data, leaf index, the tree size and root, and its RFC 9162 audit
        path. Keep ``record.to_json()`` (ROW.json); after the erasure ``receipt prove``
        shows the row was inside it. Read-only. The proofs hold only if nothing in the
        scope changes before the erasure (tree size and root must equal the receipt's).
        """
        request = self._request(thread_id, store_namespaces, False)
        self._resolve_store_rows()
        return self._export_flow(request, select)

    def reopen_thread(self, thread_id: str) -> bool:
        """Remove the tombstone so the thread id can be written again (explicit opt-in)."""
        self._ensure_journal()
        return bool(self._db(self._journal.reopen, str(thread_id)))

    def is_erased(self, thread_id: str) -> bool:
        """Whether the thread id is tombstoned (erased and not reopened)."""
        self._ensure_journal()
        return bool(self._db(self._journal.is_erased, str(thread_id)))


class AsyncThreadMethods(AsyncFlows):
    """The async twins of :class:`ThreadMethods`: the same flows on a worker thread."""

    async def aerase_thread(
        self,
        thread_id: str,
        *,
        store_namespaces: Iterable[Sequence[str]] | None = None,
        tombstone: bool = True,
        allow_empty: bool = False,
        residue_scan: ResidueScan | None = None,
        request: RequestContext | None = None,
        authorization: Authorization | None = None,
    ) -> Receipt:
        """Async :meth:`ThreadMethods.erase_thread`."""
        erasure = self._request(
            thread_id, store_namespaces, tombstone, allow_empty,
            request=request, authorization=authorization,
        )  # fmt: skip
        self._preflight()
        await self._aprepare()
        receipt = await self._flow(self._erase_flow, erasure, self._scan(residue_scan))
        self._set_last(receipt)  # in this task's context (the flow ran in a copy)
        return receipt

    async def adelete_thread(self, thread_id: str) -> None:
        """Attested ``adelete_thread``: ``aerase_thread(thread_id)``; a thread with no
        stored rows is a no-op (nothing erased, no receipt, no tombstone)."""
        try:
            await self.aerase_thread(thread_id)
        except NothingToEraseError as exc:
            log.info("adelete_thread: %s", exc.message)

    async def arecover_receipts(
        self,
        *,
        min_age_seconds: float = 300.0,
        commitment_key: CommitmentKey | str | os.PathLike[str] | None = None,
    ) -> list[Receipt]:
        """Async :meth:`ThreadMethods.recover_receipts`."""
        key = _key_or_none(commitment_key)
        await self._aprepare()
        out = await self._flow(self._recover_flow, min_age_seconds, key)
        if out:
            self._set_last(out[-1])
        return out

    async def apending_erasures(self) -> list[PendingErasure]:
        """Async :meth:`ThreadMethods.pending_erasures`."""
        await self._aensure_journal()
        return await self._flow(self._pending_flow)

    async def ajournal_receipts(self, thread_id: str | None = None) -> list[Receipt]:
        """Async :meth:`ThreadMethods.journal_receipts`."""
        await self._aensure_journal()
        return await self._flow(self._journal_receipts_flow, thread_id)

    async def adigest_thread(
        self, thread_id: str, store_namespaces: Iterable[Sequence[str]] | None = None
    ) -> ThreadDigest:
        """Async :meth:`ThreadMethods.digest_thread` (read-only too)."""
        request = self._request(thread_id, store_namespaces, False)
        await self._resolve_store_rows_async()
        return await self._adb(self._preview, request)

    async def aexport_leaves(
        self,
        thread_id: str,
        store_namespaces: Iterable[Sequence[str]] | None = None,
        *,
        select: Select | None = None,
    ) -> list[LeafRecord]:
        """Async :meth:`ThreadMethods.export_leaves` (read-only too)."""
        request = self._request(thread_id, store_namespaces, False)
        await self._resolve_store_rows_async()
        return await self._flow(self._export_flow, request, select)

    async def areopen_thread(self, thread_id: str) -> bool:
        """Async :meth:`ThreadMethods.reopen_thread`."""
        await self._aensure_journal()
        return bool(await self._adb(self._journal.reopen, str(thread_id)))

    async def ais_erased(self, thread_id: str) -> bool:
        """Async :meth:`ThreadMethods.is_erased`."""
        await self._aensure_journal()
        return bool(await self._adb(self._journal.is_erased, str(thread_id)))
