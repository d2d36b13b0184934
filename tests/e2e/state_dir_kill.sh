#!/usr/bin/env bash
# kill -9 during a --state-dir save (issue 10): the directory is a snapshot store written object by object
# (temporary file, fsync, rename; manifests after their chunks), so whatever moment the kill lands, the next
# start loads every saved context whole, without a warning, and each continues. The first save holds two
# contexts; each later run adds six of about 2,300 tokens and is killed 30, 60 or 90 ms into its save.
# Run by run.sh (ctest -L e2e); the servers are started here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
trap stop_all_servers EXIT
T=$LLAMAY_E2E_TMP
STATE=$T/state
# Sanitizer builds (E2E_TIME_SCALE > 1) prefill 10-40x slower: shorter contexts keep the test in its time.
reps=45
[ "${E2E_TIME_SCALE:-1}" -gt 1 ] && reps=8
post() { curl -fsS --max-time 120 -H 'Content-Type: application/json' "$@"; }

start_server first --state-dir "$STATE"
post "$SERVER_URL/v1/contexts" -d '{"prompt": "the first saved context"}' >/dev/null
post "$SERVER_URL/v1/contexts" -d '{"prompt": "the second saved context"}' >/dev/null
stop_server "$SERVER_PID" && pass "first save: clean shutdown" || fail "first save: exit $?"

for round in 1 2 3; do
  start_server "killed$round" --state-dir "$STATE"
  for k in 1 2 3 4 5 6; do  # distinct contexts of about 2,300 tokens each: a save of several objects each
    python3 -c "import json; print(json.dumps({'prompt': 'context $round.$k, long enough to take a while to save ' * $reps}))" >"$T/big.json"
    post "$SERVER_URL/v1/contexts" -d @"$T/big.json" >/dev/null
  done
  kill -TERM "$SERVER_PID"
  sleep "0.0$((round * 3))"
  kill -KILL "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  start_server "after$round" --state-dir "$STATE"
  if grep -q "skipped a saved context" "$SERVER_LOG"; then fail "round $round: a saved context did not load: $(cat "$SERVER_LOG")"; else
    pass "round $round: every saved context loads after kill -9 during a save"; fi
  ids=$(curl -fsS "$SERVER_URL/v1/contexts" | jq -r '.data[].id')
  n=$(wc -w <<<"$ids")
  [ "$n" -ge 2 ] && pass "round $round: $n contexts back" || fail "round $round: only $n contexts back"
  for id in $ids; do
    r=$(post "$SERVER_URL/v1/completions" -d "{\"prompt\": \" go\", \"max_tokens\": 2, \"llamay_session\": \"$id\"}" | jq -r '.choices[0].finish_reason')
    [ "$r" = length ] || [ "$r" = stop ] || fail "round $round: $id does not continue ($r)"
  done
  stop_server "$SERVER_PID" || fail "round $round: exit $?"
done
[ "$fails" -eq 0 ] || exit 1
