"""The distribution ships what users and auditors need: schemas, LICENSE, py.typed."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).parents[2]
SCHEMAS = ("receipt.schema.json", "trust.schema.json", "verify-result.schema.json")


def test_schemas_are_package_resources() -> None:
    base = resources.files("erasure_receipts") / "schemas"
    for name in SCHEMAS:
        shipped = (base / name).read_bytes()
        assert shipped == (ROOT / "schemas" / name).read_bytes()  # one copy, not two
        assert json.loads(shipped)["$schema"].endswith("2020-12/schema")


def test_wheel_contents(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in SCHEMAS:
        assert f"erasure_receipts/schemas/{name}" in names
    assert "erasure_receipts/py.typed" in names
    assert any(n.endswith("/licenses/LICENSE") for n in names)
