"""Write slurm_stack/spec/data/sshd-<slurmVersion>.json: the sshd_config keywords that the login
image of that Slurm version accepts, read from its sshd itself.

    .venv/bin/python scripts/sshd_keywords.py [SLURM_VERSION [IMAGE]]

SLURM_VERSION defaults to 26.05 and IMAGE to its local login build (images/build.sh:
localhost/slurm-stack/login:<version>-<revision>). Inside the image, every candidate name (the
keyword table's strings in the sshd binaries, sshd_config(5), `sshd -T`) goes through
`sshd -t` once: sshd says whether it is a keyword, one it ignores (deprecated, or not built
in), or not a keyword at all. A keyword sshd_config(5) does not document is an old alias:
setting it and diffing `sshd -T` names the keyword it stands for. Rerun after the login image's
OpenSSH changes, and commit the result with it.
"""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "slurm_stack" / "spec" / "data"

# Runs in the image as root. Prints tagged lines: `version ...`, `package ...`, `suite ...`,
# `man Keyword`, `known|deprecated|unsupported Word`, `alias Word keyword` and `ignored Word`.
PROBE = r"""
set -eu
mkdir -p /run/sshd /tmp/p
cd /tmp/p
ssh-keygen -q -t ed25519 -N '' -f hk
ssh-keygen -q -t ed25519 -N '' -f hk2
printf 'HostKey /tmp/p/hk\n' > base
echo "version $(sshd -V 2>&1 | head -n 1 | cut -d, -f1)"
echo "package $(dpkg-query -W -f '${Version}' openssh-server)"
echo "suite $(. /etc/os-release && echo "$VERSION_CODENAME")"
sshd -T -f base | sort > T.base
zcat /usr/share/man/man5/sshd_config.5.gz \
  | awk '$1 == ".It" && $2 == "Cm" && $3 ~ /^[A-Z][A-Za-z0-9]+$/ {print $3}' | sort -u > man
sed 's/^/man /' man
# The keyword table's names (CamelCase from OpenSSH 10.1, lower case before), whole or as
# the tail of a longer string the linker merged them into (KeepAlive inside TCPKeepAlive),
# and $EXTRA: every name the lists of other images hold.
for f in /usr/sbin/sshd /usr/lib/openssh/sshd-session /usr/lib/openssh/sshd-auth; do
  [ -f "$f" ] && tr '\0' '\n' < "$f" | grep -xE '[A-Za-z][A-Za-z0-9]{2,40}' || true
done | awk '{
  print
  for (i = 2; i <= length($0); i++) if (substr($0, i, 1) ~ /[A-Z]/) print substr($0, i)
}' > words
for word in $EXTRA; do echo "$word"; done >> words
{ cat words man; awk '{print $1}' T.base; } | sort -u -f > candidates
tr 'A-Z' 'a-z' < man > man.lower
while read -r k; do
  printf 'HostKey /tmp/p/hk\n%s x\n' "$k" > c
  out=$(sshd -t -f c 2>&1) || true
  case "$out" in
    *"Bad configuration option"*) continue ;;
    *"Unsupported option"* | *"not supported on this platform"*)
      echo "unsupported $k"; continue ;;
    *"Deprecated option"*) echo "deprecated $k"; continue ;;
  esac
  echo "known $k"
  lower=$(echo "$k" | tr 'A-Z' 'a-z')
  grep -qxF "$lower" man.lower && continue
  target=""
  for value in no yes /tmp/p/hk2 ssh-ed25519 7; do
    printf 'HostKey /tmp/p/hk\n%s %s\n' "$k" "$value" > c
    sshd -T -f c 2>/dev/null | sort > T.c || continue
    changed=$(diff T.base T.c | awk '/^[<>]/ {print $2}' | sort -u)
    if [ -n "$changed" ] && [ "$(echo "$changed" | wc -l)" -eq 1 ]; then
      target=$changed
      break
    fi
  done
  if [ -n "$target" ]; then echo "alias $k $target"; else echo "ignored $k"; fi
done < candidates
"""


def known_names() -> dict[str, str]:
    """Every name the committed lists hold, by its lower case: more candidates, and the
    spelling of a name an older sshd keeps in lower case only."""
    names = {}
    for path in sorted(DATA_DIR.glob("sshd-*.json")):
        data = json.loads(path.read_text())
        for kind in ("keywords", "aliases", "ignored", "deprecated", "unsupported"):
            names.update({name.lower(): name for name in data[kind]})
    return names


def probe(image: str, extra: list[str], cache: Path | None = None) -> list[list[str]]:
    """The probe's tagged lines for ``image``; with ``cache``, kept there under the image's ID
    and the probe's inputs, since one run starts sshd some 500 times (about 10 s)."""
    if cache is None:
        return _probe(image, extra)
    image_id = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", image],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    key = hashlib.sha256(json.dumps([image_id, PROBE, extra]).encode()).hexdigest()
    kept = cache / f"{key}.json"
    if kept.exists():
        return json.loads(kept.read_text())
    lines = _probe(image, extra)
    cache.mkdir(parents=True, exist_ok=True)
    kept.write_text(json.dumps(lines))
    return lines


def _probe(image: str, extra: list[str]) -> list[list[str]]:
    run = subprocess.run(
        [
            *("podman", "run", "--rm", "--network=none", "-e", f"EXTRA={' '.join(extra)}"),
            *("--entrypoint", "sh", image, "-c", PROBE),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        sys.exit(f"sshd_keywords: probing {image} failed:\n{run.stderr}")
    return [line.split(" ", 1) for line in run.stdout.splitlines() if " " in line]


def _sorted(names: set[str]) -> list[str]:
    return sorted(names, key=str.lower)


def keywords(image: str, cache: Path | None = None) -> dict[str, object]:
    """The probe's findings, in the file's shape (the probe's output kept in ``cache``)."""
    spelling = known_names()
    facts: dict[str, list[str]] = {}
    for tag, rest in probe(image, sorted(spelling.values(), key=str.lower), cache):
        facts.setdefault(tag, []).append(rest)
    # sshd_config(5) spells keywords as sshd's own messages do (MACs, not the table's Macs).
    documented = {name.lower() for name in facts.get("man", [])}
    spelling.update({name.lower(): name for name in facts.get("man", [])})
    for tag in ("known", "alias", "ignored", "deprecated", "unsupported"):
        facts[tag] = [
            " ".join(spelling.get(word.lower(), word) for word in line.split())
            for line in facts.get(tag, [])
        ]
    known = set(facts.get("known", []))
    aliases = dict(line.split() for line in facts.get("alias", []))
    keywords = {name for name in known if name.lower() in documented}
    undocumented = known - keywords - set(aliases) - set(facts.get("ignored", []))
    if undocumented:
        sys.exit(f"sshd_keywords: neither documented nor an alias: {_sorted(undocumented)}")
    return {
        "generated_by": "scripts/sshd_keywords.py; do not edit",
        "image": image,
        "suite": facts["suite"][0],
        "openssh": facts["version"][0],
        "package": facts["package"][0],
        "keywords": _sorted(keywords),
        "aliases": dict(sorted(aliases.items(), key=lambda item: item[0].lower())),
        "ignored": _sorted(set(facts.get("ignored", []))),
        "deprecated": _sorted(set(facts.get("deprecated", []))),
        "unsupported": _sorted(set(facts.get("unsupported", []))),
    }


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from slurm_stack.spec.models import IMAGE_REVISION

    version = sys.argv[1] if len(sys.argv) > 1 else "26.05"
    image = (
        sys.argv[2]
        if len(sys.argv) > 2
        else f"localhost/slurm-stack/login:{version}-{IMAGE_REVISION}"
    )
    data = {"slurm_version": version, **keywords(image)}
    output = DATA_DIR / f"sshd-{version}.json"
    output.write_text(json.dumps(data, indent=2) + "\n")
    print(f"{output.relative_to(ROOT)}: {len(data['keywords'])} keywords of {data['openssh']}")


if __name__ == "__main__":
    main()
