"""One definition of a valid receipt: the batch fast path is the validator itself.

``receipt._validate(st, full=False)`` tests the hot members with one-pass inline checks
and explains a failure with the precise helpers; ``full=True`` runs every helper. Both
must give the same verdict, reason and message, and the whole verifier the same
verified result, on the golden corpus (good and bad), on the fuzzer's mutations
(``bench/fuzz_verify.py``'s generators, a small sample here) and on a boundary grid
built from the limits each member has. Tests of internals (``receipt._validate``)."""

from __future__ import annotations

import copy
import json
import os
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from erasure_receipts import receipt
from erasure_receipts.canonical import canonicalize, parse_strict
from erasure_receipts.errors import Error, MalformedReceiptError
from erasure_receipts.receipt import MAX_LIST, MAX_THREAD_ID, validate_statement
from erasure_receipts.signing import PublicKey, Signer, b64decode
from erasure_receipts.trust import TrustedKey, TrustStore
from erasure_receipts.verify import VerifiedReceipt, verify_receipt
from receipt_factory import make_statement, set_path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
sys.path.insert(0, str(ROOT / "bench"))
import fuzz_verify  # noqa: E402  (bench/ is not a package)

FUZZ_CASES = int(os.environ.get("ERASURE_RECEIPTS_RULES_FUZZ_CASES", "1500"))
"""How many fuzzer cases to compare (CI: a small sample; the bench runs 100,000)."""


def _full(st: Any) -> dict[str, Any]:
    receipt._validate(st, True)
    return st  # type: ignore[no-any-return]


def statement_outcome(validate: Callable[[Any], Any], st: Any) -> tuple[Any, ...]:
    try:
        validate(copy.deepcopy(st))
    except MalformedReceiptError as exc:
        return ("rejected", exc.reason, exc.message)
    return ("accepted",)


def verify_outcome(data: Any, trust: TrustStore) -> tuple[Any, ...]:
    try:
        v = verify_receipt(data, trust)
    except Error as exc:
        return (type(exc).__name__, exc.reason, exc.message)
    assert isinstance(v, VerifiedReceipt)
    fields = tuple(getattr(v, name) for name in VerifiedReceipt.__slots__ if name != "statement")
    return ("ok", canonicalize(v.statement), *map(repr, fields))


def same_verdicts(data: Any, trust: TrustStore) -> None:
    """The verifier gives the same result (or error) with the fast path and the full one."""
    fast = verify_outcome(data, trust)
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(receipt, "validate_statement", _full)
        full = verify_outcome(data, trust)
    finally:
        mp.undo()
    assert fast == full


def golden_trust() -> TrustStore:
    return TrustStore([
        TrustedKey(PublicKey.from_pem((GOLDEN / "keys" / "trusted.pub.pem").read_bytes())),
        TrustedKey(Signer.from_seed(b"\x02" * 32).public_key, name="dpo", role="approver"),
    ])  # fmt: skip


def golden_files() -> list[Path]:
    return sorted((GOLDEN / "good").glob("*.json")) + sorted((GOLDEN / "bad").glob("*.json"))


def embedded_statement(data: bytes) -> Any:
    """The statement a golden file carries (file or DSSE payload), or None."""
    try:
        doc = parse_strict(data)
        if type(doc) is dict and "payloadType" in doc:
            return parse_strict(b64decode(doc["payload"]))
        return doc.get("statement") if type(doc) is dict else None
    except (Error, ValueError, TypeError, KeyError):
        return None


@pytest.mark.parametrize("path", golden_files(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_corpus_fast_equals_full(path: Path) -> None:
    data = path.read_bytes()
    st = embedded_statement(data)
    if st is not None:
        assert statement_outcome(validate_statement, st) == statement_outcome(_full, st)
    same_verdicts(data, golden_trust())


def test_the_golden_corpus_reaches_both_verdicts_of_the_validator() -> None:
    seen = {statement_outcome(validate_statement, embedded_statement(p.read_bytes()))[0]
            for p in golden_files() if embedded_statement(p.read_bytes()) is not None}  # fmt: skip
    assert seen == {"accepted", "rejected"}


@pytest.fixture(scope="module")
def genuines() -> list[Any]:
    """The fuzzer's seeds: receipts of every kind issued by real erasures, and the
    golden corpus's good statements."""
    return fuzz_verify.genuines()


def test_fuzzer_cases_fast_equals_full(genuines: list[Any]) -> None:
    """The fuzzer's own case generator (every category), verified both ways."""
    r = random.Random(15)
    categories: set[str] = set()
    accepted = 0
    for _ in range(FUZZ_CASES):
        try:
            case = fuzz_verify.make_case(r, genuines)
        except (IndexError, KeyError, TypeError, AttributeError, ValueError):
            continue  # a mutation that does not apply to this shape (as the bench skips it)
        categories.add(case.category)
        same_verdicts(case.data, fuzz_verify.TRUST)
        accepted += verify_outcome(case.data, fuzz_verify.TRUST)[0] == "ok"
    assert {"tree", "bytes", "dsse_payload", "resigned_semantic", "resigned_schema"} <= categories
    assert 0 < accepted < FUZZ_CASES


def test_fuzzer_statement_mutations_fast_equals_full(genuines: list[Any]) -> None:
    """The fuzzer's tree mutations applied to statements of every kind, validated
    directly (no signature in the way): same verdict, reason and message."""
    r = random.Random(51)
    ops = (fuzz_verify.m_type, fuzz_verify.m_delete, fuzz_verify.m_add,
           fuzz_verify.m_number, fuzz_verify.m_unicode)  # fmt: skip
    verdicts: set[str] = set()
    for i in range(FUZZ_CASES * 2):
        st: Any = copy.deepcopy(genuines[i % len(genuines)].statement)
        for _ in range(r.choice((1, 1, 2))):
            st = r.choice(ops)(r, st)
            if not isinstance(st, dict):
                break
        if fuzz_verify._has_raw(st):
            continue
        fast = statement_outcome(validate_statement, st)
        assert fast == statement_outcome(_full, st), st
        verdicts.add(fast[0])
    assert verdicts == {"accepted", "rejected"}


# -- a boundary grid from each member's limits ---------------------------------------------

STRINGS = {  # path: (max length, a valid value of that length, a valid value)
    "subject.0.name": MAX_THREAD_ID + 64,
    "predicate.scope.thread_id": MAX_THREAD_ID,
    "predicate.backend.database": 4096,
    "predicate.backend.versions.sqlite": 64,
    "predicate.checks.0.detail": 4096,
    "predicate.residue.0.detail.scope": 4096,
    "predicate.out_of_scope.0.note": 4096,
    "predicate.generator.version": 64,
    "predicate.scope.store_namespaces.0.0": 1024,
}
NAMES = ("predicate.backend.kind", "predicate.backend.saver", "predicate.backend.store",
         "predicate.methods.checkpoints", "predicate.checks.0.name", "predicate.residue.0.action",
         "predicate.out_of_scope.0.id", "predicate.generator.name")  # fmt: skip
INTS = ("predicate.pre_state.leaves", "predicate.pre_state.tables.checkpoints.rows",
        "predicate.post_state.tables.checkpoints.bytes",
        "predicate.residue.0.detail.value")  # fmt: skip
OTHER = ("_type", "predicateType", "subject", "subject.0", "subject.0.digest.sha256",
         "predicate", "predicate.receipt_id", "predicate.issued_at", "predicate.status",
         "predicate.kind", "predicate.scope", "predicate.scope.tombstone",
         "predicate.scope.store_namespaces", "predicate.scope.store_namespaces.0",
         "predicate.scope.checkpoint_namespaces", "predicate.scope.tombstone_policy",
         "predicate.backend", "predicate.backend.versions", "predicate.merkle",
         "predicate.merkle.algorithm", "predicate.pre_state", "predicate.pre_state.tables",
         "predicate.methods", "predicate.checks", "predicate.checks.0",
         "predicate.checks.0.result", "predicate.residue", "predicate.residue.0",
         "predicate.residue.0.status", "predicate.residue.0.detail", "predicate.out_of_scope",
         "predicate.out_of_scope.0", "predicate.generator")  # fmt: skip
CONFUSION = [None, True, False, 0, 1, -1, 2**53 - 1, 2**53, "", "x", [], [[]], [["a"]], {},
             {"a": "b"}, {"sha256": "e" * 64}, "e" * 64, "E" * 64, "a b", "all", "erased",
             "pass", "thread", "history", "new_conversations", "2026-02-29T00:00:00Z",
             "2024-02-29T23:59:59.999999Z", ["x"] * (MAX_LIST + 1)]  # fmt: skip


def grid() -> Iterator[tuple[str, Any]]:
    for path, n in STRINGS.items():
        for v in ("x" * n, "x" * (n + 1), "", 1, None, ["x"]):
            yield path, v
    for path in NAMES:
        for v in ("a" * 64, "a" * 65, "a.b:c-d_e", "a/b", "é", "", 7):
            yield path, v
    for path in INTS:
        for v in (0, 2**53 - 1, 2**53, -1, True, "1"):
            yield path, v
    for path in OTHER:
        for v in CONFUSION:
            yield path, v


def test_boundary_grid_fast_equals_full() -> None:
    verdicts = set()
    base = make_statement()
    base["predicate"]["scope"]["store_namespaces"] = [["users", "u1"]]
    base["predicate"]["backend"]["store"] = "SqliteStore"
    for path, value in grid():
        st = copy.deepcopy(base)
        try:
            set_path(st, path, copy.deepcopy(value))
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        fast = statement_outcome(validate_statement, st)
        assert fast == statement_outcome(_full, st), (path, value)
        assert receipt.statement_is_valid(copy.deepcopy(st)) <= (fast == ("accepted",))
        verdicts.add(fast[1] if len(fast) > 1 else fast[0])
    assert {"accepted", "schema", "integer_range", "unknown_type"} <= verdicts


def test_a_laxer_fast_check_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison has teeth: a one-pass check that lets a 65-character version
    through (its rule says 64) makes fast and full disagree on the grid."""
    monkeypatch.setattr(receipt, "_s", lambda v, max_len=1024: type(v) is str and len(v) > 0)
    st = make_statement()
    set_path(st, "predicate.generator.version", "x" * 65)
    assert statement_outcome(validate_statement, st) == ("accepted",)
    assert statement_outcome(_full, st)[1] == "schema"


def test_the_fast_path_does_not_format_paths_on_success(monkeypatch: pytest.MonkeyPatch) -> None:
    """Success formats nothing and raises nothing: no helper is reached for the usual
    receipts (the speed of batch verification)."""
    calls: list[str] = []
    for name in ("_obj", "_str", "_int", "_list", "_digest", "_name_map"):
        real = getattr(receipt, name)
        monkeypatch.setattr(
            receipt, name, lambda *a, _r=real, _n=name, **k: (calls.append(_n), _r(*a, **k))[1]
        )
    st = json.loads(json.dumps(make_statement()))
    validate_statement(st)
    validate_statement(st)  # the second time, cached checks and out_of_scope included
    assert calls == []
