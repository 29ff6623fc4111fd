"""Deterministic key material for the mocked `tls:index/privateKey:PrivateKey`.

Every key is derived from a seed (the mocks use a hash of the resource URN), so two runs of the
same program give byte-identical keys, and the keys are real: they parse, sign and verify.

- Ed25519: the seed is the 32-byte private key.
- ECDSA: the private scalar is a hash of the seed, reduced below the curve order.
- RSA: a real key from `cryptography`, kept per seed for the life of the process. It is not
  derived from the seed: a seeded prime search in pure Python takes seconds per key (3072
  bits), which the test suite cannot afford. Secrets are redacted in rendered output, so the
  output stays byte-identical between runs; only `--show-secrets` shows a new RSA key.

OpenSSH private keys carry a random "checkint"; it is replaced by one derived from the seed.
"""

import base64
import functools
import hashlib
import struct

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

_CURVES: dict[str, ec.EllipticCurve] = {
    "P224": ec.SECP224R1(),
    "P256": ec.SECP256R1(),
    "P384": ec.SECP384R1(),
    "P521": ec.SECP521R1(),
}
_RSA_EXPONENT = 65537


@functools.lru_cache(maxsize=64)
def rsa_key(seed: bytes, bits: int = 2048) -> rsa.RSAPrivateKey:
    """An RSA key of `bits` bits for `seed`, the same one for the whole process."""
    del seed  # the cache key: one key per resource
    return rsa.generate_private_key(public_exponent=_RSA_EXPONENT, key_size=bits)


PrivateKey = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


def deterministic_private_key(
    seed: bytes, algorithm: str, *, ecdsa_curve: str = "P224", rsa_bits: int = 2048
) -> PrivateKey:
    """A private key for the tls provider's `algorithm` (ED25519, ECDSA or RSA) from `seed`."""
    digest = hashlib.sha512(seed).digest()
    if algorithm == "ED25519":
        return ed25519.Ed25519PrivateKey.from_private_bytes(digest[:32])
    if algorithm == "ECDSA":
        if ecdsa_curve not in _CURVES:
            raise ValueError(f"unsupported ECDSA curve {ecdsa_curve!r}")
        curve = _CURVES[ecdsa_curve]
        # Any scalar in [1, 2^(bits-1)) is below the group order of every NIST curve.
        bound = 2 ** (curve.key_size - 1) - 1
        scalar = int.from_bytes(hashlib.shake_256(seed).digest(80)) % bound + 1
        return ec.derive_private_key(scalar, curve)
    if algorithm == "RSA":
        return rsa_key(seed, rsa_bits)
    raise ValueError(f"unsupported key algorithm {algorithm!r}")


def _openssh_private_key(key: PrivateKey, seed: bytes) -> str:
    """OpenSSH private key text with the random checkint replaced by one derived from `seed`."""
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    lines = pem.strip().splitlines()
    blob = bytearray(base64.b64decode("".join(lines[1:-1])))
    # Unencrypted layout: magic, cipher, kdf, kdf options, key count, public key, then the
    # private section, which starts with checkint twice.
    offset = len(b"openssh-key-v1\0")
    for _ in range(3):
        offset += 4 + struct.unpack_from(">I", blob, offset)[0]
    offset += 4
    offset += 4 + struct.unpack_from(">I", blob, offset)[0]
    offset += 4
    checkint = hashlib.sha256(b"checkint" + seed).digest()[:4]
    blob[offset : offset + 8] = checkint * 2
    body = base64.b64encode(bytes(blob)).decode()
    wrapped = [body[i : i + 70] for i in range(0, len(body), 70)]
    return "\n".join([lines[0], *wrapped, lines[-1]]) + "\n"


def private_key_outputs(
    seed: bytes, algorithm: str, *, ecdsa_curve: str = "P224", rsa_bits: int = 2048
) -> dict[str, str]:
    """The outputs the tls provider returns for a PrivateKey, with real, seeded key material."""
    key = deterministic_private_key(seed, algorithm, ecdsa_curve=ecdsa_curve, rsa_bits=rsa_bits)
    pem = serialization.Encoding.PEM
    traditional = (
        serialization.PrivateFormat.PKCS8
        if algorithm == "ED25519"
        else serialization.PrivateFormat.TraditionalOpenSSL
    )
    public = key.public_key()
    outputs = {
        "privateKeyPem": key.private_bytes(pem, traditional, serialization.NoEncryption()).decode(),
        "privateKeyPemPkcs8": key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode(),
        "publicKeyPem": public.public_bytes(
            pem, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode(),
        # OpenSSH has no P224; the provider leaves these empty for it.
        "privateKeyOpenssh": "",
        "publicKeyOpenssh": "",
        "publicKeyFingerprintMd5": "",
        "publicKeyFingerprintSha256": "",
    }
    if not (algorithm == "ECDSA" and ecdsa_curve == "P224"):
        openssh = public.public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        wire = base64.b64decode(openssh.split()[1])
        sha256 = base64.b64encode(hashlib.sha256(wire).digest()).decode().rstrip("=")
        outputs |= {
            "privateKeyOpenssh": _openssh_private_key(key, seed),
            "publicKeyOpenssh": openssh.decode() + "\n",
            "publicKeyFingerprintMd5": ":".join(
                f"{b:02x}" for b in hashlib.md5(wire, usedforsecurity=False).digest()
            ),
            "publicKeyFingerprintSha256": f"SHA256:{sha256}",
        }
    return outputs
