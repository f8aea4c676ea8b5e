"""The wheel ships checked-hash bytecode (hatch_build.py): an install that nothing
compiles loads it instead of compiling the verify path on every start, and a changed
source file is never run from stale bytecode."""

from __future__ import annotations

import dis
import importlib.util
import marshal
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import hatch_build  # noqa: E402

from receipt_factory import TRUSTED, make_receipt  # noqa: E402

VERIFY_PATH = ("verify", "receipt", "signing", "canonical", "trust", "errors", "_batch")
TAG = sys.implementation.cache_tag


def _flags(pyc: Path) -> int:
    data = pyc.read_bytes()
    assert data[:4] == importlib.util.MAGIC_NUMBER
    return int.from_bytes(data[4:8], "little")


def test_every_module_is_compiled_checked_hash(tmp_path: Path) -> None:
    included = hatch_build.compile_package(ROOT, tmp_path)
    sources = sorted((ROOT / "src" / "erasure_receipts").rglob("*.py"))
    assert len(included) == len(sources) > 50
    for built, in_wheel in included.items():
        assert in_wheel.startswith("erasure_receipts/") and "/__pycache__/" in in_wheel
        assert in_wheel.endswith(f".{TAG}.pyc")
        assert _flags(Path(built)) == 0b11  # hash-based (bit 0), checked (bit 1): PEP 552
        source = ROOT / "src" / in_wheel.replace("__pycache__/", "").replace(f".{TAG}.pyc", ".py")
        assert source in sources
        data = Path(built).read_bytes()
        assert data[8:16] == importlib.util.source_hash(source.read_bytes())


def test_bytecode_keeps_the_asserts_whatever_the_build_runs_with(tmp_path: Path) -> None:
    """Built under ``python -O``, the plain ``.pyc`` name still holds unoptimised code
    (an optimised one would drop the asserts for every interpreter that loads it)."""
    build = (f"import pathlib, sys; sys.path.insert(0, {str(ROOT)!r}); import hatch_build; "
             f"hatch_build.compile_package(pathlib.Path({str(ROOT)!r}), "
             f"pathlib.Path({str(tmp_path)!r}))")  # fmt: skip
    subprocess.run([sys.executable, "-O", "-c", build], check=True)
    pyc = tmp_path / "erasure_receipts" / "__pycache__" / f"_lease.{TAG}.pyc"
    module = marshal.loads(pyc.read_bytes()[16:])
    (owned,) = [c for c in module.co_consts if getattr(c, "co_name", "") == "owned"]
    assert any(i.opname == "LOAD_ASSERTION_ERROR" for i in dis.get_instructions(owned))


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this tree, installed where nothing compiles it."""
    tmp = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        [*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp), str(ROOT)],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = tmp.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for mod in VERIFY_PATH:
        assert f"erasure_receipts/__pycache__/{mod}.{TAG}.pyc" in names
    target = tmp / "site"
    subprocess.run(
        [*pip, "install", "-q", "--no-deps", "--no-compile", "--target", str(target), str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    return target


def _env(target: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(target))
    return env


def _loaded_from(target: Path, module: str) -> Path:
    """The file ``python -v`` says the module's code object came from."""
    p = subprocess.run(
        [sys.executable, "-v", "-c", f"import erasure_receipts.{module}"],
        env=_env(target), capture_output=True, text=True, check=True,
    )  # fmt: skip
    marker = "# code object from "
    paths = [Path(ln[len(marker) :].strip("'")) for ln in p.stderr.splitlines()
             if ln.startswith(marker)]  # fmt: skip
    (path,) = [f for f in paths if f.name.split(".")[0] == module and "erasure_receipts" in f.parts]
    assert path.is_relative_to(target / "erasure_receipts"), path
    return path


def test_an_uncompiled_install_runs_the_shipped_bytecode(installed: Path, tmp_path: Path) -> None:
    for mod in VERIFY_PATH:
        loaded = _loaded_from(installed, mod)
        assert loaded == installed / "erasure_receipts" / "__pycache__" / f"{mod}.{TAG}.pyc"
    one = tmp_path / "one.json"
    one.write_bytes(make_receipt().to_json())
    pub = tmp_path / "pub.pem"
    pub.write_bytes(TRUSTED.public_pem())
    p = subprocess.run(
        [sys.executable, "-c", "from erasure_receipts.cli import main; main()",
         "verify", str(one), "--key", str(pub)],
        env=_env(installed), capture_output=True, text=True,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr


def test_a_changed_source_is_not_run_from_stale_bytecode(installed: Path) -> None:
    source = installed / "erasure_receipts" / "errors.py"
    original = source.read_bytes()
    try:
        source.write_bytes(original + b"\nCHANGED_AFTER_INSTALL = True\n")
        loaded = _loaded_from(installed, "errors")
        assert loaded == source  # compiled from the changed source
        p = subprocess.run(
            [sys.executable, "-c",
             "import erasure_receipts.errors as e; print(e.CHANGED_AFTER_INSTALL)"],
            env=_env(installed), capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert p.stdout.strip() == "True"
    finally:
        source.write_bytes(original)
