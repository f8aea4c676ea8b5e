"""Ed25519 keys, key ids and the DSSE pre-authentication encoding."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from erasure_receipts.errors import KeyFormatError
from erasure_receipts.signing import PublicKey, Signer, key_id, pae
from receipt_factory import (
    ATTACKER,
    TRUSTED,
    TRUSTED_SEED,
    UNKNOWN_OID_PRIVATE_PEM,
    UNKNOWN_OID_PUBLIC_PEM,
)


def test_generate_and_private_pem_round_trip() -> None:
    signer = Signer.generate()
    pem = signer.private_pem()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    again = Signer.from_pem(pem)
    assert again.key_id == signer.key_id
    assert again.public_key == signer.public_key
    msg = b"message"
    assert signer.public_key.verify(again.sign(msg), msg)


def test_private_pem_with_password() -> None:
    signer = Signer.generate()
    pem = signer.private_pem(b"correct horse")
    assert b"ENCRYPTED" in pem
    assert Signer.from_pem(pem, password=b"correct horse").key_id == signer.key_id
    with pytest.raises(KeyFormatError):
        Signer.from_pem(pem, password=b"wrong password")
    with pytest.raises(KeyFormatError):
        Signer.from_pem(pem)  # password missing
    with pytest.raises(KeyFormatError):
        Signer.from_pem(signer.private_pem(), password=b"unexpected")


def test_from_seed_is_deterministic() -> None:
    a, b = Signer.from_seed(TRUSTED_SEED), Signer.from_seed(bytes(range(32)))
    assert a.key_id == b.key_id == TRUSTED.key_id
    assert a.sign(b"x") == b.sign(b"x")  # Ed25519 signatures are deterministic
    assert TRUSTED.key_id != ATTACKER.key_id
    for bad in (b"", b"\x00" * 31, b"\x00" * 33):
        with pytest.raises(KeyFormatError):
            Signer.from_seed(bad)


def test_key_id_is_sha256_of_raw_public_key() -> None:
    signer = Signer.generate()
    raw = signer.public_key.raw
    assert len(raw) == 32
    expected = hashlib.sha256(raw).hexdigest()
    assert signer.key_id == signer.public_key.key_id == key_id(raw) == expected
    # Independent of the encoding the key arrives in.
    assert PublicKey.from_pem(signer.public_pem()).key_id == expected
    assert PublicKey.from_raw(raw).key_id == expected
    assert PublicKey.from_base64(base64.b64encode(raw).decode()).key_id == expected


def test_public_pem_loads() -> None:
    pem = TRUSTED.public_pem()
    assert pem.startswith(b"-----BEGIN PUBLIC KEY-----")
    pub = PublicKey.from_pem(pem)
    assert pub == TRUSTED.public_key
    assert hash(pub) == hash(TRUSTED.public_key)
    assert pub.pem() == pem
    assert pub != ATTACKER.public_key
    msg = b"payload"
    assert pub.verify(TRUSTED.sign(msg), msg)
    assert not pub.verify(ATTACKER.sign(msg), msg)
    assert not pub.verify(TRUSTED.sign(msg), msg + b"!")
    assert not pub.verify(TRUSTED.sign(msg)[:63], msg)
    assert not pub.verify(b"", msg)


def test_non_ed25519_keys_are_rejected() -> None:
    ec_key = ec.generate_private_key(ec.SECP256R1())
    ec_pub_pem = ec_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    ec_priv_pem = ec_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(KeyFormatError):
        PublicKey.from_pem(ec_pub_pem)
    with pytest.raises(KeyFormatError):
        Signer.from_pem(ec_priv_pem)

    ed448_pub = (
        ed448.Ed448PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with pytest.raises(KeyFormatError):
        PublicKey.from_pem(ed448_pub)

    rsa_pub = (
        rsa.generate_private_key(65537, 1024)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with pytest.raises(KeyFormatError):
        PublicKey.from_pem(rsa_pub)


@pytest.mark.parametrize(
    "data",
    [b"", b"not a key", b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"],
)
def test_garbage_pem_is_rejected(data: bytes) -> None:
    with pytest.raises(KeyFormatError):
        PublicKey.from_pem(data)
    with pytest.raises(KeyFormatError):
        Signer.from_pem(data)


def test_private_pem_is_not_a_public_key() -> None:
    with pytest.raises(KeyFormatError):
        PublicKey.from_pem(TRUSTED.private_pem())
    with pytest.raises(KeyFormatError):
        Signer.from_pem(TRUSTED.public_pem())


@pytest.mark.parametrize("raw", [b"", b"\x00" * 31, b"\x00" * 33])
def test_from_raw_wrong_length(raw: bytes) -> None:
    with pytest.raises(KeyFormatError):
        PublicKey.from_raw(raw)


@pytest.mark.parametrize("text", ["", "not base64!", "\u00e9", "AAAA", "A" * 43, "A" * 44])
def test_from_base64_rejects_bad_input(text: str) -> None:
    with pytest.raises(KeyFormatError):
        PublicKey.from_base64(text)


def test_pae_matches_dsse_spec_example() -> None:
    assert (
        pae("http://example.com/HelloWorld", b"hello world")
        == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_pae_lengths_are_byte_lengths() -> None:
    assert pae("", b"") == b"DSSEv1 0  0 "
    assert pae("t\u00e9", b"\xff" * 3) == b"DSSEv1 3 t\xc3\xa9 3 \xff\xff\xff"
    # No ambiguity between type/payload boundaries.
    assert pae("a 1 b", b"") != pae("a", b"b 0 ")


def test_repr_does_not_leak_private_material() -> None:
    text = repr(TRUSTED) + repr(TRUSTED.public_key)
    assert TRUSTED.key_id[:16] in text
    assert TRUSTED.private_pem().decode() not in text
    assert TRUSTED_SEED.hex() not in text


def test_unknown_algorithm_public_key_is_key_format_error() -> None:
    with pytest.raises(KeyFormatError):
        PublicKey.from_pem(UNKNOWN_OID_PUBLIC_PEM)


def test_unknown_algorithm_private_key_is_key_format_error() -> None:
    with pytest.raises(KeyFormatError):
        Signer.from_pem(UNKNOWN_OID_PRIVATE_PEM)


# -- differential / robustness --------------------------------------------------------------

_PEM = TRUSTED.public_pem()


def _crypto_ed25519_raw(data: bytes) -> bytes | None:
    """What the cryptography package makes of ``data``: the raw Ed25519 key, or None."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(data)
    except Exception:
        return None
    if not isinstance(key, Ed25519PublicKey):
        return None
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(_PEM) - 1), st.integers(0, 255), st.booleans())
def test_from_pem_mutations(pos: int, value: int, insert: bool) -> None:
    data = _PEM[:pos] + bytes([value]) + _PEM[pos + (0 if insert else 1) :]
    reference = _crypto_ed25519_raw(data)
    try:
        pub = PublicKey.from_pem(data)
    except KeyFormatError:
        assert reference is None, "cryptography loads a key that PublicKey.from_pem rejects"
        return
    # Whatever we accept must be the key cryptography reads (when it reads one at all).
    if reference is not None:
        assert pub.raw == reference
    assert pub.key_id == key_id(pub.raw)


@pytest.mark.parametrize(
    "data",
    [
        _PEM.replace(b"\n", b"\r\n"),
        b"\n\n" + _PEM + b"\n\n",
        _PEM + ATTACKER.public_pem(),
    ],
    ids=["crlf", "blank-lines", "two-keys"],
)
def test_from_pem_agrees_with_cryptography(data: bytes) -> None:
    reference = _crypto_ed25519_raw(data)
    assert reference is not None
    assert PublicKey.from_pem(data).raw == reference
