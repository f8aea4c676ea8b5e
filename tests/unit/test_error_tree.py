"""One error tree: every exception class the library defines for callers lives in
``errors.py`` and is an ``Error``; the old import paths still give the same classes."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import erasure_receipts
from erasure_receipts import AttestingSqliteSaver, ReceiptLog, Signer, errors
from erasure_receipts.errors import ConfigurationError, Error


def _modules() -> list[str]:
    names = [erasure_receipts.__name__]
    for info in pkgutil.walk_packages(erasure_receipts.__path__, f"{erasure_receipts.__name__}."):
        names.append(info.name)
    return names


def _exception_classes() -> list[tuple[str, str, type[BaseException]]]:
    found = []
    for module_name in _modules():
        module = importlib.import_module(module_name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__.startswith(erasure_receipts.__name__)
            ):
                found.append((module_name, name, obj))
    return found


def test_the_walk_sees_every_module_and_the_moved_classes() -> None:
    modules = _modules()
    assert {"erasure_receipts.log", "erasure_receipts._backends.keep_latest"} <= set(modules)
    names = {name for _, name, _ in _exception_classes()}
    assert {"LogError", "InclusionProofError", "NeedlesFoundError", "DeltaChannelError"} <= names


def test_every_public_exception_class_is_an_error_defined_in_errors_py() -> None:
    for module_name, name, cls in _exception_classes():
        if name.startswith("_") or cls.__name__.startswith("_"):
            continue  # internal control flow (caught before it reaches a caller)
        assert issubclass(cls, Error), f"{module_name}.{name} is not an erasure_receipts.Error"
        assert cls.__module__ == "erasure_receipts.errors", (
            f"{module_name}.{name} is defined in {cls.__module__}, not errors.py"
        )


def test_private_exception_classes_are_few_and_known() -> None:
    """Control-flow exceptions stay private; a new one has to be added here on purpose."""
    private = {
        f"{cls.__module__}.{cls.__name__}"
        for _, _, cls in _exception_classes()
        if cls.__name__.startswith("_")
    }
    assert private <= {
        "erasure_receipts._engine.protocol._Abort",
        "erasure_receipts._engine.protocol._ScopeChanged",
        "erasure_receipts._ops.history._BecameActive",
        "erasure_receipts._backends.sqlite.residue._Unsettled",
        "erasure_receipts._cli.verify_fast._UsageError",
        "erasure_receipts._ops.sweep_batch._BatchChanged",
    }


def test_errors_all_lists_every_class_and_the_package_exports_them() -> None:
    defined = {
        name
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, BaseException)
    }
    assert defined == set(errors.__all__)
    assert set(errors.__all__) <= set(erasure_receipts.__all__)
    for name in errors.__all__:
        assert getattr(erasure_receipts, name) is getattr(errors, name)


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("erasure_receipts.log", "LogError"),
        ("erasure_receipts.log", "LogCorruptError"),
        ("erasure_receipts.log", "LogConflictError"),
        ("erasure_receipts.proof", "InclusionProofError"),
        ("erasure_receipts._engine", "NeedlesFoundError"),
        ("erasure_receipts._backends.keep_latest", "DeltaChannelError"),
        ("erasure_receipts.history", "DeltaChannelError"),
    ],
)
def test_old_import_paths_give_the_same_class(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name) is getattr(errors, name)


def test_delta_channel_error_is_an_error_and_still_a_not_implemented_error() -> None:
    exc = errors.DeltaChannelError(["t-2", "t-1"])
    assert isinstance(exc, errors.ErasureError)
    assert isinstance(exc, NotImplementedError)  # what LangGraph's own prune raises
    assert exc.reason == "delta_channel"
    assert exc.message == "keep_latest can't prune threads that use a DeltaChannel: t-1, t-2"
    with pytest.raises(NotImplementedError, match="t-1"):
        raise exc


def test_reason_codes_of_the_moved_classes_are_unchanged() -> None:
    assert errors.LogError("x").reason == "log_error"
    assert errors.LogCorruptError("x").reason == "log_corrupt"
    assert errors.LogConflictError("x").reason == "log_conflict"
    assert errors.InclusionProofError("x").reason == "not_included"
    needles = errors.NeedlesFoundError([{"table": "writes", "needle": "secret"}])
    assert needles.reason == "needles_found"
    assert isinstance(needles, errors.ErasureIncompleteError)
    assert "secret" not in str(needles)


# -- misuse of the public API raises an Error that is still the builtin it was ----------


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[AttestingSqliteSaver]:
    with AttestingSqliteSaver.from_conn_string(
        str(tmp_path / "app.db"), signer=Signer.generate()
    ) as s:
        yield s


def _raises(exc: pytest.ExceptionInfo[BaseException], builtin: type[BaseException]) -> None:
    assert isinstance(exc.value, Error), f"{type(exc.value).__name__} is not an Error"
    assert isinstance(exc.value, builtin)


def test_saver_argument_errors_are_errors(saver: AttestingSqliteSaver) -> None:
    with pytest.raises(TypeError) as exc:
        saver.locate("one string")
    _raises(exc, TypeError)
    assert exc.value.reason == "bad_argument"
    with pytest.raises(TypeError) as exc:
        saver.prune("t1", strategy="delete")
    _raises(exc, TypeError)
    with pytest.raises(TypeError) as exc:
        saver.purge_journal(older_than=5)  # type: ignore[arg-type]
    _raises(exc, TypeError)
    with pytest.raises(ValueError, match="strategy") as vexc:
        saver.prune(["t1"], strategy="keep_all")
    _raises(vexc, ValueError)
    assert isinstance(vexc.value, ConfigurationError)
    with pytest.raises(TypeError) as exc:
        saver.erase_thread("t1", store_namespaces=["users"])
    _raises(exc, TypeError)
    with pytest.raises(ValueError) as vexc:
        saver.erase_thread("t1", store_namespaces=[("users", "")])
    _raises(vexc, ValueError)


def test_saver_construction_errors_are_errors(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="signer") as exc:
        AttestingSqliteSaver.from_conn_string(
            str(tmp_path / "app.db"),
            signer="not a signer",  # type: ignore[arg-type]
        ).__enter__()
    _raises(exc, TypeError)


def test_receipt_log_argument_errors_are_errors(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="signer") as exc:
        ReceiptLog(tmp_path / "log", signer="nope")  # type: ignore[arg-type]
    _raises(exc, TypeError)
    log = ReceiptLog(tmp_path / "log", signer=Signer.generate(), origin="example.test/log")
    with pytest.raises(TypeError, match="append") as exc:
        log.append("a receipt as text")  # type: ignore[arg-type]
    _raises(exc, TypeError)
    with pytest.raises(ValueError, match="no proof") as vexc:
        log.consistency_proof(5)
    _raises(vexc, ValueError)
