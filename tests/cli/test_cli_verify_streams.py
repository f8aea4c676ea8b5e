"""`receipt verify` and its streams: a pipe closed early, one receipt from stdin (bounded,
given once), a non-UTF-8 stdout and a closed stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import test_verify_inputs
from erasure_receipts.cli import verify_main
from receipt_factory import make_receipt, make_statement
from test_verify_inputs import CLI, run_cli, validator

pub = test_verify_inputs.pub  # the fixture, shared

# -- broken pipes --------------------------------------------------------------------------


def _many_receipts(directory: Path, n: int) -> None:
    directory.mkdir()
    data = make_receipt().to_json()
    for i in range(n):
        (directory / f"r{i:04d}.json").write_bytes(data)


def test_verify_into_a_pipe_closed_early_exits_3_without_traceback(
    tmp_path: Path, pub: Path
) -> None:
    _many_receipts(tmp_path / "many", 600)  # far more than a pipe buffer of output
    proc = subprocess.Popen(
        [*CLI, "verify", str(tmp_path / "many"), "--key", str(pub)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"OK")
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 3
    assert "Traceback" not in err and "BrokenPipeError" not in err


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "{receipt}", "--key", "{pub}"],
        ["verify", "--json", "{receipt}", "--key", "{pub}"],
        ["verify", "--help"],
        ["show", "{receipt}"],
        ["export", "{receipt}"],
        ["--help"],
    ],
)
def test_every_command_into_a_closed_pipe_exits_3(
    tmp_path: Path, pub: Path, args: list[str]
) -> None:
    receipt = tmp_path / "r.json"
    receipt.write_bytes(make_receipt().to_json())
    argv = [a.format(receipt=receipt, pub=pub) for a in args]
    r, w = os.pipe()
    os.close(r)  # nobody will ever read: the first write fails with EPIPE
    try:
        proc = subprocess.run([*CLI, *argv], stdout=w, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(w)
    err = proc.stderr.decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode == 3


# -- stdin ---------------------------------------------------------------------------------


def test_verify_reads_one_receipt_from_stdin(pub: Path) -> None:
    data = make_receipt().to_json()
    proc = run_cli("verify", "-", "--key", pub, stdin=data)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("OK    -: thread 'thread-1'")
    proc = run_cli("verify", "--json", "-", "--key", pub, stdin=data)
    doc = json.loads(proc.stdout)
    validator("verify-result").validate(doc)
    assert [(r["file"], r["reason"]) for r in doc["results"]] == [("-", "ok")]


def test_stdin_is_bounded_and_given_once(pub: Path) -> None:
    big = make_receipt().to_json() + b" " * (1 << 20)
    proc = run_cli("verify", "--json", "-", "--key", pub, stdin=big)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["results"][0]["reason"] == "too_large"
    proc = run_cli("verify", "-", "-", "--key", pub, stdin=b"")
    assert proc.returncode == 2
    proc = run_cli("verify", "-", "--key", pub, stdin=b"")
    assert proc.returncode == 1 and "[not_json]" in proc.stdout


def test_stdin_in_process(monkeypatch: pytest.MonkeyPatch, pub: Path, capsys: Any) -> None:
    import io

    fake = io.TextIOWrapper(io.BytesIO(make_receipt().to_json()))
    monkeypatch.setattr(sys, "stdin", fake)
    assert verify_main(["-", "--key", str(pub)]) == 0
    assert capsys.readouterr().out.startswith("OK    -:")


def test_output_survives_a_non_utf8_stdout(tmp_path: Path, pub: Path) -> None:
    f = tmp_path / "r.json"
    f.write_bytes(make_receipt(make_statement(thread_id="thread-\u00e9")).to_json())
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    for extra in ([], ["--json"]):
        proc = subprocess.run(
            [*CLI, "verify", str(f), "--key", str(pub), *extra],
            capture_output=True,
            env=env,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert b"Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["results"][0]["thread_id"] == "thread-\u00e9"


def test_closed_stdout_exits_3(tmp_path: Path, pub: Path) -> None:
    f = tmp_path / "r.json"
    f.write_bytes(make_receipt().to_json())
    cmd = " ".join(f"'{a}'" for a in [*CLI, "verify", str(f), "--key", str(pub)]) + " >&-"
    proc = subprocess.run(cmd, shell=True, capture_output=True, timeout=60)
    assert proc.returncode == 3
    assert b"Traceback" not in proc.stderr
