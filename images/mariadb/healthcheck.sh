#!/bin/bash
# Container health check, compatible with the upstream image's healthcheck.sh for these
# tests; it exits 0 only when all that are given pass:
#   --connect                    the server answers on TCP, which the entrypoint's temporary
#                                setup server never does (it runs with --skip-networking)
#   --innodb_initialized         InnoDB is available
#   --innodb_buffer_pool_loaded  the buffer pool saved at the last shutdown is loaded
# Options: --datadir=DIR (default /var/lib/mysql), --defaults-extra-file=FILE (default
# DIR/.my-healthcheck.cnf, written by the entrypoint: the healthcheck user's credentials).
set -euo pipefail

fail() { echo "healthcheck.sh: $*" >&2; exit 1; }

datadir=/var/lib/mysql extra= tests=()
for arg; do
  case "$arg" in
    --datadir=*) datadir=${arg#*=} ;;
    --defaults-extra-file=*) extra=${arg#*=} ;;
    --connect | --innodb_initialized | --innodb_buffer_pool_loaded) tests+=("${arg#--}") ;;
    *) echo "healthcheck.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done
[ ${#tests[@]} -gt 0 ] || { echo "usage: healthcheck.sh [--datadir=DIR] [--defaults-extra-file=FILE] --connect|--innodb_initialized|--innodb_buffer_pool_loaded..." >&2; exit 2; }
if [ -z "$extra" ] && [ -r "$datadir/.my-healthcheck.cnf" ]; then
  extra=$datadir/.my-healthcheck.cnf
fi
[ ! -e "$datadir/.init-in-progress" ] || fail "the datadir is being initialised"

# The defaults file must come first; TCP to this container, whatever the file says.
client=(${extra:+"--defaults-extra-file=$extra"} --protocol=tcp --host=127.0.0.1 --connect-timeout=5)
query() { mariadb "${client[@]}" --batch --skip-column-names -e "$1" 2>&1; }

for test in "${tests[@]}"; do
  case "$test" in
    connect)
      # ping succeeds even when the credentials are refused: the server answered.
      mariadb-admin "${client[@]}" ping >/dev/null 2>&1 || fail "no server answers on TCP"
      ;;
    innodb_initialized)
      out=$(query "SELECT 1 FROM information_schema.ENGINES WHERE ENGINE = 'InnoDB' AND SUPPORT IN ('YES', 'DEFAULT')") || true
      [ "$out" = 1 ] || fail "InnoDB is not initialised: $out"
      ;;
    innodb_buffer_pool_loaded)
      out=$(query "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_BUFFER_POOL_LOAD_STATUS'") || true
      [[ $out == "Buffer pool(s) load completed"* ]] || fail "the buffer pool is not loaded: $out"
      ;;
  esac
done
