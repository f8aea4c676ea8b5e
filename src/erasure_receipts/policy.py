"""Witness policies (C2SP ``tlog-policy``): which logs and witnesses a verifier trusts,
and how many witnesses must have cosigned a checkpoint before it is believed.

::

    log example.com/erasures+1a2b3c4d+AQ...
    witness w1 witness.example/w1+5e6f7a8b+BA... http://127.0.0.1:7380
    witness w2 witness.example/w2+9c0d1e2f+BA...
    group both all w1 w2
    quorum both

:meth:`Policy.parse` is strict (names defined before use, no duplicate key, name or
member, exactly one ``quorum`` line, ``quorum none`` for no witnesses); :meth:`Policy.check`
accepts a checkpoint iff one of the listed logs signed it and valid ``cosignature/v1``
signatures of the witnesses meet the quorum. Every refusal is a ``WitnessError`` with one
of the reason codes of RECEIPT_SPEC.md, "Receipt log", "Witnesses".
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import LogError, WitnessError
from .note import NOTE_COSIGNATURE, NOTE_ED25519, Checkpoint, parse_vkey
from .signing import PublicKey

__all__ = ["MAX_POLICY", "Policy", "PolicyResult", "PolicyWitness"]

MAX_POLICY = 64 * 1024
_LIMIT = 256
"""At most this many logs, witnesses and groups each (the spec recommends >= 32)."""


class PolicyWitness:
    """A ``witness`` line: the policy's local ``name``, the cosigner's key name (as in
    its signature lines), its key and optional URL (a tlog-witness submission prefix)."""

    __slots__ = ("key", "key_name", "name", "url")

    def __init__(self, name: str, key_name: str, key: PublicKey, url: str | None = None) -> None:
        self.name, self.key_name, self.key, self.url = name, key_name, key, url

    def __repr__(self) -> str:
        return f"PolicyWitness({self.name!r}, {self.key_name!r})"


class PolicyResult:
    """A checkpoint the policy accepted: its origin and size, and the witnesses (policy
    names) whose cosignatures verified, with their timestamps."""

    __slots__ = ("cosigners", "origin", "root", "size")

    def __init__(self, origin: str, size: int, root: bytes, cosigners: dict[str, int]) -> None:
        self.origin, self.size, self.root, self.cosigners = origin, size, root, cosigners

    def __repr__(self) -> str:
        return f"PolicyResult({self.origin!r}, {self.size}, cosigners={sorted(self.cosigners)})"


def _bad(lineno: int, why: str) -> WitnessError:
    return WitnessError(f"policy line {lineno}: {why}", reason="malformed_policy")


class Policy:
    """A parsed tlog-policy: ``logs`` (origin -> keys), ``witnesses`` (name ->
    :class:`PolicyWitness`), ``groups`` (name -> (k, members)) and the ``quorum`` name
    (``"none"``: no cosignature needed)."""

    def __init__(self) -> None:
        self.logs: dict[str, list[PublicKey]] = {}
        self.log_urls: dict[str, str | None] = {}
        self.witnesses: dict[str, PolicyWitness] = {}
        self.groups: dict[str, tuple[int, tuple[str, ...]]] = {}
        self.quorum = ""

    @classmethod
    def parse(cls, data: bytes) -> Policy:
        """Strictly parse a policy file; ``WitnessError`` "malformed_policy" naming the
        line otherwise."""
        if not isinstance(data, bytes | bytearray):
            raise WitnessError("a policy is bytes", reason="malformed_policy")
        if len(data) > MAX_POLICY:
            raise WitnessError(f"a policy is at most {MAX_POLICY} bytes", reason="malformed_policy")
        for i, b in enumerate(bytes(data)):
            if (b < 0x20 and b not in (0x09, 0x0A)) or b == 0x7F:
                lineno = data.count(b"\n", 0, i) + 1
                raise _bad(lineno, f"control character 0x{b:02x} (only tab and newline)")
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise WitnessError(
                "the policy is not UTF-8 (names and keys are compared as text)",
                reason="malformed_policy",
            ) from None
        p = cls()
        keys: set[bytes] = set()
        quorum_line = 0
        for lineno, line in enumerate(text.split("\n"), 1):
            words = line.replace("\t", " ").split(" ")
            words = [w for w in words if w]
            if not words or words[0].startswith("#"):
                continue
            if quorum_line:
                raise _bad(lineno, f"nothing may follow the quorum line (line {quorum_line})")
            kind, args = words[0], words[1:]
            if kind == "log":
                p._log(lineno, args, keys)
            elif kind == "witness":
                p._witness(lineno, args, keys)
            elif kind == "group":
                p._group(lineno, args)
            elif kind == "quorum":
                if len(args) != 1:
                    raise _bad(lineno, "expected: quorum <name>")
                q = args[0]
                if q != "none" and q not in p.witnesses and q not in p.groups:
                    raise _bad(lineno, f"quorum {q!r} is not a witness or group defined above")
                p.quorum, quorum_line = args[0], lineno
            else:
                raise _bad(lineno, f"unknown line type {kind!r} (log, witness, group, quorum)")
        if not quorum_line:
            raise WitnessError("the policy has no quorum line", reason="malformed_policy")
        return p

    def _log(self, lineno: int, args: list[str], keys: set[bytes]) -> None:
        if len(args) not in (1, 2):
            raise _bad(lineno, "expected: log <vkey> [<url>]")
        origin, kind, key = self._vkey(lineno, args[0], keys)
        if kind != NOTE_ED25519:
            raise _bad(lineno, "a log's verifier key has signature type 0x01 (Ed25519 note)")
        if len(self.logs) >= _LIMIT:
            raise _bad(lineno, f"more than {_LIMIT} logs")
        self.logs.setdefault(origin, []).append(key)
        self.log_urls.setdefault(origin, args[1] if len(args) == 2 else None)

    def _witness(self, lineno: int, args: list[str], keys: set[bytes]) -> None:
        if len(args) not in (2, 3):
            raise _bad(lineno, "expected: witness <name> <vkey> [<url>]")
        name = self._new_name(lineno, args[0])
        key_name, kind, key = self._vkey(lineno, args[1], keys)
        if kind != NOTE_COSIGNATURE:
            raise _bad(lineno, "a witness's verifier key has signature type 0x04 (cosignature/v1)")
        if len(self.witnesses) >= _LIMIT:
            raise _bad(lineno, f"more than {_LIMIT} witnesses")
        url = args[2] if len(args) == 3 else None
        self.witnesses[name] = PolicyWitness(name, key_name, key, url)

    def _group(self, lineno: int, args: list[str]) -> None:
        if len(args) < 3:
            raise _bad(lineno, "expected: group <name> all|any|<k> <name>...")
        name = self._new_name(lineno, args[0])
        members = args[2:]
        for m in members:
            if m == "none":
                raise _bad(lineno, "'none' cannot be a group member")
            if m not in self.witnesses and m not in self.groups:
                raise _bad(lineno, f"group member {m!r} is not defined above")
        if len(set(members)) != len(members):
            raise _bad(lineno, "a group lists each member at most once")
        how = args[1]
        if how == "all":
            k = len(members)
        elif how == "any":
            k = 1
        elif how.isascii() and how.isdigit() and not (len(how) > 1 and how[0] == "0"):
            k = int(how)
            if not 1 <= k <= len(members):
                raise _bad(lineno, f"threshold {k} is not between 1 and {len(members)} members")
        else:
            raise _bad(lineno, f"threshold {how!r} is not all, any or a decimal number")
        if len(self.groups) >= _LIMIT:
            raise _bad(lineno, f"more than {_LIMIT} groups")
        self.groups[name] = (k, tuple(members))

    def _new_name(self, lineno: int, name: str) -> str:
        if name == "none":
            raise _bad(lineno, "'none' is predefined (quorum none)")
        if name in self.witnesses or name in self.groups:
            raise _bad(lineno, f"name {name!r} is already defined")
        return name

    @staticmethod
    def _vkey(lineno: int, vkey: str, keys: set[bytes]) -> tuple[str, int, PublicKey]:
        try:
            name, kind, key = parse_vkey(vkey)
        except LogError as exc:
            raise _bad(lineno, exc.message) from None
        if key.raw in keys:
            raise _bad(lineno, "duplicate key (already listed for a log or witness)")
        keys.add(key.raw)
        return name, kind, key

    # -- checking a checkpoint --------------------------------------------------------

    def check(self, checkpoint: bytes | Checkpoint) -> PolicyResult:
        """Accept ``checkpoint`` (a note or a parsed one) iff a listed log signed it and
        the quorum of valid witness cosignatures is met; else ``WitnessError`` with
        reason ``unknown_log`` (no listed log for its origin, or none of its keys signed
        it), ``bad_log_signature``, ``bad_cosignature`` (a listed witness's cosignature
        fails) or ``quorum_not_met``; ``LogError`` "bad_checkpoint" if it is malformed.
        Signatures by keys the policy does not list are ignored."""
        cp = checkpoint if isinstance(checkpoint, Checkpoint) else Checkpoint.parse(checkpoint)
        keys = self.logs.get(cp.origin)
        if not keys:
            raise WitnessError(
                f"the checkpoint's origin {cp.origin!r} is not a log of the policy",
                reason="unknown_log",
            )
        signed = [cp.signed_by(k) for k in keys]
        if True not in signed:
            if False in signed:
                raise WitnessError(
                    f"the log signature on the checkpoint of {cp.origin!r} does not verify",
                    reason="bad_log_signature",
                )
            raise WitnessError(
                f"the checkpoint of {cp.origin!r} is not signed by a key the policy lists "
                "for that log",
                reason="unknown_log",
            )
        cosigners: dict[str, int] = {}
        for w in self.witnesses.values():
            try:
                ts = cp.cosigned_by(w.key_name, w.key)
            except LogError as exc:
                raise WitnessError(
                    f"witness {w.name!r}: {exc.message}", reason="bad_cosignature"
                ) from None
            if ts is not None:
                cosigners[w.name] = ts
        if not self._met(self.quorum, cosigners):
            raise WitnessError(
                f"the checkpoint of {cp.origin!r} at size {cp.size} does not meet the quorum "
                f"{self.quorum!r}: {self.describe(self.quorum)}; valid cosignatures from "
                f"{', '.join(sorted(cosigners)) or 'no witness'}",
                reason="quorum_not_met",
            )
        return PolicyResult(cp.origin, cp.size, cp.root, cosigners)

    def _met(self, name: str, cosigners: dict[str, int]) -> bool:
        if name == "none":
            return True
        if name in self.witnesses:
            return name in cosigners
        k, members = self.groups[name]
        return sum(self._met(m, cosigners) for m in members) >= k

    def describe(self, name: str) -> str:
        """The rule ``name`` stands for, in words (``2 of w1, w2``)."""
        if name == "none":
            return "no cosignature needed"
        if name in self.witnesses:
            return f"a cosignature from {name}"
        k, members = self.groups[name]
        return f"{k} of {', '.join(members)}"

    def witness_list(self) -> Sequence[PolicyWitness]:
        """The policy's witnesses in the order they are defined."""
        return list(self.witnesses.values())
