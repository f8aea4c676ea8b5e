"""A slice of the structure-aware verify fuzzer (bench/fuzz_verify.py runs 100,000)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import fuzz_verify

CATEGORIES = {"tree", "bytes", "dsse_payload", "resigned_semantic", "resigned_schema", "keys",
              "object"}  # fmt: skip


@pytest.fixture(scope="module")
def summary() -> dict[str, Any]:
    return fuzz_verify.run(2000, seed=20260507, cli_every=40)


def test_no_uncaught_exception_and_no_wrong_accept(summary: dict[str, Any]) -> None:
    assert summary["mutations"] == 2000
    assert summary["uncaught"] == 0, summary["uncaught_examples"]
    assert summary["wrong_accepts"] == 0, summary["wrong_accept_examples"]
    assert summary["unknown_reasons"] == 0
    assert summary["cli_checked"] >= 40
    assert summary["cli_failures"] == 0, summary["cli_failure_examples"]


def test_the_slice_exercises_every_category(summary: dict[str, Any]) -> None:
    cats = summary["by_category"]
    assert set(cats) == CATEGORIES
    assert cats["tree"].get("accepted", 0) > 0  # harmless edits (key order, whitespace)
    assert cats["object"].get("accepted", 0) > 0  # mutated objects report the signed statement
    semantic = cats["resigned_semantic"]
    assert "accepted" not in semantic
    assert semantic.get("resigned_semantic_other_reason", 0) == 0
    assert {"rejected:not_empty", "rejected:inconsistent"} <= set(semantic)
    assert cats["keys"].get("rejected:key_not_valid_at_time", 0) > 0
    for reason in ("schema", "bad_signature", "not_canonical", "not_utf8", "duplicate_key"):
        assert summary["rejected_by_reason"].get(reason, 0) > 0, reason


def test_the_fuzzer_is_deterministic() -> None:
    a = fuzz_verify.run(150, seed=3, cli_every=0)
    b = fuzz_verify.run(150, seed=3, cli_every=0)
    a.pop("seconds"), b.pop("seconds")
    assert a == b
