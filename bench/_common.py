"""Shared helpers for the benchmarks: machine facts, statistics and JSON results.

Every benchmark reports *ratios* against a baseline measured in the same session
(interleaved with the candidate), never absolute timed assertions: the machines that
run these are small and noisy.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
REPO_ROOT = BENCH_DIR.parent


def machine_facts() -> dict[str, Any]:
    facts: dict[str, Any] = {
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "sqlite_version": sqlite3.sqlite_version,
    }
    with contextlib.suppress(AttributeError, OSError):
        facts["sched_affinity_cpus"] = len(os.sched_getaffinity(0))
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    facts["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/loadavg", encoding="utf-8") as fh:
            facts["loadavg_at_write"] = fh.read().split()[:3]
    except OSError:
        pass
    try:
        import sqlite3 as _s

        c = _s.connect(":memory:")
        opts = [r[0] for r in c.execute("PRAGMA compile_options")]
        c.close()
        facts["sqlite_secure_delete_default"] = "SECURE_DELETE" in opts
    except Exception:  # pragma: no cover - informational only
        pass
    facts.update(code_state())
    facts["PYTHONDONTWRITEBYTECODE"] = os.environ.get("PYTHONDONTWRITEBYTECODE")
    for dist in (
        "cryptography",
        "langgraph-checkpoint",
        "langgraph-checkpoint-sqlite",
        "langgraph-erasure-receipts",
    ):
        try:
            from importlib import metadata

            facts[f"version:{dist}"] = metadata.version(dist)
        except Exception:
            pass
    return facts


def code_state() -> dict[str, Any]:
    """Which code was measured: git HEAD, whether src/ is dirty, and a hash of src/."""
    import hashlib
    import subprocess

    out: dict[str, Any] = {}
    h = hashlib.sha256()
    for f in sorted((REPO_ROOT / "src").rglob("*.py")):
        h.update(str(f.relative_to(REPO_ROOT)).encode() + b"\0" + f.read_bytes())
    out["src_sha256"] = h.hexdigest()[:16]
    try:
        out["git_head"] = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        out["src_dirty"] = bool(dirty)
    except (OSError, subprocess.CalledProcessError):
        pass
    return out


def summary(samples: Sequence[float]) -> dict[str, float]:
    xs = sorted(samples)
    return {
        "n": len(xs),
        "min": xs[0],
        "median": statistics.median(xs),
        "max": xs[-1],
        "mean": statistics.fmean(xs),
        "stdev": statistics.stdev(xs) if len(xs) > 1 else 0.0,
    }


def verdict(value: float, target: float, op: str) -> dict[str, Any]:
    ok = value >= target if op == ">=" else value <= target
    return {
        "value": round(value, 4),
        "target": f"{op} {target}",
        "pass": ok,
        "status": "met" if ok else "MISSED",
    }


def write_result(name: str, doc: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": name,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine_facts(),
        **doc,
    }
    path = RESULTS_DIR / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def fmt_s(x: float) -> str:
    if x >= 1:
        return f"{x:.3f} s"
    if x >= 1e-3:
        return f"{x * 1e3:.2f} ms"
    return f"{x * 1e6:.1f} us"


def print_verdicts(verdicts: dict[str, dict[str, Any]]) -> None:
    for name, v in verdicts.items():
        print(f"  {name:<44} {v['value']:>10}   target {v['target']:<8} {v['status']}")


class Timer:
    """``with Timer() as t: ...; t.elapsed``"""

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.elapsed = time.perf_counter() - self.start


def vm_status() -> dict[str, int]:
    """VmRSS / VmHWM (kB) of the current process from /proc/self/status."""
    out: dict[str, int] = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":", 1)
                out[k] = int(v.split()[0])
    return out


def per_call(fn: Callable[[], object], loops: int, rounds: int = 5) -> dict[str, float]:
    """Seconds per call of ``fn`` (one warm-up call, then ``rounds`` timed runs of
    ``loops`` calls each), summarised like :func:`summary`."""
    fn()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        samples.append((time.perf_counter() - t0) / loops)
    return summary(samples)
