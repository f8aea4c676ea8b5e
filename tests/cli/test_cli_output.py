"""Output files are made before anything irreversible happens, and written atomically.

``os.access`` is not a check: as root it says yes to /proc, and it knows nothing of a
name over NAME_MAX or a file system without free inodes. Each case here is real (a
tmpfs mount, ``chattr +i`` where this machine allows them, /proc, long names), and each
asserts that a refused erasure left every database row as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.sqlite import SqliteStore
from typer.testing import CliRunner, Result

from erasure_receipts import AttestingSqliteSaver, Signer, verify_receipt
from erasure_receipts.app import app
from scenario import TURNS, build_graph, human

NAME_MAX = os.pathconf("/", "PC_NAME_MAX") if hasattr(os, "pathconf") else 255


def cli(*args: Any) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def one_line(res: Result, code: int) -> str:
    assert res.exit_code == code, (res.exit_code, res.stdout, res.stderr, res.exception)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("receipt: error: "), res.stderr
    return lines[0]


def all_rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, read with a fresh connection."""
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        out = {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables}
    conn.close()
    return out


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(d: Path) -> list[str]:
    return sorted(os.listdir(d))


@pytest.fixture
def app_db(tmp_path: Path, signer: Signer) -> Path:
    db = tmp_path / "db" / "app.db"
    db.parent.mkdir()
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        AttestingSqliteSaver.from_conn_string(str(db), signer=signer, store=store) as saver,
    ):
        store.setup()
        graph = build_graph(saver, store)
        for text in TURNS[:2]:
            graph.invoke(human(text), {"configurable": {"thread_id": "alice"}})
        graph.invoke(human("hi"), {"configurable": {"thread_id": "bob"}})
    return db


@pytest.fixture
def key(tmp_path: Path, signer: Signer) -> Path:
    path = tmp_path / "k.pem"
    path.write_bytes(signer.private_pem())
    path.chmod(0o600)
    return path


def _mount_tmpfs(where: Path, options: str) -> bool:
    where.mkdir()
    if shutil.which("mount") is None:
        return False
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                          capture_output=True, timeout=30)  # fmt: skip
    return proc.returncode == 0


@pytest.fixture
def unwritable_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A directory no file can be created in, of the kind the test names."""
    kind = request.param
    d = tmp_path / kind
    if kind == "proc":
        yield Path("/proc")
        return
    if kind in ("no-inodes", "read-only"):
        opts = "nr_inodes=1,size=64k" if kind == "no-inodes" else "ro,size=64k"
        if not _mount_tmpfs(d, opts):
            pytest.skip("cannot mount a tmpfs here")
        try:
            yield d
        finally:
            subprocess.run(["umount", str(d)], capture_output=True, timeout=30)
        return
    assert kind == "immutable"
    d.mkdir()
    if (
        shutil.which("chattr") is None
        or subprocess.run(["chattr", "+i", str(d)], capture_output=True, timeout=30).returncode
    ):
        pytest.skip("chattr +i is not supported here")
    try:
        yield d
    finally:
        subprocess.run(["chattr", "-i", str(d)], capture_output=True, timeout=30)


KINDS = ["proc", "no-inodes", "read-only", "immutable"]


def _assert_nothing_erased(db: Path, before: dict[str, list[tuple[Any, ...]]], digest: str) -> None:
    assert all_rows(db) == before
    assert sha(db) == digest
    assert before["checkpoints"] and before["store"]  # there was something to lose


@pytest.mark.parametrize("unwritable_dir", KINDS, indirect=True)
def test_erase_out_in_an_unwritable_directory_deletes_nothing(
    unwritable_dir: Path, app_db: Path, key: Path
) -> None:
    before, digest = all_rows(app_db), sha(app_db)
    out = unwritable_dir / "receipt.json"
    res = cli("erase", app_db, "--thread", "alice", "--key", key, "--store-ns", "users/alice",
              "--out", out)  # fmt: skip
    assert str(out) in one_line(res, 3)
    assert res.stdout == ""
    _assert_nothing_erased(app_db, before, digest)
    assert not os.path.lexists(out)


@pytest.mark.parametrize("json_mode", [False, True])
def test_erase_out_name_over_name_max_deletes_nothing(
    json_mode: bool, app_db: Path, key: Path, tmp_path: Path
) -> None:
    before, digest = all_rows(app_db), sha(app_db)
    out = tmp_path / ("r" * (NAME_MAX + 1))
    files = listing(tmp_path)
    res = cli("erase", app_db, "--thread", "alice", "--key", key, "--out", out,
              *(["--json"] if json_mode else []))  # fmt: skip
    line = one_line(res, 3)
    assert "name too long" in line.lower(), line
    if json_mode:
        doc = json.loads(res.stdout)
        assert doc["ok"] is False and doc["exit_code"] == 3 and doc["reason"] == "unwritable"
    else:
        assert res.stdout == ""
    _assert_nothing_erased(app_db, before, digest)
    assert listing(tmp_path) == files


@pytest.mark.parametrize("case", ["directory", "dangling-symlink", "path-over-path-max"])
def test_erase_out_in_the_way_deletes_nothing(
    case: str, app_db: Path, key: Path, tmp_path: Path
) -> None:
    before, digest = all_rows(app_db), sha(app_db)
    out = tmp_path / "out"
    if case == "directory":
        out.mkdir()
    elif case == "dangling-symlink":
        out.symlink_to(tmp_path / "elsewhere.json")
    else:
        out = tmp_path.joinpath(*["d" * 200] * 21, "r.json")
    one_line(cli("erase", app_db, "--thread", "alice", "--key", key, "--out", out), 3)
    _assert_nothing_erased(app_db, before, digest)
    assert not (tmp_path / "elsewhere.json").exists()


def test_erase_out_name_of_name_max_is_written_atomically(
    app_db: Path, key: Path, tmp_path: Path, signer: Signer
) -> None:
    """The longest name the file system takes works: the temporary file beside it has a
    short name of its own (it used to be the name plus a suffix: over NAME_MAX, and the
    erasure was done before that was found)."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / ("r" * (NAME_MAX - 5) + ".json")
    res = cli("erase", app_db, "--thread", "alice", "--key", key, "--out", out)
    assert res.exit_code == 0, res.stderr
    assert listing(out_dir) == [out.name]  # no temporary file left
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert verify_receipt(out.read_bytes(), [signer.public_key]).thread_id == "alice"
    assert all_rows(app_db)["checkpoints"] and not [
        r for r in all_rows(app_db)["checkpoints"] if r[0] == "alice"
    ]


def test_reserved_out_is_removed_when_the_erasure_is_refused(
    app_db: Path, key: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "r.json"
    one_line(cli("erase", app_db, "--thread", "nobody", "--key", key, "--out", out), 1)
    one_line(cli("erase", tmp_path / "missing.db", "--thread", "alice", "--key", key,
                 "--out", out), 3)  # fmt: skip
    one_line(cli("erase", app_db, "--thread", "alice", "--key", key, "--out", out,
                 "--archive", tmp_path / "k.pem"), 3)  # fmt: skip
    assert listing(out_dir) == []
    # ... and the next run can use the name.
    assert cli("erase", app_db, "--thread", "alice", "--key", key, "--out", out).exit_code == 0
    assert listing(out_dir) == ["r.json"]


@pytest.mark.parametrize("unwritable_dir", ["proc", "no-inodes"], indirect=True)
@pytest.mark.parametrize("cmd", ["retention", "recover"])
def test_archive_in_an_unwritable_directory_deletes_nothing(
    cmd: str, unwritable_dir: Path, app_db: Path, key: Path
) -> None:
    before, digest = all_rows(app_db), sha(app_db)
    for archive in (unwritable_dir, unwritable_dir / "receipts"):
        extra = ["--idle", "0s"] if cmd == "retention" else ["--min-age", "0"]
        one_line(cli(cmd, app_db, "--key", key, "--archive", archive, *extra), 3)
        _assert_nothing_erased(app_db, before, digest)


def _other_outputs(tmp_path: Path, key: Path, receipt: Path) -> dict[str, Any]:
    return {
        "export": lambda out: ["export", receipt, "--out", out],
        "authorize": lambda out: ["authorize", "--request-id", "r", "--not-after",
                                  "2099-01-01T00:00:00Z", "--thread", "t", "--key", key,
                                  "--out", out],
        "index --rejected": lambda out: ["index", receipt, "--key", tmp_path / "p.pem",
                                         "--rejected", out],
        "keygen": lambda out: ["keygen", "--out", out.parent, "--name", out.name],
    }  # fmt: skip


@pytest.fixture
def receipt(app_db: Path, key: Path, tmp_path: Path, signer: Signer) -> Path:
    path = tmp_path / "receipt.json"
    assert cli("erase", app_db, "--thread", "bob", "--key", key, "--out", path).exit_code == 0
    (tmp_path / "p.pem").write_bytes(signer.public_pem())
    return path


@pytest.mark.parametrize("cmd", ["export", "authorize", "index --rejected", "keygen"])
def test_other_outputs_are_checked_by_creating_them(
    cmd: str, tmp_path: Path, key: Path, receipt: Path
) -> None:
    make = _other_outputs(tmp_path, key, receipt)[cmd]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    too_long = [] if cmd == "keygen" else [out_dir / ("o" * (NAME_MAX + 1))]  # keygen: exit 2
    for bad in (Path("/proc") / "o.json", *too_long):
        one_line(cli(*make(bad)), 3)
        assert listing(out_dir) == []
    # A long name works (keygen: its longest), and nothing but the output is left.
    name = "o" * (200 if cmd == "keygen" else NAME_MAX)
    res = cli(*make(out_dir / name))
    assert res.exit_code == 0, res.stderr
    expected = [f"{name}.key", f"{name}.pub.pem"] if cmd == "keygen" else [name]
    assert listing(out_dir) == expected
    if cmd == "keygen":
        assert stat.S_IMODE((out_dir / f"{name}.key").stat().st_mode) == 0o600
        assert Signer.from_pem((out_dir / f"{name}.key").read_bytes())
    elif cmd != "index --rejected":  # nothing was rejected: an empty file
        assert (out_dir / name).read_bytes()


def test_trust_file_of_a_long_name(tmp_path: Path, pub_pem: Path) -> None:
    """``write_durably``'s temporary file beside a file of NAME_MAX has a name that fits."""
    trust = tmp_path / "out" / ("t" * NAME_MAX)
    trust.parent.mkdir()
    windows = {"a": ["--not-after", "2030-01-01T00:00:00Z"],
               "b": ["--not-before", "2030-01-01T00:00:00Z"]}  # fmt: skip
    for name, window in windows.items():  # created, then replaced
        res = cli("trust", "add", pub_pem, "--name", name, "--file", trust, *window)
        assert res.exit_code == 0, res.stderr
    assert listing(trust.parent) == [trust.name]
    assert [k["name"] for k in json.loads(trust.read_bytes())["keys"]] == ["a", "b"]
