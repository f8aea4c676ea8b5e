"""Issue 7, verifier side: every accepted receipt is true, every input is handled.

One section per item of the issue; each test failed on the code before the fix.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from erasure_receipts.canonical import canonicalize
from erasure_receipts.cli import verify_main
from erasure_receipts.errors import (
    Error,
    InputError,
    KeyFormatError,
    MalformedReceiptError,
    ReceiptSemanticsError,
)
from erasure_receipts.receipt import DSSE_PAYLOAD_TYPE, Receipt, is_time
from erasure_receipts.signing import PublicKey, Signer, b64decode, pae
from erasure_receipts.verify import (
    REASONS,
    TrustedKey,
    TrustStore,
    VerifiedReceipt,
    verify_receipt,
)
from receipt_factory import ATTACKER, TRUSTED, dump, make_receipt, make_statement, receipt_doc

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
SCHEMAS = ROOT / "schemas"
CLI = [sys.executable, "-c", "from erasure_receipts.cli import main; main()"]
TRUST = [TRUSTED.public_key]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def validator(name: str) -> jsonschema.Draft202012Validator:
    doc = json.loads((SCHEMAS / f"{name}.schema.json").read_text("utf-8"))
    jsonschema.Draft202012Validator.check_schema(doc)
    return jsonschema.Draft202012Validator(doc)


def signed_file(statement: Any, signer: Signer = TRUSTED) -> bytes:
    """A receipt file whose (possibly invalid) statement carries a *valid* signature."""
    payload = canonicalize(statement)
    sig = signer.sign(pae(DSSE_PAYLOAD_TYPE, payload))
    doc = {
        "media_type": "application/vnd.langgraph-erasure-receipt.v1+json",
        "statement": statement,
        "signatures": [{"keyid": signer.key_id, "sig": b64(sig)}],
    }
    return dump(doc)


def envelope(payload: bytes, sigs: list[dict[str, Any]] | None = None) -> bytes:
    if sigs is None:
        sig = TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload))
        sigs = [{"keyid": TRUSTED.key_id, "sig": b64(sig)}]
    env = {"payloadType": DSSE_PAYLOAD_TYPE, "payload": b64(payload), "signatures": sigs}
    return json.dumps(env).encode("utf-8")


def run_cli(
    *args: str | os.PathLike[str], stdin: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *map(str, args)],
        input=None if stdin is None else stdin.decode("latin-1"),
        capture_output=True,
        text=True,
        encoding="latin-1",
        timeout=120,
    )


@pytest.fixture
def pub(tmp_path: Path) -> Path:
    path = tmp_path / "trusted.pub.pem"
    path.write_bytes(TRUSTED.public_pem())
    return path


# -- 1. only what the signature binds -----------------------------------------------------


def _evil_statement() -> dict[str, Any]:
    st = make_statement(thread_id="mallory")
    return st


def test_receipt_object_with_a_foreign_statement_cannot_be_built() -> None:
    genuine = make_receipt()
    with pytest.raises(MalformedReceiptError):
        Receipt(_evil_statement(), genuine.signatures, None, genuine.payload)


def test_receipt_attributes_cannot_be_reassigned() -> None:
    r = Receipt.from_json(make_receipt().to_json())
    for name, value in (("statement", _evil_statement()), ("payload", b"{}"), ("signatures", ())):
        with pytest.raises(AttributeError):
            setattr(r, name, value)


def test_mutated_statement_of_a_parsed_receipt_is_never_reported() -> None:
    genuine = make_receipt()
    signed = json.loads(genuine.payload)
    r = Receipt.from_json(genuine.to_json())
    r.statement["predicate"]["scope"]["thread_id"] = "mallory"
    r.statement["subject"][0]["name"] = "langgraph-thread:mallory"
    v = verify_receipt(r, TRUST)
    assert v.thread_id == "thread-1"
    assert v.statement == signed
    assert v.statement is not r.statement
    # ... and the tampered object cannot be written out as if it were signed.
    with pytest.raises(MalformedReceiptError):
        r.to_json()


def test_receipt_object_bypassing_the_constructor_is_verified_from_its_payload() -> None:
    genuine = make_receipt()
    r = Receipt.from_json(genuine.to_json())
    object.__setattr__(r, "statement", _evil_statement())
    v = verify_receipt(r, TRUST)
    assert (v.thread_id, v.statement) == ("thread-1", json.loads(genuine.payload))


def test_receipt_object_with_a_non_canonical_signed_payload_is_rejected() -> None:
    st = make_statement()
    payload = json.dumps(st, indent=1).encode("utf-8")
    sig = TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload))
    r = Receipt.from_json(make_receipt().to_json())
    object.__setattr__(r, "payload", payload)
    object.__setattr__(r, "signatures", (type(r.signatures[0])(TRUSTED.key_id, sig),))
    with pytest.raises(MalformedReceiptError) as exc:
        verify_receipt(r, TRUST)
    assert exc.value.reason == "not_canonical"


@pytest.mark.parametrize(
    ("attr", "value"),
    [("payload", "text"), ("signatures", ("x",)), ("signatures", None), ("public_key", 1)],
)
def test_receipt_object_with_wrong_types_is_malformed(attr: str, value: Any) -> None:
    r = Receipt.from_json(make_receipt().to_json())
    object.__setattr__(r, attr, value)
    with pytest.raises(MalformedReceiptError):
        verify_receipt(r, TRUST)


def test_verified_receipt_is_read_only_and_private() -> None:
    data = make_receipt().to_json()
    a, b = verify_receipt(data, TRUST), verify_receipt(data, TRUST)
    with pytest.raises(AttributeError):
        a.thread_id = "mallory"  # type: ignore[misc]
    a.statement["predicate"]["scope"]["thread_id"] = "mallory"
    assert b.statement["predicate"]["scope"]["thread_id"] == "thread-1"
    assert isinstance(a, VerifiedReceipt)


def test_receipt_constructor_copies_the_statement() -> None:
    st = make_statement()
    r = Receipt(st, make_receipt().signatures)
    st["predicate"]["scope"]["thread_id"] = "mallory"
    assert r.thread_id == "thread-1"
    assert verify_receipt(r.to_json(), TRUST).thread_id == "thread-1"


# -- 2. real RFC 3339 times ---------------------------------------------------------------

BAD_TIMES = [
    "2025-02-31T25:61:61Z",
    "2025-02-29T00:00:00Z",
    "1900-02-29T00:00:00Z",
    "2100-02-29T00:00:00Z",
    "2026-13-45T00:00:00Z",
    "2026-00-10T00:00:00Z",
    "2026-01-00T00:00:00Z",
    "2026-04-31T00:00:00Z",
    "2026-11-31T00:00:00Z",
    "2026-01-01T24:00:00Z",
    "2026-01-01T23:60:00Z",
    "2026-01-01T23:59:60Z",
    "2026-01-01T99:00:00.5Z",
]
GOOD_TIMES = [
    "2024-02-29T00:00:00Z",
    "2000-02-29T23:59:59.999999Z",
    "2400-02-29T12:00:00Z",
    "2026-12-31T23:59:59Z",
    "2026-04-30T00:00:00.1Z",
    "0000-01-01T00:00:00Z",
]


def _time_pattern(schema: str) -> str:
    doc = json.loads((SCHEMAS / f"{schema}.schema.json").read_text("utf-8"))
    if schema == "receipt":
        pattern: str = doc["$defs"]["predicate"]["properties"]["issued_at"]["pattern"]
    else:
        pattern = doc["$defs"]["time"]["pattern"]
    return pattern.removesuffix("$") + r"\Z"


@pytest.mark.parametrize("value", BAD_TIMES)
def test_impossible_times_are_rejected_by_code_and_schemas(value: str) -> None:
    assert not is_time(value)
    for schema in ("receipt", "trust", "verify-result"):
        if schema == "verify-result":
            continue
        assert re.search(_time_pattern(schema), value) is None, schema


@pytest.mark.parametrize("value", GOOD_TIMES)
def test_real_times_are_accepted_by_code_and_schemas(value: str) -> None:
    assert is_time(value)
    for schema in ("receipt", "trust"):
        assert re.search(_time_pattern(schema), value), schema


def test_time_check_agrees_with_schema_on_every_calendar_day() -> None:
    receipt_re, trust_re = re.compile(_time_pattern("receipt")), re.compile(_time_pattern("trust"))
    for year in ("0000", "1900", "2000", "2023", "2024", "2100", "2400", "9999"):
        for month in range(0, 14):
            for day in range(0, 33):
                v = f"{year}-{month:02d}-{day:02d}T23:59:59Z"
                want = receipt_re.search(v) is not None
                assert is_time(v) == want == (trust_re.search(v) is not None), v


def test_issued_at_impossible_date_is_rejected_even_when_signed() -> None:
    st = make_statement(issued_at="2025-02-31T25:61:61Z")
    with pytest.raises(MalformedReceiptError) as exc:
        verify_receipt(signed_file(st), TRUST)
    assert exc.value.reason == "schema"
    assert "issued_at" in exc.value.message


def _trust_doc(**window: str) -> bytes:
    return json.dumps(
        {"trust_version": 1, "keys": [{"ed25519": TRUSTED.public_key.b64(), **window}]}
    ).encode()


@pytest.mark.parametrize(
    "window",
    [
        {"not_before": "2026-13-45T00:00:00Z"},
        {"not_after": "2026-02-29T00:00:00Z"},
        {"not_before": "2026-07-01T00:00:00Z", "not_after": "2026-07-01T00:00:00Z"},
        {"not_before": "2026-07-01T00:00:00Z", "not_after": "2026-06-30T23:59:59.999999Z"},
        {"not_before": "2026-07-01T00:00:00.5Z", "not_after": "2026-07-01T00:00:00.50Z"},
    ],
)
def test_trust_file_with_an_impossible_or_empty_window_is_refused(window: dict[str, str]) -> None:
    with pytest.raises(KeyFormatError):
        TrustStore.from_json(_trust_doc(**window))
    with pytest.raises(KeyFormatError):
        TrustedKey(TRUSTED.public_key, "k", window.get("not_before"), window.get("not_after"))


def test_trusted_key_window_ordering() -> None:
    tk = TrustedKey(TRUSTED.public_key, "k", "2026-07-01T00:00:00Z", "2026-07-01T00:00:00.5Z")
    assert tk.valid_at("2026-07-01T00:00:00.4Z")
    assert not tk.valid_at("2026-07-01T00:00:00.5Z")
    assert not tk.valid_at("2026-06-30T23:59:59.999999Z")
    with pytest.raises(ValueError):
        tk.valid_at("2026-02-30T00:00:00Z")


def test_cli_trust_file_with_inverted_window_is_a_usage_error(tmp_path: Path) -> None:
    trust = tmp_path / "trust.json"
    trust.write_bytes(
        _trust_doc(not_before="2027-01-01T00:00:00Z", not_after="2026-01-01T00:00:00Z")
    )
    receipt = tmp_path / "r.json"
    receipt.write_bytes(make_receipt().to_json())
    proc = run_cli("verify", receipt, "--trust", trust)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1


# -- 3. DSSE keyid types, canonical base64 ------------------------------------------------


@pytest.mark.parametrize("keyid", [None, 0, 1, False, True, {}, [], [TRUSTED.key_id], 1.5])
def test_dsse_keyid_of_the_wrong_type_is_malformed(keyid: Any) -> None:
    payload = make_receipt().payload
    sig = b64(TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload)))
    data = envelope(payload, [{"keyid": keyid, "sig": sig}])
    with pytest.raises(MalformedReceiptError) as exc:
        verify_receipt(data, TRUST)
    assert exc.value.reason in ("schema", "float")


@pytest.mark.parametrize("keyid", [TRUSTED.key_id.upper(), "abc", TRUSTED.key_id + "0"])
def test_dsse_keyid_string_must_be_hex64(keyid: str) -> None:
    payload = make_receipt().payload
    sig = b64(TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload)))
    with pytest.raises(MalformedReceiptError):
        verify_receipt(envelope(payload, [{"keyid": keyid, "sig": sig}]), TRUST)


def test_dsse_keyid_absent_or_empty_means_no_hint() -> None:
    payload = make_receipt().payload
    sig = b64(TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload)))
    for s in ({"sig": sig}, {"keyid": "", "sig": sig}):
        assert verify_receipt(envelope(payload, [s]), TRUST).key_id == TRUSTED.key_id


def test_cli_dsse_keyid_null_is_not_an_internal_error(tmp_path: Path, pub: Path) -> None:
    payload = make_receipt().payload
    sig = b64(TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload)))
    f = tmp_path / "env.json"
    f.write_bytes(envelope(payload, [{"keyid": None, "sig": sig}]))
    proc = run_cli("verify", "--json", f, "--key", pub)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["results"][0]["reason"] == "schema"


@pytest.mark.parametrize(
    "text",
    ["QUJD====", "QUJD=", "QQ===", "QQ====", "QUI==", "QR==", "QUJ=", "QQ", "Q Q==", "QQ==\n", "é"],
)
def test_base64_is_strict_and_canonical(text: str) -> None:
    with pytest.raises(ValueError):
        b64decode(text)
    with pytest.raises(ValueError):
        b64decode(text.encode("utf-8"))


def test_base64_round_trips() -> None:
    for n in range(0, 70):
        data = bytes(range(n))
        assert b64decode(b64(data)) == data


def _overpad(s: str) -> str:
    return s + "=="


@pytest.mark.parametrize("where", ["sig", "public_key", "payload"])
def test_over_padded_base64_is_rejected(where: str) -> None:
    r = make_receipt()
    if where == "payload":
        env = r.to_dsse()
        env["payload"] = _overpad(env["payload"])
        data = json.dumps(env).encode()
    else:
        doc = receipt_doc(r)
        if where == "sig":
            doc["signatures"][0]["sig"] = _overpad(doc["signatures"][0]["sig"])
        else:
            doc["public_key"]["ed25519"] = _overpad(doc["public_key"]["ed25519"])
        data = dump(doc)
    with pytest.raises(MalformedReceiptError) as exc:
        verify_receipt(data, TRUST)
    assert exc.value.reason == "schema"


def test_over_padded_keys_are_refused() -> None:
    with pytest.raises(KeyFormatError):
        PublicKey.from_base64(TRUSTED.public_key.b64() + "==")
    doc = {"trust_version": 1, "keys": [{"ed25519": TRUSTED.public_key.b64() + "=="}]}
    with pytest.raises(KeyFormatError):
        TrustStore.from_json(json.dumps(doc).encode())


# -- 4. input types ------------------------------------------------------------------------


def test_verify_receipt_accepts_paths_and_bytes_like(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    data = make_receipt().to_json()
    path.write_bytes(data)
    assert verify_receipt(path, TRUST).thread_id == "thread-1"
    assert verify_receipt(bytearray(data), TRUST).thread_id == "thread-1"
    assert verify_receipt(memoryview(data), TRUST).thread_id == "thread-1"
    with pytest.raises(InputError):
        verify_receipt(tmp_path / "missing.json", TRUST)
    with pytest.raises(InputError):
        verify_receipt(tmp_path, TRUST)  # a directory


def test_verify_receipt_refuses_str_clearly(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="str"):
        verify_receipt(str(tmp_path / "r.json"), TRUST)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        verify_receipt(make_receipt().to_json().decode(), TRUST)  # type: ignore[arg-type]
    for bad in (None, 1, {"statement": {}}):
        with pytest.raises(TypeError):
            verify_receipt(bad, TRUST)  # type: ignore[arg-type]


def test_verify_receipt_refuses_bad_trust_arguments() -> None:
    data = make_receipt().to_json()
    for bad in ("key.pem", [b"raw"], [None], 5):
        with pytest.raises(TypeError):
            verify_receipt(data, bad)  # type: ignore[arg-type]


def test_keys_from_str() -> None:
    pem = TRUSTED.public_pem()
    assert PublicKey.from_pem(pem.decode("ascii")) == PublicKey.from_pem(pem)
    with pytest.raises(KeyFormatError):
        PublicKey.from_pem("not a key")
    with pytest.raises(KeyFormatError):
        PublicKey.from_pem("-----BEGIN PUBLIC KEY-----\né\n-----END PUBLIC KEY-----")
    with pytest.raises(TypeError):
        PublicKey.from_pem(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        PublicKey.from_raw("x" * 32)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        PublicKey.from_base64(None)  # type: ignore[arg-type]
    signer = Signer.from_pem(TRUSTED.private_pem().decode("ascii"))
    assert signer.key_id == TRUSTED.key_id
    trust = json.dumps({"trust_version": 1, "keys": [{"pem": pem.decode()}]})
    assert len(TrustStore.from_json(trust)) == 1
    assert Receipt.from_json(make_receipt().to_json().decode()).thread_id == "thread-1"


# -- 5. broken pipes -----------------------------------------------------------------------


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


# -- 6. --key / --trust --------------------------------------------------------------------


def test_key_and_trust_are_mutually_exclusive(tmp_path: Path, pub: Path) -> None:
    receipt = tmp_path / "r.json"
    receipt.write_bytes(make_receipt().to_json())
    trust = tmp_path / "trust.json"
    trust.write_bytes(_trust_doc(not_after="2026-01-01T00:00:00Z"))  # expired for the receipt
    proc = run_cli("verify", receipt, "--trust", trust, "--key", pub)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "--key" in proc.stderr and "--trust" in proc.stderr
    proc = run_cli("verify", "--json", receipt, "--key", pub, "--trust", trust)
    assert proc.returncode == 2
    validator("verify-result").validate(json.loads(proc.stdout))


def test_directory_expansion_skips_the_trust_and_key_files(tmp_path: Path) -> None:
    d = tmp_path / "receipts"
    d.mkdir()
    (d / "r.json").write_bytes(make_receipt().to_json())
    (d / "trust.json").write_bytes(_trust_doc())
    proc = run_cli("verify", "--json", d, "--trust", d / "trust.json")
    assert proc.returncode == 0, proc.stdout
    assert [Path(r["file"]).name for r in json.loads(proc.stdout)["results"]] == ["r.json"]
    # The same file named through another path (a symlink) is recognised too.
    link = tmp_path / "link-to-trust.json"
    link.symlink_to(d / "trust.json")
    proc = run_cli("verify", "--json", d, "--trust", link)
    assert proc.returncode == 0, proc.stdout
    assert [Path(r["file"]).name for r in json.loads(proc.stdout)["results"]] == ["r.json"]
    # A key file named *.json (PEM inside) in the directory.
    (d / "trust.json").unlink()
    (d / "key.json").write_bytes(TRUSTED.public_pem())
    proc = run_cli("verify", "--json", d, "--key", d / "key.json")
    assert proc.returncode == 0, proc.stdout
    assert [Path(r["file"]).name for r in json.loads(proc.stdout)["results"]] == ["r.json"]


# -- 7. reason codes: code == schema == spec -----------------------------------------------


def _spec_reason_table() -> dict[str, tuple[str, int]]:
    text = (ROOT / "RECEIPT_SPEC.md").read_text("utf-8")
    section = text.split("### Reason codes", 1)[1]
    rows: dict[str, tuple[str, int]] = {}
    for line in section.splitlines()[1:]:
        if rows and not line.startswith("|"):
            break
        m = re.match(r"^\| `([a-z0-9_]+)` \| (.+?) \| (\d) \|$", line)
        if m:
            rows[m.group(1)] = (m.group(2), int(m.group(3)))
    return rows


def test_reason_codes_agree_between_code_schema_and_spec() -> None:
    codes = [code for code, _exit, _meaning in REASONS]
    assert len(codes) == len(set(codes))
    schema = json.loads((SCHEMAS / "verify-result.schema.json").read_text("utf-8"))
    enum = schema["properties"]["results"]["items"]["properties"]["reason"]["enum"]
    assert enum == codes
    table = _spec_reason_table()
    assert list(table) == codes
    assert {c: e for c, (_m, e) in table.items()} == {c: e for c, e, _m in REASONS}


def test_every_reason_literal_in_the_verify_path_is_listed() -> None:
    listed = {code for code, _exit, _meaning in REASONS}
    src = ROOT / "src" / "erasure_receipts"
    found: set[str] = set()
    for name in ("canonical", "receipt", "signing", "verify", "cli"):
        text = (src / f"{name}.py").read_text("utf-8")
        found |= set(re.findall(r'reason="([a-z0-9_]+)"', text))
    from erasure_receipts import errors

    for cls in (
        errors.InputError,
        errors.MalformedReceiptError,
        errors.SignatureError,
        errors.UntrustedKeyError,
        errors.ReceiptSemanticsError,
    ):
        found.add(cls.reason)
    found.discard("malformed")  # the base class's default; every raise names a precise code
    assert found <= listed, found - listed


def _crafted(tmp_path: Path) -> list[Path]:
    out = []
    payload = make_receipt().payload
    sig = b64(TRUSTED.sign(pae(DSSE_PAYLOAD_TYPE, payload)))
    cases: dict[str, bytes] = {
        "bom.json": b"\xef\xbb\xbf" + make_receipt().to_json(),
        "latin1.json": b'{"a": "\xe9"}',
        "surrogate.json": b'{"a": "\\ud800"}',
        "keyid_null.json": envelope(payload, [{"keyid": None, "sig": sig}]),
        "keyid_obj.json": envelope(payload, [{"keyid": {}, "sig": sig}]),
        "overpadded.json": envelope(payload, [{"keyid": TRUSTED.key_id, "sig": sig + "=="}]),
        "bad_time.json": signed_file(make_statement(issued_at="2025-02-31T25:61:61Z")),
        "untrusted.json": make_receipt(signer=ATTACKER).to_json(),
        "partial.json": make_receipt(
            make_statement(
                residue=[{"action": "sqlite.wal_checkpoint", "status": "partial", "detail": {}}]
            )
        ).to_json(),
        "array.json": b"[]",
        "deep.json": b"[" * 100000,
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        out.append(tmp_path / name)
    os.mkfifo(tmp_path / "fifo.json")
    out += [tmp_path / "fifo.json", tmp_path / "missing.json"]
    return out


def test_every_verify_json_output_matches_the_shipped_schema(tmp_path: Path, pub: Path) -> None:
    v = validator("verify-result")
    bad = sorted(p for p in (GOLDEN / "bad").iterdir() if p.name != "EXPECTED.json")
    good = sorted((GOLDEN / "good").iterdir())
    crafted = _crafted(tmp_path)
    seen: set[str] = set()
    runs: list[list[str | Path]] = [
        [*bad, *good, *crafted, "--key", pub],
        [*bad, "--key", GOLDEN / "keys" / "trusted.pub.pem"],
    ]
    runs += [[p, "--key", pub] for p in [*bad, *crafted]]
    expired = tmp_path / "expired-trust.json"
    expired.write_bytes(_trust_doc(not_after="2026-01-01T00:00:00Z"))
    runs.append([good[0], "--trust", expired])
    runs.append([good[0]])  # usage error: still one schema-valid document
    for args in runs:
        proc = run_cli("verify", "--json", *args)
        assert "Traceback" not in proc.stderr
        doc = json.loads(proc.stdout)
        v.validate(doc)
        assert proc.returncode == doc["exit_code"]
        seen |= {r["reason"] for r in doc["results"]}
    assert {"not_utf8", "key_not_valid_at_time", "unreadable", "ok", "schema"} <= seen
    assert "internal_error" not in seen


# -- 8. stdin ------------------------------------------------------------------------------


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


# -- 9. residue and methods in the output --------------------------------------------------


def _partial_receipt() -> Receipt:
    residue = [
        {"action": "sqlite.secure_delete", "status": "applied", "detail": {"value": 1}},
        {"action": "sqlite.wal_checkpoint", "status": "partial", "detail": {"busy": 1}},
    ]
    methods = {"checkpoints": "atomic-transaction", "store": "sweep"}
    return make_receipt(make_statement(residue=residue, methods=methods))


def test_verified_receipt_carries_residue_and_methods() -> None:
    v = verify_receipt(_partial_receipt().to_json(), TRUST)
    assert v.methods == {"checkpoints": "atomic-transaction", "store": "sweep"}
    assert v.residue == (("sqlite.secure_delete", "applied"), ("sqlite.wal_checkpoint", "partial"))


def test_verify_output_shows_residue_and_methods(tmp_path: Path, pub: Path) -> None:
    f = tmp_path / "r.json"
    f.write_bytes(_partial_receipt().to_json())
    proc = run_cli("verify", f, "--key", pub)
    assert proc.returncode == 0
    line = proc.stdout.splitlines()[0]
    assert "methods checkpoints=atomic-transaction, store=sweep" in line
    assert "residue sqlite.secure_delete=applied, sqlite.wal_checkpoint=partial" in line
    proc = run_cli("verify", "--json", f, "--key", pub)
    doc = json.loads(proc.stdout)
    validator("verify-result").validate(doc)
    (res,) = doc["results"]
    assert res["methods"] == {"checkpoints": "atomic-transaction", "store": "sweep"}
    assert res["residue"] == [
        {"action": "sqlite.secure_delete", "status": "applied"},
        {"action": "sqlite.wal_checkpoint", "status": "partial"},
    ]


# -- the same classes of bug elsewhere -----------------------------------------------------


def test_resigned_semantic_violation_is_rejected_with_a_valid_signature() -> None:
    st = copy.deepcopy(make_statement())
    post = st["predicate"]["post_state"]
    post["tables"]["writes"] = {"rows": 0, "bytes": 7}
    with pytest.raises(ReceiptSemanticsError) as exc:
        verify_receipt(signed_file(st), TRUST)
    assert exc.value.reason == "not_empty"


@pytest.mark.parametrize(
    "data",
    [
        b'{"payloadType": 1, "payload": "", "signatures": []}',
        b'{"payloadType": [], "payload": "", "signatures": []}',
        b'{"payloadType": {}, "payload": "", "signatures": []}',
        b'{"media_type": [], "statement": {}, "signatures": []}',
        b'{"media_type": {}, "statement": {}, "signatures": []}',
        b"[" * 5000 + b"]" * 5000,
        b'{"a": ' * 5000 + b"1" + b"}" * 5000,
        b"1" * 5000,
    ],
)
def test_odd_documents_raise_only_library_errors(data: bytes) -> None:
    with pytest.raises(Error):
        verify_receipt(data, TRUST)


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
