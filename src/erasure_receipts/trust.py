"""Trust: the keys an auditor accepts (``TrustedKey``, ``TrustStore``) and trust files,
read (``TrustStore.from_json``) and written (``TrustFile``: what ``receipt trust
add|list`` do, as a Python API)::

    tf = TrustFile.read("trust.json") if os.path.exists("trust.json") else TrustFile()
    if (clash := tf.conflict(key, not_before="2026-01-01T00:00:00Z")) is None:
        tf.add(key, "release-2026", not_before="2026-01-01T00:00:00Z").write("trust.json")

A trust file (RECEIPT_SPEC.md section 7, ``schemas/trust.schema.json``) lists Ed25519
keys with optional validity windows and a role: receipt signer or erasure approver.
Every file ``TrustFile`` writes is one ``TrustStore.from_json`` accepts (checked before
writing). On the verify path: imports nothing from LangGraph and no database driver.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ._input import read_input
from .canonical import parse_strict
from .errors import KeyFormatError, MalformedReceiptError
from .receipt import is_time, time_key
from .signing import PublicKey

__all__ = ["ROLES", "TrustFile", "TrustStore", "TrustedKey", "window_text"]

ROLES = ("signer", "approver")
"""Trust-file key roles (RECEIPT_SPEC.md 7): receipt signers, erasure approvers (9.6)."""


class TrustedKey:
    """A key the auditor trusts, optionally only for receipts issued in a time window.

    ``not_before``/``not_after`` are RFC 3339 UTC strings in the receipt's own format
    (``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``). Rotation = a new key with ``not_before`` set,
    and the old key given a ``not_after``.

    ``role`` is ``"signer"`` (signs receipts; the default) or ``"approver"`` (signs
    erasure authorizations, RECEIPT_SPEC.md 9.6); a key is trusted only in its role.
    """

    __slots__ = ("_after", "_before", "key", "name", "not_after", "not_before", "role")

    def __init__(
        self,
        key: PublicKey,
        name: str = "",
        not_before: str | None = None,
        not_after: str | None = None,
        role: str = "signer",
    ) -> None:
        if not isinstance(key, PublicKey):
            raise TypeError(f"TrustedKey needs a PublicKey, not {type(key).__name__}")
        if type(name) is not str:
            raise TypeError("TrustedKey name must be a str")
        if role not in ROLES or type(role) is not str:
            raise KeyFormatError(f"role {role!r} is not one of {', '.join(ROLES)}")
        for label, t in (("not_before", not_before), ("not_after", not_after)):
            if t is not None and (type(t) is not str or not is_time(t)):
                raise KeyFormatError(
                    f"{label} {t!r} is not a real RFC 3339 UTC time like 2026-01-31T00:00:00Z"
                )
        self.key = key
        self.name = name
        self.not_before = not_before
        self.not_after = not_after
        self.role = role
        self._before = None if not_before is None else _normalise_time(not_before)
        self._after = None if not_after is None else _normalise_time(not_after)
        if self._before is not None and self._after is not None and self._before >= self._after:
            raise KeyFormatError(
                f"empty validity window: not_before {not_before} is not before "
                f"not_after {not_after}"
            )

    def __repr__(self) -> str:
        role = f", role={self.role!r}" if self.role != "signer" else ""
        return f"TrustedKey({self.key!r}, name={self.name!r}{role})"

    def to_entry(self) -> dict[str, str]:
        """This key as a trust-file entry (``keys[i]``): ``name``, ``ed25519`` and, when
        set, ``not_before``/``not_after``; ``role`` only when not the default signer."""
        entry = {"name": self.name, "ed25519": self.key.b64()}
        for label, t in (("not_before", self.not_before), ("not_after", self.not_after)):
            if t is not None:
                entry[label] = t
        if self.role != "signer":
            entry["role"] = self.role
        return entry

    def valid_at(self, issued_at: str) -> bool:
        """Whether a receipt issued at ``issued_at`` falls in [not_before, not_after).

        Raises ``ValueError`` if ``issued_at`` is not a real RFC 3339 UTC time."""
        if type(issued_at) is not str or not is_time(issued_at):
            raise ValueError(f"{issued_at!r} is not an RFC 3339 UTC time")
        return self._contains(issued_at)

    def _contains(self, issued_at: str) -> bool:
        # issued_at is already validated (the verifier's schema check)
        if self._before is None and self._after is None:
            return True
        t = _normalise_time(issued_at)
        if self._before is not None and t < self._before:
            return False
        return not (self._after is not None and t >= self._after)


_normalise_time = time_key  # "...00Z" and "...00.5Z" order by instant, not text


class TrustStore:
    """The set of keys an auditor accepts, looked up by key id: receipt signers
    (:meth:`get`) and erasure approvers (:meth:`approvers`). One key cannot have both
    roles (four eyes: whoever signs receipts cannot approve erasures)."""

    def __init__(
        self, keys: Iterable[TrustedKey | PublicKey] | TrustedKey | PublicKey = ()
    ) -> None:
        given: object = keys  # callers without type checking pass anything
        items: Iterable[object]
        if isinstance(given, TrustedKey | PublicKey):
            items = (given,)  # one key: the common case of a single signer
        elif isinstance(given, str | bytes) or not isinstance(given, Iterable):
            raise TypeError(
                "trusted keys must be a PublicKey/TrustedKey or a list of them, "
                f"not {type(given).__name__}"
            )
        else:
            items = given
        self._by_id: dict[str, list[TrustedKey]] = {}  # signers
        self._approvers: dict[str, list[TrustedKey]] = {}
        self._all: list[TrustedKey] = []
        for k in items:
            if not isinstance(k, TrustedKey | PublicKey):
                raise TypeError(f"a trusted key must be a PublicKey, not {type(k).__name__}")
            tk = k if isinstance(k, TrustedKey) else TrustedKey(k)
            mine, other = (
                (self._approvers, self._by_id)
                if tk.role == "approver"
                else (self._by_id, self._approvers)
            )
            if tk.key.key_id in other:
                raise KeyFormatError(
                    f"key {tk.key.key_id[:16]} is trusted both as a receipt signer and as an "
                    "approver; four eyes need two keys"
                )
            mine.setdefault(tk.key.key_id, []).append(tk)
            self._all.append(tk)

    def __len__(self) -> int:
        return len(self._all)

    def __iter__(self) -> Iterator[TrustedKey]:
        """Every entry, signers and approvers, in the order given."""
        return iter(self._all)

    def signers(self) -> list[TrustedKey]:
        """The entries trusted to sign receipts (role ``signer``)."""
        return [tk for tk in self._all if tk.role == "signer"]

    def log_keys(self) -> list[PublicKey]:
        """The keys trusted to sign receipt-log checkpoints (RECEIPT_SPEC.md 10.2): the
        receipt signers. An approver's key never signs a log: it approves erasures."""
        seen: dict[str, PublicKey] = {}
        for tk in self._all:
            if tk.role == "signer":
                seen.setdefault(tk.key.key_id, tk.key)
        return list(seen.values())

    def approvers(self, keyid: str) -> list[TrustedKey]:
        """Every approver entry with this key id (role ``approver``); empty if none."""
        return self._approvers.get(keyid, [])

    def get(self, keyid: str) -> list[TrustedKey]:
        """Every entry trusted to sign receipts with this key id (one key may have
        several validity windows); empty if the key is not a trusted signer."""
        return self._by_id.get(keyid, [])

    @classmethod
    def from_json(cls, data: bytes | str) -> TrustStore:
        """Load a trust file: ``{"trust_version": 1, "keys": [{...}, ...]}``.

        ``data`` is the file's bytes or its text. Each key has ``ed25519`` (base64 raw
        key) or ``pem``, and optionally ``name``, ``not_before`` and ``not_after`` (real
        RFC 3339 UTC times, ``not_before`` < ``not_after``) and ``role`` (``"signer"``,
        the default, or ``"approver"``). See RECEIPT_SPEC.md, "Trust files".
        """
        if isinstance(data, str):
            try:
                data = data.encode("utf-8")
            except UnicodeEncodeError:
                raise KeyFormatError("trust file text is not valid Unicode") from None
        if not isinstance(data, bytes | bytearray):
            raise TypeError(f"a trust file is bytes or str, not {type(data).__name__}")
        try:
            doc = parse_strict(data)
        except MalformedReceiptError as exc:
            raise KeyFormatError(f"trust file is not valid JSON: {exc}") from None
        if type(doc) is not dict or doc.get("trust_version") != 1:
            raise KeyFormatError('trust file must be an object with "trust_version": 1')
        keys = doc.get("keys")
        if type(keys) is not list or not keys or set(doc) != {"trust_version", "keys"}:
            raise KeyFormatError('trust file needs a non-empty "keys" array and nothing else')
        out = []
        allowed = {"ed25519", "pem", "name", "not_before", "not_after", "role"}
        for i, k in enumerate(keys):
            if type(k) is not dict or not set(k) <= allowed:
                raise KeyFormatError(f"trust file keys[{i}] has unknown members")
            if ("ed25519" in k) == ("pem" in k):
                raise KeyFormatError(f"trust file keys[{i}] needs exactly one of ed25519, pem")
            for f in ("name", "not_before", "not_after", "ed25519", "pem", "role"):
                if f in k and type(k[f]) is not str:
                    raise KeyFormatError(f"trust file keys[{i}].{f} must be a string")
            for f in ("not_before", "not_after"):
                if f in k and not is_time(k[f]):
                    raise KeyFormatError(
                        f"trust file keys[{i}].{f} must be a real time like 2026-01-31T00:00:00Z"
                    )
            try:
                if "ed25519" in k:
                    pk = PublicKey.from_base64(k["ed25519"])
                else:
                    pk = PublicKey.from_pem(k["pem"])
                tk = TrustedKey(
                    pk, k.get("name", ""), k.get("not_before"), k.get("not_after"),
                    k.get("role", "signer"),
                )  # fmt: skip
            except KeyFormatError as exc:
                raise KeyFormatError(f"trust file keys[{i}]: {exc.message}") from None
            out.append(tk)
        return cls(out)

    def to_json(self) -> bytes:
        """This store as a trust file (what :meth:`from_json` reads back)."""
        return _trust_file_bytes([tk.to_entry() for tk in self._all])


def _trust_file_bytes(entries: Sequence[Mapping[str, Any]]) -> bytes:
    """A trust file holding ``entries`` (``keys[i]`` objects, kept as given) as indented
    UTF-8 JSON with a final newline: the one form trust files are written in."""
    doc = {"trust_version": 1, "keys": [dict(e) for e in entries]}
    import json

    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _instant(t: str | None, default: str) -> str:
    """A window bound as sortable text (fraction padded); ``default`` for an open end."""
    return default if t is None else time_key(t)


def window_text(not_before: str | None, not_after: str | None) -> str:
    """A validity window as ``receipt trust`` prints it: ``[FROM, UNTIL)``."""
    return f"[{not_before or 'any time'}, {not_after or 'open'})"


class TrustFile:
    """A trust file's key entries, in file order (the raw JSON objects, so a file is
    rewritten as it was, plus what is added) and the ``TrustedKey`` of each."""

    def __init__(self, entries: list[dict[str, Any]] | None = None) -> None:
        self.entries: list[dict[str, Any]] = list(entries or [])

    @property
    def keys(self) -> list[TrustedKey]:
        """The ``TrustedKey`` of each entry, in file order."""
        return [next(iter(TrustStore.from_json(_trust_file_bytes([e])))) for e in self.entries]

    @classmethod
    def parse(cls, data: bytes) -> TrustFile:
        """A trust file's bytes, checked by the verifier's own rules (``Error`` if it
        would not load as a ``TrustStore``)."""
        TrustStore.from_json(data)
        return cls(parse_strict(data)["keys"])

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> TrustFile:
        """:meth:`parse` of a file (``InputError`` if it cannot be read)."""
        return cls.parse(read_input(os.fspath(path)))

    def conflict(
        self,
        key: PublicKey,
        not_before: str | None = None,
        not_after: str | None = None,
        role: str = "signer",
    ) -> tuple[str, TrustedKey] | None:
        """Why ``key`` cannot be added, with the entry in the way: ``"role_conflict"``
        (the key is trusted with the other role: four eyes need two keys) or
        ``"duplicate_key"`` (its window overlaps one the key already has); else None."""
        lo, hi = _instant(not_before, ""), _instant(not_after, "~")
        for tk in self.keys:
            if tk.key.key_id == key.key_id and tk.role != role:
                return "role_conflict", tk
            if tk.key.key_id == key.key_id and (
                _instant(tk.not_before, "") < hi and lo < _instant(tk.not_after, "~")
            ):
                return "duplicate_key", tk
        return None

    def add(
        self,
        key: PublicKey,
        name: str,
        not_before: str | None = None,
        not_after: str | None = None,
        role: str = "signer",
    ) -> TrustFile:
        """A new ``TrustFile`` with ``key`` appended (check :meth:`conflict` first; the
        default role is left out of the entry, as files have always been written)."""
        entry: dict[str, Any] = {"name": name, "ed25519": key.b64()}
        bounds = (("not_before", not_before), ("not_after", not_after))
        entry.update({k: v for k, v in bounds if v is not None})
        if role != "signer":
            entry["role"] = role
        return TrustFile([*self.entries, entry])

    def to_bytes(self) -> bytes:
        """The file's bytes: ``{"trust_version": 1, "keys": [...]}``, indented, UTF-8."""
        return _trust_file_bytes(self.entries)

    def store(self) -> TrustStore:
        """The ``TrustStore`` the verifier would load from :meth:`to_bytes` (``Error``
        if it would reject the file)."""
        return TrustStore.from_json(self.to_bytes())

    def write(self, path: str | os.PathLike[str], mode: int | None = None) -> int:
        """Write the file durably (never partly), after checking the verifier accepts
        it; an existing file keeps its permission bits unless ``mode`` is given (new
        files: 0644). Returns the number of keys trusted. ``OSError`` if unwritable."""
        import stat

        from .receipt import write_durably

        data = self.to_bytes()
        n = len(TrustStore.from_json(data))
        if mode is None:
            mode = stat.S_IMODE(os.stat(path).st_mode) if os.path.lexists(path) else 0o644
        write_durably(path, data, exist_ok=True, mode=mode)
        return n
