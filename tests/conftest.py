from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from erasure_receipts import Receipt, Signer

sys.path.insert(0, str(Path(__file__).parent))
# Test modules import each other's graphs and helpers across these directories.
for _sub in ("cli", "postgres", "sqlite", "unit"):
    sys.path.insert(0, str(Path(__file__).parent / _sub))


@pytest.fixture
def signer() -> Signer:
    return Signer.from_seed(bytes(range(32)))


@pytest.fixture
def pub_pem(tmp_path: Path, signer: Signer) -> Path:
    path = tmp_path / "signer.pub.pem"
    path.write_bytes(signer.public_pem())
    return path


_SCHEMA = json.loads((Path(__file__).parents[1] / "schemas" / "receipt.schema.json").read_text())
_VALIDATOR = jsonschema.Draft202012Validator(_SCHEMA)


@pytest.fixture(autouse=True)
def every_signed_receipt_matches_the_schema(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Whatever a test makes the library sign (savers, CLI in-process, factories) is
    validated against schemas/receipt.schema.json, not only the receipts a test checks."""
    original = Receipt.sign.__func__  # type: ignore[attr-defined]

    def checked(cls: type[Receipt], *args: Any, **kwargs: Any) -> Receipt:
        receipt = original(cls, *args, **kwargs)
        _VALIDATOR.validate(json.loads(receipt.to_json()))
        return receipt

    monkeypatch.setattr(Receipt, "sign", classmethod(checked))
    yield


@pytest.fixture(autouse=True)
def every_issued_statement_passes_the_verifier(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every statement a saver signs (erasures, recoveries, sweeps) satisfies every rule
    of RECEIPT_SPEC.md 6.1, residue included - not only the receipts a test verifies."""
    from erasure_receipts._engine import eraser as attesting  # where the flow signs
    from erasure_receipts.verify import check_residue, check_semantics

    original = attesting.sign_and_archive

    def checked(statement: Any, *args: Any, **kwargs: Any) -> Receipt:
        st = json.loads(json.dumps(statement))
        check_semantics(st)
        check_residue(st["predicate"])
        return original(statement, *args, **kwargs)

    monkeypatch.setattr(attesting, "sign_and_archive", checked)
    yield


# PostgreSQL server fixtures (pg_dsn: session-wide server, pg_db: a fresh database).
from pg_server import pg_db, pg_dsn  # noqa: E402, F401
