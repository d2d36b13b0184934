# shellcheck shell=bash
# Shell helpers for the end-to-end tests: start `llamay serve` on a free loopback port, wait for it, stop
# it. Sourced by run.sh and by the bash tests. Every server started here is stopped when the sourcing
# script exits (SIGTERM, then SIGKILL after 10 s), and its pid is also written to $LLAMAY_E2E_PIDS so the
# launcher can stop it should the test itself be killed.
#
# Needs: LLAMAY_BIN (the llamay binary) and LLAMAY_E2E_TMP (a scratch folder), both exported by run.sh.

E2E_SERVER_PIDS=()

# start_server NAME [serve args...]: starts a server, waits until /health answers, and sets SERVER_URL,
# SERVER_PID and SERVER_LOG. Returns non-zero (after printing its log) when it does not come up in 30 s.
start_server() {
  local name=$1
  shift
  SERVER_LOG=$LLAMAY_E2E_TMP/server-$name.log
  : >"$SERVER_LOG"  # before the fork: the loop below reads it, maybe before the child has opened it
  "$LLAMAY_BIN" serve --host 127.0.0.1 --port 0 "$@" >"$SERVER_LOG" 2>&1 &
  SERVER_PID=$!
  E2E_SERVER_PIDS+=("$SERVER_PID")
  [ -n "${LLAMAY_E2E_PIDS:-}" ] && echo "$SERVER_PID" >>"$LLAMAY_E2E_PIDS"
  local port="" i
  for ((i = 0; i < 300; i++)); do
    port=$(sed -n 's|.* on http://127\.0\.0\.1:\([0-9][0-9]*\) .*|\1|p' "$SERVER_LOG" | head -n1)
    [ -n "$port" ] && break
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "server '$name' exited before listening; its log:" >&2
      cat "$SERVER_LOG" >&2
      return 1
    fi
    sleep 0.1
  done
  if [ -z "$port" ]; then
    echo "server '$name' did not print its port in 30 s; its log:" >&2
    cat "$SERVER_LOG" >&2
    return 1
  fi
  SERVER_URL=http://127.0.0.1:$port
  for ((i = 0; i < 100; i++)); do
    if curl -fsS -o /dev/null --max-time 2 "$SERVER_URL/health"; then return 0; fi
    sleep 0.1
  done
  echo "server '$name' on $SERVER_URL does not answer /health; its log:" >&2
  cat "$SERVER_LOG" >&2
  return 1
}

# stop_server PID: SIGTERM, wait up to 10 s, then SIGKILL. Returns the server's exit status (0 for a clean
# shutdown), so a caller can assert that a server it stops shut down cleanly.
stop_server() {
  local pid=$1 i rc=0
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || rc=$?; return $rc; }
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "server $pid ignored SIGTERM for 10 s: killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
    rc=137
  fi
  wait "$pid" 2>/dev/null || rc=$?
  return $rc
}

stop_all_servers() {
  local pid
  for pid in "${E2E_SERVER_PIDS[@]}"; do stop_server "$pid" || true; done
  E2E_SERVER_PIDS=()
}

# Bookkeeping for tests that go on after a failed check: `pass` and `fail` print one line each and `fails`
# counts the failures (such a test ends with `[ "$fails" -eq 0 ]`).
fails=0
pass() { echo "ok   $*"; }
fail() { fails=$((fails + 1)); echo "FAIL $*"; }

# The longest one request may take (curl --max-time): 60 s, stretched by E2E_TIME_SCALE on sanitizer builds
# up to 300 s. Those prefill 10-40x slower, slower still beside other tests: in a CI run of the TSan suite a
# 3,900-token prefill went past 60 s while the browser tests ran beside it.
E2E_MAX_TIME=$((60 * ${E2E_TIME_SCALE:-1}))
[ "$E2E_MAX_TIME" -le 300 ] || E2E_MAX_TIME=300
