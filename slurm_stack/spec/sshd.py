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

The values of the keywords people set most are checked too (SSHD_VALUES): sshd refuses to
start on `MaxAuthTries abc` or `X11Forwarding maybe`, so the login pods would never become
Ready. The rules are OpenSSH's own (servconf.c, misc.c), and tests/test_spec.py has the login
image's `sshd -t` judge every sample value of the table the same way. Other keywords' values
are still sshd's to judge.
"""

import difflib
import json
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
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
    if len(line.split(maxsplit=1)) < 2:
        return None  # no value: the line format's to report
    args = sshd_arguments(line)
    if args is None:
        return f"{key}: a quote in the line is not closed, and sshd refuses the line"
    if name == "banner":
        return _banner_problem(line)
    if name in SSHD_VALUES:
        return _value_problem(key, SSHD_VALUES[name][1], args, _release(version))
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


# ---------------------------------------------------------------------------- values

INT_MAX = 2**31 - 1
_WHOLE_NUMBER = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+")
_TIME_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([smhdw]?)", re.IGNORECASE)
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass(frozen=True)
class SshdValue:
    """What sshd takes as the one value of a keyword: ``wants`` says it in words. ``since``:
    from that OpenSSH release on, sshd takes another value instead."""

    wants: str
    accepts: Callable[[str, tuple[int, int]], bool]
    since: "tuple[tuple[int, int], SshdValue] | None" = None

    def at(self, release: tuple[int, int]) -> "SshdValue":
        """The value OpenSSH ``release`` takes."""
        if self.since is not None and release >= self.since[0]:
            return self.since[1].at(release)
        return self


def _whole_number(arg: str, _: tuple[int, int]) -> bool:
    """parse_int: misc.c atoi_err, strtonum(arg, 0, INT_MAX) (so '+5' and '-0' too)."""
    return bool(_WHOLE_NUMBER.fullmatch(arg)) and 0 <= int(arg) <= INT_MAX


def _time(arg: str, release: tuple[int, int]) -> bool:
    """parse_time: misc.c convtime. Numbers, each followed by s, m, h, d or w (none: seconds),
    adding up to at most INT_MAX seconds. From OpenSSH 10.3 (convtime_double) seconds may have
    decimals ('1.5s') and come once; before it no number has decimals."""
    decimals = release >= (10, 3)
    total, position, seconds_seen = 0.0, 0, False
    while position < len(arg):
        part = _TIME_PART.match(arg, position)
        if part is None:
            return False
        number, unit = part.groups()
        position = part.end()
        if not unit and position < len(arg):
            return False  # a number ends only at a unit or at the end
        unit = unit.lower() or "s"
        if "." in number and not (decimals and unit == "s" and number[-1].isdigit()):
            return False
        if decimals and unit == "s":
            if seconds_seen:
                return False
            seconds_seen = True
        total += float(number) * _SECONDS[unit]
    return bool(arg) and total <= INT_MAX


def _time_or_none(arg: str, release: tuple[int, int]) -> bool:
    return arg.lower() == "none" or _time(arg, release)


def _words(*words: str, any_case: bool = True) -> SshdValue:
    """One of ``words``: servconf.c's multistate tables and log.c's level and facility names
    compare with strcasecmp; PermitTunnel's with strcmp."""
    if any_case:
        known = {word.lower() for word in words}
        return SshdValue(f"one of {', '.join(words)}", lambda arg, _: arg.lower() in known)
    return SshdValue(f"one of {', '.join(words)} (in lower case)", lambda arg, _: arg in set(words))


_WHOLE = SshdValue(f"a whole number from 0 to {INT_MAX}", _whole_number)
_TIME = SshdValue("a time such as 90, 2m or 1h30m (s, m, h, d or w after a number)", _time)
_TIME_OR_NONE = SshdValue(f"none or {_TIME.wants}", _time_or_none)
_YES_NO = _words("yes", "no")
_FORWARDING = _words("yes", "all", "no", "remote", "local")

# Keyword -> the value sshd takes (servconf.c, process_server_config_line_depth, by the label
# each case jumps to). Each takes exactly one value: more is "extra arguments at end of line".
SSHD_VALUES = {
    k.lower(): (k, value)
    for k, value in (
        ("MaxAuthTries", _WHOLE),
        ("MaxSessions", _WHOLE),
        ("ClientAliveCountMax", _WHOLE),
        ("X11DisplayOffset", _WHOLE),
        ("RequiredRSASize", _WHOLE),
        ("LoginGraceTime", _TIME),
        ("ClientAliveInterval", _TIME),
        ("UnusedConnectionTimeout", _TIME_OR_NONE),
        ("X11Forwarding", _YES_NO),
        ("X11UseLocalhost", _YES_NO),
        ("AllowAgentForwarding", _YES_NO),
        ("DisableForwarding", _YES_NO),
        ("PermitTTY", _YES_NO),
        ("PermitUserRC", _YES_NO),
        ("PrintMotd", _YES_NO),
        ("PrintLastLog", _YES_NO),
        # OpenSSH 10.6 extends it to forwarded connections: `all` (`transport` is `yes`).
        (
            "TCPKeepAlive",
            SshdValue(
                _YES_NO.wants,
                _YES_NO.accepts,
                since=((10, 6), _words("yes", "transport", "true", "no", "false", "all")),
            ),
        ),
        ("UseDNS", _YES_NO),
        ("StrictModes", _YES_NO),
        ("ExposeAuthInfo", _YES_NO),
        ("StreamLocalBindUnlink", _YES_NO),
        ("IgnoreUserKnownHosts", _YES_NO),
        ("IgnoreRhosts", _words("yes", "no", "shosts-only")),
        ("AllowTcpForwarding", _FORWARDING),
        ("AllowStreamLocalForwarding", _FORWARDING),
        ("GatewayPorts", _words("no", "yes", "clientspecified")),
        ("PermitTunnel", _words("no", "yes", "point-to-point", "ethernet", any_case=False)),
        (
            "LogLevel",
            _words(
                "QUIET", "FATAL", "ERROR", "INFO", "VERBOSE", "DEBUG", "DEBUG1", "DEBUG2", "DEBUG3"
            ),
        ),
        (
            "SyslogFacility",
            _words("DAEMON", "USER", "AUTH", "AUTHPRIV", *(f"LOCAL{n}" for n in range(8))),
        ),
    )
}


def _release(version: str) -> tuple[int, int]:
    """(10, 6) for the login image of Slurm ``version`` with OpenSSH 10.6p1."""
    found = re.match(r"OpenSSH_(\d+)\.(\d+)", keyword_data(version)["openssh"])
    assert found, keyword_data(version)["openssh"]
    return int(found[1]), int(found[2])


def sshd_arguments(line: str) -> list[str] | None:
    """The arguments sshd reads after the line's keyword (servconf.c: strdelim drops one '='
    after it; misc.c argv_split: quotes and backslash escapes, and an argument starting with
    '#' ends the line); None when a quote is not closed."""
    parts = line.strip().split(maxsplit=1)
    rest = parts[1] if len(parts) == 2 else ""
    if rest.startswith("="):
        rest = rest[1:].lstrip(" \t")
    args: list[str] = []
    i = 0
    while i < len(rest):
        if rest[i] in " \t":
            i += 1
            continue
        if rest[i] == "#":
            break
        quote, arg = "", []
        while i < len(rest):
            char = rest[i]
            escaped = rest[i + 1 : i + 2]
            if char == "\\" and (escaped in ("'", '"', "\\") or (not quote and escaped == " ")):
                i += 1
                arg.append(escaped)
            elif not quote and char in " \t":
                break
            elif not quote and char in "\"'":
                quote = char
            elif quote and char == quote:
                quote = ""
            else:
                arg.append(char)
            i += 1
        if quote:
            return None
        args.append("".join(arg))
    return args


def _value_problem(
    key: str, value: SshdValue, args: list[str], release: tuple[int, int]
) -> str | None:
    value = value.at(release)
    if not args:
        return f"{key} takes {value.wants}, and the line gives none"
    if len(args) > 1:
        return (
            f"{key} takes one value, {value.wants}; sshd refuses the line's extra "
            f"{' '.join(args[1:])!r}"
        )
    if not value.accepts(args[0], release):
        return f"{key} takes {value.wants}, not {args[0]!r}: sshd would refuse to start"
    return None
