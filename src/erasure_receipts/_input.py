"""Reading the verifier's inputs: regular files of at most ``MAX_INPUT_BYTES``, and file
names printed safely. Below ``trust`` and ``verify`` (both read files with it); imports
nothing from LangGraph and no database driver. ``verify`` re-exports these names."""

from __future__ import annotations

import os
import stat

from .canonical import MAX_INPUT_BYTES
from .errors import InputError, MalformedReceiptError

__all__ = ["check_size", "read_input"]


def _display(path: str | bytes) -> str:
    """A file name that can always be printed on one line: undecodable bytes and
    control characters (a newline in a name could forge an output line) are escaped."""
    text = os.fsencode(path).decode("utf-8", "backslashreplace")
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text


def read_input(path: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> bytes:
    """Read a regular file of at most ``MAX_INPUT_BYTES`` (``InputError`` if it cannot be
    read or is not a regular file, ``MalformedReceiptError`` "too_large" if bigger)."""
    path = os.fspath(path)
    # O_NONBLOCK + a regular-file check: a FIFO or device named *.json must not hang a
    # batch verify; it is reported as unreadable instead.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise InputError(f"cannot read {_display(path)}: {_strerror(exc)}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"cannot read {_display(path)}: not a regular file")
        # Read what the file says it holds (+1 to notice growth), not a 1 MiB buffer per
        # file: allocation dominated small reads in batches. A short read of a regular
        # file is its end, so a file that did not grow costs one read call.
        want = min(st.st_size, MAX_INPUT_BYTES) + 1
        data = os.read(fd, want)
        if len(data) == want:
            while len(data) <= MAX_INPUT_BYTES and (more := os.read(fd, MAX_INPUT_BYTES + 1)):
                data += more
    except OSError as exc:
        raise InputError(f"cannot read {_display(path)}: {_strerror(exc)}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    return check_size(data)


def _strerror(exc: Exception) -> str:
    return str(getattr(exc, "strerror", None) or exc)


def check_size(data: bytes) -> bytes:
    """``data`` unchanged, or ``MalformedReceiptError`` "too_large" if over ``MAX_INPUT_BYTES``."""
    if len(data) > MAX_INPUT_BYTES:
        raise MalformedReceiptError(
            f"input is over the {MAX_INPUT_BYTES}-byte limit", reason="too_large"
        )
    return data
