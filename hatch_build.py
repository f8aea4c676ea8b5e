"""Wheel build hook: ship the package's bytecode, so ``receipt verify`` starts fast
even where nothing compiles it after installation.

Installers that do not byte-compile (uv without ``--compile-bytecode``, ``pip install
--no-compile``), read-only site-packages and ``PYTHONDONTWRITEBYTECODE=1`` containers
would otherwise recompile the verify path's modules on every start: about as long again
as importing the Ed25519 primitive (bench/cold_start.py). The ``.pyc`` files are
*checked-hash* (PEP 552): Python validates them against a hash of the installed source,
not its timestamp (which installers reset), and ignores them if the source differs. They
are written for the building interpreter only (``module.cpython-311.pyc``); other
versions ignore them and compile as before. An installer that compiles overwrites them.
Editable installs get none (their source changes).
"""

from __future__ import annotations

import py_compile
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE = Path("src") / "erasure_receipts"


def compile_package(root: Path, out: Path) -> dict[str, str]:
    """Compile every module under ``root/src/erasure_receipts`` into ``out``;
    returns ``{compiled file: its path in the wheel}``."""
    included: dict[str, str] = {}
    source_root = root / PACKAGE
    for source in sorted(source_root.rglob("*.py")):
        rel = source.relative_to(source_root.parent)  # erasure_receipts/...
        # Not importlib.util.cache_from_source: it follows PYTHONPYCACHEPREFIX and -O.
        cached = rel.parent / "__pycache__" / f"{rel.stem}.{sys.implementation.cache_tag}.pyc"
        target = out / cached
        target.parent.mkdir(parents=True, exist_ok=True)
        py_compile.compile(
            str(source),
            cfile=str(target),
            dfile=str(rel),
            doraise=True,
            optimize=0,  # the plain name holds asserts, whatever -O the build runs with
            invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
        )
        included[str(target)] = cached.as_posix()
    return included


class BytecodeHook(BuildHookInterface):  # type: ignore[type-arg]
    """Adds checked-hash bytecode of every module to standard (not editable) wheels."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        self._out = Path(tempfile.mkdtemp(prefix="erasure-receipts-pyc-"))
        build_data["force_include"].update(compile_package(Path(self.root), self._out))

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        out = getattr(self, "_out", None)
        if out is not None:
            shutil.rmtree(out, ignore_errors=True)
