"""Platform fallbacks, run for real in an interpreter that lacks the API: a
``sitecustomize`` removes it before anything is imported (macOS has no ``os.fdatasync``
and no ``os.sched_getaffinity``; Windows has no ``fcntl``). Linux is what runs here; this
shows the code paths the other platforms take, not those platforms themselves."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from erasure_receipts import ReceiptLog, Signer
from receipt_factory import make_receipt, make_statement

SITE = {
    # Every fsync is recorded with the file it was for, to see which call made a commit
    # durable once fdatasync is gone.
    "no-fdatasync": """
        import os
        del os.fdatasync
        synced = []
        _fsync = os.fsync
        def fsync(fd):
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
            return _fsync(fd)
        os.fsync = fsync
    """,
    "no-sched-getaffinity": """
        import os
        del os.sched_getaffinity
    """,
    "no-fcntl": """
        import sys
        sys.modules["fcntl"] = None  # "import fcntl" raises ImportError, as on Windows
    """,
}


def run(tmp_path: Path, site: str, *argv: str) -> subprocess.CompletedProcess[str]:
    d = tmp_path / f"site-{site}"
    d.mkdir(exist_ok=True)
    (d / "sitecustomize.py").write_text(textwrap.dedent(SITE[site]))
    path = [str(d), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env,
                          timeout=120, cwd=Path(__file__).parents[1])  # fmt: skip


@pytest.fixture
def signed(tmp_path: Path, signer: Signer) -> dict[str, str]:
    """A key pair and two receipts on disk (the receipts signed by that key)."""
    key, pub = tmp_path / "k.pem", tmp_path / "p.pem"
    key.write_bytes(signer.private_pem())
    key.chmod(0o600)
    pub.write_bytes(signer.public_pem())
    out = {"key": str(key), "pub": str(pub), "dir": str(tmp_path)}
    for i in (1, 2):
        r = tmp_path / f"r{i}.json"
        statement = make_statement(thread_id=f"t{i}", receipt_id=str(uuid.UUID(int=i)))
        r.write_bytes(make_receipt(statement, signer).to_json())
        out[f"r{i}"] = str(r)
    return out


def test_without_fdatasync_log_commits_are_fsynced(tmp_path: Path, signed: dict[str, str]) -> None:
    code = f"""
import os, sitecustomize
from pathlib import Path
from erasure_receipts import ReceiptLog, Signer
from erasure_receipts.log import verify_log
assert not hasattr(os, "fdatasync")
signer = Signer.from_pem(Path({signed["key"]!r}).read_bytes())
log = ReceiptLog({signed["dir"]!r} + "/log", signer=signer)
sitecustomize.synced.clear()
log.append(Path({signed["r1"]!r}).read_bytes())
assert any(p.endswith("/log/entries") for p in sitecustomize.synced), sitecustomize.synced
assert verify_log(log.directory, [signer.public_key]).ok
print("ok")
"""
    res = run(tmp_path, "no-fdatasync", "-c", code)
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    # The CLI on such an interpreter: append, then audit the log and a receipt in it.
    log = str(tmp_path / "cli-log")
    cli = ["-m", "erasure_receipts"]
    res = run(tmp_path, "no-fdatasync", *cli, "log", "append", log, signed["r1"], signed["r2"],
              "--key", signed["key"])  # fmt: skip
    assert res.returncode == 0, res.stderr
    res = run(tmp_path, "no-fdatasync", *cli, "log", "verify", log, "--key", signed["pub"])
    assert res.returncode == 0 and "2 entries" in res.stdout, res.stderr
    res = run(tmp_path, "no-fdatasync", *cli, "verify", signed["r2"], "--key", signed["pub"],
              "--log", log)  # fmt: skip
    assert res.returncode == 0 and "log index 1" in res.stdout, res.stderr


def test_without_sched_getaffinity_verify_uses_the_cpu_count(
    tmp_path: Path, signed: dict[str, str]
) -> None:
    res = run(tmp_path, "no-sched-getaffinity", "-c",
              "import os; from erasure_receipts.cli import default_jobs; "
              "assert not hasattr(os, 'sched_getaffinity'); "
              "assert default_jobs() == (os.cpu_count() or 1); print('ok')")  # fmt: skip
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    res = run(tmp_path, "no-sched-getaffinity", "-m", "erasure_receipts", "verify",
              signed["r1"], signed["r2"], "--key", signed["pub"])  # fmt: skip
    assert res.returncode == 0 and res.stdout.count("OK ") == 2, res.stderr


def test_without_fcntl_logs_are_read_only_with_a_clear_error(
    tmp_path: Path, signed: dict[str, str], signer: Signer
) -> None:
    log = tmp_path / "log"
    with ReceiptLog(log, signer=signer) as rl:  # made here, where flock exists
        rl.append_many([Path(signed["r1"]).read_bytes(), Path(signed["r2"]).read_bytes()])
    before = {p.name: p.read_bytes() for p in log.iterdir()}
    code = f"""
from pathlib import Path
from erasure_receipts import ReceiptLog, Signer
from erasure_receipts.log import LogError, verify_log
signer = Signer.from_pem(Path({signed["key"]!r}).read_bytes())
ro = ReceiptLog({str(log)!r})
data = Path({signed["r2"]!r}).read_bytes()
assert ro.index_of(data) == 1 and ro.inclusion_proof(1).verify(data)
assert verify_log(ro.directory, [signer.public_key]).ok
try:
    ReceiptLog({str(log)!r}, signer=signer)
except LogError as exc:
    print(exc.reason)
"""
    res = run(tmp_path, "no-fcntl", "-c", code)
    assert res.returncode == 0 and res.stdout == "unsupported_platform\n", res.stderr
    cli = ["-m", "erasure_receipts"]
    res = run(tmp_path, "no-fcntl", *cli, "log", "verify", str(log), "--key", signed["pub"])
    assert res.returncode == 0 and "2 entries" in res.stdout, res.stderr
    res = run(tmp_path, "no-fcntl", *cli, "verify", signed["r1"], "--key", signed["pub"],
              "--log", str(log))  # fmt: skip
    assert res.returncode == 0 and "log index 0" in res.stdout, res.stderr
    res = run(tmp_path, "no-fcntl", *cli, "log", "append", str(log), signed["r1"],
              "--key", signed["key"])  # fmt: skip
    assert res.returncode == 1, res.stderr
    [line] = res.stderr.splitlines()
    assert line.startswith("receipt: error: [unsupported_platform]") and "fcntl" in line
    assert {p.name: p.read_bytes() for p in log.iterdir()} == before
