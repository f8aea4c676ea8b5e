"""Many receipt files at once: finding them, reading them (standard input included) and
mapping a function over them in forked processes.

Shared by ``receipt verify`` (its fast path), the log audit and the dashboard index;
standard library only, so the verifier's cold start stays as it is.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from .canonical import MAX_INPUT_BYTES
from .errors import InputError
from .verify import check_size, read_input

__all__ = ["BATCH", "PARALLEL_MIN", "STDIN", "default_jobs", "fork_map"]

STDIN = "-"


def _read_stdin() -> bytes:
    """One receipt from standard input, bounded like a file."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise InputError("cannot read standard input: not available")
    try:
        data = stream.read(MAX_INPUT_BYTES + 1)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read standard input: {exc}") from None
    if not isinstance(data, bytes):
        raise InputError("cannot read standard input: not a byte stream")
    return check_size(data)


def _read_arg(path: str) -> bytes:
    return _read_stdin() if path == STDIN else read_input(path)


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


def _expand(paths: Sequence[str], skip: Sequence[str] = ()) -> Iterator[str]:
    """Files to verify, in order. Directories are searched for *.json files, leaving out
    the files named in ``skip`` (the --key/--trust files, compared by device and inode,
    so another spelling or a symlink is recognised too)."""
    skip_ids = {i for p in skip if (i := _file_id(p)) is not None}
    for p in paths:
        if p != STDIN and os.path.isdir(p):
            yield from sorted(_json_files(p, skip_ids))
        else:
            yield p


def _json_files(top: str, skip_ids: set[tuple[int, int]]) -> list[str]:
    """The regular ``*.json`` files under ``top`` (symlinks to files followed, symlinks
    to directories not), as ``os.walk`` + ``os.stat`` would find them, but without a
    ``stat`` per file: ``scandir`` already knows the file type (a large archive's walk
    was ~5 us per file)."""
    skip_inodes = {ino for _, ino in skip_ids}
    found: list[str] = []
    pending = [top]
    while pending:
        try:
            it = os.scandir(pending.pop())
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    if e.is_dir():
                        if not e.is_symlink():
                            pending.append(e.path)
                        continue
                    if not e.name.endswith(".json") or not e.is_file():
                        continue
                    if skip_ids and (e.is_symlink() or e.inode() in skip_inodes):
                        st = e.stat()
                        if (st.st_dev, st.st_ino) in skip_ids:
                            continue
                except OSError:
                    continue
                found.append(e.path)
    return found


BATCH = 64


PARALLEL_MIN = 256
"""Fewer files than this are verified in one process whatever ``--jobs`` says: forking
costs more than it saves (the output is the same either way)."""


def default_jobs() -> int:
    """All the cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


T = TypeVar("T")


R = TypeVar("R")


def fork_map(fn: Callable[[T], R], items: Sequence[T], jobs: int, chunk: int = 64) -> Iterator[R]:
    """``map(fn, items)`` in ``jobs`` forked processes, results in input order.

    Chunk ``c`` goes to worker ``c % jobs``; each worker sends its chunks' results back
    through a pipe (``marshal``: results must be plain str/int/bool/None/list/dict) in
    that same order, and they are read round-robin, so output streams as it is ready. A
    worker that dies (killed, out of memory) makes the whole map raise ``RuntimeError``.
    The workers inherit everything already loaded (keys, a log's look-up tables)."""
    import marshal
    import signal

    chunks = [items[i : i + chunk] for i in range(0, len(items), chunk)]
    jobs = max(1, min(jobs, len(chunks)))
    sys.stdout.flush()
    sys.stderr.flush()
    workers: list[tuple[int, Any]] = []
    try:
        for w in range(jobs):
            r, wfd = os.pipe()
            pid = os.fork()
            if pid == 0:  # the worker: never returns
                code = 0
                try:
                    os.close(r)
                    for _, f in workers:
                        f.close()
                    with os.fdopen(wfd, "wb") as out:
                        for c in range(w, len(chunks), jobs):
                            blob = marshal.dumps([fn(x) for x in chunks[c]])
                            out.write(len(blob).to_bytes(8, "big") + blob)
                            out.flush()
                except BaseException:  # the parent sees the short pipe
                    code = 70
                os._exit(code)
            os.close(wfd)
            workers.append((pid, os.fdopen(r, "rb")))
        for c in range(len(chunks)):
            f = workers[c % jobs][1]
            head = f.read(8)
            blob = f.read(int.from_bytes(head, "big")) if len(head) == 8 else b""
            if len(head) < 8 or not blob:
                raise RuntimeError("a worker process died (killed, or out of memory?)")
            yield from marshal.loads(blob)
    finally:
        for pid, f in workers:
            f.close()
            with contextlib.suppress(OSError):
                if os.waitpid(pid, os.WNOHANG) == (0, 0):
                    os.kill(pid, signal.SIGTERM)
                    os.waitpid(pid, 0)


_FDS: dict[tuple[int, str], int] = {}


def _read_entry(directory: str, offset: int, length: int) -> bytes:
    """One receipt log entry's bytes, by offset (one descriptor per process and log)."""
    key = (os.getpid(), directory)  # one descriptor per process (and per fork)
    fd = _FDS.get(key)
    if fd is None:
        fd = _FDS[key] = os.open(os.path.join(directory, "entries"), os.O_RDONLY)
    return os.pread(fd, length, offset)
