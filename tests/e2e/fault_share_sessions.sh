#!/usr/bin/env bash
# kill -9 of an instance during a --share-sessions write-through (issue 23, faults). Instances a and b share
# a directory store. Each round, a session is created on a and runs a short turn there (both answered, so
# committed: generations 1 and 2); then a long turn (about 1,700 new tokens, so its commit writes several
# new chunks, then the generation's manifest, then the record sessions/<id>/<generation>) is cut by kill -9
# of a the moment the store shows: round 1, the turn's first new chunk; round 2, its manifest (temporary
# or renamed); round 3, its record, linked. Then b continues the session, and its output (text and logprobs, temperature 0) must equal a
# single instance's continuing the same history: the answered turns, plus the long turn exactly when its
# record made it to the store (a record written before the answer reached the client commits a turn the
# client did not see answered: at-least-once, the client's retry would repeat it). Never a generation
# below the last answered one, never a half-written one. The store's invariants hold: `ctx ls` lists only
# whole snapshots, each verified by `ctx pull`, and each session record names a listed snapshot.
# Prints the phase each kill hit. Run by run.sh (ctest -L faults); the servers are started here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
trap stop_all_servers EXIT
T=$LLAMAY_E2E_TMP
STORE=$T/store
post() { curl -sS --max-time "$E2E_MAX_TIME" -H 'Content-Type: application/json' "$@"; }
# turn URL SESSION PROMPT_FILE MAX: one completion on the session; prints "text logprobs".
turn() {
  post "$1/v1/completions" -d "$(jq -c --arg s "$2" --argjson n "$4" '. + {max_tokens: $n, temperature: 0, logprobs: 2, llamay_session: $s}' "$3")" |
    jq -c '[.choices[0].text, .choices[0].logprobs.token_logprobs, .error.code]'
}
create() { post "$1/v1/contexts" -d "{\"prompt\": \"$2\"}" | jq -r .id; }
echo '{"prompt": " read_file(parser.c)"}' >"$T/short.json"
echo '{"prompt": " and then"}' >"$T/next.json"
python3 -c "import json; print(json.dumps({'prompt': ' tool result: a long file that the agent read, line after line,' * 24}))" >"$T/long.json"

start_server b --store "$STORE" --share-sessions
B=$SERVER_URL
start_server single
ONE=$SERVER_URL
triggers=("chunks/" "snapshots/\\.?SID\\.g3" "sessions/SID/0+3$")
for round in 1 2 3; do
  start_server "a$round" --store "$STORE" --share-sessions
  A=$SERVER_URL A_PID=$SERVER_PID
  prompt="You are agent $round. Tools: read_file, run_tests."
  sid=$(create "$A" "$prompt")
  [ -n "$sid" ] && [ "$sid" != null ] || { echo "FAIL round $round: create"; exit 1; }
  turn "$A" "$sid" "$T/short.json" 4 >/dev/null
  # The single instance's two possible histories: without the long turn (ref) and with it (fork).
  ref=$(create "$ONE" "$prompt")
  turn "$ONE" "$ref" "$T/short.json" 4 >/dev/null
  fork=$(post -X POST "$ONE/v1/contexts/$ref/fork?n=1" | jq -r '.branches[0].id')
  turn "$ONE" "$fork" "$T/long.json" 1 >/dev/null
  pattern=${triggers[$((round - 1))]//SID/$sid}
  python3 "$here/lib/kill_when.py" "$A_PID" "$STORE" "$pattern" 1 20 >"$T/kill.out" &
  killer=$!
  until grep -qs watching "$T/kill.out"; do sleep 0.01; done
  # Answered: the whole body arrived (a turn not done within 250 ms answers 200 at once and keeps the
  # connection alive with spaces until its body, which comes after the commit).
  crc=0
  : >"$T/turn.out"
  code=$(curl -sS -o "$T/turn.out" -w '%{http_code}' --max-time "$E2E_MAX_TIME" -H 'Content-Type: application/json' "$A/v1/completions" \
    -d "$(jq -c --arg s "$sid" '. + {max_tokens: 1, temperature: 0, llamay_session: $s}' "$T/long.json")" 2>/dev/null) || crc=$?
  answered=no
  [ "$crc" = 0 ] && [ "$code" = 200 ] && jq -e '.choices[0]' "$T/turn.out" >/dev/null 2>&1 && answered=yes
  wait "$killer" || true
  kill -KILL "$A_PID" 2>/dev/null || true  # when the trigger never came (the turn ended first): killed after it
  wait "$A_PID" 2>/dev/null || true
  newest=$(find "$STORE" -path "*/sessions/$sid/*" ! -name '*~tmp*' -printf '%f\n' | sort | tail -n1)
  echo "phase: round $round ($pattern): $(grep -v watching "$T/kill.out"); turn answered: $answered (HTTP $code, curl exit $crc, $(wc -c <"$T/turn.out") body bytes); newest generation in the store: $newest"
  g=$((10#${newest:-0}))
  [ "$answered" = yes ] && [ "$g" -lt 3 ] && fail "round $round: the long turn was answered, yet the store has generation $g"
  [ "$g" -ge 2 ] && pass "round $round: every answered generation (2) is in the store (newest $g)" ||
    fail "round $round: the store's newest generation is $g, below the answered 2"
  if [ "$g" -ge 3 ]; then want=$(turn "$ONE" "$fork" "$T/next.json" 6); else want=$(turn "$ONE" "$ref" "$T/next.json" 6); fi
  got=$(turn "$B" "$sid" "$T/next.json" 6)
  [ "$want" = "$got" ] && [ "$want" != "[null,null,null]" ] && pass "round $round: b continues generation $g exactly: $got" ||
    fail "round $round: b continues as $got, a single instance with that history as $want"
done

# The store's invariants: every listed snapshot verifies, every record names one of them.
ls=$("$LLAMAY_BIN" ctx ls --store "$STORE" 2>&1) || fail "ctx ls: $ls"
names=$(awk '{print $1}' <<<"$ls")
bad=0
for n in $names; do
  "$LLAMAY_BIN" ctx pull --store "$STORE" --name "$n" -o "$T/pulled" >/dev/null 2>"$T/pull.err" &&
    "$LLAMAY_BIN" ctx inspect "$T/pulled" >/dev/null 2>&1 || { bad=$((bad + 1)); echo "  $n: $(cat "$T/pull.err")"; }
done
[ "$bad" = 0 ] && pass "ctx ls: $(wc -w <<<"$names") snapshots, each verified by ctx pull" || fail "$bad snapshots do not verify"
orphans=0 records=0
while read -r rec; do
  records=$((records + 1))
  snap=$(head -n1 "$rec" | jq -r .snapshot)
  grep -qx -- "$snap" <<<"$names" || { orphans=$((orphans + 1)); echo "  $rec names $snap, not listed"; }
done < <(find "$STORE" -path '*/sessions/*' -type f ! -name '*~tmp*')
[ "$orphans" = 0 ] && pass "$records session records, each naming a whole snapshot" || fail "$orphans records name no snapshot"
echo "temporaries left by the kills: $(find "$STORE" -name '*~tmp*' | wc -l) (never listed)"
[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all write-through fault checks passed"
