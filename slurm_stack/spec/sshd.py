"""`login.sshdExtra` lines as the login image's sshd reads them.

A line must name a keyword that image's OpenSSH knows (slurm_stack/spec/data/sshd-<version>.json,
generated from the image by scripts/sshd_keywords.py), and none that decides who logs in, how
keys are found, or where sessions run: slurm-stack owns those.

Why refusing is enough, given where the lines go (render_sshd_config): slurm-stack's settings
come first, then the sshdExtra lines, then root's `Match User root` block. sshd keeps the
first value of a keyword, so order alone would let our settings win; but a default that a line
here sets is left out of ours (a line here replaces it, as documented), and keywords that add
up (HostKey, Port, ListenAddress, AllowUsers, ...) would add to ours rather than lose to them.
So the order protects nothing by itself: every keyword slurm-stack relies on is refused here,
whatever its case or old alias. No line here can open a Match block or Include a file, so all
of them are global; root's Match block after them is still the last word for root (sshd lets
a matching block's values override global ones).
"""

import difflib
import json
import posixpath
import re
from functools import cache
from pathlib import Path

from slurm_stack import paths
from slurm_stack.spec.fields import key_of

DATA_DIR = Path(__file__).parent / "data"

_KEY_ONLY = "logins are by SSH key only"
_KEYS = (
    "keys come from login.users, login.rootAuthorizedKeys and the directory, through "
    "slurm-stack's AuthorizedKeysCommand"
)
_WHO = "who may log in is login.users, login.rootAuthorizedKeys and directory.loginGroups"
_SERVICE = "the login Service and the pods' probes reach sshd on port 22"
_HOST_KEYS = "the host keys are the login pods' Secret"

# Keywords in slurm-stack's own sshd_config (the login chroot, host keys, key-only login):
# a line here would replace ours.
OWNED_SSHD_KEYWORDS = {
    k.lower(): (k, reason)
    for k, reason in (
        ("ChrootDirectory", "every session is chrooted into the jail"),
        ("HostKey", _HOST_KEYS),
        ("PasswordAuthentication", _KEY_ONLY),
        ("KbdInteractiveAuthentication", _KEY_ONLY),
        ("UsePAM", _KEY_ONLY),
        ("PubkeyAuthentication", _KEY_ONLY),
        ("AuthorizedKeysFile", _KEYS),
        ("AuthorizedKeysCommand", _KEYS),
        ("AuthorizedKeysCommandUser", _KEYS),
        ("PermitRootLogin", "root logs in with login.rootAuthorizedKeys (empty: never)"),
        ("Port", _SERVICE),
        ("PidFile", "sshd writes it as root in the login pod"),
        (
            "Subsystem",
            "slurm-stack offers sftp (internal-sftp, in the jail); a Subsystem line would "
            "replace that whole keyword, sftp included",
        ),
        (
            "Match",
            "a Match line makes every later line conditional, and root's restricted session "
            "is slurm-stack's own Match block",
        ),
    )
}

# Keywords slurm-stack leaves at sshd's default because another value would decide who logs
# in, or run code as root outside the jail.
REFUSED_SSHD_KEYWORDS = {
    k.lower(): (k, reason)
    for k, reason in (
        ("AuthorizedPrincipalsFile", _KEYS),
        ("AuthorizedPrincipalsCommand", _KEYS),
        ("AuthorizedPrincipalsCommandUser", _KEYS),
        ("TrustedUserCAKeys", _KEYS),
        ("AllowUsers", _WHO),
        ("DenyUsers", _WHO),
        ("AllowGroups", _WHO),
        ("DenyGroups", _WHO),
        ("AuthenticationMethods", _KEY_ONLY),
        ("PermitEmptyPasswords", _KEY_ONLY),
        ("HostbasedAuthentication", _KEY_ONLY),
        # Not built into the images' sshd today; refused before a build with them would
        # let Kerberos principals in.
        ("GSSAPIAuthentication", _KEY_ONLY),
        ("GSSAPIKeyExchange", _KEY_ONLY),
        ("KerberosAuthentication", _KEY_ONLY),
        ("RefuseConnection", "outside a Match block it refuses every connection"),
        ("Include", "lines from another file would escape these checks"),
        ("ListenAddress", _SERVICE),
        ("HostKeyAgent", _HOST_KEYS),
        ("SecurityKeyProvider", "sshd loads that library as root, outside the jail"),
        (
            "SshdSessionPath",
            "sshd runs that program as root, outside the jail, for every connection",
        ),
        ("SshdAuthPath", "sshd runs that program as root, outside the jail, to authenticate"),
        (
            "PermitUserEnvironment",
            "~/.ssh/environment (LD_PRELOAD, BASH_ENV) would run code in root's session "
            "before it gives up SYS_CHROOT",
        ),
    )
}

# sshd reads a Banner as root, outside the jail, and sends it to anyone before login.
_NO_BANNER_UNDER = {
    paths.SSH_HOST_KEY_DIR: "it holds the host keys",
    paths.JAIL_DIR: "the jail's users and root write files there, and a link to the host keys "
    "would do",
}
_KEYWORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def keyword_versions() -> tuple[str, ...]:
    """The Slurm versions whose login image has a keyword list, oldest first."""
    names = (path.stem.removeprefix("sshd-") for path in DATA_DIR.glob("sshd-*.json"))
    return tuple(sorted(names, key=_version_key))


@cache
def keyword_data(version: str) -> dict:
    """What the login image of Slurm ``version`` knows; a version without a list of its own
    (its image never probed) uses the newest list."""
    known = keyword_versions()
    chosen = version if version in known else known[-1]
    return json.loads((DATA_DIR / f"sshd-{chosen}.json").read_text())


def openssh(version: str) -> str:
    """`OpenSSH 10.6p1`: the release the list for ``version`` came from."""
    release = keyword_data(version)["openssh"].split()[0]
    return release.replace("_", " ", 1)


@cache
def _lowered(version: str) -> dict[str, dict[str, str]]:
    data = keyword_data(version)
    return {
        kind: {name.lower(): name for name in data[kind]}
        for kind in ("keywords", "ignored", "deprecated", "unsupported")
    } | {"aliases": {alias.lower(): target for alias, target in data["aliases"].items()}}


def sshd_line_problem(line: str, version: str) -> str | None:
    """Why the sshdExtra ``line`` may not go into the login pods' sshd_config, if it may not.

    A line without a keyword is the line format's to report."""
    key = key_of(line)
    if not _KEYWORD.fullmatch(key):
        return None
    lowered = _lowered(version)
    canonical = lowered["aliases"].get(key.lower())
    name = canonical.lower() if canonical else key.lower()
    old_name = f" (OpenSSH's old name for {canonical})" if canonical else ""
    if name in OWNED_SSHD_KEYWORDS:
        return f"{key}{old_name} is set by slurm-stack: {OWNED_SSHD_KEYWORDS[name][1]}"
    if name in REFUSED_SSHD_KEYWORDS:
        return f"{key}{old_name} cannot be set here: {REFUSED_SSHD_KEYWORDS[name][1]}"
    release = openssh(version)
    if canonical:
        return f"{key} is OpenSSH's old name for {canonical}: write {canonical}"
    for kind, what in (
        ("deprecated", "deprecated, and ignored by"),
        ("ignored", "ignored by"),
        ("unsupported", "not supported by"),
    ):
        if name in lowered[kind]:
            return f"{key} is {what} the login image's {release}"
    if name not in lowered["keywords"]:
        return f"{key} is not an sshd_config keyword of {release}{_did_you_mean(key, version)}"
    if name == "banner":
        return _banner_problem(line)
    return None


def _did_you_mean(key: str, version: str) -> str:
    """The closest keyword a line may set, if one is close."""
    keywords = _lowered(version)["keywords"]
    usable = [k for k in keywords if k not in OWNED_SSHD_KEYWORDS | REFUSED_SSHD_KEYWORDS]
    close = difflib.get_close_matches(key.lower(), usable, n=1, cutoff=0.7)
    return f"; did you mean {keywords[close[0]]}?" if close else " (see sshd_config(5))"


def _banner_problem(line: str) -> str | None:
    parts = line.split(maxsplit=1)
    value = parts[1].strip().strip('"') if len(parts) == 2 else ""
    if not value or value.lower() == "none":
        return None
    path = posixpath.normpath(posixpath.join("/", value))
    for directory, why in _NO_BANNER_UNDER.items():
        if path == directory or path.startswith(f"{directory}/"):
            return (
                f"Banner {value}: sshd reads the banner as root, outside the jail, and sends "
                f"it to anyone before login; not from {directory}: {why}"
            )
    return None
