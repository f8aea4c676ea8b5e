"""Who asked, why, and who approved: the request context and four-eyes authorization.

An erasure may carry the request that caused it (``RequestContext``: a ticket id, its
legal basis, the requester, when it was received and when it is due) and an approver's
signed consent (``Authorization``, made with :func:`authorize`) over the request id,
the exact scope and a deadline. Both become optional predicate members of the receipt,
``request`` and ``authorization`` (RECEIPT_SPEC.md section 9.6), covered by the
receipt's own signature; ``receipt verify --trust`` checks the authorization against the
trust file's keys marked ``"role": "approver"``.

This module is on the verify path: it imports nothing from LangGraph, no database
driver and not even ``datetime`` unless a caller hands it one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .canonical import canonicalize, parse_strict
from .errors import (
    ArgumentTypeError,
    AuthorizationError,
    ConfigurationError,
    MalformedReceiptError,
    ReceiptSemanticsError,
    SignatureError,
    UntrustedKeyError,
)
from .receipt import (
    _K_AUTH_SCOPE,
    AUTH_KINDS,
    AUTHORIZATION_TYPE,
    MAX_FIELD,
    Signature,
    _validate_authorization,
    _validate_scope,
    is_hex64,
    is_time,
    time_key,
    validate_request_members,
)
from .receipt import MAX_AUTH_SIGNATURES as MAX_AUTH_SIGNATURES
from .receipt import MAX_AUTH_THREADS as MAX_AUTH_THREADS
from .signing import Signer, pae

if TYPE_CHECKING:
    from datetime import datetime

    from .trust import TrustedKey, TrustStore

__all__ = [
    "AUTHORIZATION_PAYLOAD_TYPE",
    "AUTHORIZATION_TYPE",
    "BASES",
    "Authorization",
    "RequestContext",
    "authorize",
    "authorized_scope",
    "describe_basis",
    "erasure_scope",
    "seconds_between",
    "validate_request_members",
    "verify_request",
]

AUTHORIZATION_PAYLOAD_TYPE = "application/vnd.langgraph-erasure-authorization.v1+json"
"""The DSSE payload type an approver signs (the PAE's type; never a receipt's)."""

BASES: dict[str, str] = {
    "gdpr-art17-1a": "GDPR Art. 17(1)(a): no longer necessary for the purposes collected for",
    "gdpr-art17-1b": "GDPR Art. 17(1)(b): consent withdrawn and no other legal ground",
    "gdpr-art17-1c": "GDPR Art. 17(1)(c): objection under Art. 21 (no overriding grounds)",
    "gdpr-art17-1d": "GDPR Art. 17(1)(d): unlawfully processed",
    "gdpr-art17-1e": "GDPR Art. 17(1)(e): erasure required by a legal obligation",
    "gdpr-art17-1f": "GDPR Art. 17(1)(f): collected from a child for information society services",
    "user-deletion": "the user deleted it (a product feature, no formal request)",
}
"""The documented ``basis`` vocabulary (RECEIPT_SPEC.md 9.6). Also documented:
``retention:<policy>`` (a retention policy's name). Any other text is allowed as free
text, except that a value starting with ``gdpr-art17`` must be one of the six codes and
``retention:`` must name a policy (so a typo cannot pass for a legal basis)."""


def describe_basis(basis: str) -> str | None:
    """A human description of a documented basis, or None for free text."""
    if basis in BASES:
        return BASES[basis]
    if basis.startswith("retention:") and len(basis) > len("retention:"):
        return f"retention policy {basis[len('retention:') :]!r}"
    return None


# -- times, without importing datetime ----------------------------------------------------


def _format_time(value: Any, what: str) -> str:
    """A time in the receipts' form. ``str`` must already be one (``is_time``); a
    ``datetime`` is converted (naive = UTC, as the engine's clock)."""
    if isinstance(value, str):
        if not is_time(value):
            raise ConfigurationError(
                f"{what} {value!r} is not a real RFC 3339 UTC time like 2026-01-31T00:00:00Z"
            )
        return value
    from datetime import UTC, datetime

    if not isinstance(value, datetime):
        raise ArgumentTypeError(
            f"{what} must be an RFC 3339 UTC string or a datetime, not {value!r}"
        )
    t = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    frac = f".{t.microsecond:06d}" if t.microsecond else ""
    return t.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"


_instant = time_key


def _days(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a Gregorian date (H. Hinnant's days_from_civil)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def _micros(t: str) -> int:
    days = _days(int(t[:4]), int(t[5:7]), int(t[8:10]))
    secs = ((days * 24 + int(t[11:13])) * 60 + int(t[14:16])) * 60 + int(t[17:19])
    frac = t[20:-1] if t[19] == "." else ""
    return secs * 1_000_000 + int(frac.ljust(6, "0") or "0")


def seconds_between(start: str, end: str) -> int:
    """Whole seconds from ``start`` to ``end`` (both ``is_time`` text), rounded down:
    the SLA figure ``sla_seconds`` = ``issued_at`` - ``request.received_at``."""
    return (_micros(end) - _micros(start)) // 1_000_000


# -- request context ----------------------------------------------------------------------


def _text(value: Any, what: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{what} must be a string, not {type(value).__name__}")
    if not 1 <= len(value) <= MAX_FIELD:
        raise ConfigurationError(f"{what} must be 1..{MAX_FIELD} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigurationError(f"{what} is not valid Unicode (lone surrogate)") from None
    return value


def _check_basis(basis: str) -> None:
    if basis.startswith("gdpr-art17") and basis not in BASES:
        raise ConfigurationError(
            f"unknown GDPR basis {basis!r}: use one of {', '.join(sorted(BASES)[:6])}"
        )
    if basis.startswith("retention:") and describe_basis(basis) is None:
        raise ConfigurationError(
            "basis 'retention:' must name the policy, e.g. 'retention:chat-90d'"
        )


class RequestContext:
    """The request behind an erasure: ``id`` (e.g. a ticket number), legal ``basis``,
    ``requester`` (who asked, or None), ``received_at`` and ``due`` (RFC 3339 UTC text
    in the receipts' form, or ``datetime``; None when unknown).

    ``basis`` is one of :data:`BASES` (``gdpr-art17-1a`` ... ``gdpr-art17-1f``,
    ``user-deletion``), ``retention:<policy>``, or free text (``describe_basis``).
    ``id``, ``basis`` and ``requester`` are 1-256 characters; ``due`` must be after
    ``received_at``. Raises ``ValueError``/``TypeError`` on anything else.
    """

    __slots__ = ("basis", "due", "id", "received_at", "requester")

    id: str
    basis: str
    requester: str | None
    received_at: str | None
    due: str | None

    def __init__(
        self,
        id: str,
        basis: str,
        requester: str | None = None,
        received_at: str | datetime | None = None,
        due: str | datetime | None = None,
    ) -> None:
        rid = _text(id, "request id")
        b = _text(basis, "basis")
        assert rid is not None and b is not None
        _check_basis(b)
        req = _text(requester, "requester", optional=True)
        rec = None if received_at is None else _format_time(received_at, "received_at")
        d = None if due is None else _format_time(due, "due")
        if rec is not None and d is not None and _instant(d) <= _instant(rec):
            raise ConfigurationError(f"due {d} is not after received_at {rec}")
        set_ = object.__setattr__
        for name, value in (("id", rid), ("basis", b), ("requester", req),
                            ("received_at", rec), ("due", d)):  # fmt: skip
            set_(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"RequestContext is immutable; cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RequestContext) and self._tuple() == other._tuple()

    def __hash__(self) -> int:
        return hash(self._tuple())

    def _tuple(self) -> tuple[str | None, ...]:
        return (self.id, self.basis, self.requester, self.received_at, self.due)

    def __repr__(self) -> str:
        return f"RequestContext(id={self.id!r}, basis={self.basis!r})"

    def to_predicate(self, commit: Callable[[str, str], str] | None = None) -> dict[str, Any]:
        """The receipt's ``request`` member. With ``commit`` (privacy mode: a function
        ``(label, value) -> "hmac-sha256:<hex>"``, e.g. ``functools.partial(
        privacy.commit, key)``) the requester is replaced by ``commit("requester",
        requester)``."""
        requester = self.requester
        if requester is not None and commit is not None:
            requester = commit("requester", requester)
            if not (isinstance(requester, str) and _is_commitment(requester)):
                raise ConfigurationError(
                    f"commit() returned {requester!r}, not hmac-sha256:<64 hex>"
                )
        return {
            "id": self.id,
            "basis": self.basis,
            "requester": requester,
            "received_at": self.received_at,
            "due": self.due,
        }

    @classmethod
    def from_predicate(cls, member: Mapping[str, Any]) -> RequestContext:
        """The context a receipt's ``request`` member records (checked like a new one)."""
        return cls(
            member["id"], member["basis"], member.get("requester"), member.get("received_at"),
            member.get("due"),
        )  # fmt: skip


def _is_commitment(v: str) -> bool:
    return v.startswith("hmac-sha256:") and is_hex64(v[12:])


# -- authorization ------------------------------------------------------------------------


def _scope_of(scope: Mapping[str, Any], kind: str | None, *, strict: bool) -> dict[str, Any]:
    """The authorized-scope form of ``scope``: ``{kind, thread_id | subject,
    store_namespaces}`` (+ ``keep``), namespaces sorted and unique. ``strict`` refuses
    members an authorized scope does not have (``authorize``); otherwise a receipt's
    full scope is accepted and its other members ignored."""
    if not isinstance(scope, Mapping):
        raise ArgumentTypeError(f"scope must be a dict, not {type(scope).__name__}")
    given = scope.get("kind")
    kind = kind or given or "thread"
    if given is not None and given != kind:
        raise ConfigurationError(f"scope kind {given!r} differs from kind {kind!r}")
    if kind not in AUTH_KINDS:
        raise ConfigurationError(f"unknown kind {kind!r}: use one of {', '.join(AUTH_KINDS)}")
    out: dict[str, Any] = {"kind": kind}
    idkey = "subject" if kind == "subject" else "thread_id"
    if idkey not in scope:
        raise ConfigurationError(f"a {kind} scope needs {idkey!r}")
    out[idkey] = scope[idkey]
    if kind == "subject":
        # Authorized form (strict): always both; a receipt's or saver's scope: as given.
        if strict or "threads" in scope:
            out["threads"] = _thread_list(scope.get("threads", ()))
        if strict or "discovery" in scope:
            out["discovery"] = _discovery(scope.get("discovery"))
    if kind == "history":
        out["keep"] = scope.get("keep", "latest")
    nss = scope.get("store_namespaces", ())
    if isinstance(nss, str) or not isinstance(nss, Iterable):
        raise ArgumentTypeError("store_namespaces must be a list of namespaces (lists of strings)")
    uniq = set()
    for ns in nss:
        if isinstance(ns, str) or not isinstance(ns, Iterable):
            raise ArgumentTypeError(f"a store namespace is a list of strings, not {ns!r}")
        uniq.add(tuple(ns))
    out["store_namespaces"] = [list(ns) for ns in sorted(uniq)]
    if strict:
        extra = set(scope) - _K_AUTH_SCOPE[kind]
        if extra:
            raise ConfigurationError(
                f"unknown scope member {sorted(extra)[0]!r} for a {kind} scope"
            )
    return out


def _thread_list(threads: Any) -> list[str]:
    if isinstance(threads, str) or not isinstance(threads, Iterable):
        raise ArgumentTypeError("threads must be a list of thread ids (strings)")
    out = set()
    for t in threads:
        if not isinstance(t, str):
            raise ArgumentTypeError(f"a thread id is a string, not {t!r}")
        out.add(t)
    return sorted(out)


def _discovery(value: Any) -> dict[str, Any] | None:
    """``None`` or ``{"metadata_key": K}`` (as a subject receipt's ``scope.discovery``)
    from that form or from the metadata key itself."""
    if value is None:
        return None
    if isinstance(value, str):
        return {"metadata_key": value}
    if isinstance(value, Mapping) and set(value) == {"metadata_key"}:
        return {"metadata_key": value["metadata_key"]}
    raise ArgumentTypeError(
        f'discovery must be None, a metadata key or {{"metadata_key": K}}, not {value!r}'
    )


def authorized_scope(scope: Mapping[str, Any], kind: str | None = None) -> dict[str, Any]:
    """The authorized scope (RECEIPT_SPEC.md 9.6) an erasure of ``scope`` needs:
    ``{kind, thread_id | subject, store_namespaces}`` plus ``keep`` for history and
    ``threads``/``discovery`` for subject (when ``scope`` has them), store namespaces
    and threads sorted and unique. ``scope`` may be a receipt's full ``scope``;
    ``kind`` defaults to ``scope["kind"]``, else ``"thread"``."""
    return _scope_of(scope, kind, strict=False)


def erasure_scope(
    kind: str,
    target: str,
    store_namespaces: Iterable[Sequence[str]] = (),
    *,
    commit: Callable[[str, str], str] | None = None,
    threads: Iterable[str] | None = None,
    discovery: str | None = None,
) -> dict[str, Any]:
    """The authorized scope of a ``kind`` erasure of ``target`` (a thread id, or the data
    subject for ``subject``) and ``store_namespaces``, as the receipt will name it: with
    ``commit`` (privacy mode, e.g. ``CommitmentKey.commit``) the target and each store
    namespace are the commitments of RECEIPT_SPEC.md 9.5 (``thread``/``subject``, and
    ``store_namespace`` of the prefix joined with ``.`` as a one-element namespace).
    For ``subject``, ``threads`` (the explicit thread ids, committed with label
    ``thread`` in privacy mode) and ``discovery`` (the metadata key, or None) bind which
    threads may be erased; :func:`authorize` needs them (``threads=()`` for none).
    Pass it to :func:`authorize` (the approver) or :meth:`Authorization.check`."""
    nss = [tuple(ns) for ns in store_namespaces]
    tids = None if threads is None else [str(t) for t in threads]
    if commit is not None:
        target = commit("subject" if kind == "subject" else "thread", target)
        nss = [(commit("store_namespace", ".".join(ns)),) for ns in nss]
        if tids is not None:
            tids = [commit("thread", t) for t in tids]
    scope: dict[str, Any] = {"kind": kind, "store_namespaces": nss}
    scope["subject" if kind == "subject" else "thread_id"] = target
    if kind == "subject" and tids is not None:
        scope["threads"] = tids
        scope["discovery"] = discovery
    return _scope_of(scope, kind, strict=False)


def _scope_difference(
    authorized: Mapping[str, Any], wanted: Mapping[str, Any], *, exact: bool = False
) -> str | None:
    """Why an authorization for ``authorized`` does not cover ``wanted`` (both in
    authorized-scope form), or None when it does.

    Subject scopes: ``discovery`` must be equal; the authorized threads must equal
    ``wanted``'s (``exact``: the saver's explicit threads, or without discovery) or be a
    subset of them (a receipt's threads add the discovered ones). Either member is
    skipped when ``wanted`` lacks it (the kind-generic check; the subject saver and the
    verifier always pass both)."""
    if authorized["kind"] != wanted["kind"]:
        return f"it authorizes a {authorized['kind']} erasure, not a {wanted['kind']} erasure"
    for k, what in (("thread_id", "thread"), ("subject", "data subject"), ("keep", "keep")):
        if authorized.get(k) != wanted.get(k):
            return f"it authorizes {what} {authorized.get(k)!r}, not {what} {wanted.get(k)!r}"
    if authorized["kind"] == "subject":
        if "discovery" in wanted and authorized.get("discovery") != wanted["discovery"]:

            def key(d: Any) -> str:
                return (
                    "no metadata discovery" if d is None else f"metadata key {d['metadata_key']!r}"
                )

            return (
                f"it authorizes {key(authorized.get('discovery'))}, not {key(wanted['discovery'])}"
            )
        if "threads" in wanted:
            a_t, w_t = set(authorized.get("threads", ())), set(wanted["threads"])
            if exact or authorized.get("discovery") is None:
                if a_t != w_t:
                    return f"it authorizes threads {sorted(a_t)!r}, not threads {sorted(w_t)!r}"
            elif not a_t <= w_t:
                return f"it authorizes threads {sorted(a_t)!r}, not all of them are erased"
    a = {tuple(ns) for ns in authorized["store_namespaces"]}
    w = {tuple(ns) for ns in wanted["store_namespaces"]}
    if a != w:

        def show(s: set[tuple[str, ...]]) -> str:
            return "[" + ", ".join("/".join(ns) for ns in sorted(s)) + "]"

        return f"it authorizes store namespaces {show(a)}, not {show(w)}"
    return None


class Authorization:
    """An approver's signed consent to one erasure: ``request_id``, the exact authorized
    ``scope`` and a ``not_after`` deadline (RECEIPT_SPEC.md 9.6), with Ed25519
    signatures over the DSSE PAE of (:data:`AUTHORIZATION_PAYLOAD_TYPE`, RFC 8785 bytes
    of the statement). Made by :func:`authorize`; read with :meth:`from_json`. The
    savers take it as ``authorization=`` and embed it in the receipt. Immutable.
    """

    __slots__ = ("_statement", "payload", "signatures")

    payload: bytes
    signatures: tuple[Signature, ...]
    _statement: dict[str, Any]

    def __init__(self, statement: Mapping[str, Any], signatures: Sequence[Signature]) -> None:
        doc = {
            "statement": json.loads(json.dumps(statement)),
            "signatures": [s.to_json() if isinstance(s, Signature) else s for s in signatures],
        }
        st, sigs = _parse(doc)
        set_ = object.__setattr__
        set_(self, "_statement", st)
        set_(self, "signatures", sigs)
        set_(self, "payload", canonicalize(st))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Authorization is immutable; cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Authorization) and (self.payload, self.signatures) == (
            other.payload,
            other.signatures,
        )

    def __hash__(self) -> int:
        return hash((self.payload, self.signatures))

    def __repr__(self) -> str:
        return (
            f"Authorization(request_id={self.request_id!r}, scope={self.scope!r}, "
            f"not_after={self.not_after!r})"
        )

    @property
    def statement(self) -> dict[str, Any]:
        """A copy of the signed statement."""
        copy: dict[str, Any] = json.loads(self.payload)
        return copy

    @property
    def request_id(self) -> str:
        """The request this authorization is for."""
        return str(self._statement["request_id"])

    @property
    def scope(self) -> dict[str, Any]:
        """A copy of the authorized scope."""
        return self.statement["scope"]  # type: ignore[no-any-return]

    @property
    def not_after(self) -> str:
        """The last instant (RFC 3339 UTC) at which an erasure may use it."""
        return str(self._statement["not_after"])

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The signing approvers' key ids (not verified here)."""
        return tuple(s.keyid for s in self.signatures)

    def signed_bytes(self) -> bytes:
        """The DSSE pre-authentication encoding the approver's signature covers."""
        return pae(AUTHORIZATION_PAYLOAD_TYPE, self.payload)

    def to_dict(self) -> dict[str, Any]:
        """The receipt's ``authorization`` member (also the AUTH.json file's object)."""
        return {"statement": self.statement, "signatures": [s.to_json() for s in self.signatures]}

    def to_json(self) -> bytes:
        """The AUTH.json file: :meth:`to_dict` as indented UTF-8 JSON and a newline."""
        return (json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes | str) -> Authorization:
        """Strictly parse an AUTH.json file (signatures are not checked here: the
        verifier checks them against the trust file's approvers).
        ``MalformedReceiptError`` if it is not one."""
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        return cls.from_obj(parse_strict(data, max_bytes=1 << 20))

    @classmethod
    def from_obj(cls, doc: Any) -> Authorization:
        """:meth:`from_json` for an already parsed object (a receipt's member)."""
        st, sigs = _parse(doc)
        self = cls.__new__(cls)
        set_ = object.__setattr__
        set_(self, "_statement", st)
        set_(self, "signatures", sigs)
        set_(self, "payload", canonicalize(st))
        return self

    def check(
        self,
        kind: str,
        scope: Mapping[str, Any],
        request_id: str,
        now: str | datetime,
        *,
        exact: bool = False,
    ) -> None:
        """Refuse (``AuthorizationError``, reason ``not_authorized``) an erasure of a
        ``kind`` erasure of ``scope`` for request ``request_id`` at ``now`` that this
        authorization does not cover: another kind, thread, subject or set of store
        namespaces, another request id, or ``now`` after ``not_after``. ``scope`` may be
        the authorized-scope form or a receipt's scope. A subject scope's ``threads`` and
        ``discovery``, when given, are checked too (``exact``: the threads are the
        erasure's explicit threads and must equal the authorized ones; otherwise, with
        discovery, the authorized threads must be among them). Signatures are not checked
        (the verifier does that against the trust file)."""
        wanted = authorized_scope(scope, kind)
        diff = _scope_difference(self._statement["scope"], wanted, exact=exact)
        if diff is not None:
            raise AuthorizationError(f"the authorization does not cover this erasure: {diff}")
        if request_id != self.request_id:
            raise AuthorizationError(
                f"the authorization is for request {self.request_id!r}, not {request_id!r}"
            )
        self.check_time(now)

    def check_time(self, now: str | datetime) -> None:
        """``AuthorizationError`` if ``now`` is after ``not_after`` (inclusive bound).
        The engine calls this again with ``issued_at`` inside the erasure transaction,
        before deleting, so waiting for a lock cannot outlast the authorization."""
        t = _format_time(now, "now")
        if _instant(t) > _instant(self.not_after):
            raise AuthorizationError(
                f"the authorization expired at {self.not_after} (now {t}); ask the approver "
                "for a new one"
            )


def _parse(doc: Any) -> tuple[dict[str, Any], tuple[Signature, ...]]:
    st, sigs = _validate_authorization(doc, "authorization")
    try:
        canonicalize(st)
    except (TypeError, ValueError):
        raise MalformedReceiptError(
            "authorization statement is not valid Unicode", reason="not_utf8"
        ) from None
    return st, sigs


def authorize(
    signer: Signer,
    *,
    request_id: str,
    scope: Mapping[str, Any],
    not_after: str | datetime,
) -> Authorization:
    """An approver's authorization, signed with the approver's own key (``signer``).

    ``scope`` is the authorized scope: ``{"kind": "thread" | "history" | "subject",
    "thread_id": ... | "subject": ..., "store_namespaces": [[...], ...]}`` (``kind``
    defaults to ``"thread"``; history scopes get ``"keep": "latest"``). A subject scope
    also names the explicit ``threads`` (a list, possibly empty) and ``discovery`` (the
    metadata key, ``{"metadata_key": K}`` or None); at least one of them is needed. In privacy mode
    use the same commitments the receipt will carry (RECEIPT_SPEC.md 9.6).
    ``not_after`` is the last instant an erasure may start with it.
    """
    if not isinstance(signer, Signer):
        raise ArgumentTypeError("signer must be an erasure_receipts.Signer (the approver's key)")
    statement = {
        "_type": AUTHORIZATION_TYPE,
        "request_id": _text(request_id, "request id"),
        "scope": _scope_of(scope, None, strict=True),
        "not_after": _format_time(not_after, "not_after"),
    }
    try:
        _validate_scope(statement["scope"], "scope")
        payload = canonicalize(statement)
    except MalformedReceiptError as exc:
        raise ConfigurationError(f"cannot authorize this scope: {exc.message}") from None
    sig = Signature(signer.key_id, signer.sign(pae(AUTHORIZATION_PAYLOAD_TYPE, payload)))
    return Authorization.from_obj({"statement": statement, "signatures": [sig.to_json()]})


# -- verification (called by verify.verify_receipt) ----------------------------------------


def _approver(auth: Authorization, trust: TrustStore, issued_at: str) -> TrustedKey:
    message = auth.signed_bytes()
    outside: TrustedKey | None = None
    bad = False
    for sig in auth.signatures:
        for tk in trust.approvers(sig.keyid):
            if not tk.key.verify(sig.sig, message):
                bad = True
            elif tk._contains(issued_at):
                return tk
            else:
                outside = tk
    if outside is not None:
        raise UntrustedKeyError(
            f"authorization signed by approver key {outside.key.key_id[:16]}, which was not "
            f"valid at {issued_at}",
            reason="authorization_untrusted",
        )
    if bad:
        raise SignatureError(
            "authorization signature does not match its statement (tampered?)",
            reason="authorization_bad_signature",
        )
    ids = ", ".join(s.keyid[:16] for s in auth.signatures)
    if any(trust.get(s.keyid) for s in auth.signatures):
        why = "trusted to sign receipts, not as an approver"
    else:
        why = "not a trusted approver"
    raise UntrustedKeyError(
        f"authorization signed by key {ids}, {why} (the trust file must list the "
        'approver\'s key with "role": "approver")',
        reason="authorization_untrusted",
    )


def verify_request(p: Mapping[str, Any], trust: TrustStore) -> TrustedKey | None:
    """Check a verified predicate's ``request`` and ``authorization`` (RECEIPT_SPEC.md
    9.6, verification step 5) and return the approver's trusted key (None without an
    authorization). Raises ``ReceiptSemanticsError`` (``inconsistent``,
    ``authorization_mismatch``, ``authorization_expired``), ``UntrustedKeyError``
    (``authorization_untrusted``) or ``SignatureError``
    (``authorization_bad_signature``)."""
    r = p["request"]
    issued_at = p["issued_at"]
    rec, due = r["received_at"], r["due"]
    if rec is not None and _instant(rec) > _instant(issued_at):
        raise ReceiptSemanticsError(
            f"request received_at {rec} is after the erasure began ({issued_at})",
            reason="inconsistent",
        )
    if rec is not None and due is not None and _instant(due) <= _instant(rec):
        raise ReceiptSemanticsError(
            f"request due {due} is not after received_at {rec}", reason="inconsistent"
        )
    requester = r["requester"]
    if "privacy" in p["scope"] and requester is not None and not _is_commitment(requester):
        raise ReceiptSemanticsError(
            "privacy-mode receipt names its requester in clear (must be a commitment)",
            reason="inconsistent",
        )
    if "authorization" not in p:
        return None
    auth = Authorization.from_obj(p["authorization"])
    if auth.request_id != r["id"]:
        raise ReceiptSemanticsError(
            f"authorization is for request {auth.request_id!r}, the receipt for {r['id']!r}",
            reason="authorization_mismatch",
        )
    kind = p.get("kind", "thread")
    if kind == "deferral":  # 9.14: the approver authorizes retaining this scope
        kind = p["deferral"]["of_kind"]
    wanted = authorized_scope(p["scope"], kind)
    diff = _scope_difference(auth._statement["scope"], wanted)
    if diff is not None:
        raise ReceiptSemanticsError(
            f"authorization does not cover the erased scope: {diff}",
            reason="authorization_mismatch",
        )
    if _instant(issued_at) > _instant(auth.not_after):
        raise ReceiptSemanticsError(
            f"authorization expired at {auth.not_after}, before the erasure began ({issued_at})",
            reason="authorization_expired",
        )
    return _approver(auth, trust, issued_at)
