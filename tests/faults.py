"""Faults injected into a real saver through its eraser's seams, not by patching
module functions: the saver's journal (and database) seam is wrapped in a proxy whose
named methods fail, for that saver only.

    with faulty(saver, record_statement=OSError("disk gone")):
        saver.erase_thread(...)

    inject(monkeypatch, saver, mark_issued=fail)  # until monkeypatch.undo()

Each keyword names a journal method (``db_<name>`` a database method). Its value is an
exception (instance or class), raised instead of the call; or a callable, called
instead, with the same arguments (it may call the real journal function itself).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest

__all__ = ["FaultyProxy", "faulty", "inject"]


def _replacement(name: str, fault: Any) -> Callable[..., Any]:
    if isinstance(fault, BaseException) or (
        isinstance(fault, type) and issubclass(fault, BaseException)
    ):

        def fail(*_args: Any, **_kwargs: Any) -> Any:
            raise fault

        fail.__name__ = name
        return fail
    if not callable(fault):
        raise TypeError(f"fault for {name!r} is neither an exception nor callable: {fault!r}")
    return fault  # type: ignore[no-any-return]


class FaultyProxy:
    """A seam object with some methods replaced; every other attribute is the inner's."""

    def __init__(self, inner: Any, faults: Mapping[str, Any]) -> None:
        for name in faults:
            if not callable(getattr(inner, name, None)):
                raise AttributeError(f"{type(inner).__name__} has no method {name!r}")
        self._inner = inner
        self._faults = {name: _replacement(name, f) for name, f in faults.items()}

    def __getattr__(self, name: str) -> Any:
        fault = self.__dict__.get("_faults", {}).get(name)
        return fault if fault is not None else getattr(self._inner, name)


def _split(faults: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    journal = {k: v for k, v in faults.items() if not k.startswith("db_")}
    db = {k[3:]: v for k, v in faults.items() if k.startswith("db_")}
    return journal, db


def _proxies(saver: Any, faults: Mapping[str, Any]) -> dict[str, Any]:
    eraser = saver._eraser
    journal, db = _split(faults)
    out: dict[str, Any] = {}
    if journal:
        out["journal"] = FaultyProxy(eraser.journal, journal)
    if db:
        out["db"] = FaultyProxy(eraser.db, db)
    return out


@contextmanager
def faulty(saver: Any, **faults: Any) -> Iterator[Any]:
    """Within the block, ``saver``'s journal (and database) methods named fail."""
    eraser = saver._eraser
    proxies = _proxies(saver, faults)
    saved = {name: getattr(eraser, name) for name in proxies}
    for name, proxy in proxies.items():
        setattr(eraser, name, proxy)
    try:
        yield saver
    finally:
        for name, inner in saved.items():
            setattr(eraser, name, inner)


def inject(monkeypatch: pytest.MonkeyPatch, saver: Any, **faults: Any) -> None:
    """As :func:`faulty`, until ``monkeypatch.undo()`` (or the end of the test)."""
    for name, proxy in _proxies(saver, faults).items():
        monkeypatch.setattr(saver._eraser, name, proxy)
