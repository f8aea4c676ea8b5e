"""RFC 8785 canonical bytes (checked against the independent ``rfc8785`` package) and
the strict parser's rejections."""

from __future__ import annotations

import json
import random
import sys

import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from erasure_receipts.canonical import (
    MAX_INPUT_BYTES,
    MAX_SAFE_INTEGER,
    canonicalize,
    canonicalize_ascii_keys,
    parse_strict,
)
from erasure_receipts.errors import MalformedReceiptError, VerificationError

# -- strategies ---------------------------------------------------------------------------

safe_ints = st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)

# Text drawn from everywhere: controls, the BMP, astral planes (no lone surrogates, which
# are not Unicode scalar values and cannot be UTF-8 encoded).
any_chars = st.characters(exclude_categories=("Cs",))
controls = st.characters(min_codepoint=0, max_codepoint=0x1F)
astral = st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF, exclude_categories=("Cs",))
special = st.sampled_from(list('"\\/\b\f\n\r\t\x7f\u2028\u2029\ufeff\u00e9\u20ac\ue000\uffff'))
texts = st.text(st.one_of(any_chars, controls, astral, special), max_size=12)
ascii_texts = st.text(st.characters(max_codepoint=0x7F), max_size=12)

scalars = st.one_of(st.none(), st.booleans(), safe_ints, texts)


def _json(keys: st.SearchStrategy[str]) -> st.SearchStrategy[object]:
    return st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=5),
            st.dictionaries(keys, children, max_size=5),
        ),
        max_leaves=25,
    )


json_values = _json(texts)
ascii_key_json_values = _json(ascii_texts)


def _shuffled(value: object, rnd: random.Random) -> object:
    """The same JSON value with every object's members inserted in a new order."""
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: _shuffled(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rnd) for v in value]
    return value


# -- canonicalization ---------------------------------------------------------------------


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_canonicalize_matches_rfc8785(value: object) -> None:
    assert canonicalize(value) == rfc8785.dumps(value)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(ascii_key_json_values)
def test_canonicalize_ascii_keys_matches_reference(value: object) -> None:
    fast = canonicalize_ascii_keys(value)
    assert fast == canonicalize(value)
    assert fast == rfc8785.dumps(value)


@settings(max_examples=200)
@given(json_values, st.randoms(use_true_random=False))
def test_canonical_bytes_ignore_member_order(value: object, rnd: random.Random) -> None:
    reordered = _shuffled(value, rnd)
    assert reordered == value
    assert canonicalize(reordered) == canonicalize(value)


@settings(max_examples=200)
@given(json_values)
def test_canonical_bytes_reparse_to_the_same_value(value: object) -> None:
    data = canonicalize(value)
    assert parse_strict(data) == value
    assert canonicalize(parse_strict(data)) == data


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": 1, "a": 2}, b'{"a":2,"b":1}'),
        ("\x00\x1f\x7f", b'"\\u0000\\u001f\x7f"'),
        ('\b\f\n\r\t"\\/', b'"\\b\\f\\n\\r\\t\\"\\\\/"'),
        ("\u20ac\U0001f600", '"\u20ac\U0001f600"'.encode()),
        ([-0, 0, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER], b"[0,0,9007199254740991,-9007199254740991]"),
        # UTF-16 order: U+E000 (one unit 0xE000) sorts after U+1F600 (units 0xD83D 0xDE00).
        ({"\ue000": 1, "\U0001f600": 2}, '{"\U0001f600":2,"\ue000":1}'.encode()),
        ({}, b"{}"),
        ([], b"[]"),
        (None, b"null"),
        (True, b"true"),
    ],
)
def test_canonicalize_known_answers(value: object, expected: bytes) -> None:
    assert canonicalize(value) == expected
    assert canonicalize(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "bad", [1.5, float("nan"), 2**53, -(2**53), b"bytes", "\ud800", {"\ud800": 1}, {"a": {1.0}}]
)
def test_canonicalize_rejects_values_outside_the_domain(bad: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        canonicalize(bad)


# Non-string member names once raised AttributeError from the sort key, not
# the documented TypeError.
def test_canonicalize_rejects_non_string_member_names_with_type_error() -> None:
    with pytest.raises(TypeError):
        canonicalize({1: "x"})


def test_canonicalize_ascii_keys_rejects_lone_surrogates() -> None:
    with pytest.raises(MalformedReceiptError) as exc:
        canonicalize_ascii_keys({"a": "\udc00"})
    assert exc.value.reason == "not_utf8"


# -- strict parsing -----------------------------------------------------------------------


def _reason(data: bytes, **kwargs: int) -> str:
    with pytest.raises(MalformedReceiptError) as exc:
        parse_strict(data, **kwargs)
    assert isinstance(exc.value, VerificationError)
    return exc.value.reason


@pytest.mark.parametrize(
    "data",
    [
        b'{"a": 1, "a": 1}',
        b'{"a": 1, "b": 2, "a": 3}',
        b'{"outer": {"x": [1, {"k": 1, "k": 2}]}}',
        b'[{"z": null, "z": null}]',
        b'{"a": {"b": 1}, "a": {"b": 1}}',
    ],
)
def test_parse_strict_rejects_duplicate_keys(data: bytes) -> None:
    assert _reason(data) == "duplicate_key"


@pytest.mark.parametrize(
    "data", [b"1.0", b"1e3", b"1E3", b"-0.0", b'{"rows": 1.0}', b"[0, 2.5e-1]", b"1e400"]
)
def test_parse_strict_rejects_floats(data: bytes) -> None:
    assert _reason(data) == "float"


@pytest.mark.parametrize("data", [b"NaN", b"Infinity", b"-Infinity", b'{"a": NaN}', b"[Infinity]"])
def test_parse_strict_rejects_nan_and_infinity(data: bytes) -> None:
    assert _reason(data) == "not_json"


@pytest.mark.parametrize(
    "data",
    [
        b'{"a": "\xff"}',
        b'"\xc3\x28"',
        b'"\xed\xa0\x80"',  # UTF-8-encoded surrogate (CESU-style)
        b'"\xc0\xaf"',  # overlong encoding
        b"\xef\xbb\xbf{}",  # UTF-8 byte-order mark
        b"\xff\xfe{\x00}\x00",  # UTF-16
    ],
)
def test_parse_strict_rejects_non_utf8(data: bytes) -> None:
    assert _reason(data) == "not_utf8"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b" ",
        b"{",
        b'{"a": [1, 2',
        b'{"a": "unterminated',
        b"{} {}",
        b"[1,]",
        b"{'a': 1}",
        b"tru",
        b'"tab\there"',
        b"// comment\n{}",
    ],
)
def test_parse_strict_rejects_malformed_json(data: bytes) -> None:
    assert _reason(data) == "not_json"


def test_parse_strict_size_limit() -> None:
    assert MAX_INPUT_BYTES == 1 << 20
    assert _reason(b"[" + b" " * MAX_INPUT_BYTES + b"]") == "too_large"
    assert _reason(b"[1, 2]", max_bytes=5) == "too_large"
    assert parse_strict(b"[1, 2]", max_bytes=6) == [1, 2]
    assert parse_strict(b" " * (MAX_INPUT_BYTES - 2) + b"{}") == {}


def test_parse_strict_rejects_huge_integer_literal() -> None:
    assert _reason(b"9" * 5000) == "not_json"
    assert _reason(b'{"rows": ' + b"1" * 5000 + b"}") == "not_json"


@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_parse_strict_deep_nesting_does_not_crash(depth: int) -> None:
    with pytest.raises(MalformedReceiptError):
        parse_strict(b"[" * depth + b"]" * depth)
    with pytest.raises(MalformedReceiptError):
        parse_strict(b'{"a":' * depth + b"1" + b"}" * depth)


def test_parse_strict_accepts_plain_json() -> None:
    doc = {"a": [1, -2, None, True, False, "\u00e9\U0001f600"], "b": {"c": ""}}
    assert parse_strict(json.dumps(doc).encode()) == doc
    assert parse_strict(json.dumps(doc, ensure_ascii=False).encode()) == doc
    # Integer *range* is the validator's job, not the parser's.
    assert parse_strict(str(2**60).encode()) == 2**60


# -- the float-allowing mode (store-item leaves) ------------------------------------------

finite_floats = st.floats(allow_nan=False, allow_infinity=False)
float_json_values = st.recursive(
    st.one_of(scalars, finite_floats),
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(texts, children, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(float_json_values)
def test_float_mode_matches_rfc8785(value: object) -> None:
    assert canonicalize(value, floats=True) == rfc8785.dumps(value)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_float_mode_equals_the_receipt_mode_where_both_apply(value: object) -> None:
    assert canonicalize(value, floats=True) == canonicalize(value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, b"1"),
        (-0.0, b"0"),
        (0.1, b"0.1"),
        (1e21, b"1e+21"),
        (1e-7, b"1e-7"),
        (123456789012345680000.0, b"123456789012345680000"),
        ({"b": 2.5, "a": [1.5e300]}, b'{"a":[1.5e+300],"b":2.5}'),
        (2**53, b"9007199254740992"),  # a double's exact range, wider than I-JSON's
        (-(2**53), b"-9007199254740992"),
    ],
)
def test_float_mode_known_answers(value: object, expected: bytes) -> None:
    assert canonicalize(value, floats=True) == expected


@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), 2**53 + 1, b"bytes", {1: "x"}, "\udc00", object()]
)
def test_float_mode_rejects_what_is_not_i_json(bad: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        canonicalize(bad, floats=True)


def test_float_mode_refuses_deep_nesting_and_receipt_mode_refuses_floats() -> None:
    deep: object = []
    for _ in range(1001):
        deep = [deep]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + 2000)  # so the depth check, not the interpreter, refuses
    try:
        with pytest.raises(ValueError, match="nesting"):
            canonicalize(deep, floats=True)
    finally:
        sys.setrecursionlimit(limit)
    with pytest.raises(TypeError, match="no floats"):
        canonicalize({"a": 1.5})


_SYNTAX_ERRORS = [
    b"", b"  ", b'{"a":1} x', b'{"a": [1, 2', b'{"a"', b"{", b"[", b'{"a": "x', b'{"a" 1}',
    b"[1,]", b'{"a":1,}', b"\t[1]\r\n", b"01", b"[tru]", b' {"a":[1,{"b":null}]}\r\n\t',
]  # fmt: skip

_REFERENCE = """
import json, sys
for line in sys.stdin.buffer.read().split(b"\\n--\\n"):
    try:
        text = line.decode("utf-8")
        print(repr(json.loads(text)))
    except json.JSONDecodeError as e:
        print(f"not JSON: {e.msg} (line {e.lineno}, column {e.colno})")
"""

_OURS = """
import sys
from erasure_receipts.canonical import parse_strict
from erasure_receipts.errors import MalformedReceiptError
parse_strict(b'{"ok": [1, "two", null, true]}')
assert ("json" in sys.modules) == ("--json-first" in sys.argv), "json imported on success"
for line in sys.stdin.buffer.read().split(b"\\n--\\n"):
    try:
        print(repr(parse_strict(line)))
    except MalformedReceiptError as e:
        print(e.message)
"""


@pytest.mark.parametrize("json_first", [False, True])
def test_parse_strict_reports_what_json_loads_reports_in_a_fresh_process(
    json_first: bool,
) -> None:
    """parse_strict drives the C scanner itself (without importing json on success); its
    results and syntax-error messages are json.loads's, whether or not json (whose
    json.decoder the 3.11 scanner needs for its errors) was imported before."""
    import subprocess

    data = b"\n--\n".join(_SYNTAX_ERRORS)
    prelude = "import json\n" if json_first else ""
    ours = subprocess.run(
        [sys.executable, "-c", prelude + _OURS, *(["--json-first"] if json_first else [])],
        input=data, capture_output=True, check=True,
    )  # fmt: skip
    ref = subprocess.run(
        [sys.executable, "-c", _REFERENCE], input=data, capture_output=True, check=True
    )
    assert ours.stdout == ref.stdout
    assert ours.stdout.count(b"not JSON:") == len(_SYNTAX_ERRORS) - 2
