"""Verify erasure receipts: returns only verified facts, or raises.

Imports nothing from LangGraph or any database driver, so auditors can run it anywhere.
Order of checks: strict parse and schema -> a signature by a *trusted* key (an embedded
key is never trusted by itself) -> the key was valid when the receipt was issued -> the
statement's own semantics (an "erased" receipt must describe a verified empty state).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .canonical import parse_strict
from .errors import (
    KeyFormatError,
    ReceiptSemanticsError,
    SignatureError,
    UntrustedKeyError,
)
from .receipt import EMPTY_ROOT_HEX, REQUIRED_OUT_OF_SCOPE, Receipt, is_time
from .signing import PublicKey

__all__ = ["TrustStore", "TrustedKey", "VerifiedReceipt", "check_semantics", "verify_receipt"]


class TrustedKey:
    """A key the auditor trusts, optionally only for receipts issued in a time window.

    ``not_before``/``not_after`` are RFC 3339 UTC strings in the receipt's own format
    (``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``). Rotation = a new key with ``not_before`` set,
    and the old key given a ``not_after``.
    """

    __slots__ = ("key", "name", "not_after", "not_before")

    def __init__(
        self,
        key: PublicKey,
        name: str = "",
        not_before: str | None = None,
        not_after: str | None = None,
    ) -> None:
        self.key = key
        self.name = name
        self.not_before = not_before
        self.not_after = not_after

    def __repr__(self) -> str:
        return f"TrustedKey({self.key!r}, name={self.name!r})"

    def valid_at(self, issued_at: str) -> bool:
        t = _normalise_time(issued_at)
        if self.not_before is not None and t < _normalise_time(self.not_before):
            return False
        return not (self.not_after is not None and t >= _normalise_time(self.not_after))


def _normalise_time(t: str) -> str:
    # "2026-01-01T00:00:00Z" and "...00.5Z" must order by instant, not by text.
    base, _, frac = t.rstrip("Z").partition(".")
    return f"{base}.{frac.ljust(6, '0')}"


class TrustStore:
    """The set of keys an auditor accepts, looked up by key id."""

    def __init__(self, keys: Iterable[TrustedKey | PublicKey] = ()) -> None:
        self._by_id: dict[str, list[TrustedKey]] = {}
        for k in keys:
            tk = k if isinstance(k, TrustedKey) else TrustedKey(k)
            self._by_id.setdefault(tk.key.key_id, []).append(tk)

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_id.values())

    def __iter__(self) -> Iterator[TrustedKey]:
        for keys in self._by_id.values():
            yield from keys

    def get(self, keyid: str) -> list[TrustedKey]:
        return self._by_id.get(keyid, [])

    @classmethod
    def from_json(cls, data: bytes) -> TrustStore:
        """Load a trust file: ``{"trust_version": 1, "keys": [{...}, ...]}``.

        Each key has ``ed25519`` (base64 raw key) or ``pem``, and optionally ``name``,
        ``not_before`` and ``not_after``. See RECEIPT_SPEC.md, "Trust files".
        """
        try:
            doc = parse_strict(data)
        except Exception as exc:
            raise KeyFormatError(f"trust file is not valid JSON: {exc}") from None
        if type(doc) is not dict or doc.get("trust_version") != 1:
            raise KeyFormatError('trust file must be an object with "trust_version": 1')
        keys = doc.get("keys")
        if type(keys) is not list or not keys or set(doc) != {"trust_version", "keys"}:
            raise KeyFormatError('trust file needs a non-empty "keys" array and nothing else')
        out = []
        allowed = {"ed25519", "pem", "name", "not_before", "not_after"}
        for i, k in enumerate(keys):
            if type(k) is not dict or not set(k) <= allowed:
                raise KeyFormatError(f"trust file keys[{i}] has unknown members")
            if ("ed25519" in k) == ("pem" in k):
                raise KeyFormatError(f"trust file keys[{i}] needs exactly one of ed25519, pem")
            for f in ("name", "not_before", "not_after", "ed25519", "pem"):
                if f in k and type(k[f]) is not str:
                    raise KeyFormatError(f"trust file keys[{i}].{f} must be a string")
            for f in ("not_before", "not_after"):
                if f in k and not is_time(k[f]):
                    raise KeyFormatError(
                        f"trust file keys[{i}].{f} must be like 2026-01-31T00:00:00Z"
                    )
            try:
                pem = k["pem"].encode("utf-8") if "pem" in k else b""
            except UnicodeEncodeError:
                raise KeyFormatError(f"trust file keys[{i}].pem is not valid text") from None
            pk = PublicKey.from_base64(k["ed25519"]) if "ed25519" in k else PublicKey.from_pem(pem)
            out.append(TrustedKey(pk, k.get("name", ""), k.get("not_before"), k.get("not_after")))
        return cls(out)


class VerifiedReceipt:
    """Facts established by verification, and nothing else."""

    __slots__ = (
        "issued_at", "key_id", "key_name", "pre_digest", "receipt_id", "statement", "status",
        "thread_id",
    )  # fmt: skip

    def __init__(
        self,
        *,
        receipt_id: str,
        thread_id: str,
        status: str,
        issued_at: str,
        pre_digest: str,
        key_id: str,
        key_name: str,
        statement: dict[str, Any],
    ) -> None:
        self.receipt_id = receipt_id
        self.thread_id = thread_id
        self.status = status
        self.issued_at = issued_at
        self.pre_digest = pre_digest
        self.key_id = key_id
        self.key_name = key_name
        self.statement = statement

    def __repr__(self) -> str:
        return (
            f"VerifiedReceipt(receipt_id={self.receipt_id!r}, thread_id={self.thread_id!r}, "
            f"key_id={self.key_id[:16]}...)"
        )


def check_semantics(statement: dict[str, Any]) -> None:
    """Cross-field rules the schema cannot express; raises ``ReceiptSemanticsError``."""
    p = statement["predicate"]
    pre, post = p["pre_state"], p["post_state"]

    def bad(msg: str, reason: str = "inconsistent") -> ReceiptSemanticsError:
        return ReceiptSemanticsError(msg, reason=reason)

    if statement["subject"][0]["digest"]["sha256"] != pre["digest"]["sha256"]:
        raise bad("subject digest differs from the pre-state digest", "subject_digest_mismatch")
    if statement["subject"][0]["name"] != f"langgraph-thread:{p['scope']['thread_id']}":
        raise bad("subject name does not name the scope's thread", "subject_name_mismatch")
    for label, s in (("pre", pre), ("post", post)):
        rows = sum(t["rows"] for t in s["tables"].values())
        if rows != s["leaves"]:
            raise bad(f"{label}-state leaves ({s['leaves']}) != sum of table rows ({rows})")
        if (s["leaves"] == 0) != (s["digest"]["sha256"] == EMPTY_ROOT_HEX):
            raise bad(f"{label}-state digest does not match its leaf count")
    if set(pre["tables"]) != set(post["tables"]):
        raise bad("pre- and post-state list different tables")
    if p["status"] == "erased":
        left = {k: t["rows"] for k, t in post["tables"].items() if t["rows"] or t["bytes"]}
        if left or post["leaves"] or post["digest"]["sha256"] != EMPTY_ROOT_HEX:
            raise bad(f"status is erased but the post-state is not empty: {left}", "not_empty")
        failed = [c["name"] for c in p["checks"] if c["result"] != "pass"]
        if failed:
            raise bad(f"status is erased but checks failed: {', '.join(failed)}", "check_failed")
    missing = REQUIRED_OUT_OF_SCOPE - {o["id"] for o in p["out_of_scope"]}
    if missing:
        raise bad(f"out_of_scope lacks {', '.join(sorted(missing))}", "out_of_scope_missing")


def verify_receipt(
    data: bytes | Receipt, trusted_keys: TrustStore | Sequence[PublicKey | TrustedKey]
) -> VerifiedReceipt:
    """Verify a receipt file or DSSE envelope (bytes) against the caller's trusted keys."""
    receipt = data if isinstance(data, Receipt) else Receipt.from_json(data)
    trust = trusted_keys if isinstance(trusted_keys, TrustStore) else TrustStore(trusted_keys)
    if not len(trust):
        raise UntrustedKeyError("no trusted keys were given", reason="no_trusted_keys")
    message = receipt.signed_bytes()
    issued_at = receipt.predicate["issued_at"]
    accepted: TrustedKey | None = None
    expired: TrustedKey | None = None
    bad_trusted = False
    for sig in receipt.signatures:
        # A DSSE signature without a key id hint is tried against every trusted key.
        for tk in trust.get(sig.keyid) if sig.keyid else list(trust):
            if not tk.key.verify(sig.sig, message):
                # Only a signature that names a trusted key proves tampering; a keyless
                # one that fails may simply be someone else's.
                bad_trusted = bad_trusted or bool(sig.keyid)
            elif tk.valid_at(issued_at):
                accepted = tk
                break
            else:
                expired = tk
        if accepted:
            break
    if accepted is None:
        if expired is not None:
            raise UntrustedKeyError(
                f"key {expired.key.key_id[:16]} was not valid at {issued_at}",
                reason="key_not_valid_at_time",
            )
        if bad_trusted:
            raise SignatureError("signature does not match the statement (tampered?)")
        ids = ", ".join(s.keyid[:16] or "(no key id)" for s in receipt.signatures)
        emb = receipt.public_key
        if emb is not None and any(
            s.keyid == emb.key_id and emb.verify(s.sig, message) for s in receipt.signatures
        ):
            raise UntrustedKeyError(f"signed by key {emb.key_id[:16]}, which is not trusted")
        raise UntrustedKeyError(f"no signature by a trusted key (signed by {ids})")
    check_semantics(receipt.statement)
    p = receipt.predicate
    return VerifiedReceipt(
        receipt_id=p["receipt_id"],
        thread_id=p["scope"]["thread_id"],
        status=p["status"],
        issued_at=issued_at,
        pre_digest=p["pre_state"]["digest"]["sha256"],
        key_id=accepted.key.key_id,
        key_name=accepted.name,
        statement=receipt.statement,
    )
