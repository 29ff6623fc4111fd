"""OpenSSH public key lines (`login.users[].authorizedKeys`, `login.rootAuthorizedKeys`) as
sshd reads them from authorized_keys: `<type> <base64 blob> [comment]`.

The blob is parsed by `cryptography` (`serialization.load_ssh_public_key`), not matched by a
pattern, so a key sshd could not read is refused here, at its key path, rather than letting
nobody in. How each accepted type is checked:

- ssh-ed25519, ssh-rsa, ecdsa-sha2-nistp256/384/521: load_ssh_public_key reads the whole blob
  (the inner type, the key's fields, nothing left over) and builds the key: an Ed25519 key of
  32 bytes, an RSA modulus and exponent, an EC point on the named curve.
- sk-ssh-ed25519@openssh.com, sk-ecdsa-sha2-nistp256@openssh.com (FIDO security keys):
  load_ssh_public_key (cryptography 43 and later) reads them the same way, the application
  string ("ssh:") after the key included.

Checked before the library sees the line, because it is lenient there: the type is one of
those above (sshd takes certificates too, `*-cert-v01@openssh.com`, but only with the
cert-authority option or TrustedUserCAKeys, and load_ssh_public_key would read one as its
bare key: they are refused, as before), the blob is strict base64 (binascii skips characters
that are not), and the type inside the blob is the one the line names. After it: an RSA
modulus of at least 1024 bits, the least sshd reads (SSH_RSA_MINIMUM_MODULUS_SIZE).

Options before the type (`from="..." ssh-ed25519 ...`) were never taken here, and are not:
each key line is written as given into what slurm-stack's AuthorizedKeysCommand prints.
"""

import base64
import re

KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
_CERTIFICATE = "-cert-v01@openssh.com"
_MIN_RSA_BITS = 1024
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def ssh_key_problem(line: str) -> str | None:
    """What sshd could not read in the authorized_keys ``line``, in words; None if nothing."""
    parts = line.split()
    if not parts or parts[0] not in KEY_TYPES:
        return _type_problem(line, parts)
    key_type = parts[0]
    if len(parts) < 2:
        return f"the {key_type} key has no base64 blob after its type"
    blob = parts[1]
    shown = blob if len(blob) <= 24 else f"{blob[:20]}..."
    if not _BASE64.fullmatch(blob) or len(blob) % 4:
        odd = re.search(r"[^A-Za-z0-9+/=]", blob)
        why = (
            f"it contains {odd.group()!r}"
            if odd
            else "its length or '=' padding is wrong; was it cut short?"
        )
        return f"the {key_type} key's blob {shown!r} is not base64: {why}"
    data = base64.b64decode(blob, validate=True)
    if base64.b64encode(data).decode() != blob:
        # sshd's b64_pton refuses bits set past the last byte; binascii ignores them.
        return (
            f"the {key_type} key's blob {shown!r} is not base64 as sshd reads it: its last "
            "character has bits set past the end of the data; was it edited?"
        )
    inner = _inner_type(data)
    if inner is None:
        return (
            f"the {key_type} key's blob {shown!r} does not start with a key type: it is not an "
            "OpenSSH public key (copy the whole line of the .pub file)"
        )
    if inner != key_type:
        return f"the blob is an {inner} key but the line says {key_type}"
    return _key_problem(line, key_type)


def _type_problem(line: str, parts: list[str]) -> str:
    named = parts[0] if parts else ""
    if named.endswith(_CERTIFICATE):
        return (
            f"{named} is an OpenSSH certificate, not a public key: give the key itself (the "
            ".pub file without -cert)"
        )
    if any(part in KEY_TYPES for part in parts[1:]):
        return (
            "options before the key type are not taken here: give the key line alone "
            "('<type> <base64> [comment]')"
        )
    return f"{line[:40]!r}... is not an OpenSSH public key; it must start with one of " + (
        ", ".join(KEY_TYPES)
    )


def _inner_type(data: bytes) -> str | None:
    """The key type the blob starts with (a length-prefixed string), if it starts with one."""
    if len(data) < 4:
        return None
    size = int.from_bytes(data[:4], "big")
    name = data[4 : 4 + size]
    if not 0 < size <= 64 or len(name) < size or not re.fullmatch(rb"[\x21-\x7e]+", name):
        return None
    return name.decode()


def _key_problem(line: str, key_type: str) -> str | None:
    # A core dependency (pyproject.toml), imported here rather than with the module: the CLI
    # imports the spec first thing, and its `render` names a missing install in words
    # (cli.RENDER_EXTRA_MODULES) only if importing the spec did not fail already.
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import load_ssh_public_key

    try:
        key = load_ssh_public_key(line.encode())
    except (ValueError, UnsupportedAlgorithm, NotImplementedError) as error:
        # cryptography's words: "Invalid data" when a field runs past the end of the blob,
        # "unparsed data" when bytes follow the key.
        what = str(error)
        if what == "Invalid data":
            what = "cut short: the blob ends inside the key"
        elif "unparsed data" in what:
            what = "followed by data that is not part of it"
        else:
            what = f"not a valid key ({what})"
        return f"the {key_type} key in the blob is {what}: copy the whole line of the .pub file"
    if isinstance(key, rsa.RSAPublicKey) and key.key_size < _MIN_RSA_BITS:
        return (
            f"the ssh-rsa key has {key.key_size} bits; sshd reads no RSA key under "
            f"{_MIN_RSA_BITS} bits: use an ssh-ed25519 key"
        )
    return None
