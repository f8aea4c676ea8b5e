"""All SQL lives in ``_backends`` (ARCHITECTURE.md): no other module of the package holds
a SQL statement in a string (docstrings aside), so a scope's rows are read and deleted
only where each database's rules are kept."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import erasure_receipts

PACKAGE = Path(erasure_receipts.__file__).parent
SQL = re.compile(
    r"^\s*(SELECT\s|INSERT\s+INTO\s|UPDATE\s+\S+\s+SET\s|DELETE\s+FROM\s|CREATE\s+(TABLE|INDEX|"
    r"TRIGGER|FUNCTION)\s|DROP\s+TABLE\s|WITH\s+\w+\s+AS\s*\(|PRAGMA\s|VACUUM\b|BEGIN\b)"
)


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.add(id(value))
    return out


def _sql_strings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in skip and SQL.match(node.value)):  # fmt: skip
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value[:50]!r}")
    return found


def test_no_sql_outside_the_backends() -> None:
    modules = [p for p in PACKAGE.rglob("*.py") if "_backends" not in p.parts
               and "backends" not in p.parts]  # fmt: skip
    assert len(modules) > 50
    found = [hit for p in modules for hit in _sql_strings(p)]
    assert found == []


def test_the_check_sees_sql() -> None:
    backends = list((PACKAGE / "_backends").rglob("*.py"))
    assert sum(len(_sql_strings(p)) for p in backends) > 50
