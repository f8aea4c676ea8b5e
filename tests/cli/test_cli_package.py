"""The command line is a private package (``erasure_receipts._cli``) that no library
module imports, and what a library user needs from it is a Python API: trust files
(``trustfile.TrustFile``), opening privacy commitments (``privacy.open_claims``),
receipt-in-log checks (``log.LogCheck``), verifying a log's receipts in parallel
(``log.parallel_receipt_check``) and a read-only PostgreSQL digest
(``postgres.digest_read_only``). Each is checked against the command that uses it, on
real files, keys, logs and databases. (Tests of internals: ``_cli``'s layout.)
"""

from __future__ import annotations

import ast
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from erasure_receipts import Signer
from erasure_receipts._batch import PARALLEL_MIN
from erasure_receipts.app import app
from erasure_receipts.errors import Error
from erasure_receipts.log import LogCheck, ReceiptLog, parallel_receipt_check, verify_log
from erasure_receipts.privacy import open_claims
from erasure_receipts.receipt import Receipt
from erasure_receipts.trustfile import TrustFile, window_text
from erasure_receipts.verify import TrustStore
from receipt_factory import ATTACKER, TRUSTED, make_receipt, make_statement

SRC = Path(__file__).resolve().parents[2] / "src" / "erasure_receipts"
CLI_MODULES = {"_cli", "app", "app_postgres", "cli", "__main__"}


def cli(*args: Any) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports (at the top or inside a function), as dotted names
    relative to the package (``.cli`` -> ``cli``)."""
    package = path.relative_to(SRC).parent.parts
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            mod = [*base, *(node.module.split(".") if node.module else [])]
            if not node.level and mod[:1] == ["erasure_receipts"]:
                mod = mod[1:]
            elif not node.level:
                continue
            out.add(".".join(mod))
            out.update(".".join([*mod, a.name]) for a in node.names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("erasure_receipts."):
                    out.add(a.name.removeprefix("erasure_receipts."))
    return out


def test_no_library_module_imports_the_cli() -> None:
    library = [
        p for p in SRC.rglob("*.py")
        if p.relative_to(SRC).parts[0] not in CLI_MODULES and p.stem not in CLI_MODULES
    ]  # fmt: skip
    assert len(library) > 20
    offenders = {
        str(p.relative_to(SRC)): sorted(m for m in _imported(p) if m.split(".")[0] in CLI_MODULES)
        for p in library
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_one_module_per_command_group() -> None:
    import typer.main

    from erasure_receipts._cli import commands

    group = typer.main.get_command(commands.app)
    where = {}

    def walk(prefix: str, cmds: dict[str, Any]) -> None:
        for name, cmd in cmds.items():
            if hasattr(cmd, "commands"):
                walk(f"{prefix}{name} ", cmd.commands)
            else:
                where[prefix + name] = cmd.callback.__module__

    walk("", group.commands)  # type: ignore[attr-defined]
    short = {k: v.removeprefix("erasure_receipts._cli.") for k, v in where.items()}
    assert short == {
        "verify": "_app",
        "keygen": "keys", "keygen-commitment": "keys", "trust add": "keys",
        "trust list": "keys",
        "show": "inspect", "export": "inspect", "index": "inspect", "prove": "inspect",
        "open": "inspect",
        "digest": "erase", "erase": "erase", "recover": "erase", "locate": "erase",
        "authorize": "erase",
        "retention": "retention",
        "replay": "replay",
        "report": "report",
        "defer": "defer", "deferrals": "defer", "release-deferral": "defer",
        "shred": "shred", "encrypt": "shred",
        "log append": "log", "log verify": "log", "log prove": "log", "log checkpoint": "log",
        "log bundle": "log", "log witness add": "log", "log witness push": "log",
        "log timestamp": "log",
        "witness serve": "witness", "witness cosign": "witness", "witness watch": "witness",
        "redact": "redact",
    }  # fmt: skip
    assert list(group.commands)[:3] == ["verify", "keygen", "show"]  # type: ignore[attr-defined]
    assert list(group.commands)[-3:] == ["trust", "log", "witness"]  # type: ignore[attr-defined]


# -- trust files ----------------------------------------------------------------------------


def test_trust_file_api_writes_what_trust_add_writes(tmp_path: Path) -> None:
    pub = tmp_path / "pub.pem"
    pub.write_bytes(TRUSTED.public_pem())
    approver = tmp_path / "approver.pem"
    approver.write_bytes(ATTACKER.public_pem())
    by_cli = tmp_path / "cli.json"
    for args in (
        [pub, "--name", "old", "--not-after", "2026-01-01T00:00:00Z"],
        [pub, "--name", "new", "--not-before", "2026-01-01T00:00:00Z"],
        [approver, "--name", "boss", "--role", "approver"],
    ):
        res = cli("trust", "add", *args, "--file", by_cli)
        assert res.exit_code == 0, res.stderr

    by_api = tmp_path / "api.json"
    tf = TrustFile()
    tf = tf.add(TRUSTED.public_key, "old", not_after="2026-01-01T00:00:00Z")
    tf = tf.add(TRUSTED.public_key, "new", not_before="2026-01-01T00:00:00Z")
    tf = tf.add(ATTACKER.public_key, "boss", role="approver")
    assert tf.write(by_api) == 3
    assert by_api.read_bytes() == by_cli.read_bytes()
    assert by_api.stat().st_mode & 0o777 == 0o644

    back = TrustFile.read(by_api)
    assert back.entries == tf.entries
    assert [(k.name, k.role) for k in back.keys] == [
        ("old", "signer"), ("new", "signer"), ("boss", "approver")
    ]  # fmt: skip
    assert len(back.store()) == 3 and len(TrustStore.from_json(by_api.read_bytes())) == 3


def test_trust_file_conflicts_are_the_commands(tmp_path: Path) -> None:
    tf = TrustFile().add(TRUSTED.public_key, "k", not_before="2026-01-01T00:00:00Z")
    assert tf.conflict(ATTACKER.public_key) is None
    assert tf.conflict(TRUSTED.public_key, not_after="2026-01-01T00:00:00Z") is None
    reason, tk = tf.conflict(TRUSTED.public_key, not_after="2026-01-01T00:00:01Z") or ("", None)
    assert reason == "duplicate_key" and tk is not None and tk.name == "k"
    assert (tf.conflict(TRUSTED.public_key, role="approver") or ("",))[0] == "role_conflict"
    assert window_text(None, "2026-01-01T00:00:00Z") == "[any time, 2026-01-01T00:00:00Z)"

    path = tmp_path / "t.json"
    tf.write(path, mode=0o600)
    pub = tmp_path / "pub.pem"
    pub.write_bytes(TRUSTED.public_pem())
    res = cli("trust", "add", pub, "--name", "x", "--file", path, "--role", "approver")
    assert res.exit_code == 1 and "one key cannot be both signer and approver" in res.stderr
    res = cli("trust", "add", pub, "--name", "x", "--file", path)
    assert res.exit_code == 1 and "refusing a duplicate" in res.stderr
    tf.add(ATTACKER.public_key, "b").write(path)  # an existing file keeps its mode
    assert path.stat().st_mode & 0o777 == 0o600

    path.write_bytes(b'{"trust_version": 1, "keys": [{"name": "x"}]}')
    with pytest.raises(Error):
        TrustFile.read(path)


# -- opening commitments --------------------------------------------------------------------


def test_open_claims_is_what_receipt_open_prints(tmp_path: Path) -> None:
    receipt = make_receipt()
    path = tmp_path / "r.json"
    path.write_bytes(receipt.to_json())
    thread = receipt.predicate["scope"]["thread_id"]
    claims = [("thread", thread), ("thread", "someone-else")]
    res = cli("open", path, "--no-verify", "--json", "--thread", thread,
              "--thread", "someone-else")  # fmt: skip
    assert res.exit_code == 1, res.stderr
    assert json.loads(res.stdout)["claims"] == open_claims(receipt.predicate, None, claims)
    assert [c["found"] for c in open_claims(receipt.predicate, None, claims)] == [True, False]
    with pytest.raises(ValueError, match="bad store namespace 'users//x'"):
        open_claims(receipt.predicate, None, [("store-ns", "users//x")])
    res = cli("open", path, "--no-verify", "--store-ns", "users//x")
    assert res.exit_code == 2
    assert res.stderr == (
        "receipt: error: bad store namespace 'users//x': use slash-separated non-empty parts "
        "(see `receipt open --help`)\n"
    )


# -- receipt logs ---------------------------------------------------------------------------


def _receipts(n: int) -> list[Receipt]:
    return [
        make_receipt(make_statement(receipt_id=str(uuid.UUID(int=i + 1, version=4))))
        for i in range(n)
    ]


def test_log_check_and_parallel_receipt_check(tmp_path: Path) -> None:
    n = PARALLEL_MIN + 9
    rs = _receipts(n + 1)
    log = ReceiptLog(tmp_path / "log", signer=TRUSTED, origin="example.com/erasures")
    log.append_many([r.to_json() for r in rs[:n]])
    log.checkpoint()
    trust = TrustStore([TRUSTED.public_key])

    check = LogCheck(str(tmp_path / "log"), trust)
    assert check.size == n
    assert check.index_of(rs[5].to_json()) == 5
    assert check.index_of(rs[n].to_json()) is None  # never appended
    with pytest.raises(Error):
        LogCheck(str(tmp_path / "log"), TrustStore([ATTACKER.public_key]))

    for jobs in (1, 2):
        check_all = parallel_receipt_check(tmp_path / "log", trust, jobs)
        report = verify_log(tmp_path / "log", trust, check_receipts=check_all)
        assert report.ok and report.receipts_verified == n, report.problems
    spans = [(i, 0, 10) for i in range(PARALLEL_MIN)]  # not receipts: each one reported
    verdicts = parallel_receipt_check(tmp_path / "log", trust, 2)(spans)
    assert [v[0] if v else None for v in verdicts] == list(range(PARALLEL_MIN))
    assert len({(v[1], v[2]) for v in verdicts if v}) == 1  # the same verdict in every process


# -- a read-only PostgreSQL digest ----------------------------------------------------------


def test_digest_read_only_is_receipt_digest(pg_db: str, signer: Signer) -> None:
    import psycopg
    from psycopg.rows import dict_row

    from erasure_receipts.errors import ConfigurationError
    from erasure_receipts.postgres import digest_read_only
    from test_cli_postgres import NS, T, catalog, populate

    populate(pg_db, signer, erasure_schema=False)
    before = catalog(pg_db)
    res = cli("digest", pg_db, "--thread", T, "--store-ns", "/".join(NS), "--json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    options = "-c default_transaction_read_only=on"
    with psycopg.connect(pg_db, autocommit=True, row_factory=dict_row, options=options) as conn:
        d = digest_read_only(conn, T, [NS])
        assert d.digest == doc["digest"]
        assert {t: c.rows for t, c in d.tables.items()} == {
            t: v["rows"] for t, v in doc["tables"].items()
        }
        assert digest_read_only(conn, T).digest != d.digest  # without the store rows
        with pytest.raises(ConfigurationError):
            digest_read_only(conn, "")
        with pytest.raises(ConfigurationError):
            digest_read_only(conn, T, [NS], has_store=False)
    assert catalog(pg_db) == before  # nothing was installed
