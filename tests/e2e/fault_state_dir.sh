#!/usr/bin/env bash
# SIGTERM, then kill -9 during the --state-dir save (issue 23, faults). A clean save holds three contexts.
# Then, three times, a server loads them, gets four new contexts of about 1,700 tokens (7 chunks each, so
# the save writes dozens of objects), is sent SIGTERM and is killed by tests/e2e/lib/kill_when.py the
# moment the directory shows: round 1, the save's first new chunk; round 2, its second manifest (temporary
# or renamed); round 3, its sixth. After each kill, the next start:
#   - loads every context the directory lists, none skipped (no "skipped a saved context");
#   - has every context a completed save held, with its tokens (nothing that was saved is lost);
#   - has each of the round's new contexts whole (its tokens) or not at all;
#   - `ctx ls` lists exactly the loaded contexts, and `ctx pull` verifies each; leftover temporaries are
#     never listed; every loaded context continues.
# Prints the phase each kill hit (how many of the new contexts the save had finished). Complements
# state_dir_kill.sh, whose kills land at fixed delays. Run by run.sh (ctest -L faults).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
trap stop_all_servers EXIT
T=$LLAMAY_E2E_TMP
STATE=$T/state
post() { curl -fsS --max-time "$E2E_MAX_TIME" -H 'Content-Type: application/json' "$@"; }
declare -A tokens  # id -> tokens, of every context a save must keep
declare -A fresh   # id -> tokens, of the round's new contexts

start_server first --state-dir "$STATE"
for k in 1 2 3; do
  r=$(post "$SERVER_URL/v1/contexts" -d "{\"prompt\": \"saved context $k, cleanly\"}")
  tokens[$(jq -r .id <<<"$r")]=$(jq -r .tokens <<<"$r")
done
stop_server "$SERVER_PID" && pass "first save: clean shutdown (${#tokens[@]} contexts)" || fail "first save: exit $?"

triggers=("chunks/ 1" "snapshots/ 2" "snapshots/ 6")
for round in 1 2 3; do
  start_server "killed$round" --state-dir "$STATE"
  A=$SERVER_URL A_PID=$SERVER_PID
  fresh=()
  for k in 1 2 3 4; do
    python3 -c "import json; print(json.dumps({'prompt': 'round $round, context $k: long enough to take a while to save. ' * 28}))" >"$T/big.json"
    r=$(post "$A/v1/contexts" -d @"$T/big.json")
    fresh[$(jq -r .id <<<"$r")]=$(jq -r .tokens <<<"$r")
  done
  read -r pattern count <<<"${triggers[$((round - 1))]}"
  python3 "$here/lib/kill_when.py" "$A_PID" "$STATE" "$pattern" "$count" 20 >"$T/kill.out" &
  killer=$!
  until grep -qs watching "$T/kill.out"; do sleep 0.01; done
  kill -TERM "$A_PID"
  wait "$killer" || true
  kill -KILL "$A_PID" 2>/dev/null || true  # when the trigger never came (the save ended first): killed after it
  rc=0
  wait "$A_PID" 2>/dev/null || rc=$?
  saved_msg=$(grep -c "held contexts saved" "$T/server-killed$round.log" || true)

  start_server "after$round" --state-dir "$STATE"
  B=$SERVER_URL
  if grep -q "skipped a saved context" "$SERVER_LOG"; then fail "round $round: $(grep skipped "$SERVER_LOG")"; else
    pass "round $round: no saved context skipped"; fi
  curl -fsS "$B/v1/contexts" | jq -r '.data[] | "\(.id) \(.tokens)"' | sort >"$T/loaded"
  lost=0
  for id in "${!tokens[@]}"; do
    grep -qx "$id ${tokens[$id]}" "$T/loaded" || { lost=$((lost + 1)); echo "  lost or changed: $id (${tokens[$id]} tokens): $(grep "^$id " "$T/loaded" || echo absent)"; }
  done
  [ "$lost" = 0 ] && pass "round $round: all ${#tokens[@]} contexts of completed saves are back, with their tokens" ||
    fail "round $round: $lost saved contexts lost or changed"
  whole=0 bad=0
  for id in "${!fresh[@]}"; do
    line=$(grep "^$id " "$T/loaded" || true)
    if [ -z "$line" ]; then continue; fi
    if [ "$line" = "$id ${fresh[$id]}" ]; then whole=$((whole + 1)); tokens[$id]=${fresh[$id]}; else bad=$((bad + 1)); echo "  $line, want ${fresh[$id]} tokens"; fi
  done
  echo "phase: round $round ($pattern x$count): $(grep -v watching "$T/kill.out"); exit $rc; $whole of 4 new contexts saved whole$([ "$saved_msg" = 1 ] && echo ', the save had finished')"
  [ "$bad" = 0 ] && pass "round $round: each new context back whole or not at all" || fail "round $round: $bad new contexts changed"
  extra=$(awk '{print $1}' "$T/loaded" | while read -r id; do [ -n "${tokens[$id]:-}" ] || echo "$id"; done)
  [ -z "$extra" ] || fail "round $round: unexpected contexts: $extra"
  ls=$("$LLAMAY_BIN" ctx ls --store "$STATE" 2>&1) || fail "round $round: ctx ls: $ls"
  [ "$(awk '{print $1}' <<<"$ls" | sort)" = "$(awk '{print $1}' "$T/loaded")" ] && pass "round $round: ctx ls lists exactly the loaded contexts" ||
    fail "round $round: ctx ls: $ls"
  for id in $(awk '{print $1}' "$T/loaded"); do
    "$LLAMAY_BIN" ctx pull --store "$STATE" --name "$id" -o "$T/pulled" >/dev/null 2>"$T/pull.err" ||
      fail "round $round: $id does not verify: $(cat "$T/pull.err")"
    r=$(post "$B/v1/completions" -d "{\"prompt\": \" go\", \"max_tokens\": 2, \"llamay_session\": \"$id\"}" | jq -r '.choices[0].finish_reason')
    [ "$r" = length ] || [ "$r" = stop ] || fail "round $round: $id does not continue ($r)"
  done
  # A clean stop now saves them all again, continued: the next round starts from a completed save.
  while read -r id n; do tokens[$id]=$n; done < <(curl -fsS "$B/v1/contexts" | jq -r '.data[] | "\(.id) \(.tokens)"')
  stop_server "$SERVER_PID" || fail "round $round: the clean save exited $?"
  n=$("$LLAMAY_BIN" ctx ls --store "$STATE" 2>/dev/null | wc -l)
  [ "$n" = "${#tokens[@]}" ] || fail "round $round: the clean save holds $n contexts, want ${#tokens[@]}"
done
echo "temporaries left by the kills: $(find "$STATE" -name '*~tmp*' | wc -l) (never listed)"
[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all state-dir fault checks passed"
