# shellcheck shell=bash
# Sourced by scripts/setup.sh and scripts/setup-podman.sh: `apt_get`, apt-get that waits for
# the package locks another apt or dpkg run holds (on a fresh machine often unattended-upgrades
# or cloud-init) instead of failing at once with exit 100, and says what it waits for.
#
# apt's own `-o DPkg::Lock::Timeout=N` (apt >= 1.9.11) waits only for the dpkg locks
# (/var/lib/dpkg/lock-frontend and lock), and silently under -qq. apt 2.6 (bookworm) still
# fails at once on /var/lib/apt/lists/lock (`apt-get update`) and /var/cache/apt/archives/lock
# (`apt-get install`, even with nothing to install). So: a try that finds a lock held names the
# lock and its holder (from apt's own message, which is why apt runs with LC_ALL=C); then apt's
# DPkg::Lock::Timeout waits for a dpkg lock; for the others this watches /proc/locks and tries
# again once the lock is free. A try that fails on a lock has changed nothing, so trying again
# is safe.
#
# SLURM_STACK_APT_LOCK_TIMEOUT: seconds to wait in all (default 600), then fail naming the lock.

# apt-get "$@", waiting for the package locks; prints what it waits for on stderr.
apt_get() {
  local who timeout deadline err rc lock holder said="" said_at=0 remaining wait=0 poll_end
  who=$(basename "$0" .sh)
  timeout=${SLURM_STACK_APT_LOCK_TIMEOUT:-600}
  deadline=$((SECONDS + timeout))
  err=$(mktemp)
  while :; do
    rc=0
    LC_ALL=C apt-get -o DPkg::Lock::Timeout="$wait" "$@" 2>"$err" || rc=$?
    # apt 2.6: "Could not get lock PATH. It is held by process PID (NAME)", or without the
    # holder "Could not get lock PATH - open (11: ...)"; after DPkg::Lock::Timeout ran out,
    # "Unable to acquire the dpkg frontend lock (PATH), is another process using it?".
    lock=$(sed -n -e 's/^E: Could not get lock \([^ ]*[^ .]\)[. ].*/\1/p' \
      -e 's/^E: Unable to acquire the dpkg frontend lock (\(.*\)),.*/\1/p' "$err" | head -n 1)
    if [ "$rc" -eq 0 ] || [ -z "$lock" ]; then
      cat "$err" >&2  # apt's warnings, or the error that is not about a lock
      rm -f "$err"
      return "$rc"
    fi
    holder=$(sed -n 's/^E: Could not get lock .* It is held by process \([0-9]*\) .*/\1/p' "$err" | head -n 1)
    if [ -z "$holder" ] && [ "$wait" -gt 0 ]; then
      wait=0  # apt's own wait ran out, and it does not say who holds the lock: ask it now
      continue
    fi
    if [ -n "$holder" ]; then
      holder="process $holder ($(apt_lock_process "$holder"))"
    else
      holder="a process apt does not name"
    fi
    remaining=$((deadline - SECONDS))
    if [ "$remaining" -le 0 ]; then
      echo "$who: gave up after $timeout s waiting for the package lock $lock," \
        "held by $holder: let it finish (or stop it), then run this again" \
        "(SLURM_STACK_APT_LOCK_TIMEOUT sets the wait)" >&2
      rm -f "$err"
      return "$rc"
    fi
    if [ "$lock $holder" != "$said" ] || [ $((SECONDS - said_at)) -ge 60 ]; then
      echo "$who: waiting up to $remaining s for the package lock $lock, held by $holder" >&2
      said="$lock $holder"
      said_at=$SECONDS
    fi
    case $lock in
      */dpkg/lock | */dpkg/lock-frontend)
        # apt waits for these itself; in steps of at most 60 s, to say again who holds it.
        # (The second's sleep: an apt older than 1.9.11 ignores the option and fails at once.)
        wait=$((remaining < 60 ? remaining : 60))
        sleep 1 ;;
      *)
        # apt fails at once on these: watch the lock (cheaply) and try again once it is free.
        wait=0
        poll_end=$((SECONDS + (remaining < 60 ? remaining : 60)))
        sleep 1
        while [ "$SECONDS" -lt "$poll_end" ] && apt_lock_held "$lock"; do
          sleep 0.5
        done ;;
    esac
  done
}

# Whether /proc/locks shows a process holding a lock on file $1 (by device and inode). Where
# that fails to match (a file system that reports another device), apt's next try tells.
apt_lock_held() {
  local dev ino
  read -r dev ino < <(stat -L -c '%d %i' "$1" 2>/dev/null) || return 1
  grep -qE "^[0-9]+: (POSIX|OFDLCK) +ADVISORY +WRITE +-?[0-9]+ $(printf '%02x:%02x' \
    $(((dev >> 8) & 0xfff)) $(((dev & 0xff) | ((dev >> 12) & 0xfff00)))):$ino " /proc/locks
}

# "NAME: COMMAND LINE" of process $1, as far as /proc shows it.
apt_lock_process() {
  local name command
  name=$(cat "/proc/$1/comm" 2>/dev/null) || name="exited"
  command=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || command=""
  command=${command% }
  if [ "${#command}" -gt 100 ]; then
    command="${command:0:100}..."
  fi
  if [ -n "$command" ]; then
    printf '%s: %s' "$name" "$command"
  else
    printf '%s' "$name"
  fi
}
