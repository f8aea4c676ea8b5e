"""Real RFC 3339 times: impossible dates and times are rejected by the code and the schemas
alike, in receipts and in trust-file windows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from erasure_receipts.errors import KeyFormatError, MalformedReceiptError
from erasure_receipts.receipt import is_time
from erasure_receipts.verify import TrustedKey, TrustStore, verify_receipt
from receipt_factory import TRUSTED, make_receipt, make_statement
from test_verify_inputs import SCHEMAS, TRUST, _trust_doc, run_cli, signed_file

# -- real RFC 3339 times ------------------------------------------------------------------

BAD_TIMES = [
    "2025-02-31T25:61:61Z",
    "2025-02-29T00:00:00Z",
    "1900-02-29T00:00:00Z",
    "2100-02-29T00:00:00Z",
    "2026-13-45T00:00:00Z",
    "2026-00-10T00:00:00Z",
    "2026-01-00T00:00:00Z",
    "2026-04-31T00:00:00Z",
    "2026-11-31T00:00:00Z",
    "2026-01-01T24:00:00Z",
    "2026-01-01T23:60:00Z",
    "2026-01-01T23:59:60Z",
    "2026-01-01T99:00:00.5Z",
]
GOOD_TIMES = [
    "2024-02-29T00:00:00Z",
    "2000-02-29T23:59:59.999999Z",
    "2400-02-29T12:00:00Z",
    "2026-12-31T23:59:59Z",
    "2026-04-30T00:00:00.1Z",
    "0000-01-01T00:00:00Z",
]


def _time_pattern(schema: str) -> str:
    doc = json.loads((SCHEMAS / f"{schema}.schema.json").read_text("utf-8"))
    if schema == "receipt":
        pattern: str = doc["$defs"]["predicate"]["properties"]["issued_at"]["pattern"]
    else:
        pattern = doc["$defs"]["time"]["pattern"]
    return pattern.removesuffix("$") + r"\Z"


@pytest.mark.parametrize("value", BAD_TIMES)
def test_impossible_times_are_rejected_by_code_and_schemas(value: str) -> None:
    assert not is_time(value)
    for schema in ("receipt", "trust", "verify-result"):
        if schema == "verify-result":
            continue
        assert re.search(_time_pattern(schema), value) is None, schema


@pytest.mark.parametrize("value", GOOD_TIMES)
def test_real_times_are_accepted_by_code_and_schemas(value: str) -> None:
    assert is_time(value)
    for schema in ("receipt", "trust"):
        assert re.search(_time_pattern(schema), value), schema


def test_time_check_agrees_with_schema_on_every_calendar_day() -> None:
    receipt_re, trust_re = re.compile(_time_pattern("receipt")), re.compile(_time_pattern("trust"))
    for year in ("0000", "1900", "2000", "2023", "2024", "2100", "2400", "9999"):
        for month in range(0, 14):
            for day in range(0, 33):
                v = f"{year}-{month:02d}-{day:02d}T23:59:59Z"
                want = receipt_re.search(v) is not None
                assert is_time(v) == want == (trust_re.search(v) is not None), v


def test_issued_at_impossible_date_is_rejected_even_when_signed() -> None:
    st = make_statement(issued_at="2025-02-31T25:61:61Z")
    with pytest.raises(MalformedReceiptError) as exc:
        verify_receipt(signed_file(st), TRUST)
    assert exc.value.reason == "schema"
    assert "issued_at" in exc.value.message


@pytest.mark.parametrize(
    "window",
    [
        {"not_before": "2026-13-45T00:00:00Z"},
        {"not_after": "2026-02-29T00:00:00Z"},
        {"not_before": "2026-07-01T00:00:00Z", "not_after": "2026-07-01T00:00:00Z"},
        {"not_before": "2026-07-01T00:00:00Z", "not_after": "2026-06-30T23:59:59.999999Z"},
        {"not_before": "2026-07-01T00:00:00.5Z", "not_after": "2026-07-01T00:00:00.50Z"},
    ],
)
def test_trust_file_with_an_impossible_or_empty_window_is_refused(window: dict[str, str]) -> None:
    with pytest.raises(KeyFormatError):
        TrustStore.from_json(_trust_doc(**window))
    with pytest.raises(KeyFormatError):
        TrustedKey(TRUSTED.public_key, "k", window.get("not_before"), window.get("not_after"))


def test_trusted_key_window_ordering() -> None:
    tk = TrustedKey(TRUSTED.public_key, "k", "2026-07-01T00:00:00Z", "2026-07-01T00:00:00.5Z")
    assert tk.valid_at("2026-07-01T00:00:00.4Z")
    assert not tk.valid_at("2026-07-01T00:00:00.5Z")
    assert not tk.valid_at("2026-06-30T23:59:59.999999Z")
    with pytest.raises(ValueError):
        tk.valid_at("2026-02-30T00:00:00Z")


def test_cli_trust_file_with_inverted_window_is_a_usage_error(tmp_path: Path) -> None:
    trust = tmp_path / "trust.json"
    trust.write_bytes(
        _trust_doc(not_before="2027-01-01T00:00:00Z", not_after="2026-01-01T00:00:00Z")
    )
    receipt = tmp_path / "r.json"
    receipt.write_bytes(make_receipt().to_json())
    proc = run_cli("verify", receipt, "--trust", trust)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1
