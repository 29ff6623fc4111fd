#!/bin/bash
# Entrypoint of the MariaDB image, a drop-in for docker.io/library/mariadb's as slurm-stack
# uses it:
#   - arguments starting with "-" are options to mariadbd; any other command runs as given;
#   - an uninitialised datadir is set up from MARIADB_DATABASE, MARIADB_USER,
#     MARIADB_PASSWORD, MARIADB_ROOT_HOST and MARIADB_ROOT_PASSWORD (or
#     MARIADB_ALLOW_EMPTY_ROOT_PASSWORD); each may instead come from the file that
#     <VARIABLE>_FILE names (a mounted Secret), its trailing newlines dropped, as upstream reads
#     them. Unlike upstream, root is only root@localhost unless MARIADB_ROOT_HOST names another
#     host, and MARIADB_RANDOM_ROOT_PASSWORD is refused: upstream prints that password to the
#     log. Nothing secret is ever written to the log or exported to mariadbd;
#   - an initialised datadir is used as it is.
# Started as root, it gives the datadir to mysql and runs as mysql.
set -euo pipefail

log() { echo "docker-entrypoint.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

[ $# -gt 0 ] || set -- mariadbd
[ "${1:0:1}" != - ] || set -- mariadbd "$@"
case "$1" in
  mariadbd | mysqld) ;;
  *) exec "$@" ;;
esac

# Where this server keeps its data and listens, after the config files and the arguments;
# also fails early on options mariadbd does not know.
help=$("$@" --verbose --help 2>&1) || { printf '%s\n' "$help" >&2; die "mariadbd rejects its options"; }
# The value table follows the option descriptions, whose wrapped lines may start alike.
setting() { awk -v name="$1" '/^Variables \(/ { t = 1 } t && $1 == name { print $2; exit }' <<<"$help"; }
datadir=$(setting datadir) datadir=${datadir%/}
socket=$(setting socket)
port=$(setting port)
[ -n "$datadir" ] && [ -n "$socket" ] && [ -n "$port" ] || die "cannot read datadir, socket and port from mariadbd"

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$datadir" "$(dirname "$socket")"
  find "$datadir" "$(dirname "$socket")" \! -user mysql -exec chown mysql:mysql {} +
  exec setpriv --reuid=mysql --regid=mysql --init-groups -- "$0" "$@"
fi

random_password() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }
sql_string() { local s=${1//\\/\\\\}; printf "'%s'" "${s//\'/\\\'}"; }
sql_name() { printf '`%s`' "${1//\`/\`\`}"; }

# Present from the start of an initialisation to its end: an interrupted one is redone
# rather than taken for a usable datadir. healthcheck.sh also reports unhealthy while it is.
marker=$datadir/.init-in-progress

# setting_or_file NAME: the value of $NAME, or the content of the file $NAME_FILE names
# (never both), or "". The value stays in this shell: it is neither exported nor logged.
setting_or_file() {
  local name=$1 file_name=${1}_FILE
  if [ -n "${!name:-}" ] && [ -n "${!file_name:-}" ]; then
    die "set $name or $file_name, not both"
  fi
  if [ -n "${!file_name:-}" ]; then
    [ -f "${!file_name}" ] && [ -r "${!file_name}" ] || die "$file_name: cannot read ${!file_name}"
    printf '%s' "$(<"${!file_name}")"
  else
    printf '%s' "${!name:-}"
  fi
}

initialise() {
  local root_password root_host db user password
  local health_password sql tmp pid i host
  [ -z "${MARIADB_RANDOM_ROOT_PASSWORD:-}" ] \
    || die "MARIADB_RANDOM_ROOT_PASSWORD is not supported (it would print root's password to the log): set MARIADB_ROOT_PASSWORD_FILE"
  root_host=$(setting_or_file MARIADB_ROOT_HOST)
  root_host=${root_host:-localhost}
  db=$(setting_or_file MARIADB_DATABASE)
  user=$(setting_or_file MARIADB_USER)
  password=$(setting_or_file MARIADB_PASSWORD)
  root_password=$(setting_or_file MARIADB_ROOT_PASSWORD)
  if [ -z "$root_password" ] && [ -z "${MARIADB_ALLOW_EMPTY_ROOT_PASSWORD:-}" ]; then
    die "the datadir is uninitialised: set MARIADB_ROOT_PASSWORD_FILE (or MARIADB_ROOT_PASSWORD, or MARIADB_ALLOW_EMPTY_ROOT_PASSWORD)"
  fi
  [ -z "$user" ] || [ -n "$password" ] || die "MARIADB_USER is set without MARIADB_PASSWORD(_FILE)"
  [ "$user" != root ] || die "MARIADB_USER must not be root (use MARIADB_ROOT_PASSWORD_FILE)"

  log "initialising $datadir"
  touch "$marker"
  # "normal": passwordless root accounts, the one at localhost to finish the setup with.
  mariadb-install-db --datadir="$datadir" --auth-root-authentication-method=normal \
    --skip-test-db --skip-name-resolve "${@:2}" >&2

  # A temporary server for the setup, unreachable over TCP (so healthcheck.sh --connect
  # fails until the real server runs) on a socket of its own. No TLS on that socket: without
  # a certificate configured, MariaDB 11.4 and later generate one at each start (an RSA key,
  # up to a second of CPU), which the real server still does.
  tmp=$(mktemp -d)
  "$@" --skip-networking --socket="$tmp/mysqld.sock" --pid-file="$tmp/mysqld.pid" \
    --skip-slave-start --loose-innodb-buffer-pool-load-at-startup=0 --skip-ssl &
  pid=$!
  for ((i = 0; ; i++)); do
    mariadb-admin --socket="$tmp/mysqld.sock" --skip-ssl --user=root ping >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || die "the temporary server exited during startup"
    ((i < 2400)) || die "the temporary server did not start within 120 s"
    sleep 0.05
  done

  health_password=$(random_password)
  sql="SET SESSION sql_log_bin = 0;"
  # The other passwordless root accounts (127.0.0.1, ::1, the hostname) and any anonymous one.
  sql+=$(mariadb --socket="$tmp/mysqld.sock" --skip-ssl --user=root --batch --skip-column-names -e "
    SELECT CONCAT('DROP USER ', QUOTE(User), '@', QUOTE(Host), ';') FROM mysql.global_priv
    WHERE User = '' OR (User = 'root' AND Host <> 'localhost')")
  sql+="ALTER USER root@localhost IDENTIFIED BY $(sql_string "$root_password");"
  # Root over the network only when asked for (upstream's default is '%').
  if [ "$root_host" != localhost ]; then
    sql+="CREATE USER root@$(sql_string "$root_host") IDENTIFIED BY $(sql_string "$root_password");"
    sql+="GRANT ALL ON *.* TO root@$(sql_string "$root_host") WITH GRANT OPTION;"
  fi
  # For healthcheck.sh only: it may connect, nothing more.
  for host in 127.0.0.1 ::1 localhost; do
    sql+="CREATE USER healthcheck@'$host' IDENTIFIED BY '$health_password';"
  done
  if [ -n "$db" ]; then
    sql+="CREATE DATABASE IF NOT EXISTS $(sql_name "$db");"
  fi
  if [ -n "$user" ]; then
    sql+="CREATE USER $(sql_string "$user")@'%' IDENTIFIED BY $(sql_string "$password");"
    # In GRANT, _ and % in a database name are wildcards.
    [ -z "$db" ] || sql+="GRANT ALL ON $(sql_name "$(sed 's/[_%]/\\&/g' <<<"$db")").* TO $(sql_string "$user")@'%';"
  fi
  # On stdin: passwords stay out of the process list.
  mariadb --socket="$tmp/mysqld.sock" --skip-ssl --user=root --batch <<<"$sql" || die "the setup SQL failed"

  (
    umask 077
    printf '[client]\nuser=healthcheck\npassword=%s\nport=%s\nprotocol=tcp\n' \
      "$health_password" "$port" >"$datadir/.my-healthcheck.cnf"
  )
  kill "$pid"
  wait "$pid" || die "the temporary server exited with status $? on shutdown"
  rm -rf "$tmp"
  rm "$marker"
  log "$datadir initialised"
}

if [ -e "$marker" ]; then
  log "an earlier initialisation of $datadir was interrupted: starting it over"
  find "$datadir" -mindepth 1 -maxdepth 1 \! -name lost+found -exec rm -rf {} +
fi
if [ -d "$datadir/mysql" ]; then
  log "$datadir is initialised: using it as it is"
else
  initialise "$@"
fi
exec "$@"
