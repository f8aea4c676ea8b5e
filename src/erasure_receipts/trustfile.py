"""Writing trust files (RECEIPT_SPEC.md 7): what ``receipt trust add|list`` do, as a
Python API. Reading them for verification is ``TrustStore.from_json``; this module adds
keys to a file the way the command does, so a program can manage a trust file without
the command line::

    tf = TrustFile.read("trust.json") if os.path.exists("trust.json") else TrustFile()
    if (clash := tf.conflict(key, not_before="2026-01-01T00:00:00Z")) is None:
        tf.add(key, "release-2026", not_before="2026-01-01T00:00:00Z").write("trust.json")

Every file it writes is one ``TrustStore.from_json`` accepts (checked before writing).
"""

from __future__ import annotations

import json
import os
from typing import Any

from .signing import PublicKey
from .verify import TrustedKey, TrustStore, read_input

__all__ = ["TrustFile", "window_text"]


def _instant(t: str | None, default: str) -> str:
    """A window bound as sortable text (fraction padded); ``default`` for an open end."""
    if t is None:
        return default
    base, _, frac = t[:-1].partition(".")
    return f"{base}.{frac.ljust(6, '0')}"


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
        return [next(iter(TrustStore.from_json(_document([e])))) for e in self.entries]

    @classmethod
    def parse(cls, data: bytes) -> TrustFile:
        """A trust file's bytes, checked by the verifier's own rules (``Error`` if it
        would not load as a ``TrustStore``)."""
        from .canonical import parse_strict

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
        return _document(self.entries)

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


def _document(entries: list[dict[str, Any]]) -> bytes:
    doc = {"trust_version": 1, "keys": entries}
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
