#!/usr/bin/env bash
# Launcher of one end-to-end test: starts `llamay serve --port 0 [SERVE ARGS]` (the built-in demo model
# unless the args say -m), waits until it answers, runs TEST against it, and stops every server the test
# started, whatever happens (trap on exit, SIGINT and SIGTERM: no process is left behind).
#
# Usage: run.sh LLAMAY_BINARY SHARED_DIR TEST [SERVE ARGS...]
#   TEST is a .mjs file (run with node) or a .sh file (run with bash). It gets, in its environment:
#   LLAMAY_URL, LLAMAY_PID (the server started here), LLAMAY_BIN, LLAMAY_SHARED, LLAMAY_E2E_TMP (a scratch
#   folder removed afterwards) and LLAMAY_E2E_PIDS (a file where tests append the pids of servers they
#   start themselves, so they are stopped here too).
# Exit: the test's status; 77 (skipped) when TEST is JavaScript and node is not installed; 1 when the
# server started here died during the test or did not exit 0 on SIGTERM afterwards.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 LLAMAY_BINARY SHARED_DIR TEST [SERVE ARGS...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
export LLAMAY_BIN=$1 LLAMAY_SHARED=$2
test_file=$3
shift 3

[ -x "$LLAMAY_BIN" ] || { echo "no llamay binary at $LLAMAY_BIN (build it first)" >&2; exit 1; }
case "$test_file" in
  *.mjs) runner=(node)
    if ! command -v node >/dev/null 2>&1; then
      echo "skipped: node is not installed, so $(basename "$test_file") cannot run (scripts/setup installs it)"
      exit 77
    fi ;;
  *.sh) runner=(bash) ;;
  *) echo "unknown test kind: $test_file" >&2; exit 2 ;;
esac
# A model from ../shared that this checkout lacks (a clone without ../shared beside it): skipped, as the
# other tests that need ../shared are.
prev=""
for arg in "$@"; do
  if [ "$prev" = "-m" ] && [ ! -f "$arg" ]; then echo "skipped: $arg is absent"; exit 77; fi
  prev=$arg
done

LLAMAY_E2E_TMP=$(mktemp -d "${TMPDIR:-/tmp}/llamay-e2e.XXXXXX")
export LLAMAY_E2E_TMP
export LLAMAY_E2E_PIDS=$LLAMAY_E2E_TMP/pids
: >"$LLAMAY_E2E_PIDS"
# shellcheck source=lib.sh
source "$here/lib.sh"

test_pid=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$test_pid" ] && kill -0 "$test_pid" 2>/dev/null; then kill -TERM "$test_pid" 2>/dev/null || true; wait "$test_pid" 2>/dev/null || true; fi
  # Servers the test started itself and did not stop (it was killed, or it failed before its cleanup):
  # only pids that still run this binary, so a recycled pid is never touched.
  local pid
  while read -r pid; do
    [ -n "$pid" ] || continue
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$LLAMAY_BIN serve"; then
      case " ${E2E_SERVER_PIDS[*]} " in *" $pid "*) ;; *) kill -KILL "$pid" 2>/dev/null || true ;; esac
    fi
  done <"$LLAMAY_E2E_PIDS"
  stop_all_servers
  rm -rf "$LLAMAY_E2E_TMP"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

start_server main "$@"
export LLAMAY_URL=$SERVER_URL LLAMAY_PID=$SERVER_PID
main_log=$SERVER_LOG
echo "e2e: $(basename "$test_file") against $LLAMAY_URL (pid $LLAMAY_PID, llamay serve ${*:-})"

start=$SECONDS
set +e
"${runner[@]}" "$test_file" &
test_pid=$!
wait "$test_pid"
rc=$?
test_pid=""
set -e
if ! kill -0 "$LLAMAY_PID" 2>/dev/null; then
  echo "FAIL: the server died during the test; its log:"
  cat "$main_log"
  rc=1
else
  # A clean shutdown exits 0; a sanitizer report or a crash on the way out does not.
  set +e
  stop_server "$LLAMAY_PID"
  src=$?
  set -e
  if [ "$src" -ne 0 ]; then
    echo "FAIL: the server exited $src on SIGTERM; the end of its log:"
    tail -n 60 "$main_log"
    rc=1
  fi
fi
echo "e2e: $(basename "$test_file") exit $rc in $((SECONDS - start)) s"
exit "$rc"
