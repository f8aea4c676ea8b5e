"""Every command's usage errors are one ``receipt: error:`` line on stderr with exit 2
(a missing, unknown or valueless option, a bad value or choice: never click's usage box),
and an input file that cannot be read (missing, a directory, a FIFO) is exit 3, one line.

All in process through typer's CliRunner (``receipt verify`` through ``verify_main``),
against real files: a LangGraph SQLite database, keys, a receipt and a receipt log.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
import typer.main
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver
from typer.testing import CliRunner, Result

from erasure_receipts import Signer
from erasure_receipts.app import _Group, app
from erasure_receipts.cli import verify_main


def cli(*args: Any) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def one_line(res: Result, code: int) -> str:
    """Exit ``code`` with exactly one ``receipt: error:`` line on stderr: no usage box,
    no "Try --help" line, no traceback."""
    assert res.exit_code == code, (res.exit_code, res.stdout, res.stderr, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("receipt: error: "), res.stderr
    assert "╭" not in res.stderr and "Usage:" not in res.stderr
    return lines[0]


def _leaves(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name, cmd in sorted(group.commands.items()):
        if hasattr(cmd, "commands"):
            yield from _leaves(cmd, (*path, name))
        else:
            yield (*path, name), cmd


COMMANDS = {" ".join(p): cmd for p, cmd in _leaves(typer.main.get_command(app))}
COMMANDS.pop("verify")  # dispatched to cli.verify_main before typer: tested below

# A bad value per command: a typed option's wrong value or choice where it has one, else a
# value given to a flag. Every command must be here (test_every_command_is_covered).
BAD_VALUES: dict[str, list[list[str]]] = {
    "authorize": [["--request-id", "r", "--not-after", "2099-01-01T00:00:00Z", "--key", "k",
                   "--out", "o", "--thread", "t", "--kind", "everything"]],
    "digest": [["db", "--thread", "t", "--json=yes"]],
    "erase": [["db", "--key", "k", "--thread", "t", "--no-tombstone=yes"]],
    "export": [["r.json", "--format", "pdf"]],
    "index": [["r.json", "--format", "xlsx"], ["r.json", "--jobs", "0"],
              ["r.json", "--jobs", "many"]],
    "keygen": [["--out", "d", "--verbose=1"]],
    "keygen-commitment": [["--out", "f", "--verbose=1"]],
    "locate": [["db", "needle", "--json=1"]],
    "log append": [["log", "r.json", "--key", "k", "--json=1"]],
    "log checkpoint": [["log", "--json=1"]],
    "log prove": [["log", "r.json", "--json=1"]],
    "log verify": [["log", "--jobs", "many"], ["log", "-j", "0"], ["log", "--jobs", "1.5"]],
    "open": [["r.json", "--thread", "t", "--json=1"]],
    "prove": [["row.json", "--receipt", "r.json", "--json=1"]],
    "recover": [["db", "--key", "k", "--archive", "a", "--min-age", "soon"]],
    "replay": [["db", "--archive", "a", "--key", "k", "--verify-key", "p", "--jobs", "many"]],
    "report": [["r.json", "--key", "k", "--max-rows", "0"], ["r.json", "--jobs", "many"]],
    "retention": [["db", "--idle", "1d", "--limit", "ten"],
                  ["db", "--idle", "1d", "--limit", "-1"],
                  ["db", "--idle", "1d", "--workers", "0"],
                  ["db", "--idle", "1d", "--workers", "two"]],
    "show": [["r.json", "--json=no"]],
    "trust add": [["p.pem", "--name", "n", "--file", "t.json", "--role", "boss"]],
    "trust list": [["t.json", "--json=true"]],
    "redact": [["db", "--key", "k", "--thread", "t", "--needles-file", "f", "--json=1"]],
    "defer": [["db", "--thread", "t", "--basis", "b", "--until", "2099-01-01", "--key", "k",
               "--archive", "a", "--json=yes"]],
    "deferrals": [["db", "--json=yes"]],
    "release-deferral": [["db", "id", "--reason", "r", "--json=yes"]],
    "shred": [["db", "--key", "k", "--keystore", "ks", "--archive", "a", "--subject", "s",
               "--json=1"]],
    "encrypt": [["db", "--keystore", "ks", "--master-key", "mk", "--json=1"]],
    "log bundle": [["log", "r.json", "-o", "o", "--verbose=1"]],
    "log witness add": [["log", "vkey", "http://x", "--verbose=1"]],
    "log witness push": [["log", "--json=1"]],
    "log timestamp": [["log", "--tsa", "http://127.0.0.1:9/", "--timeout", "0"]],
    "witness serve": [["--log-key", "p", "--origin", "o", "--key", "k", "--name", "n",
                       "--state", "s", "--allow-remote=1"]],
    "witness cosign": [["c", "--log-key", "p", "--origin", "o", "--key", "k", "--name", "n",
                        "--state", "s", "--old", "-1"],
                       ["c", "--log-key", "p", "--origin", "o", "--key", "k", "--name", "n",
                        "--state", "s", "--old", "x"]],
    "witness watch": [["src", "--policy", "p", "--json=1"]],
}  # fmt: skip

# Required options left out while everything else is given.
MISSING_OPTION = [
    ("erase", ["db", "--thread", "t"], "'--key'"),
    ("recover", ["db", "--key", "k"], "'--archive'"),
    ("authorize", ["--request-id", "r", "--not-after", "2099-01-01T00:00:00Z", "--key", "k",
                   "--thread", "t"], "'--out'"),
    ("trust add", ["p.pem", "--name", "n"], "'--file'"),
    ("prove", ["row.json"], "'--receipt'"),
    ("log append", ["log", "r.json"], "'--key'"),
    ("keygen", [], "'--out'"),
    ("keygen-commitment", [], "'--out'"),
    ("redact", ["db", "--key", "k", "--needles-file", "f"], "'--thread'"),
    ("redact", ["db", "--key", "k", "--thread", "t"], "'--needles-file'"),
    ("log bundle", ["log", "r.json"], "'--out'"),
    ("log timestamp", ["log"], "'--tsa'"),
    ("witness cosign", ["c", "--log-key", "p", "--origin", "o", "--key", "k", "--name", "n",
                        "--state", "s"], "'--old'"),
    ("witness serve", ["--log-key", "p", "--origin", "o", "--key", "k", "--name", "n"],
     "'--state'"),
    ("witness watch", ["src"], "'--policy'"),
]  # fmt: skip


def _valued_options() -> list[tuple[str, str]]:
    """(command, option) for every option that takes a value."""
    out = []
    for name, cmd in COMMANDS.items():
        for p in cmd.params:
            if getattr(p, "param_type_name", "") == "option" and not getattr(p, "is_flag", False):
                out.append((name, max(p.opts, key=len)))
    return sorted(out)


def test_every_command_is_covered() -> None:
    assert set(BAD_VALUES) == set(COMMANDS)
    assert len(_valued_options()) > 40  # the introspection found the options


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_arguments_and_unknown_option(name: str) -> None:
    argv = name.split()
    assert "Missing" in one_line(cli(*argv), 2)
    line = one_line(cli(*argv, "--no-such-option"), 2)
    assert "--no-such-option" in line and f"`receipt {name} --help`" in line
    # A JSON caller still gets one document on stdout.
    res = cli(*argv, "--no-such-option", "--json")
    one_line(res, 2)
    if "--json" in [o for p in COMMANDS[name].params for o in getattr(p, "opts", [])]:
        doc = json.loads(res.stdout)
        assert doc["ok"] is False and doc["exit_code"] == 2 and doc["reason"] == "usage"


@pytest.mark.parametrize(
    ("name", "args"), [(n, a) for n, cases in sorted(BAD_VALUES.items()) for a in cases]
)
def test_bad_value(name: str, args: list[str]) -> None:
    line = one_line(cli(*name.split(), *args), 2)
    assert "Invalid value" in line or "does not take a value" in line, line


@pytest.mark.parametrize(("name", "args", "option"), MISSING_OPTION)
def test_missing_required_option(name: str, args: list[str], option: str) -> None:
    line = one_line(cli(*name.split(), *args), 2)
    assert "Missing option" in line and option in line


@pytest.mark.parametrize(("name", "option"), _valued_options())
def test_option_without_its_value(name: str, option: str) -> None:
    line = one_line(cli(*name.split(), option), 2)
    # (an option whose value is optional gets to the missing arguments instead)
    assert "requires an argument" in line or "Missing" in line, line


def test_global_option_and_command_errors() -> None:
    assert "--bogus" in one_line(cli("--bogus"), 2)
    res = cli("--bogus", "erase", "--json")
    one_line(res, 2)
    assert json.loads(res.stdout)["reason"] == "usage"
    assert "nosuch" in one_line(cli("nosuch"), 2)
    assert "nosuch" in one_line(cli("log", "nosuch"), 2)
    assert "nosuch" in one_line(cli("trust", "nosuch"), 2)


@pytest.mark.parametrize("name", ["", *sorted(COMMANDS), "log", "trust", "witness", "log witness"])
def test_help_still_works(name: str) -> None:
    res = cli(*name.split(), "--help")
    assert res.exit_code == 0, res.stderr
    assert "Usage" in res.stdout and res.stderr == ""


@pytest.mark.parametrize("group", ["", "log", "trust", "witness", "log witness"])
def test_a_group_without_a_command_shows_its_help(group: str) -> None:
    res = cli(*group.split())
    assert res.exit_code == 2 and "Usage" in res.stderr
    assert res.stdout == ""  # the help page is a diagnostic: stdout carries only results


def test_a_group_without_a_command_in_a_real_process() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "erasure_receipts", "log"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 2 and done.stdout == "" and "Usage" in done.stderr


@pytest.mark.parametrize(
    "argv",
    [[], ["--bogus"], ["r.json", "--key"], ["r.json", "--jobs", "x"], ["r.json", "-j", "0"],
     ["r.json", "--key", "k", "--trust", "t"]],
)  # fmt: skip
def test_verify_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert verify_main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("receipt verify: error: "), err


# -- a path option's own checks (typer's exists=/readable=, file types) are I/O: exit 3 ------

probe = typer.Typer(cls=_Group)


@probe.command("read")
def _read(
    path: Annotated[
        Path, typer.Option("--path", exists=True, dir_okay=False, readable=True)
    ] = Path(),
    text: Annotated[typer.FileText | None, typer.Option("--text")] = None,
) -> None:
    """An option as typer checks it."""


@probe.command("other")
def _other() -> None:
    """A second command, so that the probe is a group."""


@pytest.mark.parametrize("option", ["--path", "--text"])
def test_typer_file_checks_are_io_errors(option: str, tmp_path: Path) -> None:
    for target in (tmp_path / "missing", tmp_path):
        res = CliRunner().invoke(probe, ["read", option, str(target)])
        assert res.exit_code == 3, (res.stdout, res.stderr)
        assert len(res.stderr.splitlines()) == 1 and "receipt: error: " in res.stderr


# -- unreadable inputs of every command: exit 3, one line ---------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("inputs")
    s = Signer.from_seed(bytes(range(32)))
    key, pub = d / "k.pem", d / "p.pem"
    key.write_bytes(s.private_pem())
    key.chmod(0o600)
    pub.write_bytes(s.public_pem())
    db = d / "app.db"
    with SqliteSaver.from_conn_string(str(db)) as saver:
        for t in ("t", "u"):
            saver.put({"configurable": {"thread_id": t, "checkpoint_ns": ""}},
                      empty_checkpoint(), {}, {})  # fmt: skip
    receipt = d / "r.json"
    assert cli("erase", db, "--thread", "u", "--key", key, "--out", receipt).exit_code == 0
    assert cli("log", "append", d / "log", receipt, "--key", key).exit_code == 0
    os.mkfifo(d / "fifo")
    (d / "empty-dir").mkdir()
    return {"key": str(key), "pub": str(pub), "db": str(db), "receipt": str(receipt),
            "log": str(d / "log"), "dir": str(d)}  # fmt: skip


X = "<unreadable>"
# (command line with X for the input, kinds of unreadable input that apply). A directory is
# a valid log (or receipts to search) for some inputs, so not every kind applies everywhere.
ALL, NOT_DIR = ("missing", "directory", "fifo"), ("missing", "fifo")
UNREADABLE: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "show": (["show", X], ALL),
    "export": (["export", X], ALL),
    "digest": (["digest", X, "--thread", "t"], ALL),
    "digest --commitment-key": (["digest", "{db}", "--subject", "s", "--metadata-key", "m",
                                 "--commitment-key", X], ALL),
    "erase": (["erase", X, "--thread", "t", "--key", "{key}"], ALL),
    "erase --key": (["erase", "{db}", "--thread", "t", "--key", X], ALL),
    "erase --commitment-key": (["erase", "{db}", "--subject", "s", "--metadata-key", "m",
                                "--privacy", "commitments", "--commitment-key", X,
                                "--key", "{key}"], ALL),
    "erase --authorization": (["erase", "{db}", "--thread", "t", "--key", "{key}",
                               "--request-id", "r", "--basis", "b", "--authorization", X], ALL),
    "recover": (["recover", X, "--key", "{key}", "--archive", "{dir}/archive"], ALL),
    "recover --key": (["recover", "{db}", "--key", X, "--archive", "{dir}/archive"], ALL),
    "authorize --key": (["authorize", "--request-id", "r", "--not-after",
                         "2099-01-01T00:00:00Z", "--thread", "t", "--key", X,
                         "--out", "{dir}/auth-{n}.json"], ALL),
    "authorize --commitment-key": (["authorize", "--request-id", "r", "--not-after",
                                    "2099-01-01T00:00:00Z", "--thread", "t", "--key", "{key}",
                                    "--commitment-key", X, "--out", "{dir}/auth-{n}.json"], ALL),
    "trust add": (["trust", "add", X, "--name", "n", "--file", "{dir}/trust-{n}.json"], ALL),
    "trust add --file": (["trust", "add", "{pub}", "--name", "n", "--file", X],
                         ("directory", "fifo")),
    "trust list": (["trust", "list", X], ALL),
    "prove": (["prove", X, "--receipt", "{receipt}", "--key", "{pub}"], ALL),
    "prove --receipt": (["prove", "{receipt}", "--receipt", X, "--key", "{pub}"], ALL),
    "prove --key": (["prove", "{receipt}", "--receipt", "{receipt}", "--key", X], ALL),
    "prove --trust": (["prove", "{receipt}", "--receipt", "{receipt}", "--trust", X], ALL),
    "log append RECEIPT": (["log", "append", "{dir}/log-{n}", X, "--key", "{key}"], ALL),
    "log append --key": (["log", "append", "{dir}/log-{n}", "{receipt}", "--key", X], ALL),
    "log verify": (["log", "verify", X, "--key", "{pub}"], ("missing",)),
    "log verify --key": (["log", "verify", "{log}", "--key", X], ALL),
    "log verify --trust": (["log", "verify", "{log}", "--trust", X], ALL),
    "log verify --checkpoint": (["log", "verify", "{log}", "--key", "{pub}",
                                 "--checkpoint", X], ALL),
    "log prove": (["log", "prove", X, "{receipt}"], ("missing",)),
    "log prove RECEIPT": (["log", "prove", "{log}", X], ALL),
    "log checkpoint": (["log", "checkpoint", X], ("missing",)),
    "index --key": (["index", "{receipt}", "--key", X], ALL),
    "index --trust": (["index", "{receipt}", "--trust", X], ALL),
    "locate": (["locate", X, "needle"], ALL),
    "open": (["open", X, "--thread", "t", "--no-verify"], ALL),
    "open --key": (["open", "{receipt}", "--thread", "u", "--key", X], ALL),
    "replay": (["replay", "{db}", "--archive", "{dir}", "--key", X, "--verify-key", X], ALL),
    "retention": (["retention", X, "--idle", "1d", "--dry-run"], ALL),
    "retention --key": (["retention", "{db}", "--idle", "1d", "--key", X,
                         "--archive", "{dir}/archive"], ALL),
    "redact": (["redact", X, "--thread", "t", "--needles-file", "{receipt}", "--key", "{key}"],
               ALL),
    "redact --key": (["redact", "{db}", "--thread", "t", "--needles-file", "{receipt}",
                      "--key", X], ALL),
    "redact --needles-file": (["redact", "{db}", "--thread", "t", "--needles-file", X,
                               "--key", "{key}"], ALL),
    "report --key": (["report", "{receipt}", "--key", X, "--json"], ALL),
    "report --trust": (["report", "{receipt}", "--trust", X, "--json"], ALL),
    "report --tsa-cert": (["report", "{log}", "--key", "{pub}", "--json", "--tsa-cert", X],
                          ALL),
    "defer": (["defer", X, "--thread", "t", "--basis", "b", "--until", "2099-01-01",
               "--key", "{key}", "--archive", "{dir}/archive"], ALL),
    "defer --key": (["defer", "{db}", "--thread", "t", "--basis", "b", "--until",
                     "2099-01-01", "--key", X, "--archive", "{dir}/archive"], ALL),
    "deferrals": (["deferrals", X], ALL),
    "release-deferral": (["release-deferral", X, "id", "--reason", "r"], ALL),
    "shred": (["shred", X, "--key", "{key}", "--keystore", "{dir}/ks", "--archive",
               "{dir}/archive", "--subject", "s", "--master-key", "{dir}/mk"], ALL),
    "encrypt": (["encrypt", X, "--keystore", "{dir}/ks", "--master-key", "{dir}/mk"], ALL),
    "log bundle": (["log", "bundle", X, "{receipt}", "-o", "{dir}/b-{n}"], ("missing",)),
    "log bundle RECEIPT": (["log", "bundle", "{log}", X, "-o", "{dir}/b-{n}"], ALL),
    "log witness add": (["log", "witness", "add", X, "w+00000000+AA", "http://x"],
                        ("missing",)),
    "log witness push": (["log", "witness", "push", X], ("missing",)),
    "log timestamp": (["log", "timestamp", X, "--tsa", "http://127.0.0.1:9/"], ("missing",)),
    "witness serve --key": (["witness", "serve", "--log-key", "{pub}", "--origin", "o",
                             "--key", X, "--name", "w", "--state", "{dir}/ws-{n}"], ALL),
    "witness serve --log-key": (["witness", "serve", "--log-key", X, "--origin", "o",
                                 "--key", "{key}", "--name", "w", "--state", "{dir}/ws-{n}"],
                                ALL),
    "witness cosign": (["witness", "cosign", X, "--log-key", "{pub}", "--origin", "o",
                        "--key", "{key}", "--name", "w", "--state", "{dir}/ws-{n}",
                        "--old", "0"], ALL),
    "witness cosign --proof": (["witness", "cosign", "{receipt}", "--log-key", "{pub}",
                                "--origin", "o", "--key", "{key}", "--name", "w", "--state",
                                "{dir}/ws-{n}", "--old", "0", "--proof", X], ALL),
    "witness watch --policy": (["witness", "watch", "{log}", "--policy", X], ALL),
}  # fmt: skip


class Hung(BaseException):
    """Not an OSError (which the commands would report as unreadable, exit 3)."""


@pytest.fixture
def alarm() -> Iterator[None]:
    """A FIFO read that blocks fails the test instead of hanging it."""

    def hung(signum: int, frame: Any) -> None:
        raise Hung("blocked reading a FIFO")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_unreadable_table_covers_every_command() -> None:
    named = {next(" ".join(case.split()[:k]) for k in (3, 2, 1)
                  if " ".join(case.split()[:k]) in COMMANDS) for case in UNREADABLE}  # fmt: skip
    # keygen and keygen-commitment read no file.
    assert named == set(COMMANDS) - {"keygen", "keygen-commitment"}


@pytest.mark.parametrize(
    ("case", "kind"), [(c, k) for c, (_, kinds) in UNREADABLE.items() for k in kinds]
)
def test_unreadable_input_is_exit_3(
    case: str, kind: str, files: dict[str, str], alarm: None, tmp_path: Path
) -> None:
    d = Path(files["dir"])
    target = {"missing": str(tmp_path / "missing"), "directory": str(d / "empty-dir"),
              "fifo": str(d / "fifo")}[kind]  # fmt: skip
    argv, _ = UNREADABLE[case]
    n = f"{len(case)}-{kind}-{os.getpid()}-{abs(hash(case))}"
    args = [target if a == X else a.format(n=n, **files) for a in argv]
    before = sorted(os.listdir(d))
    one_line(cli(*args), 3)
    assert sorted(os.listdir(d)) == before  # nothing created next to the inputs


@pytest.mark.parametrize(
    ("argv", "kind"),
    [(["{x}", "--key", "{pub}"], "missing"), (["{x}", "--key", "{pub}"], "fifo"),
     (["{receipt}", "--key", "{x}"], "missing"), (["{receipt}", "--key", "{x}"], "directory"),
     (["{receipt}", "--key", "{x}"], "fifo"), (["{receipt}", "--trust", "{x}"], "directory"),
     (["{receipt}", "--trust", "{x}"], "fifo"), (["{receipt}", "--key", "{pub}", "--log", "{x}"],
                                                 "missing")],
)  # fmt: skip
def test_verify_unreadable_input_is_exit_3(
    argv: list[str], kind: str, files: dict[str, str], alarm: None,
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:  # fmt: skip
    d = Path(files["dir"])
    x = {"missing": str(tmp_path / "missing"), "directory": str(d / "empty-dir"),
         "fifo": str(d / "fifo")}[kind]  # fmt: skip
    assert verify_main([a.format(x=x, **files) for a in argv]) == 3
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
