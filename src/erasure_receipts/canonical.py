"""RFC 8785 (JCS) canonical bytes and strict JSON parsing.

Receipts only ever contain strings, booleans, null, arrays, objects and integers inside
the I-JSON safe range; floats are rejected outright (``canonicalize(value, floats=True)``
admits them, for store-item leaves). On that domain RFC 8785 reduces to:
object members sorted by the UTF-16 code units of their names, no whitespace, integers
in plain decimal and strings escaped exactly as ECMAScript's ``JSON.stringify`` does.

``canonicalize`` is the reference implementation (pure Python, any key). The verifier
uses ``canonicalize_ascii_keys``, which delegates to the stdlib's C JSON encoder: for
ASCII member names code-point order equals UTF-16 order, and with ``ensure_ascii=False``
its escaping (short forms for \\b \\f \\n \\r \\t, lowercase ``\\u00xx`` for other
controls, everything else literal) equals ECMAScript's, so the bytes are identical (the
test suite checks both against the independent ``rfc8785`` package). It is far faster
than a Python walk and keeps the verify path free of extra imports.
"""

from __future__ import annotations

from typing import Any

from .errors import MalformedReceiptError

__all__ = [
    "MAX_INPUT_BYTES",
    "MAX_SAFE_INTEGER",
    "canonicalize",
    "canonicalize_ascii_keys",
    "es6_number",
    "parse_own_layout",
    "parse_strict",
]

MAX_SAFE_INTEGER = 2**53 - 1
MAX_INPUT_BYTES = 1 << 20
"""Receipts are a few KiB; anything over 1 MiB is refused before parsing."""

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
_ESCAPES["\t"] = "\\t"

MAX_FLOAT_MODE_DEPTH = 1000
"""Nesting limit of ``floats=True`` (store values are arbitrary: refuse, not recurse)."""
_FLOAT_MODE_MAX_INTEGER = 2**53
"""``floats=True``: integers exactly representable as a double (a store value's range)."""


def _escape(s: str) -> str:
    out = ['"']
    for ch in s:
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _utf16_key(name: str) -> bytes:
    return name.encode("utf-16-be", "surrogatepass")


def es6_number(v: float) -> str:
    """ECMAScript Number::toString of a finite double (RFC 8785 section 3.2.2.3)."""
    if v != v or v in (float("inf"), float("-inf")):
        raise ValueError("NaN and Infinity are not JSON")
    if v == 0:
        return "0"
    if v < 0:
        return "-" + es6_number(-v)
    mantissa, _, exp = repr(v).partition("e")  # repr: the shortest round-tripping digits
    whole, _, frac = mantissa.partition(".")
    raw = whole + frac
    digits = raw.lstrip("0")
    n = len(whole) + (int(exp) if exp else 0) - (len(raw) - len(digits))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = n - 1
    return (
        digits[0]
        + ("." + digits[1:] if k > 1 else "")
        + "e"
        + ("+" if e >= 0 else "-")
        + str(abs(e))
    )


def _emit(value: Any, out: list[str], floats: bool, depth: int) -> None:
    if floats and depth > MAX_FLOAT_MODE_DEPTH:
        raise ValueError("nesting too deep")
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        if floats:
            if not -_FLOAT_MODE_MAX_INTEGER <= value <= _FLOAT_MODE_MAX_INTEGER:
                raise ValueError("integer outside the exactly representable range")
        elif not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise ValueError(f"integer {value} is outside the I-JSON safe range")
        out.append(str(int(value)))
    elif isinstance(value, str):
        value.encode("utf-8")  # rejects lone surrogates
        out.append(_escape(value))
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _emit(item, out, floats, depth + 1)
        out.append("]")
    elif isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise TypeError("object member names must be strings")
        out.append("{")
        for i, key in enumerate(sorted(value, key=_utf16_key)):
            if i:
                out.append(",")
            out.append(_escape(key))
            out.append(":")
            _emit(value[key], out, floats, depth + 1)
        out.append("}")
    elif floats and isinstance(value, float):
        out.append(es6_number(value))
    elif floats:
        raise TypeError(f"{type(value).__name__} is not JSON")
    else:
        raise TypeError(f"{type(value).__name__} values cannot be canonicalized (no floats)")


def canonicalize(value: Any, *, floats: bool = False) -> bytes:
    """RFC 8785 canonical UTF-8 bytes of ``value``: the one reference implementation.

    Receipts (the default): no floats, integers within +-(2**53 - 1). ``floats=True`` is
    the store-leaf mode (RECEIPT_SPEC.md section 4): finite floats as ECMAScript prints
    them, integers within +-2**53, at most ``MAX_FLOAT_MODE_DEPTH`` levels of nesting.
    Raises ``ValueError``, ``TypeError`` or ``UnicodeEncodeError`` outside the domain.
    """
    out: list[str] = []
    _emit(value, out, floats, 0)
    return "".join(out).encode("utf-8")


def _no_default(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


# The C parts of the stdlib's json, used directly: ``import json`` compiles half a dozen
# regular expressions (about 3 ms of a verifier's cold start) that the C scanner and
# encoder never use. json.dumps builds a new C encoder on every call; build the identical
# one once (markers=None: parsed JSON cannot be circular). Falls back to the json module
# where the C module is absent.
try:
    import _json
except ImportError:  # pragma: no cover - CPython always has _json
    _json_c: Any = None
else:
    _json_c = _json
_c_encoder: Any = (
    None
    if _json_c is None
    else _json_c.make_encoder(
        None, _no_default, _json_c.encode_basestring, None, ":", ",", True, False, False
    )
)


_orjson_dumps: Any = None
_orjson_file: Any = None  # (loads, dumps indented) for parse_own_layout


def use_orjson() -> None:
    """Compute ``canonicalize_ascii_keys`` with orjson from now on (batch verification).

    Same bytes (sorted keys, compact, ECMAScript escaping; the tests check it against
    ``canonicalize`` and ``rfc8785``), ~3x faster, but a 5 ms import: worth it only
    when many receipts are verified in one process.
    """
    global _orjson_dumps, _orjson_file
    if _orjson_dumps is None:
        import orjson

        option = orjson.OPT_SORT_KEYS
        _orjson_file = (orjson.loads, orjson.dumps, orjson.OPT_INDENT_2)

        def dumps(value: Any) -> bytes:
            try:
                out: bytes = orjson.dumps(value, option=option)
            except TypeError:  # lone surrogates, or a non-JSON type
                raise UnicodeEncodeError("utf-8", "", 0, 1, "not valid Unicode") from None
            return out

        _orjson_dumps = dumps


def canonicalize_ascii_keys(value: Any) -> bytes:
    """Fast RFC 8785 bytes for values whose member names are all ASCII.

    The caller guarantees the precondition (the receipt validator admits only known,
    ASCII member names) and the float/integer domain.
    """
    try:
        if _orjson_dumps is not None:
            return _orjson_dumps(value)  # type: ignore[no-any-return]
        if _c_encoder is not None:
            return "".join(_c_encoder(value, 0)).encode("utf-8")
        import json

        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
    except UnicodeEncodeError:
        raise MalformedReceiptError("string is not valid Unicode", reason="not_utf8") from None


def parse_own_layout(data: bytes) -> Any | None:
    """A fast path for batches (after :func:`use_orjson`): the parsed document when
    ``data`` is byte for byte the layout ``Receipt.to_json`` writes (2-space indent, one
    final newline) of what orjson parses from it, else None (then use ``parse_strict``).

    The byte identity is what makes it safe: the serialisation of a parsed document
    cannot repeat a member name, so ``parse_strict`` would return an equal document
    (a float still parses here; the schema check rejects it, and the caller's strict
    re-parse then reports ``float``)."""
    fast = _orjson_file
    if fast is None or len(data) > MAX_INPUT_BYTES or data[-1:] != b"\n":
        return None
    loads, dumps, indent = fast
    try:
        doc = loads(data)
        if dumps(doc, option=indent) != data[:-1]:
            return None
    except (ValueError, TypeError):
        return None
    return doc


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise MalformedReceiptError(f"duplicate key {key!r}", reason="duplicate_key")
            seen.add(key)
    return obj


def _reject_float(text: str) -> Any:
    raise MalformedReceiptError(f"non-integer number {text} is not allowed", reason="float")


def _reject_constant(text: str) -> Any:
    raise MalformedReceiptError(f"{text} is not valid JSON", reason="not_json")


def parse_strict(data: bytes, *, max_bytes: int = MAX_INPUT_BYTES) -> Any:
    """Parse UTF-8 JSON, rejecting what could make two readers disagree.

    Rejected: input over ``max_bytes``, non-UTF-8 (and a BOM), duplicate member names,
    non-integer numbers, NaN/Infinity, and trailing garbage. Integer *range* is checked
    by the receipt validator, which knows where integers may appear.
    """
    if not isinstance(data, bytes | bytearray):
        raise TypeError(f"parse_strict takes bytes, not {type(data).__name__}")
    if len(data) > max_bytes:
        raise MalformedReceiptError(
            f"input is {len(data)} bytes, over the {max_bytes}-byte limit", reason="too_large"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedReceiptError(
            f"input is not UTF-8 (byte {exc.start})", reason="not_utf8"
        ) from None
    if text.startswith("\ufeff"):
        raise MalformedReceiptError("input starts with a byte-order mark", reason="not_utf8")
    try:
        return _loads(text)
    except MalformedReceiptError:
        raise
    except RecursionError:
        raise MalformedReceiptError("JSON nesting is too deep", reason="not_json") from None
    except ValueError as exc:  # a JSONDecodeError, or int() over the digit limit
        from json import JSONDecodeError

        if isinstance(exc, JSONDecodeError):
            raise MalformedReceiptError(
                f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", reason="not_json"
            ) from None
        raise MalformedReceiptError(f"not acceptable JSON: {exc}", reason="not_json") from None


_WS = " \t\n\r"


class _StrictContext:
    """What the C scanner reads from a ``json.JSONDecoder``: strict parsing's hooks."""

    strict = True
    object_hook = None
    object_pairs_hook = staticmethod(_pairs_hook)
    parse_float = staticmethod(_reject_float)
    parse_int = int
    parse_constant = staticmethod(_reject_constant)


_scan: Any = None if _json_c is None else _json_c.make_scanner(_StrictContext())


def _loads(text: str) -> Any:
    """``json.loads(text, object_pairs_hook=..., parse_float=..., parse_constant=...)``
    with one C scanner built once (json.loads builds a decoder per call), the same
    results and the same errors."""
    if _scan is None:  # pragma: no cover - CPython always has _json
        import json

        return json.loads(
            text,
            object_pairs_hook=_pairs_hook,
            parse_float=_reject_float,
            parse_constant=_reject_constant,
        )
    start = len(text) - len(text.lstrip(_WS))
    try:
        try:
            obj, end = _scan(text, start)
        except SystemError:
            # Python 3.11's scanner raises its JSONDecodeError only when json.decoder is
            # already imported (else this SystemError): import it and scan again.
            import json.decoder

            obj, end = _scan(text, start)
    except StopIteration as err:
        from json import JSONDecodeError

        raise JSONDecodeError("Expecting value", text, err.value) from None
    if end != len(text):
        rest = text[end:]
        end += len(rest) - len(rest.lstrip(_WS))
        if end != len(text):
            from json import JSONDecodeError

            raise JSONDecodeError("Extra data", text, end)
    return obj
