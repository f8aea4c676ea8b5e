"""Needles: values that must occur nowhere after an erasure, in every form a backend
stores them (RECEIPT_SPEC.md 9.4).
"""

from __future__ import annotations

import base64
import json
import os
import re
import unicodedata
from collections.abc import Iterator, Sequence
from typing import Any

from langgraph.store.base import BaseStore

from .._backends.store import PAGE_SIZE
from .._parts import iter_pages
from ..errors import (
    NeedlesFoundError,
)
from .types import ErasureBackend, ErasureRequest, _committed

__all__ = ["NEEDLE_FORMS", "named_needle_forms", "needle_forms", "store_locations"]


NEEDLE_FORMS = (
    "raw", "json", "json-escaped", "json-escaped-upper", "json-nested",
    "json-escaped-nested", "json-solidus", "unicode-nfc", "unicode-nfd",
)  # fmt: skip
"""How a needle can be stored, all searched (RECEIPT_SPEC.md 9.4): its UTF-8 bytes
(msgpack); JSON string text with only ``"``, ``\\`` and control characters escaped
(orjson, PostgreSQL jsonb, ``json.dumps(..., ensure_ascii=False)``); the same with every
non-ASCII character as ``\\uXXXX`` (Python's ``json.dumps`` default), also with
upper-case hex digits; either JSON text stored inside a JSON string again (pasted JSON:
every backslash doubled); any of these with ``/`` written ``\\/``; and each of them
for the needle's Unicode NFC and NFD forms. Not searched: other letter cases, other
normalisations (NFKC), and a value split across several stored values."""


def named_needle_forms(needle: str) -> list[tuple[str, bytes]]:
    """``(form name, bytes)`` searched for one needle; a form equal to an earlier one is
    left out (an ASCII needle without characters JSON escapes has one form)."""
    named: dict[bytes, str] = {}
    variants = {"": needle}
    for nf in ("NFC", "NFD"):
        variants.setdefault(f"+unicode-{nf.lower()}", unicodedata.normalize(nf, needle))
    for suffix, v in variants.items():
        raw = v.encode("utf-8", "surrogatepass")
        plain = json.dumps(v, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")
        escaped = json.dumps(v)[1:-1].encode("ascii")
        upper = re.sub(rb"\\u([0-9a-f]{4})", lambda m: b"\\u" + m.group(1).upper(), escaped)
        jsonish = {"json": plain, "json-escaped": escaped, "json-escaped-upper": upper}
        for name, form in list(jsonish.items()):
            if b"/" in form:
                jsonish[f"{name}+json-solidus"] = form.replace(b"/", b"\\/")
        forms = {"raw": raw, **jsonish}
        for name, form in jsonish.items():  # that JSON text pasted into a JSON string
            text = form.decode("utf-8", "surrogatepass")
            nested = json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")
            forms[name.replace("json", "json-nested", 1) if name == "json" else f"{name}-nested"
                  if "+" not in name else name.replace("+", "-nested+", 1)] = nested  # fmt: skip
        for name, form in forms.items():
            named.setdefault(form, name + suffix)
    return [(name, form) for form, name in named.items() if form]


def needle_forms(needle: str) -> list[bytes]:
    """The byte strings a backend searches for one needle (see ``NEEDLE_FORMS``)."""
    return [form for _, form in named_needle_forms(needle)]


def _check_needles(
    backend: ErasureBackend, request: ErasureRequest, *, outside: bool = False
) -> dict[str, Any] | None:
    """Inside the transaction, after the deletion: no needle may occur in the searched
    scope, or the erasure is refused (rolled back) and the locations reported.

    First the database's rows, before anything is swept outside the transaction (so a
    refusal deletes nothing anywhere); then (``outside``), after the sweep, a store
    outside the database, if the backend searches one (``find_store_needles``)."""
    if not request.needles:
        return None
    find = backend.find_store_needles if outside else backend.find_needles
    forms = [(i, f) for i, n in enumerate(request.needles) for f in needle_forms(n)]
    found = find([f for _, f in forms], request.needle_scope, request.all_threads)
    if found:
        raise NeedlesFoundError(_redact_locations(found, request, forms))
    if outside:
        return None
    if request.privacy is not None:
        values, salt = [request.privacy.needle(n) for n in request.needles], None
    else:
        from ..privacy import needle_commitment

        key = os.urandom(16)
        values = [needle_commitment(key, n) for n in request.needles]
        salt = base64.b64encode(key).decode("ascii")
    return {
        "commitment": "hmac-sha256", "salt": salt, "values": sorted(set(values)),
        "forms": list(NEEDLE_FORMS), "searched": request.needle_scope,
        "occurrences_after": 0,
    }  # fmt: skip


_LOCATION_LABELS = {"thread_id": "thread", "prefix": "store_namespace"}


def _redact_locations(
    locations: list[dict[str, Any]], request: ErasureRequest, forms: list[tuple[int, bytes]]
) -> list[dict[str, Any]]:
    """Locations fit to print: a key that contains a needle (a store key, a thread id)
    names the needle by number instead, and in privacy mode ids are committed and store
    keys withheld."""
    texts = [(i, f.decode("utf-8", "replace")) for i, f in forms]
    out = []
    for loc in locations:
        clean: dict[str, Any] = {}
        for k, v in loc.items():
            if k in ("table", "column", "form") or not isinstance(v, str):
                clean[k] = v
                continue
            hit = next((i for i, t in texts if t and t in v), None)
            if hit is not None:
                clean[k] = f"<contains needle #{hit + 1}>"
            elif request.privacy is not None and k in _LOCATION_LABELS:
                clean[k] = _committed(request, _LOCATION_LABELS[k], v)
            elif request.privacy is not None and k == "key":  # a store key names people too
                clean[k] = "withheld (privacy mode)"
            else:
                clean[k] = v
        out.append(clean)
    return out


# -- the store outside the database: through the BaseStore API -------------------------


def _all_namespaces(store: BaseStore) -> Iterator[tuple[str, ...]]:
    def fetch(offset: int) -> list[Any]:
        return list(store.list_namespaces(limit=PAGE_SIZE, offset=offset))

    return iter_pages(fetch, PAGE_SIZE)


def store_locations(store: BaseStore, forms: Sequence[bytes]) -> list[dict[str, Any]]:
    """Store items holding any of ``forms`` in their namespace, key or value (as JSON
    text), searched page by page through the API (items a store hides, such as expired
    ones, are not seen)."""
    out: list[dict[str, Any]] = []
    for first in sorted({ns[0] for ns in _all_namespaces(store) if ns}):

        def fetch(offset: int, first: str = first) -> list[Any]:
            return list(store.search((first,), limit=PAGE_SIZE, offset=offset, refresh_ttl=False))

        for item in iter_pages(fetch, PAGE_SIZE):
            prefix = ".".join(item.namespace)
            value = json.dumps(item.value, ensure_ascii=False, default=str, sort_keys=True)
            columns = (("prefix", prefix), ("key", item.key), ("value", value))
            for column, text in columns:
                data = text.encode("utf-8", "surrogatepass")
                if any(f in data for f in forms):
                    out.append({"table": "store", "prefix": prefix, "key": item.key,
                                "column": column, "via": "store_api"})  # fmt: skip
    return out
