"""C2SP signed notes (``signed-note``), tlog checkpoints (``tlog-checkpoint``) and
Ed25519 cosignatures (``tlog-cosignature``): what a verifier needs to read a receipt
log's checkpoints and its witnesses' cosignatures, without the log itself.
:mod:`erasure_receipts.log` re-exports every name (the log signs and stores these).

* :class:`Checkpoint` - parse a signed checkpoint strictly, check the log's signature
  (:meth:`Checkpoint.verify`), a cosigner's (:meth:`Checkpoint.cosigned_by`), sign one.
* key IDs and verifier keys: :func:`note_key_id` and :func:`verifier_key` (logs, type
  0x01), :func:`cosignature_key_id` and :func:`cosigner_vkey` (witnesses, type 0x04),
  :func:`parse_vkey` for both.
* :func:`cosign` - a ``cosignature/v1`` line (u64 big-endian time || Ed25519 signature
  over ``cosignature/v1\\ntime <t>\\n`` + the checkpoint's text).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .errors import ConfigurationError, Error, LogError
from .signing import PublicKey, Signer, b64decode, b64encode, sha256

if TYPE_CHECKING:
    from .verify import TrustStore

_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f]")
"""Control characters a note may not hold (every one but newline)."""

__all__ = [
    "EM_DASH",
    "MAX_NOTE",
    "MAX_SIGNATURES",
    "MAX_TIMESTAMP",
    "NOTE_COSIGNATURE",
    "NOTE_ED25519",
    "Checkpoint",
    "cosign",
    "cosignature_key_id",
    "cosignature_message",
    "cosigner_vkey",
    "note_key_id",
    "parse_vkey",
    "verifier_key",
]

MAX_NOTE = 64 * 1024
MAX_SIGNATURES = 100
NOTE_ED25519 = 0x01
"""C2SP signed-note signature type of Ed25519."""
EM_DASH = "\u2014"


# -- C2SP signed notes and tlog checkpoints -------------------------------------------------


def note_key_id(name: str, key: PublicKey) -> bytes:
    """C2SP signed-note key ID of an Ed25519 key under ``name``:
    ``SHA-256(name || 0x0A || 0x01 || public key)[:4]``."""
    digest: bytes = sha256(name.encode("utf-8") + b"\n\x01" + key.raw).digest()
    return digest[:4]


def verifier_key(name: str, key: PublicKey) -> str:
    """The verifier key string of Go's ``golang.org/x/mod/sumdb/note`` and the C2SP
    tooling: ``<name>+<hex key ID>+<base64(0x01 || public key)>``."""
    return f"{name}+{note_key_id(name, key).hex()}+{b64encode(bytes([NOTE_ED25519]) + key.raw)}"


NOTE_COSIGNATURE = 0x04
"""C2SP signed-note signature type of an Ed25519 ``cosignature/v1`` (tlog-cosignature)."""
MAX_TIMESTAMP = 2**63 - 1


def cosignature_key_id(name: str, key: PublicKey) -> bytes:
    """C2SP tlog-cosignature key ID of an Ed25519 cosigner:
    ``SHA-256(name || 0x0A || 0x04 || public key)[:4]``."""
    digest: bytes = sha256(name.encode("utf-8") + b"\n\x04" + key.raw).digest()
    return digest[:4]


def cosigner_vkey(name: str, key: PublicKey) -> str:
    """The verifier key of an Ed25519 cosigner (a witness):
    ``<name>+<hex key ID>+<base64(0x04 || public key)>``."""
    kid = cosignature_key_id(name, key).hex()
    return f"{name}+{kid}+{b64encode(bytes([NOTE_COSIGNATURE]) + key.raw)}"


def parse_vkey(vkey: str) -> tuple[str, int, PublicKey]:
    """``(name, signature type, key)`` of a C2SP verifier key string: an Ed25519 note key
    (type 0x01, a log) or an Ed25519 cosigner (type 0x04, a witness); the key ID must be
    the one the name and key give. ``LogError`` "bad_vkey" otherwise."""

    def bad(why: str) -> LogError:
        return LogError(f"bad verifier key {vkey[:80]!r}: {why}", reason="bad_vkey")

    if type(vkey) is not str:
        raise bad("expected <name>+<hex key id>+<base64 key>")
    name, _, rest = vkey.partition("+")  # the base64 may hold '+' too; the name may not
    kid_hex, sep, b64 = rest.partition("+")
    if not sep or len(kid_hex) != 8:
        raise bad("expected <name>+<hex key id>+<base64 key>")
    try:
        _check_name(name, "key name")
    except LogError as exc:
        raise bad(exc.message) from None
    try:
        blob = b64decode(b64)
    except ValueError:
        raise bad("the key is not canonical base64") from None
    if len(blob) != 33 or blob[0] not in (NOTE_ED25519, NOTE_COSIGNATURE):
        raise bad("only Ed25519 keys (type 0x01, logs; 0x04, cosigners) are supported")
    try:
        key = PublicKey.from_raw(blob[1:])
    except Error:
        raise bad("not an Ed25519 public key") from None
    kid = note_key_id(name, key) if blob[0] == NOTE_ED25519 else cosignature_key_id(name, key)
    if kid_hex != kid.hex():
        raise bad(f"key ID {kid_hex!r} is not {kid.hex()!r}")
    return name, blob[0], key


def cosignature_message(text: bytes, timestamp: int) -> bytes:
    """What an Ed25519 ``cosignature/v1`` signs: ``cosignature/v1\\ntime <t>\\n`` and
    the checkpoint's note text (its lines, without signatures)."""
    return b"cosignature/v1\ntime %d\n" % timestamp + text


def cosign(checkpoint: bytes, name: str, signer: Signer, timestamp: int) -> bytes:
    """A ``cosignature/v1`` note signature line by ``signer`` as cosigner ``name`` on a
    signed checkpoint (parsed, not verified here: a witness checks the log's signature
    and the consistency first): ``— <name> base64(key ID || u64 time || signature)``."""
    _check_name(name, "cosigner name")
    if type(timestamp) is not int or not 0 <= timestamp <= MAX_TIMESTAMP:
        raise ConfigurationError("a cosignature timestamp is 0 <= t <= 2**63 - 1 seconds")
    cp = Checkpoint.parse(checkpoint)
    sig = signer.sign(cosignature_message(cp.text, timestamp))
    blob = cosignature_key_id(name, signer.public_key) + struct.pack(">Q", timestamp) + sig
    return f"{EM_DASH} {name} {b64encode(blob)}\n".encode()


def _check_name(name: str, what: str = "origin") -> str:
    if type(name) is not str or not name or len(name) > 256:
        raise LogError(f"{what} must be 1-256 characters", reason="bad_origin")
    if "+" in name or any(c.isspace() or not c.isprintable() for c in name):
        raise LogError(
            f"{what} {name!r} must not contain spaces, '+' or control characters "
            "(C2SP signed-note key names)",
            reason="bad_origin",
        )
    return name


def _bad(message: str) -> LogError:
    return LogError(message, reason="bad_checkpoint")


class Checkpoint:
    """A parsed C2SP checkpoint: ``origin``, tree ``size`` and ``root`` (32 bytes).

    Parsing checks the format only; :meth:`verify` checks the note signature against
    keys the caller trusts (a checkpoint means nothing until then). ``raw`` is the note
    as given; ``text`` the signed part (the three lines and their newlines)."""

    __slots__ = ("origin", "raw", "root", "signatures", "size", "text")

    origin: str
    size: int
    root: bytes
    text: bytes
    raw: bytes
    signatures: tuple[tuple[str, bytes, bytes], ...]
    """``(key name, 4-byte key ID, signature)`` of every signature line."""

    def __init__(
        self,
        origin: str,
        size: int,
        root: bytes,
        text: bytes,
        raw: bytes,
        signatures: tuple[tuple[str, bytes, bytes], ...],
    ) -> None:
        self.origin, self.size, self.root = origin, size, root
        self.text, self.raw, self.signatures = text, raw, signatures

    def __repr__(self) -> str:
        return (
            f"Checkpoint(origin={self.origin!r}, size={self.size}, root={self.root.hex()[:16]}...)"
        )

    @classmethod
    def parse(cls, data: bytes) -> Checkpoint:
        """Strictly parse a signed checkpoint note; ``LogError`` "bad_checkpoint" if it is
        not one (C2SP signed-note: UTF-8, no control characters but newline, text and
        signatures separated by the last blank line; tlog-checkpoint: origin, decimal
        size without leading zeros, base64 of a 32-byte root)."""
        if not isinstance(data, bytes | bytearray) or not data:
            raise _bad("a checkpoint is non-empty bytes")
        data = bytes(data)
        if len(data) > MAX_NOTE:
            raise _bad(f"checkpoint is over {MAX_NOTE} bytes")
        try:
            note = data.decode("utf-8")
        except UnicodeDecodeError:
            raise _bad("checkpoint is not UTF-8") from None
        if _CONTROL.search(note):
            raise _bad("checkpoint contains control characters")
        if not note.endswith("\n"):
            raise _bad("checkpoint does not end with a newline")
        split = note.rfind("\n\n")
        if split < 0:
            raise _bad("checkpoint has no signatures (no blank line)")
        text, sig_block = note[: split + 1], note[split + 2 :]
        lines = text[:-1].split("\n")
        if len(lines) < 3 or not all(lines):
            raise _bad("checkpoint text needs origin, size and root hash lines, none empty")
        origin, size_text, root_text = lines[0], lines[1], lines[2]
        if (
            not (size_text.isascii() and size_text.isdigit())
            or len(size_text) > 19
            or (size_text != "0" and size_text.startswith("0"))
        ):
            raise _bad(f"checkpoint tree size {size_text!r} is not a decimal without zeros")
        try:
            root = b64decode(root_text)
        except ValueError:
            raise _bad("checkpoint root hash is not canonical base64") from None
        if len(root) != 32:
            raise _bad("checkpoint root hash is not 32 bytes")
        sigs: list[tuple[str, bytes, bytes]] = []
        sig_lines = sig_block[:-1].split("\n") if sig_block else []
        if not sig_lines or len(sig_lines) > MAX_SIGNATURES:
            raise _bad(f"checkpoint needs 1-{MAX_SIGNATURES} signature lines")
        for line in sig_lines:
            head, _, rest = line.partition(" ")
            name, _, b64 = rest.partition(" ")
            if head != EM_DASH or not name or not b64 or " " in b64:
                raise _bad("malformed checkpoint signature line")
            if "+" in name or any(c.isspace() for c in name):
                raise _bad("malformed key name in a checkpoint signature line")
            try:
                blob = b64decode(b64)
            except ValueError:
                raise _bad("checkpoint signature is not canonical base64") from None
            if len(blob) < 5:
                raise _bad("checkpoint signature is too short")
            sigs.append((name, blob[:4], blob[4:]))
        return cls(origin, int(size_text), root, text.encode("utf-8"), data, tuple(sigs))

    def signed_by(self, key: PublicKey) -> bool | None:
        """Whether this key signed the note under the origin as key name: None if no
        signature line names it (other signatures, e.g. witnesses', are ignored, as the
        signed-note specification requires), else whether its signature verifies."""
        kid = note_key_id(self.origin, key)
        found: bool | None = None
        for name, sid, sig in self.signatures:
            if name == self.origin and sid == kid:
                if not key.verify(sig, self.text):
                    return False
                found = True
        return found

    def cosigned_by(self, name: str, key: PublicKey) -> int | None:
        """The timestamp of a valid ``cosignature/v1`` by cosigner ``name`` with ``key``;
        None if no signature line has that name and key ID (unknown cosigners are
        ignored); ``LogError`` "bad_cosignature" if one does but fails to verify."""
        kid = cosignature_key_id(name, key)
        found: int | None = None
        for sname, sid, sig in self.signatures:
            if sname != name or sid != kid:
                continue
            ts = int.from_bytes(sig[:8], "big") if len(sig) == 72 else -1
            if not 0 <= ts <= MAX_TIMESTAMP or not key.verify(
                sig[8:], cosignature_message(self.text, ts)
            ):
                raise LogError(
                    f"the cosignature of {name!r} on the checkpoint of {self.origin!r} "
                    f"(size {self.size}) does not verify",
                    reason="bad_cosignature",
                )
            found = ts if found is None else max(found, ts)
        return found

    def signature_lines(self, name: str | None = None) -> list[bytes]:
        """The note's signature lines as bytes (each ending in a newline), all of them or
        those under key name ``name``."""
        return [
            f"{EM_DASH} {n} {b64encode(kid + sig)}\n".encode()
            for n, kid, sig in self.signatures
            if name is None or n == name
        ]

    def verify(self, keys: Iterable[PublicKey]) -> PublicKey:
        """The trusted key that signed this checkpoint; ``LogError`` "bad_checkpoint"
        if a trusted key's signature fails or none of them signed it."""
        keys = list(keys)
        for key in keys:
            ok = self.signed_by(key)
            if ok is False:
                raise _bad(f"checkpoint signature by key {key.key_id[:16]} does not verify")
            if ok:
                return key
        raise _bad(
            f"checkpoint of {self.origin!r} is not signed by a trusted key "
            f"(signed by {', '.join(n + '+' + i.hex() for n, i, _ in self.signatures)})"
        )

    def verify_trusted(self, trust: TrustStore) -> PublicKey:
        """:meth:`verify` with the keys a trust store lets sign logs (its receipt
        signers); a checkpoint signed only by one of its approvers is refused by name."""
        try:
            return self.verify(trust.log_keys())
        except LogError:
            approvers = [
                tk.name or tk.key.key_id[:16]
                for tk in trust
                if tk.role == "approver" and self.signed_by(tk.key)
            ]
            if approvers:
                raise _bad(
                    f"checkpoint of {self.origin!r} is signed by {approvers[0]!r}, an approver "
                    "key: approvers sign erasure authorizations, never receipt logs (only keys "
                    "with role signer may sign a log's checkpoints)"
                ) from None
            raise

    @staticmethod
    def sign(origin: str, size: int, root: bytes, signer: Signer) -> bytes:
        """A signed checkpoint note: ``origin\\nsize\\nbase64(root)\\n\\n— origin sig\\n``."""
        _check_name(origin)
        if size < 0 or len(root) != 32:
            raise ConfigurationError("a checkpoint needs a size >= 0 and a 32-byte root")
        text = f"{origin}\n{size}\n{b64encode(root)}\n".encode()
        blob = note_key_id(origin, signer.public_key) + signer.sign(text)
        return text + f"\n{EM_DASH} {origin} {b64encode(blob)}\n".encode()
